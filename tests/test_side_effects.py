"""Success as the paper defines it (section V): goal units met, no infeasible action, *and* nothing
else changed — side effects count (grasif.goals.side_effects). The lenient verdict that looks at
the goal units alone is kept as success_changed_only."""

from __future__ import annotations

import copy
import json

import pytest

from grasif import dataset
from grasif.goals import CountGoal, GoalSpec, NodeGoal, evaluate_goal, goal_from_graphs
from grasif.metrics import EpisodeRecord, summarize, summary_table
from grasif.task import Task, load_task
from grasif.validate import validate_plan
from lookplangraph.lm import ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.evaluation.runner import to_record, write_summary
from sgs.actions import parse_plan
from sgs.io import graph_from_dict, graph_to_dict
from sgs.simulator import run_plan
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict

APPLE_IN_FRIDGE = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="inside", destination="fridge-1")],
                           unchanged_elsewhere=True)


def _effects(report_or_result):
    goal = getattr(report_or_result, "goal", report_or_result)
    return [(i.label, i.expected, i.actual) for i in goal.side_effects]


# -- the rule ----------------------------------------------------------------------------------
def test_container_left_open_fails_strictly_but_passes_changed_only(kitchen):
    report = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)"], APPLE_IN_FRIDGE)
    assert "open(fridge-1)" in report.steps[0].primitives  # the SGS opened it
    assert report.goal.success_changed_only and report.success_changed_only and report.precision == 1.0
    assert not report.goal.success and not report.success
    assert _effects(report) == [("fridge-1", "closed", "open")]
    assert report.goal.not_met() == ["side effect: fridge-1: expected closed; found open"]
    closed = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)"], APPLE_IN_FRIDGE)
    assert closed.success and _effects(closed) == []


def test_the_lenient_spec_ignores_what_the_strict_one_counts(kitchen):
    lenient = APPLE_IN_FRIDGE.model_copy(update={"unchanged_elsewhere": False})
    report = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)"], lenient)
    assert report.success and not report.goal.frame_checked and report.side_effects == []


def test_moving_an_unrelated_object_fails(kitchen):
    plan = ["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)", "rearrange(book-1, ontop, table-1)"]
    report = validate_plan(kitchen, plan, APPLE_IN_FRIDGE)
    assert report.success_changed_only and not report.success
    assert _effects(report) == [("book-1", "ontop bed-1", "ontop table-1")]


def test_objects_riding_along_are_not_moved_and_states_in_the_goal_are_not_reported_twice(kitchen):
    # cup-1 lies on tray-1: moving the tray keeps the cup's parent (the tray), so only the goal counts
    spec = GoalSpec(node_goals=[NodeGoal(node="tray-1", relation="ontop", destination="bed-1"),
                                NodeGoal(node="lamp-1", states=["on"])], unchanged_elsewhere=True)
    ok = validate_plan(kitchen, ["rearrange(tray-1, ontop, bed-1)", "turn_on(lamp-1)"], spec)
    assert ok.success
    missed = validate_plan(kitchen, ["rearrange(tray-1, ontop, bed-1)"], spec)
    assert [i.label for i in missed.goal.items if not i.ok] == ["lamp-1"] and _effects(missed) == []


def test_a_held_leftover_fails_unless_the_goal_asks_for_it(kitchen):
    spec = GoalSpec(node_goals=[NodeGoal(node="lamp-1", states=["on"])], unchanged_elsewhere=True)
    report = validate_plan(kitchen, ["turn_on(lamp-1)", "pick_up(book-1)"], spec)
    assert report.success_changed_only and not report.success
    assert _effects(report) == [("book-1", "ontop bed-1", "held by the agent")]
    held = spec.model_copy(update={"node_goals": [*spec.node_goals, NodeGoal(node="book-1", relation="held")]})
    assert validate_plan(kitchen, ["turn_on(lamp-1)", "pick_up(book-1)"], held).success


def test_count_goals_accept_any_instance_and_other_instances_may_stay(gift):
    spec = GoalSpec(count_goals=[CountGoal(cls="candle", relation="inside", destination="wicker_basket-2", count=2),
                                 CountGoal(cls="candle", relation="inside", destination="wicker_basket-1", count=1)],
                    unchanged_elsewhere=True)
    plan = ["rearrange(candle-4, inside, wicker_basket-2)", "rearrange(candle-1, inside, wicker_basket-2)",
            "rearrange(candle-3, inside, wicker_basket-1)"]
    report = validate_plan(gift, plan, spec)
    assert report.success and report.goal.total == 3 and _effects(report) == []
    # a fourth candle in a basket the goal counts is allowed; one elsewhere is a side effect
    assert validate_plan(gift, plan + ["rearrange(candle-2, inside, wicker_basket-1)"], spec).success
    stray = validate_plan(gift, plan + ["rearrange(candle-2, inside, wicker_basket-3)"], spec)
    assert stray.success_changed_only and not stray.success
    assert _effects(stray) == [("candle-2", "ontop table-1", "inside wicker_basket-3")]


