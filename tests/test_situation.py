"""What the feedback on a refused action adds about the agent's situation
(lookplangraph.agent.situation) and the loop's ``refusal_situation`` setting. The loop test uses
ScriptedBackend: SCRIPTED replies, not a real LM."""

from __future__ import annotations

import json

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.agent.situation import destinations, situation
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make
from sgs.simulator import apply
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": "scripted"})


def holding_apple(kitchen):
    g = apply(kitchen, make("go_to", "kitchen-1"))
    return apply(g, make("pick_up", "apple-2"))


def test_empty_hands_say_where_the_agent_is(kitchen):
    assert situation(kitchen) == "you are in bedroom-1 and hold nothing"
    assert destinations(kitchen) == {"put_on": [], "put_inside": []}


def test_holding_something_names_what_in_the_room_takes_it(kitchen):
    g = holding_apple(kitchen)
    where = destinations(g)
    assert where["put_on"] == ["table-1", "tray-1"]
    assert where["put_inside"] == ["fridge-1", "cup-1"]  # box-1 is inside the closed fridge: not reachable
    assert situation(g) == ("you are in kitchen-1 holding apple-2; here it can go put_on(table-1, tray-1) "
                            "or put_inside(fridge-1, cup-1)")


def test_unseen_priors_and_what_is_held_are_not_offered(kitchen):
    g = holding_apple(kitchen)
    assert "tray-1" not in destinations(g, unseen={"tray-1"})["put_on"]
    g = apply(apply(kitchen, make("go_to", "kitchen-1")), make("pick_up", "tray-1"))
    assert "tray-1" not in destinations(g)["put_on"] and "cup-1" not in destinations(g)["put_inside"]


def apple_episodes(replies, setting):
    """The apple-to-the-bed task run on ``replies`` (SCRIPTED, not an LM) with ``setting`` on and
    off: ``(on, result, step records)`` for each."""
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple from the table on the bed.",
                initial_graph=kitchen_dict(), goal=goal)
    for on in (True, False):
        steps = []
        result = run_episode(task, GraphEnvironment(task.graph, task.goal), ScriptedBackend(list(replies)),
                             PlannerConfig(**{setting: on}), on_step=steps.append)
        yield on, result, steps


def test_the_loop_adds_the_situation_to_a_refusal_only_when_asked():
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("pick_up", "apple-2"),
               J("put_inside", "apple-2", None, "table-1"), J("rearrange", "apple-2", "ontop", "bed-1"), J("done")]
    for on, result, steps in apple_episodes(replies, "refusal_situation"):
        assert result.success
        refused = [r for r in steps if r.proposed.startswith("put_inside")]
        assert len(refused) == 1 and refused[0].feedback.startswith("put_inside(apple-2, table-1): table-1 does not take things inside it")
        said = "(you are in kitchen-1 holding apple-2; here it can go put_on(table-1, tray-1)"
        assert (said in refused[0].feedback) is on


def test_a_put_with_a_room_asset_or_the_destination_in_the_object_slot_means_the_held_object(kitchen):
    from lookplangraph.agent.situation import held_put

    g = holding_apple(kitchen)
    assert held_put(make("put_on", "kitchen-1", None, "table-1"), g) == make("put_on", "apple-2", None, "table-1")
    assert held_put(make("put_inside", "fridge-1", None, "fridge-1"), g) == make("put_inside", "apple-2", None, "fridge-1")
    assert held_put(make("put_inside", "fridge-1", None, "apple-2"), g) == make("put_inside", "apple-2", None, "fridge-1")
    assert held_put(make("put_on", "tray-1", None, "table-1"), g) is None  # another object: it may mean to move it
    assert held_put(make("put_on", "apple-2", None, "table-1"), g) is None  # already right
    assert held_put(make("put_on", "table-1"), g) is None  # no destination slot to read
    assert held_put(make("put_on", "kitchen-1", None, "table-1"), kitchen) is None  # holds nothing


def test_the_loop_reads_the_shuffled_put_only_when_asked_and_says_how():
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("pick_up", "apple-2"),
               J("go_to", "bedroom-1"), J("put_on", "bedroom-1", None, "bed-1"),
               J("put_on", "apple-2", None, "bed-1"), J("done")]
    for on, result, steps in apple_episodes(replies, "held_slot"):
        assert result.success
        shuffled = next(r for r in steps if r.proposed == "put_on(bedroom-1, bed-1)")
        assert shuffled.accepted is on
        if on:
            assert shuffled.executed == ["put_on(bed-1)"]
            assert shuffled.corrections[0] == "read put_on(bedroom-1, bed-1) as put_on(apple-2, bed-1): you hold apple-2"
        else:
            assert "you hold apple-2, not bedroom-1 (you are in bedroom-1 holding apple-2" in shuffled.feedback
