"""The distillation tools that need no training stack: checked chunks (for carrying a base model
to a GPU machine) and the ``MODEL+ADAPTER`` spec's adapter lookup."""

from __future__ import annotations

import json
import os

import pytest

from lookplangraph.cli import main
from lookplangraph.lm import LMError
from lookplangraph.lm.llamacpp import resolve_adapter
from lookplangraph.distill.training import chunks


@pytest.fixture
def blob(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(os.urandom(10_000) + bytes(range(256)) * 7)
    return path


def test_split_and_join_give_back_the_same_bytes(blob, tmp_path):
    manifest = chunks.split_file(blob, tmp_path / "carry", chunk_bytes=4096)
    m = json.loads(manifest.read_text())
    assert len(m["chunks"]) == -(-blob.stat().st_size // 4096) and all(c["bytes"] <= 4096 for c in m["chunks"])
    out = chunks.join_file(manifest, tmp_path / "back.gguf")
    assert out.read_bytes() == blob.read_bytes()


def test_a_damaged_or_missing_chunk_is_named_and_nothing_is_written(blob, tmp_path):
    manifest = chunks.split_file(blob, tmp_path / "carry", chunk_bytes=4096)
    part = tmp_path / "carry" / "model.gguf.part001"
    data = bytearray(part.read_bytes())
    data[5] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(chunks.ChunkError, match="model.gguf.part001 is damaged"):
        chunks.join_file(manifest, tmp_path / "back.gguf")
    part.unlink()
    with pytest.raises(chunks.ChunkError, match="model.gguf.part001 is missing"):
        chunks.join_file(manifest, tmp_path / "back.gguf")
    assert not (tmp_path / "back.gguf").exists() and not (tmp_path / "back.gguf.part").exists()


def test_the_cli_splits_and_joins(blob, tmp_path, capsys):
    assert main(["distill", "split", str(blob), "--out", str(tmp_path / "c"), "--chunk-mib", "0.005"]) == 0
    manifest = tmp_path / "c" / "model.gguf.manifest.json"
    assert main(["distill", "join", str(manifest), "--out", str(tmp_path / "j.gguf")]) == 0
    assert (tmp_path / "j.gguf").read_bytes() == blob.read_bytes()
    (tmp_path / "c" / "model.gguf.part000").write_bytes(b"x")
    assert main(["distill", "join", str(manifest), "--out", str(tmp_path / "k.gguf")]) == 1
    assert "part000 is damaged" in capsys.readouterr().err


def test_an_adapter_is_a_file_or_a_shipped_name(tmp_path):
    f = tmp_path / "adapter.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_adapter("qwen2.5-coder-1.5b", str(f)) == f
    with pytest.raises(LMError, match="no adapter 'lpg' shipped for 'qwen2.5-coder-1.5b'.*distill train"):
        resolve_adapter("qwen2.5-coder-1.5b", "lpg")


def test_the_compact_system_prompt_is_what_the_planner_sends_and_what_training_puts_in():
    from grasif import office
    from lookplangraph.distill.teacher.expert import Expert
    from lookplangraph.evaluation.runner import make_env
    from lookplangraph.distill.planning.trajectories import RecordingLM
    from lookplangraph.distill.training.sft import with_system
    from lookplangraph.planners.config import PlannerConfig
    from lookplangraph.planners.lookplangraph import run_episode
    from lookplangraph.agent.prompts import compact_prompt, static_prompt

    task = office.build_tasks()[0]
    sent = {}
    for style in ("full", "compact"):
        lm, env, cfg = RecordingLM(Expert()), make_env(task), PlannerConfig(system_prompt=style)
        lm.begin_episode(task, env, "lookplangraph", cfg)
        assert run_episode(task, env, lm, cfg).success
        sent[style] = lm.calls
    assert {m[0]["content"] for m, _ in sent["full"]} == {static_prompt()}
    assert {m[0]["content"] for m, _ in sent["compact"]} == {compact_prompt()}
    assert len(compact_prompt()) * 5 < len(static_prompt())
    # the user turns are the same bytes: an example built with the full prompt, trained with the
    # compact one, is exactly what the planner sends with system_prompt = "compact"
    assert [m[1] for m, _ in sent["full"]] == [m[1] for m, _ in sent["compact"]]
    built = [*sent["full"][0][0], {"role": "assistant", "content": sent["full"][0][1]}]
    assert with_system(built, compact_prompt())[:2] == sent["compact"][0][0]
    with pytest.raises(ValueError, match="system_prompt"):
        PlannerConfig(system_prompt="short")


def test_device_tree_untracks_what_the_device_never_needs_and_restores_it_exactly(tmp_path):
    """benchmarks/device_tree.sh on a repository of its own: untrack takes the .gguf, the committed
    training data and the figures out of the tree git shows (the files stay), refuses a second
    untrack, and restore leaves git status and .git/info/exclude as they were."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "device_tree.sh"
    repo = tmp_path / "r"
    for rel, size in {"lookplangraph/lm/adapters/a.gguf": 4000, "data/training/mix/sft.jsonl.gz": 3000,
                      "docs/figures/f.png": 2000, "docs/index.md": 100, "data/training/mix/README.md": 50}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(b"x" * size)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(git[:5] + ["init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "t"], check=True)
    exclude_before = (repo / ".git/info/exclude").read_text()

    def run(*args):
        return subprocess.run(["sh", str(script), *args], cwd=repo, capture_output=True, text=True)
    assert "after untrack: 150 bytes" in run("size").stdout
    r = run("untrack")
    assert r.returncode == 0 and "untracked 3 files; tree now 150 bytes" in r.stdout
    tracked = subprocess.run(git + ["ls-files"], capture_output=True, text=True).stdout.split()
    assert tracked == ["data/training/mix/README.md", "docs/index.md"]
    assert (repo / "lookplangraph/lm/adapters/a.gguf").stat().st_size == 4000  # still on disk
    status = subprocess.run(git + ["status", "--short", "--untracked-files=all"], capture_output=True, text=True).stdout
    assert all(line.startswith("D ") for line in status.splitlines())  # ignored, not offered as new files
    assert run("untrack").returncode == 1
    assert run("restore").returncode == 0
    assert subprocess.run(git + ["status", "--short"], capture_output=True, text=True).stdout == ""
    assert (repo / ".git/info/exclude").read_text() == exclude_before
    assert run("restore").returncode == 1 and run("nonsense").returncode == 2
