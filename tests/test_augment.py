"""Label-preserving task transforms (grasif/augment.py): on real GraSIF tasks (the first 15 of
each split) every kind keeps the ground-truth plan valid; rename is a class-keeping bijection
applied everywhere, shuffle only reorders, distractors add exactly n untouched nodes of
unmentioned classes; seeds are reproducible; a broken label raises AugmentError."""

from __future__ import annotations

import json
import random
import re

import pytest

from conftest import kitchen_dict
from grasif import dataset
from grasif.augment import (
    DEVICE_CLASSES, KINDS, AugmentError, add_distractors, augment, check_label, rename_instances, substitute_names,
)
from grasif.task import Task, load_task
from grasif.validate import validate_plan
from sgs.actions import parse_plan
from sgs.graph import Layer, SceneGraph, node_class

SPLITS = ("virtualhome", "behavior", "office")
SAMPLE = 15
INSTANCE = re.compile(r"^(.+)-(\d+)$")


@pytest.fixture(scope="module")
def tasks(grasif_build) -> list[Task]:
    return [load_task(grasif_build / s / f"{t}.json") for split in SPLITS
            for s, t in dataset.task_ids(grasif_build, split)[:SAMPLE]]


def _solves(task: Task) -> bool:
    return validate_plan(task.graph, parse_plan(task.ground_truth_plan), task.goal, correct=True).success


def _renamed(name: str, graph: SceneGraph) -> bool:
    return INSTANCE.match(name) is not None and graph.nodes[name].layer is not Layer.PLACE


def _tokens(text: str) -> set[str]:
    """Name-like tokens of ``text`` (a sentence's final dot dropped)."""
    return {t.rstrip(".") for t in re.findall(r"[\w.-]+", text)}


