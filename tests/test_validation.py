"""Goals and plan validation (paper appendix B): node goals, count goals, precision, success."""
import copy

import pytest

from grasif.goals import CountGoal, GoalSpec, NodeGoal, changed_nodes, evaluate_goal, goal_from_graphs
from grasif.metrics import EpisodeRecord, summarize, summary_table
from grasif.validate import validate_plan
from sgs.actions import parse_plan
from sgs.io import graph_from_dict
from sgs.simulator import run_plan


@pytest.fixture
def gift_goal(gift, gift_plan):
    final, outs = run_plan(gift, parse_plan(gift_plan))
    assert all(o.ok for o in outs)
    return goal_from_graphs(gift, final)


def test_goal_from_graphs_lists_the_changed_nodes(gift, gift_goal):
    assert len(gift_goal.node_goals) == 16
    g = {n.node: n for n in gift_goal.node_goals}
    assert g["bow-3"] == NodeGoal(node="bow-3", relation="inside", destination="wicker_basket-3")


def test_gift_basket_plan_validates_as_success(gift, gift_plan, gift_goal):
    report = validate_plan(gift, gift_plan, gift_goal)
    assert report.success
    assert report.precision == 1.0
    assert report.goal.correct == report.goal.total == 16
    assert report.primitive_count == 32


def test_plan_with_one_step_removed_fails_naming_the_node(gift, gift_plan, gift_goal):
    plan = gift_plan[:6] + gift_plan[7:]  # drops rearrange(swiss_cheese-2, ...)
    report = validate_plan(gift, plan, gift_goal)
    assert not report.success
    assert report.precision == pytest.approx(15 / 16)
    missed = [i for i in report.goal.items if not i.ok]
    assert [i.label for i in missed] == ["swiss_cheese-2"]
    assert missed[0].expected == "inside wicker_basket-2" and missed[0].actual == "ontop table-2"


def _candles_in_closed_cabinet(gift_dict):
    d = copy.deepcopy(gift_dict)
    d["nodes"]["asset"].append({"name": "cabinet-1", "room": "living_room-1", "states": ["closed"], "affordances": ["put_inside", "open", "close"]})
    for o in d["nodes"]["objects"]:
        if o["name"].startswith("candle"):
            o["relation"], o["related_to"] = "inside_of", "cabinet-1"
    return graph_from_dict(d)


def test_pick_from_closed_container_fails_only_without_correction(gift_dict, gift_plan, gift_goal):
    start = _candles_in_closed_cabinet(gift_dict)
    corrected = validate_plan(start, gift_plan, gift_goal)
    assert corrected.steps[0].primitives == ["open(cabinet-1)", "pick_up(candle-1)", "put_inside(wicker_basket-1)"]
    # the SGS opened cabinet-1 and the plan never closes it: goal units met, but a side effect
    assert corrected.success_changed_only and not corrected.success
    assert [(i.label, i.expected, i.actual) for i in corrected.side_effects] == [("cabinet-1", "closed", "open")]
    assert validate_plan(start, gift_plan + ["close(cabinet-1)"], gift_goal).success
    strict = validate_plan(start, gift_plan, gift_goal, correct=False)
    assert not strict.success
    assert [s.index for s in strict.infeasible] == [1, 5, 9, 13]  # the four candle steps
    assert strict.infeasible[0].feedback == (
        "rearrange(candle-1, inside, wicker_basket-1): candle-1 is inside cabinet-1, which is closed; open(cabinet-1) first")
    assert strict.precision == pytest.approx(12 / 16)


def test_infeasible_step_fails_even_when_goal_is_reached(gift, gift_plan, gift_goal):
    report = validate_plan(gift, gift_plan + ["turn_off(candle-1)"], gift_goal)
    assert report.goal.success and not report.success
    assert "already off" in report.infeasible[0].feedback


def test_unparseable_step_is_reported_not_raised(gift, gift_plan, gift_goal):
    report = validate_plan(gift, ["go to the kitchen"] + gift_plan, gift_goal)
    assert not report.success and report.goal.success
    assert report.infeasible[0].index == 1 and "cannot read" in report.infeasible[0].feedback


def test_count_goals_check_class_and_number_not_ids(gift):
    spec = GoalSpec(count_goals=[CountGoal(cls="candle", relation="inside", destination="wicker_basket-2", count=2)])
    plan = ["rearrange(candle-4, inside, wicker_basket-2)", "rearrange(candle-1, inside, wicker_basket-2)"]
    report = validate_plan(gift, plan, spec)
    assert report.success and report.goal.total == 2
    half = validate_plan(gift, plan[:1], spec)
    assert not half.success and half.precision == 0.5
    assert "candle-4" in half.goal.items[0].actual


def test_by_class_goal_accepts_other_instances(gift):
    final, _ = run_plan(gift, parse_plan(["rearrange(bow-1, inside, wicker_basket-1)"]))
    spec = goal_from_graphs(gift, final, by_class=True)
    assert spec.count_goals == [CountGoal(cls="bow", relation="inside", destination="wicker_basket-1", count=1)]
    assert validate_plan(gift, ["rearrange(bow-3, inside, wicker_basket-1)"], spec).success
    assert not validate_plan(gift, ["rearrange(bow-3, inside, wicker_basket-2)"], spec).success


def test_state_goals_and_changed_nodes(kitchen):
    final, _ = run_plan(kitchen, parse_plan(["turn_on(lamp-1)", "open(fridge-1)"]))
    assert changed_nodes(kitchen, final) == ["fridge-1", "lamp-1"]
    spec = goal_from_graphs(kitchen, final)
    assert NodeGoal(node="lamp-1", states=["on"]) in spec.node_goals
    assert evaluate_goal(spec, final, kitchen).success
    assert evaluate_goal(spec, kitchen, kitchen).correct == 0


def test_no_change_goal_is_trivially_met(kitchen):
    spec = goal_from_graphs(kitchen, kitchen)
    assert spec.is_empty()
    report = validate_plan(kitchen, [], spec)
    assert report.success and report.precision == 1.0


def test_node_goal_needs_destination_with_relation():
    with pytest.raises(ValueError, match="needs a destination"):
        NodeGoal(node="a-1", relation="inside")


def test_metrics_sr_app_tpa():
    records = [
        EpisodeRecord(task_id="a", success=True, precision=1.0, actions=4, tokens=400, gt_actions=4),
        EpisodeRecord(task_id="b", success=True, precision=1.0, actions=2, tokens=100, gt_actions=2),
        EpisodeRecord(task_id="c", success=False, precision=0.5, actions=10, tokens=5000, gt_actions=3),
    ]
    s = summarize(records)
    assert s.sr == pytest.approx(2 / 3)
    assert s.app == pytest.approx(2.5 / 3)
    assert s.tpa == pytest.approx((100 + 50) / 2)  # failed task's tokens excluded
    assert s.mean_gt_actions == pytest.approx(3.0)
    table = summary_table({"office": s})
    assert "office" in table and "0.667" in table and "75.0" in table
