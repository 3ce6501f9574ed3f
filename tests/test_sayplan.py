"""SayPlan and SayPlan Lite (lookplangraph/planners/sayplan.py): search over the collapsed graph,
the plan check's executability feedback, replanning, execution, and every failure kind.

The LM is ScriptedBackend everywhere: SCRIPTED replies written for these tests, not a language
model."""

from __future__ import annotations

import json

import pytest

from grasif.task import save_task
from lookplangraph.lm import ContextOverflow, ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners import get_planner
from lookplangraph.planners.sayplan import GRAPH_SUPERSEDED, searched_graph, verify_lite, verify_sayplan
from sgs.graph import Relation
from sim_adapters.graph_env import GraphEnvironment

from test_baselines import GOOD_PLAN, apple_task, run


def S(command, node="", plan=None, reasoning="scripted"):
    """A SCRIPTED SayPlan reply."""
    return json.dumps({"reasoning": reasoning, "command": command, "node": node, "plan": plan or []})


def L(command, node=""):
    """A SCRIPTED SayPlan Lite search reply."""
    return json.dumps({"reasoning": "scripted", "command": command, "node": node})


def P(plan):
    """A SCRIPTED plan reply."""
    return json.dumps({"reasoning": "scripted", "plan": plan})


SAYPLAN_GOOD = ["goto(kitchen-1)", "access(fridge-1)", "open(fridge-1)", "open(box-1)", "pickup(apple-1)", "close(box-1)",
                "close(fridge-1)", "goto(bedroom-1)", "access(bed-1)", "release(apple-1)"]


class Overflowing(ScriptedBackend):
    """SCRIPTED: a backend whose context is too small from call ``at`` on."""

    def __init__(self, replies, at):
        super().__init__(replies)
        self.at = at

    def complete(self, messages, **kw):
        if self.calls + 1 >= self.at:
            raise ContextOverflow("llamacpp:tiny: Requested tokens (7000) exceed context window of 4096")
        return super().complete(messages, **kw)


def stale_env(task):
    """The environment after someone moved the apple onto the book in the bedroom."""
    env = GraphEnvironment(task.graph)
    env.set_initial(task.graph.evolve(parent={**task.graph.parent, "apple-1": ("book-1", Relation.ONTOP)}).check())
    return env


# -- the searched graph and the checks ---------------------------------------------------------------
def test_the_searched_graph_starts_collapsed_and_shows_only_expanded_rooms(kitchen):
    g = searched_graph(kitchen, [])
    assert sorted(g.nodes) == ["bedroom-1", "kitchen-1"] and g.agent.location == "bedroom-1"
    g = searched_graph(kitchen, ["kitchen-1"])
    assert {"fridge-1", "box-1", "apple-1", "table-1", "cup-1"} <= set(g.nodes) and "bed-1" not in g.nodes


def test_sayplan_check_maps_its_functions_and_needs_access(kitchen):
    prims, why = verify_sayplan(kitchen, SAYPLAN_GOOD)
    assert why is None
    assert [str(p) for p in prims] == GOOD_PLAN  # access adds no primitive; release on the bed is put_on
    # pickup without access, access in another room, release without access, goto ends the access
    cases = [
        (["goto(kitchen-1)", "open(fridge-1)"], "step 2 open(fridge-1): access fridge-1 (or what holds it) first"),
        (["access(fridge-1)"], "fridge-1 is in kitchen-1 but you are in bedroom-1; goto(kitchen-1) first"),
        (["goto(kitchen-1)", "access(table-1)", "pickup(apple-2)", "goto(bedroom-1)", "release(bed-1)"],
         "step 5 release(bed-1): release puts the held object down at the accessed node; access a node first"),
        (["goto(kitchen-1)", "access(table-1)", "pickup(apple-2)", "goto(bedroom-1)", "access(lamp-1)", "release(bed-1)"],
         "access(bed-1) first"),
        (["goto(kitchen-1)", "access(fridge-1)", "pickup(apple-1)"], "apple-1 is inside box-1, which is closed"),
        (["goto(kitchen-1)", "access(table-1)", "pickup(apple-2)", "access(fridge-1)", "release(fridge-1)"],
         "fridge-1 is closed"),  # inside, since the fridge only takes things inside
        (["put_on(bed-1)"], "not a plan function; use goto, access, pickup, release"),
        (["goto(garage-1)"], "there is no node 'garage-1'"),
        (["goto(kitchen-1)", "pickup(apple-2)"], "access apple-2 (or what holds it) first"),
        (["pickup(book-1)"], "access book-1"),
        (["fly("], "step 1 fly(:"),
    ]
    for plan, expected in cases:
        prims, why = verify_sayplan(kitchen, plan)
        assert prims is None and expected in why, (plan, why)
    # the feedback speaks SayPlan's words, not our primitives'
    _, why = verify_sayplan(kitchen, ["goto(kitchen-1)", "access(table-1)", "release(table-1)"])
    assert "release puts down the object you hold, but you hold nothing; pickup an object first" in why