def _tiny_task() -> Task:
    """The conftest kitchen plus cup-10 and teacup-1 beside cup-1; the instruction names all three."""
    graph = kitchen_dict()
    graph["nodes"]["objects"] += [
        {"name": "cup-10", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up"]},
        {"name": "teacup-1", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up"]},
    ]
    return Task(**{
        "id": "tiny_cups", "split": "examples",
        "instruction": "Put cup-1 on bed-1; leave cup-10 and teacup-1 where they are. Only cup-1.",
        "initial_graph": graph,
        "goal": {"node_goals": [{"node": "cup-1", "relation": "ontop", "destination": "bed-1"}], "unchanged_elsewhere": True},
        "ground_truth_plan": ["rearrange(cup-1, ontop, bed-1)"],
    })


# ---------------------------------------------------------------------------------------------
# every kind, real tasks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_keeps_the_plan_valid(tasks, kind):
    for task in tasks:
        new = augment(task, kind, 0)
        assert _solves(new), (task.split, task.id, kind)
        assert (new.id, new.split) == (task.id, task.split)
        assert new.provenance["augmentation"] == {"kind": kind, "seed": 0}
        assert new.goal.check_names(new.graph) == []


def test_rename_is_a_class_keeping_bijection_applied_everywhere(tasks):
    for task in tasks:
        new_task = augment(task, "rename", 0)
        old, new = task.graph, new_task.graph
        mapping = dict(zip(old.nodes, new.nodes))  # rename keeps the node order
        assert len(set(mapping.values())) == len(mapping) == len(new.nodes)
        for before, after in mapping.items():
            if _renamed(before, old):
                assert after != before and INSTANCE.match(after) and node_class(after) == node_class(before)
                assert after not in old.nodes  # no clash with any old name, places included
            else:
                assert after == before  # places keep their names
            assert new.nodes[after].states == old.nodes[before].states
        assert new.agent.name == old.agent.name
        assert new.parent == {mapping[c]: (mapping.get(p, p), r) for c, (p, r) in old.parent.items()}
        assert [(g.cls, g.relation, g.count) for g in new_task.goal.count_goals] == \
            [(g.cls, g.relation, g.count) for g in task.goal.count_goals]
        assert [g.destination for g in new_task.goal.count_goals] == [mapping[g.destination] for g in task.goal.count_goals]
        assert [(g.node, g.destination) for g in new_task.goal.node_goals] == \
            [(mapping[g.node], g.destination and mapping[g.destination]) for g in task.goal.node_goals]
        old_plan, new_plan = parse_plan(task.ground_truth_plan), parse_plan(new_task.ground_truth_plan)
        assert [(a.node, a.destination) for a in new_plan] == \
            [(mapping.get(a.node, a.node), a.destination and mapping[a.destination]) for a in old_plan]
        left = _tokens(json.dumps({k: v for k, v in new_task.model_dump(mode="json").items() if k != "id"}))
        assert [name for name in mapping if _renamed(name, old) and name in left] == []  # nothing left unrenamed


def test_substitution_is_simultaneous_and_matches_whole_names_only():
    swap = {"cup-1": "cup-10", "cup-10": "cup-1", "teacup-1": "teacup-2"}
    data = {"cup-1": ["rearrange(cup-10, ontop, table-1)", "(inside ?cup-1 teacup-1)"],
            "text": "Put cup-1 on cup-10, not teacup-1 nor cup-1.n.01 nor my_cup-1 nor cup-100. Only cup-1."}
    assert substitute_names(data, swap) == {
        "cup-10": ["rearrange(cup-1, ontop, table-1)", "(inside ?cup-10 teacup-2)"],
        "text": "Put cup-10 on cup-1, not teacup-2 nor cup-1.n.01 nor my_cup-1 nor cup-100. Only cup-10.",
    }
    assert substitute_names(data, {}) == data


def test_rename_matches_whole_names_only():
    task = _tiny_task()
    new = rename_instances(task, random.Random(7))
    m = dict(zip(task.graph.nodes, new.graph.nodes))
    assert len({m["cup-1"], m["cup-10"], m["teacup-1"]}) == 3
    assert node_class(m["cup-10"]) == "cup" and node_class(m["teacup-1"]) == "teacup"
    assert new.instruction == (f"Put {m['cup-1']} on {m['bed-1']}; leave {m['cup-10']} and {m['teacup-1']} where they are. "
                               f"Only {m['cup-1']}.")
    assert new.ground_truth_plan == [f"rearrange({m['cup-1']}, ontop, {m['bed-1']})"]
    assert (new.goal.node_goals[0].node, new.goal.node_goals[0].destination) == (m["cup-1"], m["bed-1"])
    assert m["kitchen-1"] == "kitchen-1" and new.graph.agent.name == "agent-1"
    assert _solves(new)


def test_shuffle_reorders_only(tasks):
    reordered = 0
    for task in tasks:
        new = augment(task, "shuffle", 0)
        assert new.graph == task.graph
        assert {k: sorted(e["name"] for e in v) for k, v in new.initial_graph["nodes"].items() if k != "agent"} == \
            {k: sorted(e["name"] for e in v) for k, v in task.initial_graph["nodes"].items() if k != "agent"}
        reordered += list(new.graph.nodes) != list(task.graph.nodes)
    assert reordered >= len(tasks) // 2


@pytest.mark.parametrize("n", [1, 3, 5])
def test_distractors_are_n_untouched_nodes_of_unmentioned_classes(tasks, n):
    for task in tasks[::3]:
        new = add_distractors(task, random.Random(n), n)
        added = [name for name in new.graph.nodes if name not in task.graph.nodes]
        assert len(added) == n == len(new.graph.nodes) - len(task.graph.nodes)
        assert all(new.graph.nodes[a].layer is Layer.OBJECT and INSTANCE.match(a) for a in added)
        assert {k: v for k, v in new.graph.nodes.items() if k not in added} == task.graph.nodes
        assert {k: v for k, v in new.graph.parent.items() if k not in added} == task.graph.parent
        assert all(new.graph.nodes[new.graph.parent[a][0]].layer is Layer.ASSET for a in added)
        mentioned = " ".join([task.goal.model_dump_json(), *map(str, task.ground_truth_plan), task.instruction])
        mentioned = " " + re.sub(r"[^a-z0-9]+", " ", mentioned.lower()) + " "
        assert not any(f" {node_class(a).replace('_', ' ')} " in mentioned for a in added), (task.id, added)
        devices = [a for a in added if new.graph.nodes[a].has("off") and "turn_on" in new.graph.nodes[a].affordances]
        assert len(devices) == 1
        report = validate_plan(new.graph, parse_plan(new.ground_truth_plan), new.goal, correct=True)
        assert report.success
        assert all(report.final_graph.nodes[a] == new.graph.nodes[a] and report.final_graph.parent[a] == new.graph.parent[a]
                   for a in added)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_copy_other_seed_other_copy(tasks, kind):
    task = tasks[0]  # a VirtualHome task: hundreds of nodes
    first = augment(task, kind, 3).model_dump(mode="json")
    assert augment(task, kind, 3).model_dump(mode="json") == first
    other = augment(task, kind, 4).model_dump(mode="json")
    assert other["initial_graph"] != first["initial_graph"]


# ---------------------------------------------------------------------------------------------
# broken labels
# ---------------------------------------------------------------------------------------------
def test_a_broken_plan_is_rejected():
    task = _tiny_task()
    assert check_label(task) is task
    broken = Task(**{**task.model_dump(mode="json"), "ground_truth_plan": ["rearrange(cup-1, ontop, table-1)"]})
    with pytest.raises(AugmentError, match="no longer solves.*cup-1"):
        check_label(broken)
    unknown = Task(**{**task.model_dump(mode="json"), "ground_truth_plan": ["pick_up(cup-99)"]})
    with pytest.raises(AugmentError, match="cup-99"):
        check_label(unknown)


def test_distractors_without_unmentioned_classes_are_rejected():
    task = _tiny_task()
    crowded = Task(**{**task.model_dump(mode="json"), "instruction": task.instruction + " Mind the " + ", ".join(DEVICE_CLASSES)})
    with pytest.raises(AugmentError, match="distractors"):
        augment(crowded, "distract", 0)


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="kinds are rename, shuffle, distract"):
        augment(_tiny_task(), "mirror", 0)
