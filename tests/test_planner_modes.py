"""Correction modes (rules / feedback / none) and excluded actions in the planner loop. The LM is
ScriptedBackend: SCRIPTED replies, not a real LM (it records what it was asked not to produce but
cannot obey it, so the planner's own refusal of repeats is tested too)."""

from __future__ import annotations

import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination, "reason": "scripted"})


def kitchen_task():
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")])
    return Task(id="kitchen", split="test", instruction="Put the apple from the box on the bed.",
                initial_graph=kitchen_dict(), goal=goal)


def episode(replies, **cfg):
    task = kitchen_task()
    lm = ScriptedBackend(replies)  # SCRIPTED replies, not an LM
    return run_episode(task, GraphEnvironment(task.graph, task.goal), lm, PlannerConfig(**cfg)), lm


# -- correction modes ---------------------------------------------------------------------------
def test_none_mode_lets_an_execution_error_into_the_plan_and_fails_the_task(decisions):
    # pick_up from the closed fridge: not caught, the environment refuses it; then the model
    # opens everything and reaches the goal, but the plan holds an infeasible action
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("pick_up", "apple-1"),
               J("open", "fridge-1"), J("open", "box-1"), J("rearrange", "apple-1", "ontop", "bed-1"), J("done")]
    result, lm = episode(replies, correction="none")
    assert result.termination == "done"
    assert result.goal_not_met == [] and result.precision == 1.0
    assert not result.success
    assert len(result.infeasible) == 1 and result.infeasible[0].startswith("pick_up(apple-1)")
    assert "pick_up(apple-1)" in result.actions  # it stays in the plan
    # the LM was told nothing about the failure
    assert not any("Feedback on your last answer" in d.dynamic for d in decisions)


def test_none_mode_still_reprompts_hallucinations(decisions):
    result, lm = episode([J("go_to", "garage-1"), J("teleport", "kitchen-1"), J("rearrange", "apple-1", "ontop", None)],
                         correction="none")
    assert result.termination == "unresolved" and result.infeasible == []
    assert "there is no node 'garage-1'" in decisions[1].dynamic
    assert "unknown function 'teleport'" in decisions[2].dynamic


def test_none_mode_executes_rearrange_as_written_without_opening():
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"), J("done")]
    result, _ = episode(replies, correction="none")
    assert not result.success and result.infeasible[0].startswith("rearrange(apple-1, ontop, bed-1)")
    assert "open(fridge-1)" not in result.executed


def test_three_infeasible_actions_in_a_row_end_the_episode_in_none_mode():
    replies = [J("go_to", "kitchen-1"), J("pick_up", "apple-1"), J("pick_up", "box-1"), J("put_on", "table-1")]
    result, _ = episode(replies, correction="none")
    assert result.termination == "unresolved" and len(result.infeasible) == 3


def test_feedback_mode_reports_and_corrects_nothing(decisions):
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("pick_up", "apple-1")]
    result, lm = episode(replies, correction="feedback")
    assert "closed" in decisions[3].dynamic and result.infeasible == []
    assert "open(fridge-1)" not in result.executed


def test_rules_mode_corrects_and_tells_the_lm_what_was_done(decisions):
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"), J("done")]
    result, lm = episode(replies)
    assert result.success and "open(fridge-1)" in result.executed
    # the history shows the inserted steps, so the LM knows the fridge stands open
    assert "done as: open(fridge-1), open(box-1), pick_up(apple-1)" in decisions[3].dynamic


def test_unknown_mode_is_an_error():
    with pytest.raises(ValueError, match="rules, feedback, none"):
        PlannerConfig(correction=False)


# -- exclusions ----------------------------------------------------------------------------------
def test_a_refused_action_is_excluded_until_the_memory_changes(decisions):
    replies = [J("turn_on", "lamp-1"), J("turn_on", "lamp-1"), J("go_to", "kitchen-1"), J("done")]
    result, lm = episode(replies, exclude_inapplicable=False)
    assert decisions[0].excluded == [] and decisions[1].excluded == []  # turn_on(lamp-1) was accepted, not refused
    # lamp now on: the repeat changes nothing and is refused ...
    assert result.lm_calls == 4
    # ... and is excluded from the next decode; go_to then changes the memory: refusals forgotten
    assert decisions[2].excluded == [("turn_on", "lamp-1", None, None)]
    assert decisions[3].excluded == []


def test_an_action_already_in_effect_suggests_done_when_asked(decisions):
    result, lm = episode([J("turn_off", "lamp-1"), J("done")], done_hint=True, refusal_situation=False)
    assert "lamp-1 is already off; if the instruction is carried out now, answer done()" in decisions[1].dynamic
    assert result.termination == "done"
    decisions.clear()
    _, lm = episode([J("turn_off", "lamp-1"), J("done")])
    assert "lamp-1 is already off" in decisions[1].dynamic and "answer done()" not in decisions[1].dynamic


def test_a_repeat_the_backend_could_not_exclude_is_refused_without_trying_it(decisions):
    replies = [J("go_to", "kitchen-1"), J("pick_up", "apple-1"), J("pick_up", "apple-1"), J("pick_up", "apple-1")]
    result, lm = episode(replies, exclude_inapplicable=False)
    assert result.termination == "unresolved"
    assert "confirm where it is" in decisions[2].dynamic
    assert "pick_up(apple-1) was already refused in this situation" in decisions[3].dynamic
    assert decisions[2].excluded == decisions[3].excluded == [("pick_up", "apple-1", None, None)]


def test_without_exclude_refused_nothing_is_excluded_or_refused_as_repeat(decisions):
    replies = [J("go_to", "kitchen-1"), J("pick_up", "apple-1"), J("pick_up", "apple-1"), J("pick_up", "apple-1")]
    result, lm = episode(replies, exclude_refused=False, exclude_inapplicable=False)
    assert all(e == [] for e in (d.excluded for d in decisions))
    assert "already refused" not in decisions[3].dynamic and "confirm where it is" in decisions[3].dynamic


def test_inapplicable_actions_are_excluded_from_every_decode(decisions):
    replies = [J("go_to", "kitchen-1"), J("done")]
    result, lm = episode(replies)
    first, second = (set(e) for e in (d.excluded for d in decisions))
    assert ("go_to", "bedroom-1", None, None) in first and ("go_to", "kitchen-1", None, None) in second
    assert ("discover_objects", "kitchen-1", None, None) in second  # a room is never discovered
    assert ("go_to", "fridge-1", None, None) in second  # go_to takes rooms only
    assert ("turn_off", "lamp-1", None, None) not in first  # already off: decodable, answered with a hint
    assert ("open", "lamp-1", None, None) in first  # a lamp does not open
    assert ("open", "fridge-1", None, None) not in second
    assert ("turn_on", None, None, None) in first and ("put_on", None, None, None) in first  # no node: never


def test_cli_run_with_correction_none_prints_the_infeasible_action(tmp_path, capsys):
    from lookplangraph.cli import main

    task = tmp_path / "task.json"
    task.write_text(kitchen_task().model_dump_json())
    replies = "||".join([J("go_to", "kitchen-1"), J("pick_up", "box-1"), J("done")])  # SCRIPTED
    code = main(["run", "--task-file", str(task), "--lm", f"scripted:{replies}", "--correction", "none",
                 "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert code == 1
    assert "INFEASIBLE (not told to the LM): pick_up(box-1) failed" in out
    assert "infeasible action in the plan: pick_up(box-1)" in out
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["infeasible"] and saved["config"]["correction"] == "none" and not saved["success"]