def test_release_goes_inside_an_open_container_and_on_top_otherwise(kitchen):
    plan = ["goto(kitchen-1)", "access(table-1)", "pickup(apple-2)", "access(fridge-1)", "open(fridge-1)",
            "release(apple-2)"]
    prims, why = verify_sayplan(kitchen, plan)
    assert why is None and str(prims[-1]) == "put_inside(fridge-1)"
    prims, _ = verify_sayplan(kitchen, plan[:3] + ["release(table-1)"])
    assert str(prims[-1]) == "put_on(table-1)"
    # a node on the accessed asset counts as at it: release onto the tray on the table
    prims, why = verify_sayplan(kitchen, plan[:3] + ["release(tray-1)"])
    assert why is None and str(prims[-1]) == "put_on(table-1)"


def test_lite_check_takes_our_primitives_only(kitchen):
    actions, why = verify_lite(kitchen, GOOD_PLAN)
    assert why is None and [str(a) for a in actions] == GOOD_PLAN
    assert "not a plan function" in verify_lite(kitchen, ["access(fridge-1)"])[1]
    assert "not a plan function" in verify_lite(kitchen, ["rearrange(apple-2, ontop, bed-1)"])[1]
    assert "step 2 pick_up(apple-1): apple-1 is inside box-1" in verify_lite(kitchen, ["go_to(kitchen-1)", "pick_up(apple-1)"])[1]
    assert verify_lite(kitchen, "go_to(kitchen-1)")[1] == "the plan must be a JSON list of function calls"


# -- SayPlan --------------------------------------------------------------------------------------
def test_sayplan_searches_replans_on_feedback_and_executes_in_one_chat():
    replies = [S("expand_node", "kitchen-1"), S("expand_node", "kitchen-1"), S("contract_node", "bedroom-1"),
               S("verify_plan", plan=["goto(kitchen-1)", "access(fridge-1)", "open(fridge-1)", "open(box-1)",
                                      "pickup(apple-1)", "goto(bedroom-1)", "access(bed-1)", "release(bed-1)"]),
               S("expand_node", "bedroom-1"), S("verify_plan", plan=SAYPLAN_GOOD)]
    result, steps, lm = run("sayplan", replies)
    assert result.success and result.failure is None and result.planner == "sayplan"
    assert result.actions == SAYPLAN_GOOD and result.executed == GOOD_PLAN
    assert result.lm_calls == 6 == len(steps)
    assert result.prompt_tokens == sum(s.prompt_tokens for s in steps) > 0
    assert [s.accepted for s in steps] == [True, False, False, False, True, True]
    assert steps[1].feedback == "expand_node(kitchen-1): kitchen-1 is already expanded"
    assert steps[2].feedback == "contract_node(bedroom-1): bedroom-1 is not expanded"
    # the bedroom is not expanded: its nodes are unknown to the check, which never speaks of the goal
    assert steps[3].feedback.startswith("step 7 access(bed-1): there is no node 'bed-1'")
    assert "goal" not in steps[3].feedback and "instruction" not in steps[3].feedback
    assert steps[-1].executed == GOOD_PLAN
    # one chat history: user/assistant turns alternate; only the latest user turn carries the graph
    last = lm.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant"] * 5 + ["user"]
    assert all(GRAPH_SUPERSEDED in m["content"] for m in last[:-1] if m["role"] == "user")
    assert '"name":"bed-1"' in last[-1]["content"] and "Expanded rooms: kitchen-1, bedroom-1" in last[-1]["content"]
    assert "the plan cannot be carried out" in last[8]["content"]
    first = lm.requests[0]["messages"][0]["content"]
    assert "Put the apple from the fridge on the bed." in first and '"asset":[]' in first
    assert "at most 50 search commands and 5 plan submissions" in first
    assert lm.requests[0]["schema"]["properties"]["node"]["enum"] == ["kitchen-1", "bedroom-1", ""]


