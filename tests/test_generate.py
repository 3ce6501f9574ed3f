"""Generated worlds (grasif.generate): deterministic, every task checked through the SGS and
solved by the expert, every goal kind and several phrasings, and no held-out scene or instruction
among them, renamed or not."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from grasif import dataset, heldout
from grasif.augment import augment
from grasif.generate import KINDS, generate, write
from grasif.generate.leaks import GeneratedLeak, leaks
from grasif.generate.worlds import PEOPLE
from grasif.goals import evaluate_goal
from grasif.task import load_task
from grasif.validate import validate_plan
from lookplangraph.cli import main
from lookplangraph.distill.teacher.expert import Expert
from lookplangraph.distill.planning.trajectories import expert_episode
from lookplangraph.planners.config import PlannerConfig


@pytest.fixture(scope="module")
def made():
    return {kind: generate(kind, 400, seed=0) for kind in ("home", "office")}


@pytest.fixture(scope="module")
def held(grasif_build):
    return [t for s in ("virtualhome", "behavior", "office") for t in dataset.load_split(grasif_build, s)
            if heldout.is_eval(t)]


def test_generation_is_deterministic_per_seed(made):
    again = generate("office", 400, seed=0)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in made["office"]]
    other = generate("office", 50, seed=1)
    assert [t.instruction for t in other] != [t.instruction for t in made["office"][:50]]


def test_every_task_is_checked_and_every_kind_comes_in_several_phrasings(made):
    for kind, tasks in made.items():
        assert len(tasks) == 400 and len({t.id for t in tasks}) == 400
        assert Counter(t.provenance["kind"] for t in tasks).keys() == set(KINDS)
        for k in KINDS:
            assert len({t.provenance["phrasing"] for t in tasks if t.provenance["kind"] == k}) >= 3, (kind, k)
        for t in tasks:
            g = t.graph
            assert t.goal.unchanged_elsewhere and not any(i.ok for i in evaluate_goal(t.goal, g, g).items), t.id
            assert validate_plan(g, t.ground_truth_plan, t.goal).success, t.id
    offices = [t for t in made["office"] if "'s desk" in t.instruction or "'s office" in t.instruction]
    assert len(offices) > 20  # people's rooms by name


def test_some_objects_start_on_or_in_another_object_never_deeper(made):
    from grasif.generate.worlds import NESTS
    from sgs.graph import Layer, node_class

    for kind, tasks in made.items():
        nested = 0
        for t in {t.provenance["building"]: t for t in tasks}.values():
            g = t.graph
            for o in g.names(Layer.OBJECT):
                holder, rel = g.parent[o]
                if g.nodes[holder].layer is Layer.OBJECT:
                    nested += 1
                    assert node_class(o) in NESTS[node_class(holder)][1] and rel.value == NESTS[node_class(holder)][0]
                    assert g.nodes[g.parent[holder][0]].layer is Layer.ASSET  # two deep at most
        assert nested >= 20, (kind, nested)


def test_an_attribute_task_names_its_object_by_a_property_the_view_shows_and_no_other_of_its_class_has(made):
    from lookplangraph.agent.memory import MemoryGraph
    from lookplangraph.agent.view import render_view, view
    from sgs.graph import Layer, node_class

    for kind, tasks in made.items():
        attribute = [t for t in tasks if t.provenance["kind"] == "attribute"]
        assert len(attribute) >= 15, kind
        for t in attribute:
            g, obj = t.graph, t.goal.node_goals[0].node
            mine = set(g.nodes[obj].properties or ())
            same = [o for o in g.names(Layer.OBJECT) if node_class(o) == node_class(obj) and o != obj]
            assert same, t.id  # the class is there more than once
            told = [p for p in mine if p.lower() in t.instruction.lower()
                    and not any(p in (g.nodes[o].properties or ()) for o in same)]
            assert told, (t.id, t.instruction, mine)
            shown = render_view(view(MemoryGraph(g), "full"), "full")
            assert f"{obj}, {', '.join(g.nodes[obj].properties)}," in shown, t.id
    owned = [t for t in made["office"] if t.provenance["kind"] == "attribute" and any(
        p.endswith("'s") and f"{p} " in t.instruction for p in t.graph.nodes[t.goal.node_goals[0].node].properties)]
    assert owned  # a person's things by name, in offices


def test_a_decoy_task_hints_at_the_decoys_place_or_the_objects_own_and_names_the_object_by_property(made):
    """A ``decoy`` task says where the object usually is: half the time the asset where another
    of its class (without the naming property) sits, half the time the object's own."""
    from sgs.graph import node_class

    for kind, tasks in made.items():
        decoys = [t for t in tasks if t.provenance["kind"] == "decoy"]
        assert len(decoys) >= 15, kind
        stale = 0
        for t in decoys:
            g, obj, decoy, hint = t.graph, t.goal.node_goals[0].node, t.provenance["decoy"], t.provenance["hint"]
            mine = set(g.nodes[obj].properties or ())
            assert node_class(decoy) == node_class(obj) and not mine & set(g.nodes[decoy].properties or ()), t.id
            assert any(p.lower() in t.instruction.lower() for p in mine), t.id
            assert g.parent[decoy][0] != g.parent[obj][0] and hint in (g.parent[decoy][0], g.parent[obj][0]), t.id
            assert node_class(hint).replace("_", " ") in t.instruction, t.id
            stale += hint == g.parent[decoy][0]
        assert len(decoys) // 4 <= stale <= len(decoys) * 3 // 4, (kind, stale, len(decoys))


