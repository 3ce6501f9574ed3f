"""The held-out split: evaluation tasks and their siblings never reach the train pool, the pinned
manifest is what a fresh GraSIF build gives, and the evaluation sample is the one the
measurement script runs."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

from grasif import dataset, heldout

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def build(grasif_build):
    return grasif_build


@pytest.fixture(scope="module")
def manifest():
    return heldout.load_manifest()


def test_no_evaluation_task_or_sibling_is_in_the_pool(manifest):
    assert heldout.leaks(manifest) == []
    assert manifest["counts"] == {side: len(manifest[side]) for side in ("eval", "train")} | \
        {"excluded_siblings": len(manifest["excluded_siblings"])}
    assert manifest["counts"]["eval"] == 47 and manifest["counts"]["train"] > 0
    assert not any(t.startswith("office/") for t in manifest["train"])  # the office is out of domain


def test_the_manifest_is_what_a_fresh_build_gives(build, manifest):
    """Task ids and the SHA-256 of every task file, both sides: the split is pinned."""
    split = heldout.check(build, manifest)
    assert split["eval"] == manifest["eval"] and split["train"] == manifest["train"]


def test_no_pool_task_shares_a_family_with_an_evaluation_task(build, manifest):
    """Recomputed from the task files, not read from the manifest's own list of siblings."""
    tasks = {f"{t.split}/{t.id}": t for s in heldout.POOL_SPLITS + heldout.EVAL_SPLITS
             for t in dataset.load_split(build, s)}
    eval_keys = set().union(*(heldout.family_keys(tasks[t]) for t in manifest["eval"]))
    assert [t for t in manifest["train"] if heldout.family_keys(tasks[t]) & eval_keys] == []
    assert len(manifest["train"]) + len(manifest["excluded_siblings"]) + 18 == \
        sum(1 for t in tasks if not t.startswith("office/"))


def test_the_evaluation_sample_is_the_measurement_scripts():
    script = (ROOT / "benchmarks" / "lm_eval.sh").read_text()
    vh = re.search(r'^VH="([^"]+)"', script, re.M).group(1).split()
    bh = re.search(r'^BH="([^"]+)"', script, re.M).group(1).split()
    assert tuple(vh) == heldout.EVAL_VIRTUALHOME and tuple(bh) == heldout.EVAL_BEHAVIOR


def test_a_leak_and_a_changed_task_file_are_caught(build, manifest):
    leaked = copy.deepcopy(manifest)
    leaked["train"]["virtualhome/file647_2"] = leaked["eval"]["virtualhome/file647_2"]
    sibling = leaked["excluded_siblings"][0]["task"]
    leaked["train"][sibling] = "0" * 64
    problems = heldout.leaks(leaked)
    assert any("file647_2 is in the train pool" in p for p in problems)
    assert any(sibling in p and "sibling" in p for p in problems)
    with pytest.raises(heldout.LeakError, match="file647_2"):
        heldout.check(build, leaked)
    changed = copy.deepcopy(manifest)
    first = sorted(changed["train"])[0]
    changed["train"][first] = "0" * 64
    with pytest.raises(heldout.LeakError, match="differs from the manifest"):
        heldout.check(build, changed)


def test_siblings_by_program_title_and_activity():
    from grasif.task import Task

    def task(split, tid, **prov):
        return Task.model_construct(id=tid, split=split, provenance=prov)

    assert heldout.family_keys(task("virtualhome", "file647_3", title="Change TV channel")) == \
        {"program:file647", "title:change tv channel"}
    assert heldout.family_keys(task("behavior", "buy_a_belt", activity="buy_a_belt")) == {"activity:buy_a_belt"}