def test_sayplan_accepts_an_executable_plan_that_misses_the_goal():
    # executability feedback only: a plan that stops short is accepted, executed, and fails
    plan = ["goto(kitchen-1)", "access(fridge-1)", "open(fridge-1)", "close(fridge-1)"]
    result, steps, _ = run("sayplan", [S("expand_node", "kitchen-1"), S("verify_plan", plan=plan)])
    assert not result.success and result.failure is None and result.termination == "done"
    assert result.goal_not_met and steps[-1].feedback == "the plan can be carried out on the searched graph"


@pytest.mark.parametrize("replies, cfg, kind, calls", [
    ([S("expand_node", "kitchen-1"), S("contract_node", "kitchen-1")], {"sayplan_search_steps": 3}, "search_limit", 4),
    (["I think we should go to the kitchen."], {"sayplan_search_steps": 2}, "search_limit", 3),  # unreadable, counted
    ([S("expand_node", "kitchen-1"), S("verify_plan", plan=["goto(kitchen-1)", "pickup(apple-2)"])],
     {"sayplan_replans": 2}, "replan_limit", 4),
])
def test_sayplan_limits_are_failure_kinds(replies, cfg, kind, calls):
    result, steps, _ = run("sayplan", replies, **cfg)
    assert result.failure == kind and result.lm_calls == calls and not result.success
    assert result.termination == "no_plan" and result.actions == [] and result.executed == []


def test_sayplan_unreadable_reply_gets_feedback():
    result, steps, lm = run("sayplan", ["not json", S("expand_node", "kitchen-1"), S("verify_plan", plan=SAYPLAN_GOOD[:2])])
    assert "your answer could not be read" in steps[0].feedback and not steps[0].accepted
    assert "your answer could not be read" in lm.requests[1]["messages"][2]["content"]
    assert result.failure is None and result.actions == SAYPLAN_GOOD[:2]


def test_sayplan_context_overflow_and_a_stale_map():
    task = apple_task()
    lm = Overflowing([S("expand_node", "kitchen-1")], at=2)
    result = get_planner("sayplan").run(task, GraphEnvironment(task.graph), lm, PlannerConfig())
    assert result.failure == "context_overflow" and result.lm_calls == 2 and result.termination == "no_plan"
    # the plan is checked on the map; the moved apple makes it fail in the environment
    result, steps, _ = run("sayplan", [S("expand_node", "kitchen-1"), S("expand_node", "bedroom-1"),
                                       S("verify_plan", plan=SAYPLAN_GOOD)], task=task, env=stale_env(task))
    assert result.failure == "infeasible_step" and "apple-1 is in bedroom-1" in result.infeasible[0]
    assert steps[-1].infeasible == result.infeasible[0] and result.executed == GOOD_PLAN[:3]