def test_the_expert_solves_generated_tasks_static_and_dynamic(made):
    for t in made["home"][::40] + made["office"][::40]:
        for seed in (None, 0):
            result, _, _ = expert_episode(t, seed, PlannerConfig(max_actions=60), Expert())
            assert result.success, (t.id, seed, result.actions)


def test_no_generated_scene_or_instruction_is_a_held_out_task(made, held):
    assert len(held) == 47
    assert leaks(made["home"] + made["office"], held) == []


def test_the_leak_check_catches_a_renamed_held_out_task_and_a_copied_instruction(made, held):
    office = next(t for t in held if t.split == "office")
    renamed = augment(office, "rename", 0)
    assert renamed.graph.nodes.keys() != office.graph.nodes.keys()
    task = made["office"][0]
    occupant = next(p for p in task.graph.places if p.startswith(tuple(PEOPLE))).split("s_office")[0]
    copied = task.model_copy(update={"instruction": office.instruction.upper().replace("TOM", occupant.capitalize())})
    assert leaks([renamed], held) == [f"{renamed.id}: its scene is office/{office.id}'s, renamed",
                                      f"{renamed.id}: its instruction is office/{office.id}'s"]
    assert leaks([copied], held) == [f"{copied.id}: its instruction is office/{office.id}'s"]


def test_a_leak_stops_the_writing_before_anything_is_written(made, held, tmp_path):
    office = next(t for t in held if t.split == "office")
    copied = made["office"][0].model_copy(update={"instruction": office.instruction})
    with pytest.raises(GeneratedLeak, match="leak held-out tasks"):
        write([made["office"][1], copied], tmp_path / "gen", held)
    assert list(tmp_path.iterdir()) == []


def test_write_puts_each_task_beside_its_building_whole(made, held, tmp_path):
    out = write(made["office"][:30], tmp_path / "gen", held)
    index = json.loads((out / "index.json").read_text())
    assert index["tasks"] == 30 and sum(index["by_kind"].values()) == 30
    for rel, sha in index["files"].items():
        path = out / rel
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
        assert (path.parent / "building.json").exists()
        assert load_task(path).model_dump() == next(t for t in made["office"] if t.id == path.stem).model_dump()
    with pytest.raises(FileExistsError):
        write(made["office"][:3], out, held)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_task_kinds_restrict_the_draw_and_an_unknown_one_is_refused(grasif_build, tmp_path, capsys):
    only = generate("office", 40, seed=3, kinds=("decoy", "attribute"))
    assert len(only) == 40 and {t.provenance["kind"] for t in only} == {"decoy", "attribute"}
    with pytest.raises(ValueError, match="task kinds are"):
        generate("office", 5, kinds=("decoys",))
    assert main(["grasif", "generate", "--kind", "office", "--n", "5", "--task-kinds", "decoy,nope",
                 "--out", str(tmp_path / "g"), "--data-dir", str(grasif_build)]) == 2
    assert "--task-kinds: unknown nope" in capsys.readouterr().err and not (tmp_path / "g").exists()


