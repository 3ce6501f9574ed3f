"""The planner loop (lookplangraph/planners/lookplangraph.py) around an LM, with the memory graph and the graph
environment. The LM here is ScriptedBackend: SCRIPTED replies, not a real LM; a real model runs
the loop in tests/test_episode_lm.py."""

from __future__ import annotations

import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task, load_task
from lookplangraph.lm import ContextOverflow, ScriptedBackend
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.evaluation.settings import load_settings
from lookplangraph.planners.config import BEYOND_THE_PAPER, PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.agent.view import render, visible_names
from sgs.io import graph_to_dict
from sim_adapters.dynamic import perturb, relevant_objects
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.wrappers import DynamicPerturbation

from conftest import EXAMPLES, kitchen_dict


def J(fn, node=None, relation=None, destination=None, reason="scripted"):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination, "reason": reason})


@pytest.fixture
def gift_task():
    return load_task(EXAMPLES / "gift_basket" / "task.json")


def kitchen_task(goal=None, instruction="Put the apple from the box on the bed."):
    goal = goal or GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")])
    return Task(id="kitchen", split="test", instruction=instruction,
                initial_graph=kitchen_dict(), goal=goal)


def episode(task, replies, **cfg):
    lm = ScriptedBackend(replies)  # SCRIPTED replies, not an LM
    env = GraphEnvironment(task.graph, task.goal)
    return run_episode(task, env, lm, PlannerConfig(**cfg)), lm


def test_scripted_gift_basket_episode_succeeds_with_trace_and_tokens(gift_task, decisions):
    plan = json.loads((EXAMPLES / "gift_basket" / "plan.json").read_text())
    replies = [J("discover_objects", "floor-1"), J("discover_objects", "table-1"), J("discover_objects", "table-2")]
    replies += [J("rearrange", *s[len("rearrange("):-1].split(", ")) for s in plan] + [J("done")]
    steps = []
    lm = ScriptedBackend(replies)
    result = run_episode(gift_task, GraphEnvironment(gift_task.graph, gift_task.goal), lm, PlannerConfig(), on_step=steps.append)
    assert result.success and result.precision == 1.0 and result.termination == "done"
    assert result.lm_calls == len(replies) == len(steps)
    assert len(result.actions) == 20 and result.actions[-1] == "done()"
    assert result.prompt_tokens == sum(s.prompt_tokens for s in steps) > 0
    assert result.completion_tokens == sum(s.completion_tokens for s in steps) > 0
    assert steps[0].observed[:1] == ["wicker_basket-1 ontop floor-1"]
    # the static part is the same bytes on every call; the dynamic part carries history
    assert len({d.static for d in decisions}) == 1
    assert "discover_objects(floor-1)" in decisions[1].dynamic


def test_unseen_prior_must_be_discovered_first(decisions):
    task = kitchen_task()
    result, lm = episode(task, [J("go_to", "kitchen-1"), J("rearrange", "apple-1", "ontop", "bed-1"),
                                J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"), J("done")],
                          close_at_once=False)
    assert "confirm where it is with discover_objects(fridge-1)" in decisions[2].dynamic
    assert result.success and result.termination == "done"
    # correction opened the fridge and the box, walked back to the bedroom; done() went back and
    # closed what the corrections had opened (close_opened)
    assert result.executed[-8:] == ["open(fridge-1)", "open(box-1)", "pick_up(apple-1)", "go_to(bedroom-1)",
                                    "put_on(bed-1)", "go_to(kitchen-1)", "close(box-1)", "close(fridge-1)"]


def test_close_at_once_closes_what_a_correction_opened_right_after_the_pick_up():
    task, steps = kitchen_task(), []
    replies = [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("rearrange", "apple-1", "ontop", "bed-1"),
               J("done")]
    result = run_episode(task, GraphEnvironment(task.graph, task.goal), ScriptedBackend(replies),  # SCRIPTED
                         PlannerConfig(close_at_once=True), on_step=steps.append)
    assert result.success and result.termination == "done"
    # innermost first, before the walk; done() has nothing left to close
    assert result.executed[-7:] == ["open(fridge-1)", "open(box-1)", "pick_up(apple-1)", "close(box-1)",
                                    "close(fridge-1)", "go_to(bedroom-1)", "put_on(bed-1)"]
    assert steps[2].corrections[-2:] == ["closed box-1 after pick_up(apple-1): a correction had opened it",
                                         "closed fridge-1 after pick_up(apple-1): a correction had opened it"]
    assert steps[3].executed == []


def test_close_at_once_closes_after_a_put_inside_but_not_what_the_lm_opened():
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="inside", destination="fridge-1")])
    task = kitchen_task(goal, "Put the apple on the table in the fridge.")
    look = [J("go_to", "kitchen-1"), J("discover_objects", "table-1")]
    result, _ = episode(task, [*look, J("rearrange", "apple-2", "inside", "fridge-1"), J("done")],
                        close_at_once=True)
    assert result.executed[2:] == ["pick_up(apple-2)", "open(fridge-1)", "put_inside(fridge-1)", "close(fridge-1)"]
    assert result.success
    own, _ = episode(task, [*look, J("open", "fridge-1"), J("rearrange", "apple-2", "inside", "fridge-1"), J("done")],
                     close_at_once=True)
    assert own.executed[2:] == ["open(fridge-1)", "pick_up(apple-2)", "put_inside(fridge-1)"]  # stays open


