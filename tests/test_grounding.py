"""The grounding check (lookplangraph.agent.grounding) and the close-what-the-rules-opened rule of
the planner loop. The loop tests use ScriptedBackend: SCRIPTED replies, not a real LM."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from grasif.dataset import load_split
from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.agent.grounding import attached, mismatch, named_nodes, placed
from lookplangraph.evaluation.grounding_audit import false_refusals
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.evaluation.injection import script_for
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import opened_by_lm, opened_by_rules, run_episode
from lookplangraph.planners.episode import StepRecord
from sgs.actions import make
from sgs.io import graph_from_dict
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": "scripted"})


def two_cups():
    """The kitchen of conftest with cup-1 (blue, on the tray) and a red cup-2 on the table."""
    d = copy.deepcopy(kitchen_dict())
    objs = d["nodes"]["objects"]
    next(o for o in objs if o["name"] == "cup-1")["properties"] = ["blue"]
    objs.append({"name": "cup-2", "relation": "ontop_of", "related_to": "table-1", "states": [],
                 "affordances": ["pick_up", "put_inside"], "properties": ["red"]})
    return d


# -- the check -------------------------------------------------------------------------------
def test_a_property_said_before_a_class_is_attached_only_when_an_object_has_it():
    g = graph_from_dict(two_cups())
    assert attached("Bring the red cup to the bed.", g) == {"cup": frozenset({"red"})}
    assert attached("Bring the green cup to the bed.", g) == {}  # no cup is green: not a property here
    assert attached("Bring a cup; the red one is mine.", g) == {}  # not said before the class


def test_moving_the_other_object_of_the_class_is_a_mismatch_that_names_the_right_one():
    g = graph_from_dict(two_cups())
    wanted = attached("Bring the red cups to the bed.", g)
    fb = mismatch(make("pick_up", "cup-1"), g, wanted)
    assert fb == ("pick_up(cup-1): cup-1 is not the red cup the instruction names (blue, in kitchen-1); "
                  "the red cup: cup-2 (red, in kitchen-1)")
    assert mismatch(make("rearrange", "cup-1", "ontop", "bed-1"), g, wanted) is not None
    assert mismatch(make("put_on", "cup-1", None, "bed-1"), g, wanted) is not None  # read as a rearrange
    assert mismatch(make("pick_up", "cup-2"), g, wanted) is None
    assert mismatch(make("pick_up", "apple-1"), g, wanted) is None  # a class the instruction does not describe
    assert mismatch(make("pick_up", "cup-9"), g, wanted) is None  # no node: the simulator's feedback answers it
    assert named_nodes(make("rearrange", "cup-1", "inside", "fridge-1"), g) == ["cup-1", "fridge-1"]
    assert named_nodes(make("discover_objects", "cup-1"), g) == []  # looking is never refused


def test_a_destination_or_a_toggled_node_of_a_described_class_is_checked_too():
    d = two_cups()
    d["nodes"]["asset"].append({"name": "table-2", "room": "bedroom-1", "states": [], "affordances": ["put_on"],
                                "properties": ["round"]})
    d["nodes"]["asset"].append({"name": "lamp-2", "room": "kitchen-1", "states": ["off"],
                                "affordances": ["turn_on", "turn_off"], "properties": ["reading"]})
    g = graph_from_dict(d)
    wanted = attached("Put the apple on the round table and switch on the reading lamp.", g)
    assert wanted == {"table": frozenset({"round"}), "lamp": frozenset({"reading"})}
    assert "table-1 is not the round table" in mismatch(make("rearrange", "apple-2", "ontop", "table-1"), g, wanted)
    assert mismatch(make("rearrange", "apple-2", "ontop", "table-2"), g, wanted) is None
    assert "lamp-1 is not the reading lamp" in mismatch(make("turn_on", "lamp-1"), g, wanted)


def test_the_place_and_its_owner_describe_a_node_too():
    d = two_cups()
    d["nodes"]["rooms"].append({"name": "annas_office-1"})
    d["nodes"]["asset"] += [{"name": "fridge-2", "room": "bedroom-1", "states": ["closed"],
                             "affordances": ["put_inside", "open", "close"]},
                            {"name": "desk-1", "room": "annas_office-1", "states": [], "affordances": ["put_on"]},
                            {"name": "desk-2", "room": "bedroom-1", "states": [], "affordances": ["put_on"]}]
    g = graph_from_dict(d)
    wanted = attached("Put the apple from the kitchen fridge on Anna's desk.", g)
    assert wanted == {"fridge": frozenset({"kitchen"}), "desk": frozenset({"anna's"})}
    fb = mismatch(make("rearrange", "apple-2", "inside", "fridge-2"), g, wanted)
    assert fb.endswith("the kitchen fridge: fridge-1 (in kitchen-1)")
    assert "desk-2 is not the anna's desk" in mismatch(make("rearrange", "apple-2", "ontop", "desk-2"), g, wanted)
    assert mismatch(make("rearrange", "apple-2", "ontop", "desk-1"), g, wanted) is None
    assert attached("Put the apple in the fridge.", g) == {}  # no place said: any fridge


@pytest.mark.parametrize("split", ["virtualhome", "behavior", "office"])
def test_no_ground_truth_action_of_grasif_is_a_mismatch(grasif_build, split):
    # the check must never refuse what the benchmark's own plans do, with the discovers a memory of
    # priors needs (script_for; measured: 0 of 2,984 actions of the three splits, 14 office tasks
    # describing a node; 0 of 16,227 actions of 2,500 generated v3 tasks, 996 describing one).
    # The first version refused office-07's discover_objects of Omar's desk ("Anna's desk").
    tasks = load_split(grasif_build, split)
    described = 0
    for task in tasks:
        graph = MemoryGraph(task.graph).graph
        wanted = attached(task.instruction, graph)
        described += bool(wanted)
        for step in script_for(task):
            assert mismatch(step, graph, wanted) is None, (task.id, str(step))
    if split == "office":
        assert described >= 14  # the red stapler, Tom's desk, the kitchen fridge, the spare monitor ...


# -- where an object stands ----------------------------------------------------------------------
@pytest.mark.parametrize("instruction", [
    "Take the apple from the table to the bed.",
    "The apple on the table is rotten; throw it in the fridge.",
    "Bring the apple lying on the table to the bed.",
    "Take the apple on the table to the bed.",  # a destination follows: "on the table" is where it is
    "Take the apple off the kitchen table.",  # the holder with its own descriptor
])
def test_a_place_said_after_a_class_describes_its_objects(kitchen, instruction):
    where = placed(instruction, kitchen)
    assert set(where) == {"apple"} and where["apple"] & {"table", "kitchen table"}


@pytest.mark.parametrize("instruction", [
    "Put the apple on the table.",  # where it goes, not where it is
    "Put the apple in the fridge.",
    "Put the apple on the table in the kitchen.",  # a room after it is not a second destination
    "Take the apple from the bathtub.",  # nothing stands there: not a place of this graph
])
def test_a_destination_or_an_unknown_place_is_not_a_description(kitchen, instruction):
    assert placed(instruction, kitchen) == {}


def test_an_object_elsewhere_is_refused_while_one_there_is_remembered(kitchen):
    where = placed("The apple on the table is rotten. Throw it in the fridge.", kitchen)
    fb = mismatch(make("pick_up", "apple-1"), kitchen, {}, where)
    assert fb == ("pick_up(apple-1): apple-1 is not the apple the instruction names by where it stands "
                  "(inside box-1 in kitchen-1); the apple there: apple-2 (on table-1 in kitchen-1)")
    assert mismatch(make("pick_up", "apple-2"), kitchen, {}, where) is None
    assert mismatch(make("discover_objects", "box-1"), kitchen, {}, where) is None  # looking is never refused
    # an object the agent has held is no longer described by where it stood
    assert mismatch(make("rearrange", "apple-1", "inside", "fridge-1"), kitchen, {}, where, moved={"apple-1"}) is None


def test_no_object_there_any_more_means_nothing_is_checked(kitchen):
    where = placed("Take the apple from the table to the bed.", kitchen)
    parent = dict(kitchen.parent)
    parent["apple-2"] = ("bed-1", parent["apple-2"][1])  # the one on the table is gone
    moved = kitchen.evolve(parent=parent)
    assert mismatch(make("pick_up", "apple-1"), moved, {}, where) is None


def test_a_descriptor_said_only_as_a_place_to_leave_checks_no_destination(kitchen):
    from lookplangraph.agent.grounding import said_away

    d = copy.deepcopy(kitchen_dict())
    d["nodes"]["asset"].append({"name": "table-2", "room": "bedroom-1", "states": [], "affordances": ["put_on"]})
    g = graph_from_dict(d)
    off = "Take the apple off the kitchen table and put it somewhere else."
    wanted = attached(off, g)
    assert wanted == {"table": frozenset({"kitchen"})} and said_away(off, g) == {"table"}
    move = make("rearrange", "apple-2", "ontop", "table-2")
    assert mismatch(move, g, wanted) is not None  # the check as it was
    assert mismatch(move, g, wanted, away=said_away(off, g)) is None
    assert said_away("No apple should be left on the kitchen table.", g) == {"table"}
    assert said_away("Put the apple on the kitchen table.", g) == frozenset()
    # where the same descriptor is also said as wanted, the destination is checked
    both = "Take the apple off the kitchen table, then put it back on the kitchen table."
    assert said_away(both, g) == frozenset()


@pytest.mark.parametrize("split", ["virtualhome", "behavior", "office", "dev"])
def test_no_ground_truth_step_is_refused_in_the_graph_of_its_step(grasif_build, split):
    # the replay asks the check, places included, in the memory graph of each step, as the loop does
    audits = [false_refusals(task) for task in load_split(grasif_build, split)]
    assert [(a.task_id, a.refused) for a in audits if a.refused] == []
    if split == "dev":
        assert sum(a.placed for a in audits) >= 8  # "the forceps on the instrument trolley", ...


# -- in the loop ---------------------------------------------------------------------------------
def cup_task():
    goal = GoalSpec(node_goals=[NodeGoal(node="cup-2", relation="ontop", destination="bed-1")])
    return Task(id="cups", split="test", instruction="Put the red cup on the bed.", initial_graph=two_cups(), goal=goal)


def run(task, replies, **cfg):
    lm = ScriptedBackend(replies)  # SCRIPTED replies, not an LM
    return run_episode(task, GraphEnvironment(task.graph, task.goal), lm, PlannerConfig(**cfg))


def test_the_loop_refuses_the_wrong_cup_with_feedback_and_accepts_the_right_one(decisions):
    replies = [J("go_to", "kitchen-1"), J("pick_up", "cup-1"), J("discover_objects", "table-1"),
               J("rearrange", "cup-2", "ontop", "bed-1"), J("done")]
    result = run(cup_task(), replies)
    assert result.success and "pick_up(cup-1)" not in result.actions
    assert "cup-1 is not the red cup" in decisions[2].dynamic


def test_a_refused_mismatch_stays_excluded_after_the_scene_changed(decisions):
    replies = [J("go_to", "kitchen-1"), J("pick_up", "cup-1"), J("discover_objects", "table-1"), J("done")]
    run(cup_task(), replies)
    key = ("pick_up", "cup-1", None, None)
    assert key not in decisions[1].excluded
    assert key in decisions[2].excluded and key in decisions[3].excluded  # discover changed the memory state


def test_grounding_off_and_correction_none_let_the_wrong_cup_through():
    for cfg in ({"grounding_check": False}, {"correction": "none"}):
        replies = [J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("pick_up", "cup-1"), J("done")]
        result = run(cup_task(), replies, **cfg)
        assert "pick_up(cup-1)" in result.actions and not result.success


def kitchen_task():
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")], unchanged_elsewhere=True)
    return Task(id="kitchen", split="test", instruction="Put the apple from the box on the bed.",
                initial_graph=kitchen_dict(), goal=goal)


def test_done_closes_what_the_rules_opened_walking_back_to_it():
    # the rules open the fridge (discover) and the box (rearrange); the apple ends on the bed in
    # the bedroom; done() goes back and closes both, so nothing else in the scene has changed
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"),
               J("done")]
    result = run(kitchen_task(), replies, close_at_once=False)  # (close_at_once would close both after the pick-up)
    assert result.success and result.termination == "done"
    tail = result.executed[result.executed.index("put_on(bed-1)") + 1:]
    assert tail == ["go_to(kitchen-1)", "close(box-1)", "close(fridge-1)"]
    off = run(kitchen_task(), replies, close_opened=False, close_at_once=False)
    assert not off.success and off.executed[-1] == "put_on(bed-1)"
    assert any("fridge-1" in g and "open" in g for g in off.goal_not_met)


def test_what_the_lm_opened_itself_stays_open():
    replies = [J("go_to", "kitchen-1"), J("open", "fridge-1"), J("discover_objects", "fridge-1"), J("done")]
    result = run(kitchen_task(), replies)
    assert result.executed[-1] == "discover_objects(fridge-1)"  # nothing closed by done()


def test_remind_open_sends_done_back_once_naming_what_the_lm_opened(decisions):
    replies = [J("go_to", "kitchen-1"), J("open", "fridge-1"), J("open", "box-1"), J("discover_objects", "box-1"),
               J("rearrange", "apple-1", "ontop", "bed-1"), J("done"), J("close", "box-1"), J("close", "fridge-1"),
               J("done")]
    result = run(kitchen_task(), replies, remind_open=True)
    assert ("fridge-1, box-1 are still open (you opened them); close them unless the instruction asks for them "
            "open, then answer done()") in decisions[6].dynamic
    assert result.success and result.termination == "done" and result.lm_calls == 9
    assert result.executed[-2:] == ["close(box-1)", "close(fridge-1)"]
    # without the setting (the default) the first done() ends the episode with both left open
    off = run(kitchen_task(), replies[:6])
    assert off.termination == "done" and not off.success and off.lm_calls == 6
    assert any(g.startswith("side effect: fridge-1") for g in off.goal_not_met)


def test_remind_open_is_given_once_and_leaves_done_decodable(decisions):
    # an instruction may want the fridge open: the second done() is accepted as it stands
    replies = [J("go_to", "kitchen-1"), J("open", "fridge-1"), J("done"), J("done")]
    result = run(kitchen_task(), replies, remind_open=True)
    assert result.termination == "done" and result.lm_calls == 4
    assert "fridge-1 is still open (you opened it); close it unless" in decisions[3].dynamic
    assert ("done", None, None, None) not in decisions[3].excluded
    assert result.executed[-1] == "open(fridge-1)"


def test_remind_open_leaves_what_the_rules_opened_to_close_opened(decisions):
    # the rules opened the fridge and the box: done() closes them without a reminder
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"),
               J("done")]
    result = run(kitchen_task(), replies, remind_open=True, close_at_once=False)
    assert result.success and result.lm_calls == 4
    assert result.executed[-2:] == ["close(box-1)", "close(fridge-1)"]
    # and not with correction none, which has no reminders: done() ends the episode
    result = run(kitchen_task(), [J("go_to", "kitchen-1"), J("open", "fridge-1"), J("done")],
                 remind_open=True, correction="none")
    assert result.termination == "done" and result.lm_calls == 3


def test_opened_by_lm_names_what_the_lm_opened_itself_in_order():
    g = graph_from_dict(kitchen_dict())
    for n in ("fridge-1", "box-1"):
        g.nodes[n] = replace(g.nodes[n], states=("open",))
    recs = [StepRecord(1, "", "open(fridge-1)", True, "", executed=["go_to(kitchen-1)", "open(fridge-1)"]),
            StepRecord(2, "", "open(box-1)", True, "", executed=["open(box-1)"])]
    assert opened_by_lm(recs, g) == ["fridge-1", "box-1"] and opened_by_rules(recs, g) == []
    recs.append(StepRecord(3, "", "close(box-1)", True, "", executed=["close(box-1)"]))
    assert opened_by_lm(recs, g) == ["fridge-1"]  # closed since (the graph still says open: the records decide)
    g.nodes["fridge-1"] = replace(g.nodes["fridge-1"], states=("closed",))
    assert opened_by_lm(recs, g) == []  # not open in the graph


def test_opened_by_rules_forgets_what_was_closed_or_reopened_by_the_lm():
    g = graph_from_dict(kitchen_dict())
    for n in ("fridge-1", "box-1"):
        g.nodes[n] = replace(g.nodes[n], states=("open",))
    recs = [StepRecord(1, "", "discover_objects(fridge-1)", True, "", executed=["open(fridge-1)", "discover_objects(fridge-1)"]),
            StepRecord(2, "", "pick_up(apple-1)", True, "", executed=["open(box-1)", "pick_up(apple-1)"])]
    assert opened_by_rules(recs, g) == ["box-1", "fridge-1"]  # the inner one first
    recs.append(StepRecord(3, "", "open(box-1)", True, "", executed=["open(box-1)"]))  # the LM's own, now
    assert opened_by_rules(recs, g) == ["fridge-1"]
    # the LM's open of a box in a closed fridge: the rules opened the fridge on the way
    recs = [StepRecord(1, "", "open(box)", True, "", executed=["open(fridge-1)", "open(box-1)"])]
    assert opened_by_rules(recs, g) == ["fridge-1"]
    g.nodes["fridge-1"] = replace(g.nodes["fridge-1"], states=("closed",))
    assert opened_by_rules(recs, g) == []
