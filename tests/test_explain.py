"""Reasons on demand (lookplangraph.agent.decide.explain, the loop's ``explain`` setting): the reason
of a decided action, asked of the LM after the fact with the action fixed by the schema. The LM
here is ScriptedBackend: SCRIPTED replies, not a real LM."""

from __future__ import annotations

import json

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.agent.decide import decision_messages, explain
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict


def A(fn, node=None, relation=None, destination=None, **more):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination, **more})


def test_explain_fixes_the_action_and_decodes_only_the_reason():
    lm = ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="the bed is where it goes")])
    said = explain(lm, "static", "dynamic", make("rearrange", "apple-2", "ontop", "bed-1"))
    assert said.reason == "the bed is where it goes" and str(said.action) == "rearrange(apple-2, ontop, bed-1)"
    request = lm.requests[0]
    assert request["messages"] == decision_messages("static", "dynamic")
    props = request["schema"]["properties"]
    assert list(props) == ["function_name", "node", "relation", "destination", "reason"]
    assert props["function_name"]["enum"] == ["rearrange"] and props["destination"]["enum"] == ["bed-1"]
    assert props["reason"]["maxLength"] > 0
    explain(lm, "s", "d", make("done"))
    assert lm.requests[1]["schema"]["properties"]["node"] == {"type": "null"}


def test_the_loop_records_explained_reasons_but_keeps_them_out_of_the_prompts():
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)
    decisions = [A("go_to", "kitchen-1"), A("discover_objects", "table-1"), A("rearrange", "apple-2", "ontop", "bed-1"),
                 A("done")]
    for on in (True, False):
        replies = []
        for i, d in enumerate(decisions):
            replies += [d, json.dumps({**json.loads(d), "reason": f"why {i}"})] if on else [d]
        lm, steps = ScriptedBackend(replies), []
        cfg = PlannerConfig(reason_max_length=0, explain=on)
        result = run_episode(task, GraphEnvironment(task.graph, goal), lm, cfg, on_step=steps.append)
        assert result.success
        assert [s.reason for s in steps] == ([f"why {i}" for i in range(4)] if on else [None] * 4)
        prompts = [r["messages"][-1]["content"] for r in lm.requests if r["schema"]["properties"].get("reason") is None]
        assert len(prompts) == 4 and not any("why" in p for p in prompts)
        assert "- go_to(kitchen-1)" in prompts[1]