def test_close_at_once_leaves_an_action_as_it_was_where_a_later_step_needs_the_container_open():
    # the apple goes from the box in the fridge into the fridge: closing the fridge after the
    # pick-up would stop the put, so nothing is added and done() closes what is left (close_opened)
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="inside", destination="fridge-1")])
    result, _ = episode(kitchen_task(goal), [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"),
                                             J("rearrange", "apple-1", "inside", "fridge-1"), J("done")],
                        close_at_once=True)
    assert result.executed[-6:] == ["open(fridge-1)", "open(box-1)", "pick_up(apple-1)", "put_inside(fridge-1)",
                                    "close(box-1)", "close(fridge-1)"]
    assert result.success


def test_the_papers_tables_run_lookplangraph_without_the_rules_beyond_the_paper():
    defaults = PlannerConfig()
    assert all(isinstance(getattr(defaults, name), bool) for name in BEYOND_THE_PAPER)
    tables = [load_settings(str(p), {}) for p in sorted((EXAMPLES.parent / "configs").glob("table*.toml"))]
    loop = [s for s in tables if s.planner == "lookplangraph"]
    assert len(loop) == 8  # Table II dynamic, Table IV planning and Table V's six rows
    for settings in loop:
        config = settings.planner_config()
        assert [name for name in BEYOND_THE_PAPER if getattr(config, name)] == [], settings.out


def test_without_correction_the_closed_box_is_feedback(decisions):
    task = kitchen_task()
    result, lm = episode(task, [J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"),
                                J("rearrange", "apple-1", "ontop", "bed-1")], correction="feedback")
    assert result.termination == "unresolved" and not result.success
    assert "closed" in decisions[-1].dynamic


BAD_REPLIES = {
    "empty": "",
    "not json": "I think the robot should look around first.",
    "unknown function": J("teleport", "kitchen-1"),
    "unknown node": J("go_to", "garage-1"),
    "wrong types": json.dumps({"function_name": "go_to", "node": 7, "reason": "x"}),
    "two actions": json.dumps([{"function_name": "done"}, {"function_name": "done"}]),
}


@pytest.mark.parametrize("kind", BAD_REPLIES)
def test_bad_reply_is_feedback_and_three_in_a_row_end_the_episode(kind, decisions):
    task = kitchen_task()
    result, lm = episode(task, [BAD_REPLIES[kind]])
    assert result.termination == "unresolved" and result.lm_calls == 3 and result.actions == []
    assert "Feedback on your last answer:" in decisions[1].dynamic


def test_a_good_action_resets_the_unresolved_count():
    task = kitchen_task()
    bad = BAD_REPLIES["not json"]
    result, _ = episode(task, [bad, bad, J("go_to", "kitchen-1"), bad, bad, J("done")])
    assert result.termination == "done" and result.lm_calls == 6


def test_endless_repetition_is_feedback_then_unresolved(decisions):
    task = kitchen_task()
    result, lm = episode(task, [J("go_to", "kitchen-1")])
    assert result.actions == ["go_to(kitchen-1)"]
    assert "changed nothing" in decisions[2].dynamic
    assert result.termination == "unresolved" and result.lm_calls == 4


