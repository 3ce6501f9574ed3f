"""The append-only prompt layout (lookplangraph.agent.journal, ``prompt_layout = "journal"``): each
decision's prompt extends the previous one, and it says what the view says. The loop test uses
ScriptedBackend: SCRIPTED replies, not a real LM; the expert is the privileged harness tool."""

from __future__ import annotations

import copy
import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.agent.prompts import dynamic_prompt
from sgs.io import graph_from_dict
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict

ANSWER = "\nAnswer:"


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination})


def run(replies, true_graph=None, **settings):
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)
    lm = ScriptedBackend(replies)
    result = run_episode(task, GraphEnvironment(graph_from_dict(true_graph or kitchen_dict()), goal), lm,
                         PlannerConfig(prompt_layout="journal", reason_max_length=0, **settings))
    return result, [r["messages"][-1]["content"] for r in lm.requests]


def test_each_prompt_extends_the_one_before():
    result, prompts = run([J("go_to", "kitchen-1"), J("pick_up", "apple-9"), J("discover_objects", "table-1"),
                           J("rearrange", "apple-2", "ontop", "bed-1"), J("done")])
    assert result.success
    for before, after in zip(prompts, prompts[1:]):
        assert before.endswith(ANSWER) and after.startswith(before[: -len(ANSWER)])
    first, last = prompts[0], prompts[-1]
    assert first.startswith("Instruction: Put the apple on the bed.\nPlaces: kitchen-1, bedroom-1.\n"
                            "In bedroom-1, holding nothing. Assets here: lamp-1 (off); bed-1.")
    # a refused answer stays in the journal with its feedback; the next answer follows it
    assert "\n- pick_up(apple-9)\nFeedback on your last answer: " in last
    assert "\n- discover_objects(table-1)\nSeen: apple-2 ontop table-1 (inspected)" in last
    assert "- rearrange(apple-2, ontop, bed-1) [done as: pick_up(apple-2), go_to(bedroom-1), put_on(bed-1)]" in last
    assert "\nBack in bedroom-1. Changed: apple-2 ontop bed-1 (inspected)." in last
    assert last.count("In kitchen-1.") == 1  # a room is described in full once


def test_a_prior_not_found_is_written_once_with_the_search_line_or_without():
    moved = copy.deepcopy(kitchen_dict())
    next(o for o in moved["nodes"]["objects"] if o["name"] == "apple-2")["related_to"] = "bed-1"
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("go_to", "bedroom-1"), J("done")]
    _, prompts = run(replies, moved)
    assert "Not found where remembered: apple-2 (was ontop table-1 in kitchen-1); likeliest places" in prompts[2]
    _, prompts = run(replies, moved, search_hint=False)
    assert prompts[-1].count("Not found where remembered: apple-2 (was ontop table-1).") == 1


def test_the_journal_is_the_loops_to_write_and_only_in_the_text_style():
    with pytest.raises(ValueError, match="journal"):
        dynamic_prompt("x", "scene", [], None, "journal")
    with pytest.raises(ValueError, match="graph_style"):
        run([J("done")], graph_style="json")


def test_the_expert_writes_journal_examples_in_dynamic_mode():
    """Training data in the journal layout: the expert (the privileged harness tool) plays a dev
    task in dynamic mode, its search going by the journal's search lines."""
    from grasif.dev import build_tasks
    from lookplangraph.distill.planning.trajectories import expert_episode

    task = next(t for t in build_tasks() if t.id == "clinic-01")
    cfg = PlannerConfig(max_actions=30, system_prompt="compact", prompt_layout="journal", reason_max_length=0,
                        recall="named")
    result, examples, _ = expert_episode(task, 0, cfg)
    assert result.success and len(examples) == 12