def test_by_class_goal_graph_is_strict_but_accepts_other_instances(gift):
    final, _ = run_plan(gift, parse_plan(["rearrange(bow-1, inside, wicker_basket-1)"]))
    spec = goal_from_graphs(gift, final, by_class=True)
    assert spec.unchanged_elsewhere
    assert validate_plan(gift, ["rearrange(bow-3, inside, wicker_basket-1)"], spec).success
    both = validate_plan(gift, ["rearrange(bow-3, inside, wicker_basket-1)", "rearrange(bow-2, inside, wicker_basket-2)"], spec)
    assert not both.success and _effects(both) == [("bow-2", "ontop table-2", "inside wicker_basket-2")]


def test_formula_classes_and_named_nodes_are_exempt_from_the_frame(kitchen):
    spec = GoalSpec(formula="(exists (?a - apple) (inside ?a fridge-1))", unchanged_elsewhere=True)
    report = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)"], spec)
    # fridge-1 is named by the formula and apples are quantified: neither is a side effect
    assert report.success and report.goal.frame_checked and _effects(report) == []
    moved = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)", "rearrange(book-1, ontop, table-1)"], spec)
    assert not moved.success and _effects(moved) == [("book-1", "ontop bed-1", "ontop table-1")]


def test_a_strict_goal_without_the_initial_graph_is_an_error(kitchen):
    with pytest.raises(ValueError, match="needs the initial graph"):
        evaluate_goal(APPLE_IN_FRIDGE, kitchen)
    assert evaluate_goal(APPLE_IN_FRIDGE.model_copy(update={"unchanged_elsewhere": False}), kitchen).items


# -- who is strict -------------------------------------------------------------------------------
def _task_dict(**goal):
    return {"id": "t", "split": "test", "instruction": "Put the apple in the fridge.", "initial_graph": kitchen_dict(), **goal}


def test_a_task_file_with_a_goal_graph_gets_unchanged_elsewhere(tmp_path, kitchen):
    final, _ = run_plan(kitchen, parse_plan(["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)"]))
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_task_dict(goal_graph=graph_to_dict(final))))
    task = load_task(path)
    assert task.goal.unchanged_elsewhere
    assert not validate_plan(task.graph, ["rearrange(apple-2, inside, fridge-1)"], task.goal).success
    assert validate_plan(task.graph, ["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)"], task.goal).success
    # an explicit goal says for itself; the default is the goal units alone
    path.write_text(json.dumps(_task_dict(goal={"node_goals": [{"node": "apple-2", "relation": "inside", "destination": "fridge-1"}]})))
    assert not load_task(path).goal.unchanged_elsewhere


def test_behavior_formula_goals_keep_bddl_semantics(kitchen):
    """bddl judges only its goal conditions: a container left open is no failure there."""
    spec = GoalSpec(formula="(and (inside apple-2 fridge-1))")
    assert not spec.unchanged_elsewhere
    report = validate_plan(kitchen, ["rearrange(apple-2, inside, fridge-1)", "rearrange(book-1, ontop, table-1)"], spec)
    assert report.success and not report.goal.frame_checked and report.side_effects == []


def test_every_ground_truth_plan_of_every_split_is_strictly_successful(request):
    """The built data directory (all splits; the session's build, read only): goals from goal
    graphs, VirtualHome and the office are strict; BEHAVIOR's formula goals are not. Every
    ground-truth plan succeeds strictly with the SGS's corrections, and the VirtualHome and
    BEHAVIOR plans also without them."""
    pytest.importorskip("virtualhome_eval")
    pytest.importorskip("bddl")
    out = request.getfixturevalue("grasif_build")
    for split, strict, without_correction in (("virtualhome", True, True), ("behavior", False, True), ("office", True, False)):
        tasks = dataset.load_split(out, split)
        assert tasks
        for t in tasks:
            assert t.goal.unchanged_elsewhere is strict, t.id
            for correct in (True, False) if without_correction else (True,):
                report = validate_plan(t.graph, t.ground_truth_plan, t.goal, correct=correct)
                assert report.success and report.goal.frame_checked is strict, (t.id, correct, report.summary())