# -- SayPlan Lite ------------------------------------------------------------------------------------
def test_sayplan_lite_searches_with_only_the_previous_command_then_plans_apart():
    replies = [L("expand_node", "kitchen-1"), L("expand_node", "hall-1"), L("expand_node", "bedroom-1"),
               L("verify_plan"), P(["go_to(kitchen-1)", "pick_up(apple-1)"]), P(GOOD_PLAN)]
    result, steps, lm = run("sayplan-lite", replies)
    assert result.success and result.failure is None and result.planner == "sayplan-lite"
    assert result.actions == GOOD_PLAN == result.executed and result.lm_calls == 6
    prompts = [r["messages"] for r in lm.requests]
    assert all(len(m) == 1 for m in prompts)  # no chat history
    assert "Previous command: expand_node(hall-1): hall-1 is not a room" in prompts[2][0]["content"]
    assert "expand_node(kitchen-1)" not in prompts[2][0]["content"].split("Now the real task.")[1]
    # search prompts offer only the search API, planning prompts only the planning API
    assert "expand_node" in prompts[0][0]["content"] and "put_on" not in prompts[0][0]["content"]
    assert "expand_node" not in prompts[4][0]["content"] and "access" not in prompts[4][0]["content"]
    assert "plan" not in lm.requests[0]["schema"]["properties"]
    assert "Your previous plan: ['go_to(kitchen-1)', 'pick_up(apple-1)']" in prompts[5][0]["content"]
    assert "The simulator rejected it: step 2 pick_up(apple-1): apple-1 is inside box-1" in prompts[5][0]["content"]
    assert [s.proposed for s in steps[:4]] == ["expand_node(kitchen-1)", "expand_node(hall-1)", "expand_node(bedroom-1)",
                                               "verify_plan()"]


def test_sayplan_lite_plans_on_what_it_found_when_the_search_limit_is_reached():
    replies = [L("expand_node", "kitchen-1"), L("expand_node", "bedroom-1"), P(GOOD_PLAN)]
    result, steps, lm = run("sayplan-lite", replies, sayplan_search_steps=2)
    assert result.success and result.lm_calls == 3
    assert '"name":"bed-1"' in lm.requests[2]["messages"][0]["content"]


@pytest.mark.parametrize("replies, kind, calls", [
    ([L("verify_plan"), P(["go_to(kitchen-1)", "pick_up(apple-1)"])], "replan_limit", 3),
    ([L("verify_plan"), "no plan here"], "replan_limit", 3),  # unreadable plans use up the attempts
])
def test_sayplan_lite_failure_kinds(replies, kind, calls):
    result, steps, _ = run("sayplan-lite", replies, sayplan_replans=1)
    assert result.failure == kind and result.lm_calls == calls and result.actions == [] and result.executed == []


def test_sayplan_lite_context_overflow_in_either_phase_and_a_stale_map():
    task = apple_task()
    for at in (1, 3):  # search, planning
        lm = Overflowing([L("expand_node", "kitchen-1"), L("verify_plan")], at=at)
        result = get_planner("sayplan-lite").run(task, GraphEnvironment(task.graph), lm, PlannerConfig())
        assert result.failure == "context_overflow" and result.lm_calls == at
    replies = [L("expand_node", "kitchen-1"), L("expand_node", "bedroom-1"), L("verify_plan"), P(GOOD_PLAN)]
    result, _, _ = run("sayplan-lite", replies, task=task, env=stale_env(task))
    assert result.failure == "infeasible_step" and not result.success


def test_cli_runs_sayplan_lite(tmp_path, capsys):
    task_file = tmp_path / "apple.json"
    save_task(apple_task(), task_file)
    replies = "||".join([L("expand_node", "kitchen-1"), L("expand_node", "bedroom-1"), L("verify_plan"), P(GOOD_PLAN)])
    out = tmp_path / "run"
    code = main(["run", "--planner", "sayplan-lite", "--task-file", str(task_file), "--lm", "scripted:" + replies,
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "SUCCESS" in printed and "expand_node(kitchen-1)" in printed
    result = json.loads((out / "result.json").read_text())
    assert result["planner"] == "sayplan-lite" and result["config"]["sayplan"]["replans"] == 4