def test_action_limit_ends_the_episode():
    task = kitchen_task()
    result, _ = episode(task, [J("go_to", "kitchen-1"), J("go_to", "bedroom-1")] * 5, max_actions=3, refuse_cycles=False)
    assert result.termination == "max_actions" and len(result.actions) == 3


class OverflowingBackend(ScriptedBackend):
    """SCRIPTED replies, not an LM, whose third call finds the prompt too long for its context."""

    def complete(self, messages, **kw):
        if self.calls == 2:
            raise ContextOverflow("scripted: Requested tokens (4293) exceed context window of 4096")
        return super().complete(messages, **kw)


def test_a_prompt_the_context_cannot_hold_ends_the_episode_and_what_was_done_is_judged():
    task = kitchen_task()
    lm = OverflowingBackend([J("go_to", "kitchen-1"), J("go_to", "bedroom-1"), J("done")])
    result = run_episode(task, GraphEnvironment(task.graph, task.goal), lm, PlannerConfig(prompt_layout="conversation"))
    assert result.termination == result.failure == "context_overflow"
    assert result.actions == ["go_to(kitchen-1)", "go_to(bedroom-1)"] and result.lm_calls == 2
    assert not result.success and result.goal_not_met


def test_memory_discover_replaces_priors_and_keeps_what_was_seen():
    g = kitchen_task().graph
    m = MemoryGraph(g)
    assert m.unseen == {"box-1", "apple-1", "apple-2", "tray-1", "cup-1", "book-1"}
    env = GraphEnvironment(g.evolve(parent={k: v for k, v in g.parent.items() if k != "cup-1"} | {"cup-1": ("table-1", g.parent["tray-1"][1])}))
    # the environment has cup-1 on the table, the memory believes it is on the tray
    from sgs.actions import make
    for a in (make("go_to", "kitchen-1"), make("discover_objects", "table-1")):
        res = env.step(a)
        m.apply(a)
    removed = m.discover(res.observation)
    assert removed == []
    assert m.graph.parent["cup-1"][0] == "table-1" and "cup-1" not in m.unseen and "cup-1" in m.known
    text = render(m)
    assert "Objects seen here:" in text and "cup-1 ontop table-1" in text
    assert "table-1 (inspected)" in text


def test_discover_removes_priors_that_are_not_there():
    g = kitchen_task().graph
    true = g.evolve(nodes={k: v for k, v in g.nodes.items() if k not in ("apple-2",)},
                    parent={k: v for k, v in g.parent.items() if k != "apple-2"})
    env, m = GraphEnvironment(true), MemoryGraph(g)
    from sgs.actions import make
    for a in (make("go_to", "kitchen-1"), make("discover_objects", "table-1")):
        res = env.step(a)
        m.apply(a)
    assert m.discover(res.observation) == ["apple-2"]
    assert "apple-2" not in m.graph.nodes


def test_no_priors_and_serialization_styles():
    g = kitchen_task().graph
    m = MemoryGraph(g, priors=False)
    assert not [n for n in m.graph.nodes if n.startswith(("apple", "cup"))]
    full = MemoryGraph(g)
    text, js, whole = render(full, "text"), json.loads(render(full, "json")), render(full, "full")
    assert "book-1 ontop bed-1" in text and "apple-1" not in text  # only the agent's room
    assert [e["name"] for e in js["remembered"]] == ["book-1"]
    assert "apple-1 inside box-1 in kitchen-1" in whole
    assert set(visible_names(full, "full")) >= {"apple-1", "fridge-1", "kitchen-1"}
    assert "fridge-1" not in visible_names(full, "text")
    with pytest.raises(ValueError, match="unknown graph style"):
        render(full, "yaml")


def test_dynamic_mode_moves_relevant_objects_deterministically():
    task = kitchen_task()
    assert relevant_objects(task.graph, task.goal) == ["apple-1"]
    a, notes_a = perturb(task.graph, task.goal, seed=3, mode="anywhere")
    b, notes_b = perturb(task.graph, task.goal, seed=3, mode="anywhere")
    assert graph_to_dict(a) == graph_to_dict(b) and notes_a == notes_b and len(notes_a) == 1
    assert a.parent["apple-1"] != task.graph.parent["apple-1"]
    assert a.parent["apple-1"][0] != "bed-1"  # never onto a goal destination
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, seed=3, mode="anywhere")
    env.reset()  # the moves are drawn at reset
    assert env.moves == notes_a and env.true_graph().parent["apple-1"] == a.parent["apple-1"]