# -- reports and metrics ---------------------------------------------------------------------------
def test_validate_cli_names_the_side_effect_and_the_failed_rule(tmp_path, capsys, kitchen):
    final, _ = run_plan(kitchen, parse_plan(["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)"]))
    (tmp_path / "init.json").write_text(json.dumps(kitchen_dict()))
    (tmp_path / "goal.json").write_text(json.dumps(graph_to_dict(final)))
    (tmp_path / "plan.json").write_text(json.dumps(["rearrange(apple-2, inside, fridge-1)"]))
    args = ["validate", "--initial", str(tmp_path / "init.json"), "--goal", str(tmp_path / "goal.json"),
            "--plan", str(tmp_path / "plan.json")]
    assert main(args) == 1
    out = capsys.readouterr().out.splitlines()
    assert "Goal: 1/1 correct (precision 1.000)" in out
    assert "  side effect: fridge-1: expected closed; found open" in out
    assert "FAILURE: side effects on fridge-1" in out
    assert any("changed-only verdict: success" in line for line in out)
    assert main(args + ["--json"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["success"] is False and summary["success_changed_only"] is True
    assert [(s["label"], s["expected"], s["actual"]) for s in summary["side_effects"]] == [("fridge-1", "closed", "open")]
    (tmp_path / "plan.json").write_text(json.dumps(["rearrange(apple-2, inside, fridge-1)", "close(fridge-1)"]))
    assert main(args) == 0
    assert "Side effects: none (all else must stay as in the initial graph)" in capsys.readouterr().out


def test_an_episode_records_both_verdicts_and_names_the_side_effect(kitchen):
    task = Task(id="k", split="test", instruction="Put the apple on the table in the fridge.",
                initial_graph=kitchen_dict(), goal=APPLE_IN_FRIDGE)
    reply = json.dumps({"function_name": "rearrange", "node": "apple-2", "relation": "inside", "destination": "fridge-1"})
    lm = ScriptedBackend([json.dumps({"function_name": "go_to", "node": "kitchen-1"}),
                          json.dumps({"function_name": "discover_objects", "node": "table-1"}), reply,
                          json.dumps({"function_name": "done"})])  # SCRIPTED replies, not an LM
    # close_opened and close_at_once off: either would close the fridge the correction opened
    result = run_episode(task, GraphEnvironment(task.graph, task.goal), lm,
                         PlannerConfig(close_opened=False, close_at_once=False))
    assert result.termination == "done" and result.precision == 1.0
    assert result.success_changed_only and not result.success
    assert result.goal_not_met == ["side effect: fridge-1: expected closed; found open"]


def test_summaries_carry_strict_and_changed_only_sr(tmp_path):
    records = [
        EpisodeRecord(task_id="a", success=True, success_changed_only=True, precision=1.0, actions=3),
        EpisodeRecord(task_id="b", success=False, success_changed_only=True, precision=1.0, actions=3),
        EpisodeRecord(task_id="c", success=False, success_changed_only=False, precision=0.5, actions=3),
    ]
    s = summarize(records)
    assert s.sr == pytest.approx(1 / 3) and s.sr_changed_only == pytest.approx(2 / 3)
    table = summary_table({"run": s}).splitlines()
    assert "SR chg." in table[0]
    assert table[2].split()[1:4] == ["3", "0.333", "0.667"]
    # a row written before the lenient verdict was recorded is unknown, not a success
    old = EpisodeRecord(task_id="d", success=False, precision=1.0, actions=1)
    assert old.success_changed_only is None
    mixed = summarize(records + [old])
    assert mixed.sr == 0.25 and mixed.sr_changed_only is None
    assert summary_table({"old": mixed}).splitlines()[2].split()[3] == "-"
    # results rows -> records -> summary.json / summary.csv
    row = {"task_id": "b", "split": "office", "success": False, "success_changed_only": True, "precision": 1.0,
           "actions": ["done()"], "prompt_tokens": 10, "completion_tokens": 2, "wall_s": 1.0, "lm_calls": 1,
           "lm_seconds": 0.5, "termination": "done"}
    legacy = {k: v for k, v in row.items() if k != "success_changed_only"} | {"task_id": "old"}
    assert to_record(row).success_changed_only is True and to_record(legacy).success_changed_only is None
    summary = write_summary([row], tmp_path)
    assert summary["all"]["sr"] == 0.0 and summary["all"]["sr_changed_only"] == 1.0
    csv_lines = (tmp_path / "summary.csv").read_text().splitlines()
    head, body = csv_lines[0].split(","), csv_lines[1].split(",")
    assert body[head.index("success")] == "0" and body[head.index("success_changed_only")] == "1"
    assert write_summary([row, legacy], tmp_path)["all"]["sr_changed_only"] is None
    assert (tmp_path / "summary.csv").read_text().splitlines()[2].split(",")[3] == ""  # the legacy row: unknown
