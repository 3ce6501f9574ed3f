"""LoRA adapters: the GGUF header reader, the checks against a base, the metadata an adapter carries,
the shipped adapter, and the prompt settings a run takes from it.

Tiny base models and adapters are written with the ``gguf`` package (the distill extra) so that
every failure kind is made on purpose; the shipped adapter and the embedded 0.5B model are the
real files."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lookplangraph.lm import AdapterError, embedded
from lookplangraph.lm.llamacpp import resolve_adapter
from lookplangraph.lm.lora import (
    GGUFFormatError, META_KEYS, check_adapter, read_adapter, read_header, stamp_adapter, training_metadata,
)
from lookplangraph.planners.config import PlannerConfig, answer_format
from lookplangraph.agent.prompts import PROMPT_LAYOUTS, SYSTEM_PROMPTS, dynamic_prompt, system_prompt

gguf = pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parent.parent
MODEL = "qwen2.5-coder-1.5b"
DEFAULT = embedded.default_adapter(MODEL)  # the planner's default, shipped (so is the Cypher agent's)
SHIPPED = ROOT / "lookplangraph" / "lm" / "adapters" / f"{DEFAULT}.gguf"


def run_recall(name: str, info) -> str:
    """The view's recall a run of adapter ``name`` takes: the registry's choice, else its own."""
    return embedded.ADAPTERS[MODEL][name].run.get("recall", own_settings(info)[2])


def own_settings(info) -> tuple[str, str, str, str]:
    """What an adapter records it was trained with: system prompt, layout, recall, answer format."""
    m = info.metadata
    return (m["lookplangraph.system_prompt_name"], m["lookplangraph.prompt_layout"], m.get("lookplangraph.recall", "here"),
            m["lookplangraph.answer_format"])
BASE_SHAPES = {"blk.0.attn_q.weight": (16, 16), "blk.0.ffn_up.weight": (32, 16)}  # numpy (out, in)


def write_base(path: Path, shapes=BASE_SHAPES, arch: str = "qwen2") -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_type(gguf.GGUFType.MODEL)
    for name, shape in shapes.items():
        w.add_tensor(name, np.ones(shape, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_adapter(path: Path, shapes=BASE_SHAPES, rank: int = 4, arch: str = "qwen2", meta: dict | None = None) -> Path:
    w = gguf.GGUFWriter(str(path), arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, 8.0)
    for key, value in (meta or {}).items():
        w.add_string(key, value)
    rng = np.random.default_rng(0)
    for name, (out, inp) in shapes.items():
        w.add_tensor(f"{name}.lora_a", rng.standard_normal((rank, inp)).astype(np.float16))
        w.add_tensor(f"{name}.lora_b", rng.standard_normal((out, rank)).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def sha(path: Path) -> str:
    return embedded.sha256_file(path)


def test_a_fitting_adapter_is_read_and_checked(tmp_path):
    base = write_base(tmp_path / "base.gguf")
    info = check_adapter(write_adapter(tmp_path / "a.gguf"), base)
    assert (info.rank, info.alpha, info.architecture) == (4, 8.0, "qwen2")
    assert info.targets == tuple(sorted(BASE_SHAPES))
    assert info.metadata == {}


@pytest.mark.parametrize("damage, message", [
    ("missing", "no adapter file"),
    ("garbage", "not a GGUF file"),
    ("truncated_header", "cut short"),
    ("truncated_data", "cut short"),
    ("base_as_adapter", "not a GGUF LoRA adapter"),
])
def test_an_unusable_adapter_file_is_a_clear_error(tmp_path, damage, message):
    good = write_adapter(tmp_path / "good.gguf")
    path = tmp_path / "bad.gguf"
    if damage == "garbage":
        path.write_bytes(b"PK\x03\x04 not a gguf at all" * 10)
    elif damage == "truncated_header":
        path.write_bytes(good.read_bytes()[:100])
    elif damage == "truncated_data":
        path.write_bytes(good.read_bytes()[:-64])
    elif damage == "base_as_adapter":
        write_base(path)
    with pytest.raises(AdapterError, match=message):
        read_adapter(path)


def test_an_adapter_for_another_base_is_refused_by_shape_name_architecture_and_hash(tmp_path):
    base = write_base(tmp_path / "base.gguf")
    wider = {k: (out * 2, inp * 2) for k, (out, inp) in BASE_SHAPES.items()}
    with pytest.raises(AdapterError, match="does not fit the base.*another model size"):
        check_adapter(write_adapter(tmp_path / "wide.gguf", wider), base)
    with pytest.raises(AdapterError, match="does not have"):
        check_adapter(write_adapter(tmp_path / "other.gguf", {"blk.7.attn_k.weight": (16, 16)}), base)
    with pytest.raises(AdapterError, match="adapter for a llama model"):
        check_adapter(write_adapter(tmp_path / "llama.gguf", arch="llama"), base)
    stranger = write_adapter(tmp_path / "hash.gguf", meta={"lookplangraph.base_sha256": "0" * 64})
    with pytest.raises(AdapterError, match="trained on a base with SHA-256 0000"):
        check_adapter(stranger, base)
    own = write_adapter(tmp_path / "own.gguf", meta={"lookplangraph.base_sha256": sha(base)})
    assert check_adapter(own, base).metadata["lookplangraph.base_sha256"] == sha(base)
    # a known hash given by the caller (the embedded registry's) is used instead of hashing the file
    with pytest.raises(AdapterError, match="trained on a base"):
        check_adapter(own, base, base_sha256="f" * 64)


def test_stamping_keeps_every_tensor_and_key_and_never_leaves_half_a_file(tmp_path):
    src = write_adapter(tmp_path / "a.gguf")
    meta = training_metadata("ab" * 32, "compact", system_prompt("compact"), "history-scene", "action", {"steps": 3})
    info = stamp_adapter(src, tmp_path / "stamped.gguf", meta)
    assert info.metadata == meta and info.system_prompt_name == "compact" and info.answer_format == "action"
    before, after = gguf.GGUFReader(str(src)), gguf.GGUFReader(str(info.path))
    assert [t.name for t in before.tensors] == [t.name for t in after.tensors]
    assert all(np.array_equal(a.data, b.data) for a, b in zip(before.tensors, after.tensors))
    assert float(after.fields["adapter.lora.alpha"].contents()) == 8.0
    # stamping again replaces a key instead of adding a second one
    again = stamp_adapter(info.path, info.path, {"lookplangraph.answer_format": "action+reason"})
    assert again.answer_format == "action+reason" and again.metadata["lookplangraph.base_sha256"] == "ab" * 32
    assert list(read_header(again.path).kv).count("lookplangraph.answer_format") == 1
    with pytest.raises(AdapterError, match="unknown adapter metadata key"):
        stamp_adapter(src, tmp_path / "x.gguf", {"lookplangraph.colour": "blue"})
    (tmp_path / "broken.gguf").write_bytes(b"GGUF" + b"\0" * 10)
    with pytest.raises(AdapterError):
        stamp_adapter(tmp_path / "broken.gguf", tmp_path / "y.gguf", meta)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "broken.gguf", "stamped.gguf"]


def shipped_record(name: str):
    """An adapter's file checked against its registry entry and its record's invariants: the
    embedded base, a system prompt of this version byte for byte, a layout and an answer format
    this version has, some LoRA rank on some of the base's weights; returns its info and its
    training record."""
    spec = embedded.ADAPTERS[MODEL][name]
    assert spec.path().stat().st_size <= 40 << 20
    info = read_adapter(spec.path())
    assert info.metadata["lookplangraph.base_sha256"] == embedded.MODELS[MODEL].sha256
    prompt, layout, _, answers = own_settings(info)
    assert prompt in SYSTEM_PROMPTS and info.metadata["lookplangraph.system_prompt"].strip() == system_prompt(prompt)
    assert layout in PROMPT_LAYOUTS and answers in ("action", "action+reason", "reason+action")
    assert info.rank > 0 and info.targets
    return info, json.loads(info.metadata["lookplangraph.training"])


def test_the_registry_ships_each_jobs_default_alone_and_names_a_card_and_a_source_for_every_adapter():
    registry = json.loads(embedded.REGISTRY_FILE.read_text())
    entries = registry["adapters"]
    assert registry["default"] == {MODEL: DEFAULT} and DEFAULT in embedded.ADAPTERS[MODEL]
    cypher = embedded.default_adapter(MODEL, "cypher")
    assert cypher == registry.get("cypher_default", {}).get(MODEL, DEFAULT) and cypher in embedded.ADAPTERS[MODEL]
    shipped = embedded.shipped_adapters(MODEL)
    assert shipped[0] == DEFAULT and set(shipped) == {DEFAULT, cypher}
    assert sorted(e["name"] for e in entries if e["shipped"]) == sorted(shipped)
    in_package = sorted(p.name for p in embedded.REGISTRY_FILE.parent.glob("*.gguf"))
    assert in_package == sorted(f"{n}.gguf" for n in shipped), "the package ships the jobs' default adapters only"
    assert embedded.ADAPTERS[MODEL][DEFAULT].path() == SHIPPED
    assert embedded.default_lm("cypher") == f"llamacpp:{MODEL}+{cypher}" and embedded.default_lm() == f"llamacpp:{MODEL}+{DEFAULT}"
    with pytest.raises(ValueError, match="unknown job 'planning'; one of planner, cypher"):
        embedded.default_adapter(MODEL, "planning")
    for e in entries:
        assert (ROOT / e["card"]).is_file(), e["card"]
        assert e["trained_from"] is None or e["trained_from"] in embedded.ADAPTERS[e["model"]], e
        assert e["shipped"] or len(e.get("commit", "")) == 40, f"{e['name']}: no commit to restore it from"


def test_a_jobs_default_is_the_planners_unless_the_registry_names_another(tmp_path):
    doc = json.loads(embedded.REGISTRY_FILE.read_text())
    doc.pop("cypher_default", None)
    (tmp_path / "same.json").write_text(json.dumps(doc))
    _, defaults = embedded.load_registry(tmp_path / "same.json")
    assert defaults["cypher"] == defaults["planner"] == doc["default"]
    other = next(e["name"] for e in doc["adapters"] if e["name"] != doc["default"][MODEL])
    (tmp_path / "other.json").write_text(json.dumps(doc | {"cypher_default": {MODEL: other}}))
    _, defaults = embedded.load_registry(tmp_path / "other.json")
    assert defaults == {"planner": doc["default"], "cypher": {MODEL: other}}


def test_the_cypher_commands_default_to_the_cypher_agents_adapter():
    from lookplangraph.cypher import commands

    assert commands.DEFAULT_LM == embedded.default_lm("cypher")


def test_an_adapter_that_is_not_shipped_says_how_to_restore_it_and_resolves_once_restored():
    spec = next(s for s in embedded.ADAPTERS[MODEL].values() if not s.shipped)
    with pytest.raises(AdapterError, match="is not shipped in this package") as caught:
        resolve_adapter(MODEL, spec.name)
    assert f"git show {spec.commit}:lookplangraph/lm/adapters/{spec.filename}" in str(caught.value)
    assert f"docs/models/{spec.name}.md" in str(caught.value)
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", spec.commit],
                                                     capture_output=True).returncode != 0:
        pytest.skip("no git history here (a shallow clone or an installed package) to restore from")
    target = embedded.models_dir() / "adapters" / spec.filename  # the session's own model cache
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "show", f"{spec.commit}:lookplangraph/lm/adapters/{spec.filename}"],
                       stdout=out, check=True)
    try:
        assert resolve_adapter(MODEL, spec.name) == target  # the SHA-256 of the registry checked
        info, training = shipped_record(spec.name)
        assert training["device"] in ("NVIDIA H200", "cpu")
        target.write_bytes(target.read_bytes()[:-1] + b"x")
        with pytest.raises(AdapterError, match="SHA-256 differs"):
            resolve_adapter(MODEL, spec.name)
    finally:
        target.unlink()


@pytest.mark.parametrize("job", embedded.JOBS)
def test_the_default_adapter_records_its_start_and_runs_in_its_own_view(job):
    name = embedded.default_adapter(MODEL, job)
    info, training = shipped_record(name)
    defaulted = {"lookplangraph.recall", "lookplangraph.cypher_classes_at",  # absent: here, schema, 1
                 "lookplangraph.actions_per_answer"}
    assert set(info.metadata) <= set(META_KEYS) and set(META_KEYS) - set(info.metadata) <= defaulted
    assert training["device"] and training["steps"] > 0 and training["examples"] > 0
    start = json.loads(embedded.REGISTRY_FILE.read_text())
    start = next(e for e in start["adapters"] if e["name"] == name)["trained_from"]
    # an adapter trained in stages records them, first to last, each starting from the one before
    stages = training.get("lineage") or [training]
    assert stages[0]["init_adapter_sha256"] == embedded.ADAPTERS[MODEL][start].sha256
    # (a stage that started from a stamped release names the file as its training wrote it too)
    assert all(b.get("init_trained_as_sha256", b["init_adapter_sha256"]) == a["adapter_gguf_sha256"]
               for a, b in zip(stages, stages[1:]))
    assert stages[-1]["adapter_gguf_sha256"] == training["adapter_gguf_sha256"]
    assert stages[-1]["init_adapter_sha256"] == training["init_adapter_sha256"]
    cfg, notes = PlannerConfig().settled(info)
    prompt, layout, _, _ = own_settings(info)
    assert (cfg.system_prompt, cfg.prompt_layout, cfg.recall, notes) == (prompt, layout, run_recall(name, info), [])


def test_auto_prompt_settings_follow_the_adapter_and_an_explicit_other_prompt_is_noted(tmp_path):
    own = read_adapter(SHIPPED)
    prompt, layout, _, answers = own_settings(own)
    cfg, notes = PlannerConfig().settled(own)
    assert (cfg.system_prompt, cfg.prompt_layout, notes) == (prompt, layout, [])
    cfg, notes = PlannerConfig().settled(None)
    assert (cfg.system_prompt, cfg.prompt_layout, cfg.reason_max_length) == ("full", "scene-history", None)
    other = next(p for p in SYSTEM_PROMPTS if p != prompt)
    other_cap = 300 if answers == "action" else 0  # the other answer format
    cfg, notes = PlannerConfig(system_prompt=other, reason_max_length=other_cap).settled(own)
    assert cfg.system_prompt == other and cfg.reason_max_length == other_cap
    assert len(notes) == 2 and f"system_prompt = {prompt}" in notes[0] and f"answers {answers}" in notes[1]
    # an adapter trained on answers without a reason runs without one unless a length is set
    short = stamp_adapter(write_adapter(tmp_path / "a.gguf"), tmp_path / "short.gguf",
                          training_metadata("0" * 64, "full", system_prompt("full"), "history-scene", "action"))
    cfg, notes = PlannerConfig().settled(short)
    assert (cfg.prompt_layout, cfg.reason_max_length, notes) == ("history-scene", 0, [])
    # a recorded prompt text this version does not have: refused under auto, allowed when set
    drifted = stamp_adapter(short.path, tmp_path / "drift.gguf", {"lookplangraph.system_prompt": "You are a toaster."})
    with pytest.raises(AdapterError, match="set system_prompt"):
        PlannerConfig().settled(drifted)
    assert PlannerConfig(system_prompt="compact").settled(drifted)[0].system_prompt == "compact"


def test_the_registry_chooses_run_settings_by_the_files_hash_and_explicit_settings_win(tmp_path, monkeypatch):
    for specs in embedded.ADAPTERS.values():  # every entry's choices are settings a run may leave unset
        for spec in specs.values():
            PlannerConfig.from_dict(spec.run, where=spec.name)
            assert set(spec.run) <= {"reason_max_length", "prompt_layout", "recall", "system_prompt"}, spec.name
    made = write_adapter(tmp_path / "made.gguf")
    spec = embedded.AdapterSpec("test", "test-model", "made.gguf", sha(made), run={"reason_max_length": 0},
                                size=made.stat().st_size)
    monkeypatch.setitem(embedded.ADAPTERS, "test-model", {"test": spec})
    elsewhere = tmp_path / "elsewhere.gguf"
    shutil.copy(made, elsewhere)
    assert embedded.registered_settings(elsewhere) == {"reason_max_length": 0}  # the same file by another path
    cfg, notes = PlannerConfig().settled(read_adapter(elsewhere))
    assert (cfg.reason_max_length, notes) == (0, [])
    assert PlannerConfig(reason_max_length=300).settled(read_adapter(elsewhere))[0].reason_max_length == 300
    other = tmp_path / "other.gguf"
    other.write_bytes(made.read_bytes()[:-1] + bytes([made.read_bytes()[-1] ^ 1]))  # same size, other bytes
    assert embedded.registered_settings(other) == {} and embedded.registered_settings(None) == {}
    assert PlannerConfig().settled(read_adapter(other))[0].reason_max_length is None


def test_run_settings_settle_the_prompt_from_the_spec_without_loading_a_model():
    from lookplangraph.evaluation.settings import load_settings

    prompt, layout, _, _ = own_settings(read_adapter(SHIPPED))
    s = load_settings(None, {"lm": f"llamacpp:{MODEL}+{DEFAULT}"})
    assert (s.config.system_prompt, s.config.prompt_layout) == (prompt, layout)
    assert s.as_dict()["system_prompt"] == prompt  # what results record
    notes = []
    other = next(p for p in SYSTEM_PROMPTS if p != prompt)
    s = load_settings(None, {"lm": f"llamacpp:{MODEL}+{DEFAULT}", "system_prompt": other}, note=notes.append)
    assert s.config.system_prompt == other and f"trained with system_prompt = {prompt}" in notes[0]
    assert load_settings(None, {"lm": "openai:gpt-4o"}).config.system_prompt == "full"
    with pytest.raises(AdapterError, match="no adapter file"):
        load_settings(None, {"lm": "llamacpp:qwen2.5-coder-1.5b+/nowhere/adapter.gguf"})


def run_cli(capsys, *args: str):
    """``lookplangraph ARGS`` in this process: (exit code, stderr)."""
    from lookplangraph.cli import main

    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.parametrize("adapter, message", [
    ("/nowhere/adapter.gguf", "no adapter file /nowhere/adapter.gguf"),
    ("lpg-v9", "no adapter 'lpg-v9' shipped for 'qwen2.5-coder-1.5b'"),
])
def test_the_cli_exits_2_on_an_adapter_it_cannot_find(capsys, adapter, message):
    code, err = run_cli(capsys, "run", "--split", "office", "--task", "office-01",
                        "--lm", f"llamacpp:qwen2.5-coder-1.5b+{adapter}")
    assert code == 2 and message in err, err


def test_the_cli_exits_2_on_a_corrupt_adapter(capsys, tmp_path):
    bad = tmp_path / "adapter.gguf"
    bad.write_bytes(SHIPPED.read_bytes()[:4096])
    code, err = run_cli(capsys, "run", "--split", "office", "--task", "office-01",
                        "--lm", f"llamacpp:qwen2.5-coder-1.5b+{bad}")
    assert code == 2 and "cut short" in err, err


@pytest.mark.skipif(not embedded.is_available("qwen2.5-coder-0.5b"), reason="the 0.5B model's parts are not installed")
def test_the_cli_exits_2_on_an_adapter_of_another_base_before_llama_cpp_loads_it(capsys, tmp_path):
    # the real 1.5B adapter on the real 0.5B base: the shapes differ (hidden size 1536 against 896)
    code, err = run_cli(capsys, "run", "--split", "office", "--task", "office-01", "--max-actions", "1",
                        "--lm", f"llamacpp:qwen2.5-coder-0.5b+{SHIPPED}")
    assert code == 2 and "does not fit the base" in err and "another model size" in err, err
    # eval reports it the same way (the backend is made inside its workers)
    code, err = run_cli(capsys, "eval", "--split", "office", "--limit", "1", "--out", str(tmp_path / "eval"),
                        "--lm", f"llamacpp:qwen2.5-coder-0.5b+{SHIPPED}")
    assert code == 2 and "does not fit the base" in err, err


@pytest.mark.skipif(not embedded.is_available("qwen2.5-coder-0.5b"), reason="the 0.5B model's parts are not installed")
@pytest.mark.parametrize("adapter, message", [
    ("lpg-v9", "no adapter 'lpg-v9' shipped for 'qwen2.5-coder-0.5b'"),
    (str(SHIPPED), "does not fit the base"),  # the 1.5B's adapter as the start of a 0.5B run
])
def test_distill_train_exits_2_on_a_start_adapter_that_is_missing_or_does_not_fit(capsys, tmp_path, adapter, message):
    code, err = run_cli(capsys, "distill", "train", "--data", str(tmp_path / "sft.jsonl"), "--base", "qwen2.5-coder-0.5b",
                        "--out", str(tmp_path / "out"), "--init-adapter", adapter)
    assert code == 2 and "--init-adapter" in err and message in err, err
    assert not (tmp_path / "out").exists()


def test_answer_formats_and_prompt_layouts():
    from lookplangraph.agent.decoding import action_schema, constrained_schema

    assert answer_format() == "action+reason" and answer_format(True) == "reason+action"
    assert answer_format(False, 0) == answer_format(True, 0) == "action"
    assert list(action_schema(["a-1"], reason_max_length=0)["properties"]) == [
        "function_name", "node", "relation", "destination"]
    excluded = constrained_schema(["a-1", "b-1"], [("go_to", "a-1", None, None)], reason_max_length=0)
    assert all("reason" not in o["properties"] for o in excluded["anyOf"])
    with pytest.raises(ValueError, match="reason_max_length"):
        PlannerConfig(reason_max_length=-1)
    scene = "Places: kitchen-1, hall-1.\nYou are in hall-1 and hold nothing.\nAssets here: none."
    history = [("look", "go_to(kitchen-1)", ""), ("", "discover_objects(table-1)", "saw cup-1")]
    old = dynamic_prompt("Bring the cup.", scene, history, None)
    assert old.index("Places:") < old.index("You are in") < old.index("Previous steps")
    new = dynamic_prompt("Bring the cup.", scene, history, "try again", layout="history-scene")
    assert new.index("Places:") < new.index("Previous steps") < new.index("You are in") < new.index("Feedback")
    assert "- look -> go_to(kitchen-1)\n- discover_objects(table-1) [saw cup-1]" in new
    # the next step's prompt begins with this step's prompt up to the end of its history
    longer = dynamic_prompt("Bring the cup.", scene.replace("hall-1 and", "kitchen-1 and"),
                            history + [("", "pick_up(cup-1)", "")], None, layout="history-scene")
    assert longer.startswith(new[: new.index("\nScene now:")])
    with pytest.raises(ValueError, match="unknown prompt layout"):
        dynamic_prompt("x", scene, [], None, layout="sideways")


@pytest.mark.skipif(not embedded.is_available("qwen2.5-coder-0.5b"), reason="the 0.5B model's parts are not installed")
def test_merging_adds_the_adapter_to_the_real_base_and_keeps_its_record(tmp_path):
    from gguf import quants

    from lookplangraph.lm.lora import merged_record
    from lookplangraph.lm.specs import spec_adapter
    from lookplangraph.distill.training.merge import merge_lora

    base = embedded.ensure_model("qwen2.5-coder-0.5b")
    target = "blk.0.ffn_up.weight"
    shape = read_header(base).tensors[target].shape  # ggml [in, out]
    meta = training_metadata(embedded.MODELS["qwen2.5-coder-0.5b"].sha256, "compact", system_prompt("compact"),
                             "history-scene", "action")
    adapter = write_adapter(tmp_path / "a.gguf", {target: (shape[1], shape[0])}, rank=2, meta=meta)
    report = merge_lora(base, adapter, tmp_path / "merged.gguf", file_type="q8_0",
                        base_sha256=embedded.MODELS["qwen2.5-coder-0.5b"].sha256)
    assert report.merged == 1 and not list(tmp_path.glob("*.part"))

    def weight(path, name):
        t = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == name)
        return quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape[1], shape[0])

    lora = {t.name: np.asarray(t.data, dtype=np.float32) for t in gguf.GGUFReader(str(adapter)).tensors}
    delta = 8.0 / 2 * lora[target + ".lora_b"] @ lora[target + ".lora_a"]
    moved = weight(report.path, target) - weight(base, target)
    assert np.corrcoef(moved.ravel(), delta.ravel())[0, 1] > 0.99
    untouched = "blk.1.ffn_up.weight"
    assert np.abs(weight(report.path, untouched) - weight(base, untouched)).max() < 0.05
    # the merged model still says which prompt it was trained with, and a run settles on it
    assert merged_record(report.path).metadata == meta and merged_record(base) is None
    assert spec_adapter(f"llamacpp:{report.path}").answer_format == "action"
    with pytest.raises(AdapterError, match="does not fit the base"):
        merge_lora(base, SHIPPED, tmp_path / "never.gguf")
    assert not (tmp_path / "never.gguf").exists()


def test_the_default_lm_is_the_adapter_for_lookplangraph_and_the_base_for_the_other_planners():
    from lookplangraph.evaluation.settings import BASE_LM, DEFAULT_LM, load_settings

    assert DEFAULT_LM == f"llamacpp:{MODEL}+{DEFAULT}" and BASE_LM == f"llamacpp:{MODEL}"
    s = load_settings(None, {})
    shipped = read_adapter(SHIPPED)
    prompt = own_settings(shipped)[0]
    assert (s.lm, s.config.system_prompt, s.config.recall) == (DEFAULT_LM, prompt, run_recall(DEFAULT, shipped))
    assert load_settings(None, {"planner": "react"}).lm == BASE_LM
    assert load_settings(None, {"planner": "react", "lm": DEFAULT_LM}).lm == DEFAULT_LM
    # the Cypher agent asks and is evaluated with its own job's adapter; its mistakes are recorded on the base
    from lookplangraph.cypher import commands as cypher_commands
    from lookplangraph.distill.cypher import commands as cypher_data_commands

    assert (cypher_commands.DEFAULT_LM, cypher_data_commands.MISTAKES_LM) == (embedded.default_lm("cypher"), BASE_LM)


def test_every_command_that_plans_defaults_to_the_default_model_and_adapter():
    import argparse

    from lookplangraph.cli import build_parser
    from lookplangraph.evaluation.settings import BASE_LM, DEFAULT_LM

    def commands(parser, path=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from commands(sub, (*path, name))
        yield path, parser

    lm_help = {" ".join(path): next(a for a in p._actions if "--lm" in a.option_strings).help
               for path, p in commands(build_parser()) if any("--lm" in a.option_strings for a in p._actions)}
    # the base by design: the paper's tables run every planner on the same base model; mistakes to
    # recover from are recorded on it; a replay's reasons come from the run's own LM
    base = {"reproduce", "cypher-mistakes"}
    own = {"explain"}
    cypher = {"ask", "cypher-eval"}  # the Cypher agent's job has a default adapter of its own
    assert {"trial"} | cypher <= set(lm_help)
    for command, text in lm_help.items():
        if command in base:
            assert BASE_LM in text, (command, text)
        elif command in cypher:
            assert embedded.default_lm("cypher") in text, (command, text)
        elif command not in own and "default" in text:
            assert DEFAULT_LM in text or BASE_LM not in text.replace(DEFAULT_LM, ""), (command, text)
    assert DEFAULT_LM in lm_help["trial"]
    args = build_parser().parse_args(["trial", "--task-file", "t.json"])
    assert args.lm is None  # resolved to DEFAULT_LM when the trial is made (cmd_trial), as the help says


def test_the_cypher_layout_is_recorded_from_the_training_prompts_and_settles_ask_s_auto(tmp_path, kitchen_store):
    import argparse

    from lookplangraph.cypher import commands
    from lookplangraph.cypher.agent import AgentConfig, CypherAgent, classes_at_end, classes_layout
    from lookplangraph.distill.training.sft import TrainConfig, TrainError, cypher_layout, prompt_metadata
    from lookplangraph.lm.scripted import ScriptedBackend

    lm = ScriptedBackend(['{"thought": "t", "tool": "answer", "answer": 1}'])  # scripted: only the prompt matters
    schema = CypherAgent(lm, kitchen_store, AgentConfig()).answer_question("How many?", "number").transcript[0]["content"]
    end = classes_at_end(schema)
    assert (classes_layout(schema), classes_layout(end), classes_layout(system_prompt("full"))) == ("schema", "end", None)

    def data(*systems):
        path = tmp_path / f"d{len(list(tmp_path.iterdir()))}" / "sft.jsonl"
        path.parent.mkdir()
        path.write_text("".join(json.dumps({"messages": [{"role": "system", "content": s},
                                                         {"role": "user", "content": "q"},
                                                         {"role": "assistant", "content": "a"}]}) + "\n"
                                for s in systems))
        return path

    planning = system_prompt("compact")
    assert cypher_layout(data(planning)) == "schema"  # no Cypher example: the default
    assert cypher_layout(data(planning, end, end)) == "end"
    with pytest.raises(TrainError, match="both layouts"):
        cypher_layout(data(end, schema))
    meta = prompt_metadata(TrainConfig(), planning, data(planning, end), "0" * 64)
    assert meta["lookplangraph.cypher_classes_at"] == "end"
    assert "lookplangraph.cypher_classes_at" not in prompt_metadata(TrainConfig(), planning, data(schema), "0" * 64)
    # ask/cypher-eval --classes-at auto: the adapter's record, read from its header; schema without one
    made = stamp_adapter(write_adapter(tmp_path / "a.gguf"), tmp_path / "end.gguf", meta)
    assert made.cypher_classes_at == "end" and read_adapter(tmp_path / "a.gguf").cypher_classes_at == "schema"
    for lm_spec, flag, settled in ((f"llamacpp:{MODEL}+{made.path}", "auto", "end"),
                                   (f"llamacpp:{MODEL}+{made.path}", "schema", "schema"),
                                   (f"llamacpp:{MODEL}+{SHIPPED}", "auto", read_adapter(SHIPPED).cypher_classes_at),
                                   ("openai:gpt-4o", "auto", "schema"),
                                   (f"llamacpp:{MODEL}+/nowhere/a.gguf", "auto", "schema")):  # the load reports it
        assert commands._classes_at(argparse.Namespace(classes_at=flag, lm=lm_spec)) == settled


def test_the_registry_chooses_the_cypher_layout_of_an_adapter_before_its_record(tmp_path, monkeypatch):
    import argparse

    from lookplangraph.cypher import commands

    plain = write_adapter(tmp_path / "plain.gguf")  # records nothing: schema
    spec = embedded.AdapterSpec("test", "test-model", "plain.gguf", sha(plain), size=plain.stat().st_size,
                                cypher={"classes_at": "end"})
    monkeypatch.setitem(embedded.ADAPTERS, "test-model", {"test": spec})
    assert embedded.registered_settings(plain, "cypher") == {"classes_at": "end"}
    assert embedded.registered_settings(plain) == {}  # the planner's settings are another field
    settle = lambda flag: commands._classes_at(argparse.Namespace(classes_at=flag, lm=f"llamacpp:{MODEL}+{plain}"))
    assert (settle("auto"), settle("schema")) == ("end", "schema")  # an explicit setting wins
    for specs in embedded.ADAPTERS.values():  # every entry's Cypher choices are settings of the agent
        for entry in specs.values():
            assert set(entry.cypher) <= {"classes_at"}, entry.name


def test_distill_stamp_puts_a_runs_record_into_a_copy_of_its_adapter_and_refuses_a_record_of_another(tmp_path, capsys):
    from lookplangraph.cli import main

    run = tmp_path / "run"
    run.mkdir()
    adapter = write_adapter(run / "adapter.gguf")
    record = {"steps": 3, "adapter_gguf_sha256": sha(adapter), "data_sha256": "d" * 64}
    (run / "train.json").write_text(json.dumps(record))
    assert main(["distill", "stamp", "--run", str(run), "--out", str(tmp_path / "v1.gguf")]) == 0
    stamped = read_adapter(tmp_path / "v1.gguf")
    assert json.loads(stamped.metadata["lookplangraph.training"]) == record
    assert stamped.pairs == read_adapter(adapter).pairs
    (run / "train.json").write_text(json.dumps({**record, "adapter_gguf_sha256": "0" * 64}))
    assert main(["distill", "stamp", "--run", str(run), "--out", str(tmp_path / "v2.gguf")]) == 2
    assert "different training calls" in capsys.readouterr().err and not (tmp_path / "v2.gguf").exists()
