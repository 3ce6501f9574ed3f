"""Search after a move (lookplangraph.agent.search): what the memory keeps of an object that was not
where it was remembered, the view's line naming the likeliest places, the loop's ``search_hint``
and ``discover_holders`` settings. The loop tests use ScriptedBackend: SCRIPTED replies, not a
real LM."""

from __future__ import annotations

import copy
import json

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.search import instruction_hints, ranked_holders, search_entries
from lookplangraph.agent.view import inapplicable, names_in, render_view, view
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make
from sgs.io import graph_from_dict
from sim_adapters.base import Observation, SeenObject
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict

LINE = ("Not found where remembered: apple-2 (was ontop table-1 in kitchen-1); likeliest places not looked at "
        "yet: fridge-1 here, bed-1 in bedroom-1.")


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": "scripted"})


def moved_apple() -> dict:
    """The kitchen as it truly is: apple-2 no longer on table-1 but on bed-1."""
    d = copy.deepcopy(kitchen_dict())
    for o in d["nodes"]["objects"]:
        if o["name"] == "apple-2":
            o["related_to"] = "bed-1"
    return d


def looked_at_table(kitchen) -> MemoryGraph:
    memory = MemoryGraph(kitchen)
    memory.apply(make("go_to", "kitchen-1"))
    memory.apply(make("discover_objects", "table-1"))
    memory.discover(Observation("table-1", [SeenObject("tray-1", "ontop", "table-1"),
                                            SeenObject("cup-1", "ontop", "tray-1")]))
    return memory


def test_memory_keeps_where_a_prior_not_found_was_remembered_until_it_is_seen(kitchen):
    memory = looked_at_table(kitchen)
    assert memory.missing == {"apple-2": ("ontop", "table-1", "kitchen-1")}
    assert "apple-2" not in memory.graph.nodes
    memory.apply(make("go_to", "bedroom-1"))
    memory.apply(make("discover_objects", "bed-1"))
    memory.discover(Observation("bed-1", [SeenObject("apple-2", "ontop", "bed-1"),
                                          SeenObject("book-1", "ontop", "bed-1")]))
    assert memory.missing == {}


def test_the_view_names_the_likeliest_places_not_looked_at(kitchen):
    memory = looked_at_table(kitchen)
    shown = view(memory)
    shown["search"] = search_entries(memory.graph, memory.missing, "Put the apple on the bed.")
    assert render_view(shown).splitlines()[-1] == LINE
    assert "bed-1" in names_in(shown)  # a place the line names may be answered from another room
    assert "apple-2" not in names_in(shown)  # the missing object itself is no node of the memory


def test_remembered_room_first_per_action_then_a_room_the_instruction_names(kitchen):
    memory = looked_at_table(kitchen)
    g = memory.graph
    assert ranked_holders(g, "apple", "kitchen-1", ["bed-1", "fridge-1"], (set(), set())) == ["fridge-1", "bed-1"]
    # from the bedroom, the bed costs one action and the fridge two
    assert ranked_holders(g, "apple", "kitchen-1", ["bed-1", "fridge-1"], (set(), set()),
                          here="bedroom-1") == ["bed-1", "fridge-1"]
    assert instruction_hints("Is the apple still in the bedroom?", g)[0] == {"bedroom-1"}


def test_discover_holders_excludes_looking_at_what_holds_nothing(kitchen):
    memory = looked_at_table(kitchen)
    names = ["apple-1", "box-1", "fridge-1"]
    on = inapplicable(memory, names, holders_only=True)
    off = inapplicable(memory, names)
    key = ("discover_objects", "apple-1", None, None)
    assert key in on and key not in off
    for holder in ("box-1", "fridge-1"):  # they take things inside
        assert ("discover_objects", holder, None, None) not in on


def episode(search_hint: bool):
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="table-1")])
    task = Task(id="apple", split="test", instruction="Put the apple back on the table.",
                initial_graph=kitchen_dict(), goal=goal)
    lm = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("discover_objects", "bed-1"),
                          J("rearrange", "apple-2", "ontop", "table-1"), J("done")])
    result = run_episode(task, GraphEnvironment(graph_from_dict(moved_apple()), goal), lm,
                         PlannerConfig(search_hint=search_hint))
    return result, [r["messages"][-1]["content"] for r in lm.requests]


def test_the_loop_shows_the_line_only_while_the_object_is_missing_and_only_when_asked():
    result, prompts = episode(True)
    assert result.success
    assert [LINE in p for p in prompts] == [False, False, True, False, False]
    result, prompts = episode(False)
    assert result.success and not any("Not found where remembered" in p for p in prompts)
