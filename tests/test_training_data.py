"""The training sets committed under ``data/training/`` (the data of the next adapter, kept in the
repository because ``runs/`` does not outlive a checkout): each reads as chat examples, counts what
its ``counts.json`` and README say, and holds nothing of a held-out task, scene or instruction."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path

import pytest

from grasif import dataset, heldout
from grasif.generate import SPLIT_PREFIX
from lookplangraph.cypher.intents import HELDOUT_INTENTS
from lookplangraph.distill.cypher.data import allowed_scenes
from lookplangraph.distill.training.sft import read_examples

ROOT = Path(__file__).resolve().parent.parent
SETS = sorted(p.parent for p in (ROOT / "data" / "training").glob("*/sft.jsonl.gz"))


def rows(directory: Path) -> list[dict]:
    with gzip.open(directory / "sft.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_there_is_a_committed_set():
    assert SETS, "data/training/ holds no sft.jsonl.gz"


@pytest.mark.parametrize("directory", SETS, ids=lambda p: p.name)
def test_a_set_is_what_its_counts_and_readme_say(directory):
    examples = read_examples(directory)  # raises on a line that is not a chat example
    counts = json.loads((directory / "counts.json").read_text())
    assert counts["kind"] == "mix" and counts["examples"] == len(examples)
    assert sum(s["taken"] for s in counts["sources"]) == len(examples)
    readme = (directory / "README.md").read_text()
    sha = hashlib.sha256(gzip.decompress((directory / "sft.jsonl.gz").read_bytes())).hexdigest()
    assert sha in readme, "README.md must give the SHA-256 of the uncompressed sft.jsonl"
    assert f"{len(examples):,}" in readme


def held_out_problems(examples: list[dict], build: Path) -> list[str]:
    """What in ``examples`` (rows of an sft.jsonl) comes from a held-out task, scene, instruction or
    intent."""
    tasks = [t for s in (*heldout.POOL_SPLITS, *heldout.EVAL_SPLITS) for t in dataset.load_split(build, s)]
    cypher_scenes = {(t.split, t.id) for t in allowed_scenes(tasks)}
    held_out = {t.instruction.strip().lower() for t in heldout.kept_out_tasks(build)}  # evaluation and dev
    bad = []
    for n, row in enumerate(examples, 1):
        meta = row["meta"]
        if meta["split"].startswith(SPLIT_PREFIX):
            # generated: checked against the held-out tasks when generated, and by text below; a
            # building kind kept for development never
            if heldout.is_dev_split(meta["split"]):
                bad.append(f"{n}: an example of a generated {meta['split'][len(SPLIT_PREFIX):]}, dev material")
        elif str(meta.get("source", "")).startswith("cypher"):
            if (meta["split"], meta["scene"]) not in cypher_scenes:
                bad.append(f"{n}: Cypher example on {meta['split']}/{meta['scene']}, not a training scene")
        elif not heldout.in_train_pool(meta["split"], meta["task_id"]):
            bad.append(f"{n}: planning example of {meta['split']}/{meta['task_id']}, not in the train pool")
        if meta.get("intent") in HELDOUT_INTENTS:
            bad.append(f"{n}: a question of the held-out intent {meta['intent']}")
        user = next(m["content"] for m in row["messages"] if m["role"] == "user")
        said = [m.strip().lower() for m in re.findall(r"^Instruction: (.*)$", user, re.M)]
        said += [str(meta["instruction"]).strip().lower()] if "instruction" in meta else []
        bad += [f"{n}: a held-out instruction: {s!r}" for s in said if s in held_out]
    return bad


@pytest.mark.parametrize("directory", SETS, ids=lambda p: p.name)
def test_no_example_comes_from_a_held_out_task_scene_or_instruction(directory, grasif_build):
    assert held_out_problems(rows(directory), grasif_build) == []


def test_the_check_catches_held_out_examples(grasif_build):
    """The guard above on examples made from an evaluation task: as a planning example, as a
    Cypher example on its scene, and as a generated example that says its instruction; and on an
    intent example of a held-out intent on a training scene."""
    task = next(t for t in heldout.evaluation_tasks(grasif_build) if t.split == "virtualhome")
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": f"Instruction: {task.instruction}\nScene:"},
            {"role": "assistant", "content": "{}"}]
    examples = [{"messages": chat, "meta": {"split": task.split, "task_id": task.id}},
                {"messages": chat[:1] + [{"role": "user", "content": "Question: how many?"}] + chat[2:],
                 "meta": {"source": "cypher-gold", "split": task.split, "scene": task.id}},
                {"messages": chat, "meta": {"split": f"{SPLIT_PREFIX}home", "task_id": "home-s0-00000-t1"}}]
    dev = dataset.load_split(grasif_build, "dev")[0]  # a development task: kept out as surely
    examples.append({"messages": [chat[0], {"role": "user", "content": f"Instruction: {dev.instruction}\nScene:"}, chat[2]],
                     "meta": {"split": dev.split, "task_id": dev.id}})
    tasks = [t for s in (*heldout.POOL_SPLITS, *heldout.EVAL_SPLITS) for t in dataset.load_split(grasif_build, s)]
    train = allowed_scenes(tasks)[0]
    examples.append({"messages": chat[:1] + [{"role": "user", "content": "Question: which?"}] + chat[2:],
                     "meta": {"source": "cypher-gold-intent", "split": train.split, "scene": train.id,
                              "intent": HELDOUT_INTENTS[0]}})
    problems = held_out_problems(examples, grasif_build)
    assert [p.split(":")[0] for p in problems] == ["1", "1", "2", "3", "4", "4", "5"]
    assert "not in the train pool" in problems[0] and "not a training scene" in problems[2]
    assert problems[-1] == f"5: a question of the held-out intent {HELDOUT_INTENTS[0]}"
