"""Full episodes with a REAL language model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M): in process
through llama.cpp and through a llama.cpp OpenAI-compatible server started on 127.0.0.1.

They check the trace, the token accounting and the termination rules, not whether the small
model succeeds. Marked ``lm``; skipped with the reason when llama-cpp-python or the model parts
are not installed."""

from __future__ import annotations

import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.agent.prompts import static_prompt
from lookplangraph.evaluation.runner import run_episode_to_dir
from sgs.actions import FUNCTIONS

from conftest import kitchen_dict

CFG = PlannerConfig(max_actions=3, max_unresolved=2)


def kitchen_task():
    return Task(id="kitchen-apple", split="test", instruction="Put the apple that is in the box on the bed.",
                initial_graph=kitchen_dict(),
                goal=GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")]))


def check_episode(result, out):
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    saved = json.loads((out / "result.json").read_text())
    assert saved["termination"] == result.termination
    # termination rules: done, the action limit, or max_unresolved unresolved replies in a row
    assert result.termination in ("done", "max_actions", "unresolved")
    accepted = [r for r in trace if r["accepted"]]
    if result.termination == "max_actions":
        assert len(accepted) == CFG.max_actions
    elif result.termination == "unresolved":
        assert all(not r["accepted"] and r["feedback"] for r in trace[-CFG.max_unresolved:])
    else:
        assert trace[-1]["accepted"] and trace[-1]["proposed"] == "done()"
    assert len(accepted) <= CFG.max_actions
    # the trace is the episode: one record per LM call, every reply parsed or answered by feedback
    assert len(trace) == result.lm_calls >= 1
    for r in trace:
        assert r["text"] and (r["proposed"] or r["feedback"])
        if r["proposed"]:
            assert r["proposed"].split("(")[0] in FUNCTIONS or r["feedback"]
        assert r["prompt_tokens"] > 300 and r["completion_tokens"] > 0 and r["seconds"] > 0
    assert [r["proposed"] for r in accepted] == result.actions
    # a refused action is never proposed again before the memory changes (constrained decoding):
    # within a run of refused replies, every proposal is new
    run: list[str] = []
    for r in trace:
        if r["accepted"]:
            run = []
        elif r["proposed"]:
            assert r["proposed"] not in run, f"{r['proposed']} proposed again after its refusal"
            run.append(r["proposed"])
        assert r["excluded"] >= 1  # go_to the current room, at least, is never decodable
    # token accounting: the totals are the sums of the per-call counts
    assert result.prompt_tokens == sum(r["prompt_tokens"] for r in trace)
    assert result.completion_tokens == sum(r["completion_tokens"] for r in trace)
    assert result.cached_tokens == sum(r["cached_tokens"] or 0 for r in trace)
    return trace


@pytest.mark.lm
def test_real_episode_in_process(small_model_path, tmp_path):
    from lookplangraph.lm import LlamaCppBackend

    lm = LlamaCppBackend(small_model_path, n_ctx=4096)
    result = run_episode_to_dir(kitchen_task(), lm, CFG, tmp_path)
    trace = check_episode(result, tmp_path)
    if len(trace) > 1:  # the static prompt comes first and is reused from the KV cache
        assert trace[1]["cached_tokens"] >= len(static_prompt()) // 6


@pytest.mark.lm
def test_real_episode_through_llama_cpp_server(llama_server, tmp_path):
    from lookplangraph.lm import make_backend

    lm = make_backend(f"openai:qwen-0.5b@{llama_server}", structured="json_object", timeout=180, max_retries=1)
    result = run_episode_to_dir(kitchen_task(), lm, CFG, tmp_path)
    check_episode(result, tmp_path)


@pytest.mark.lm
def test_run_keeps_llama_cpps_own_log_in_the_run_directory_and_shows_it_with_verbose(small_model_path, tmp_path):
    """``lookplangraph run`` as a child process (what a user's terminal gets, native writes
    included): the episode on stdout, nothing of llama.cpp's loading on stderr, all of it in
    ``llama.log``; ``--verbose`` shows it on the terminal too."""
    import subprocess
    import sys

    task = tmp_path / "task.json"
    task.write_text(json.dumps(kitchen_task().model_dump(mode="json")))
    marks = ("llama_model_loader", "load_tensors", "llama_context")

    def run(out, *extra):
        return subprocess.run([sys.executable, "-m", "lookplangraph.cli", "run", "--task-file", str(task), "--lm",
                               f"llamacpp:{small_model_path}", "--max-actions", "1", "--out", str(out), *extra],
                              capture_output=True, text=True, timeout=600)

    quiet = run(tmp_path / "quiet")
    assert quiet.returncode in (0, 1), quiet.stderr  # success or failure of the episode, not an error
    assert quiet.stdout.startswith("Task test/kitchen-apple:") and "trace:" in quiet.stdout
    assert not any(m in quiet.stderr for m in marks), quiet.stderr[-2000:]
    log = (tmp_path / "quiet" / "llama.log").read_text()
    assert all(m in log for m in marks)
    loud = run(tmp_path / "loud", "--verbose")
    assert loud.returncode in (0, 1) and all(m in loud.stderr for m in marks)
    assert all(m in (tmp_path / "loud" / "llama.log").read_text() for m in marks)