def test_stale_priors_are_replaced_by_what_discover_finds():
    task = kitchen_task()
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, seed=3, mode="anywhere")
    env.reset()  # the moves are drawn at reset
    assert env.moves == ["apple-1: inside box-1 -> inside cup-1"]
    lm = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("discover_objects", "table-1"),
                          J("rearrange", "apple-1", "ontop", "bed-1"), J("done")])  # SCRIPTED, not an LM
    steps = []
    result = run_episode(task, env, lm, PlannerConfig(), on_step=steps.append)
    assert steps[1].observed == ["box-1 inside fridge-1", "not found: apple-1"]
    assert "apple-1 inside cup-1" in steps[2].observed
    assert result.success and result.termination == "done"


def test_vocabulary_ties_each_function_to_the_names_it_can_take():
    from lookplangraph.agent.view import vocabulary
    from sgs.actions import make

    g = kitchen_task().graph
    m = MemoryGraph(g)
    v = vocabulary(m)
    assert v == {"go_to": {"node": ["kitchen-1"]}, "discover_objects": {"node": ["lamp-1", "bed-1"]},
                 "pick_up": {"node": ["book-1"]}, "rearrange": {"node": ["book-1"], "destination": ["bed-1"]},
                 "turn_on": {"node": ["lamp-1"]}, "done": {}}  # book-1 is a prior: nameable, then feedback
    env = GraphEnvironment(g)
    for a in (make("go_to", "kitchen-1"), make("discover_objects", "table-1")):
        res = env.step(a)
        m.apply(a)
    m.discover(res.observation)
    v = vocabulary(m)
    assert v["go_to"] == {"node": ["bedroom-1"]}
    assert v["discover_objects"] == {"node": ["fridge-1"]}  # table-1 is inspected; priors are not offered
    assert set(v["pick_up"]["node"]) == {"apple-2", "tray-1", "cup-1", "box-1", "apple-1"}
    assert "fridge-1" in v["rearrange"]["destination"] and "box-1" not in v["rearrange"]["destination"]
    assert v["open"] == {"node": ["fridge-1"]} and "put_on" not in v


def test_typed_vocabulary_reaches_the_backend_and_flat_is_a_list(decisions):
    task = kitchen_task()
    _, lm = episode(task, [J("done")], vocabulary="typed")
    assert isinstance(decisions[0].names, dict) and decisions[0].names["go_to"] == {"node": ["kitchen-1"]}
    decisions.clear()
    _, lm = episode(task, [J("done")])  # flat is the default
    assert isinstance(decisions[0].names, list) and "kitchen-1" in decisions[0].names


def test_oscillation_is_feedback_unless_cycles_are_allowed(decisions):
    task = kitchen_task()
    toggles = [J("turn_on", "lamp-1"), J("turn_off", "lamp-1")] * 3 + [J("done")]
    result, lm = episode(task, toggles)
    # on, off (one return to the start: allowed, like brewing coffee), on, then off again is refused
    assert result.actions == ["turn_on(lamp-1)", "turn_off(lamp-1)", "turn_on(lamp-1)"]
    assert result.termination == "unresolved" and "going in circles" in decisions[4].dynamic
    assert result.actions.count("turn_off(lamp-1)") == 1
    result, _ = episode(task, toggles, refuse_cycles=False)
    assert result.actions.count("turn_off(lamp-1)") == 3
    # walking back and forth: the second return is refused; after looking around it is a new state
    walk = [J("go_to", "kitchen-1"), J("go_to", "bedroom-1"), J("go_to", "kitchen-1"), J("go_to", "bedroom-1"),
            J("discover_objects", "table-1"), J("go_to", "bedroom-1"), J("done")]
    result, lm = episode(task, walk)
    assert result.actions == ["go_to(kitchen-1)", "go_to(bedroom-1)", "go_to(kitchen-1)", "discover_objects(table-1)",
                              "go_to(bedroom-1)", "done()"]