def test_removal_kinds_are_drawn_only_when_named_and_write_negated_formulas():
    from grasif.formula import Formula
    from grasif.generate import OPT_IN_KINDS
    from grasif.generate.tasks import REMOVAL_KINDS
    from sgs.graph import node_class

    assert not set(OPT_IN_KINDS) & set(KINDS)  # the default draw (and what a seed gives) is unchanged
    tasks = generate("home", 30, seed=5, kinds=REMOVAL_KINDS) + generate("office", 30, seed=5, kinds=REMOVAL_KINDS)
    assert {t.provenance["kind"] for t in tasks} == set(REMOVAL_KINDS)
    for t in tasks:
        g, f = t.graph, t.goal.formula
        assert not t.goal.node_goals and not t.goal.count_goals and f.count("(not (") == 1
        assert not any(i.ok for i in evaluate_goal(t.goal, g, g).items), t.id
        assert validate_plan(g, t.ground_truth_plan, t.goal).success, t.id
        moved = [s.split("(")[1].split(",")[0] for s in t.ground_truth_plan if s.startswith("rearrange(")]
        if t.provenance["kind"] == "remove":
            assert f == f"(not ({g.parent[moved[0]][1].value} {moved[0]} {g.parent[moved[0]][0]}))" and len(moved) == 1
            assert "the " + node_class(moved[0]).replace("_", " ") in t.instruction.lower()
        else:
            assert f.startswith("(forall (?") and len(moved) >= 2 and Formula.parse(f).classes()
            assert len({g.parent[o][0] for o in moved}) == 1  # all of the class off one asset
    assert len({t.provenance["phrasing"] for t in tasks}) >= 4


def test_the_command_writes_tasks_a_run_reads(grasif_build, tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["grasif", "generate", "--kind", "home", "--n", "12", "--seed", "2", "--out", str(out),
                 "--data-dir", str(grasif_build)]) == 0
    assert "12 tasks on" in capsys.readouterr().out
    first = sorted(out.glob("*/*-t1.json"))[0]
    assert main(["run", "--task-file", str(first), "--lm", "expert", "--out", str(tmp_path / "run")]) == 0
    assert main(["grasif", "generate", "--kind", "home", "--n", "0", "--out", str(tmp_path / "x")]) == 2
    assert main(["grasif", "generate", "--kind", "home", "--n", "2", "--out", str(out),
                 "--data-dir", str(grasif_build)]) == 2
    assert "not empty" in capsys.readouterr().err


def test_distill_data_takes_generated_tasks_after_the_leak_check(made, held, tmp_path):
    from lookplangraph.distill.planning.trajectories import build_data, validate_data

    chosen = made["home"][:6] + made["office"][:6]
    counts = build_data([], tmp_path / "d", seeds=[None, 0], augmentations=(), generated=chosen, heldout=held,
                        answer_format="action")
    assert set(counts.by_source) == {"generated-home", "generated-office"}
    assert sum(counts.by_source.values()) == counts.examples > 12 and counts.successful == counts.episodes
    report = validate_data(tmp_path / "d", {(t.split, t.id): t for t in chosen})
    assert report.ok, report.problems[:3]
    office = next(t for t in held if t.split == "office")
    copied = chosen[0].model_copy(update={"instruction": office.instruction})
    with pytest.raises(GeneratedLeak):
        build_data([], tmp_path / "e", seeds=[None], augmentations=(), generated=[copied], heldout=held)
    with pytest.raises(ValueError, match="pass heldout"):
        build_data([], tmp_path / "f", seeds=[None], augmentations=(), generated=chosen)
    assert not (tmp_path / "e").exists() and not (tmp_path / "f").exists()
