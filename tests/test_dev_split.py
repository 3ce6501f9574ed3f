"""The dev split (grasif.dev): hand-written buildings that choose designs, checked like the office
split, built with the other splits, and kept out of training like the evaluation tasks."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from grasif import dataset, dev, heldout
from grasif.dataset import SourceError
from grasif.generate.leaks import leaks
from grasif.validate import validate_plan
from sgs.actions import parse_plan


@pytest.fixture(scope="module")
def tasks():
    return dev.build_tasks()


def test_two_buildings_of_at_least_fifteen_tasks_each_every_plan_checked(tasks):
    by_building = Counter(t.provenance["building"] for t in tasks)
    assert set(by_building) == set(dev.BUILDINGS) and min(by_building.values()) >= 15
    assert all(t.split == "dev" and t.id.startswith(t.provenance["building"] + "-") for t in tasks)
    kinds = Counter(t.provenance["kind"] for t in tasks)
    assert {"search", "rearrange", "state", "sequence"} <= set(kinds)
    for t in tasks:  # the independent check: the plan reaches the goal with nothing else changed
        assert t.goal.unchanged_elsewhere
        assert validate_plan(t.graph, parse_plan(t.ground_truth_plan), t.goal).success, t.id
        assert not validate_plan(t.graph, [], t.goal).success, t.id  # nothing holds at the start
    rooms = {b: len(next(t for t in tasks if t.provenance["building"] == b).graph.places) for b in dev.BUILDINGS}
    assert rooms == {"clinic": 15, "flat": 11}


def test_a_task_whose_plan_leaves_a_side_effect_is_refused(tmp_path):
    shutil.copytree(dev.SOURCE_DIR, tmp_path / "dev")
    path = tmp_path / "dev" / "flat" / "tasks.json"
    doc = json.loads(path.read_text())
    entry = next(t for t in doc["tasks"] if t["id"] == "flat-10")
    entry["plan"] = [a for a in entry["plan"] if not a.startswith("close(")]  # the freezer left open
    path.write_text(json.dumps(doc))
    with pytest.raises(SourceError, match="flat-10: the ground-truth plan does not reach the goal: side effect: freezer-1"):
        dev.build_tasks(tmp_path / "dev")
    entry["id"] = "clinic-99"
    path.write_text(json.dumps(doc))
    with pytest.raises(SourceError, match="a flat task id starts with 'flat-'"):
        dev.build_tasks(tmp_path / "dev")


def test_the_split_is_built_and_kept_out_of_training(grasif_build, tasks):
    assert [t.id for t in dataset.load_split(grasif_build, "dev")] == [t.id for t in tasks]
    assert not any(heldout.in_train_pool(t.split, t.id) for t in tasks)
    kept = {(t.split, t.id) for t in heldout.kept_out_tasks(grasif_build)}
    assert {(t.split, t.id) for t in tasks} <= kept and len(kept) == 47 + len(tasks)
    # a generated task that says a dev instruction is refused as a leak
    copy = tasks[0].model_copy(update={"split": "generated-office", "id": "x-1"})
    assert leaks([copy], heldout.kept_out_tasks(grasif_build))


def test_the_fixed_half_is_every_odd_numbered_dev_task_of_both_buildings(tasks):
    listed = Path(__file__).resolve().parents[1] / "benchmarks" / "dev_half.txt"
    ids = [line.strip() for line in listed.read_text().splitlines() if line.strip() and not line.startswith("#")]
    odd = [t.id for t in tasks if int(t.id.rsplit("-", 1)[1]) % 2 == 1]
    assert ids == odd and len(ids) == 16
