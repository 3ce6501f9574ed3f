"""ReAct (lookplangraph/planners/react.py): the ALFWorld-style text environment over the
environment protocol, the transcript, graph augmentation on what the agent looks at, and every way
an episode ends.

The LM is ScriptedBackend everywhere: SCRIPTED replies written for these tests, not a language
model."""

from __future__ import annotations

import json

import pytest

from grasif.task import save_task
from lookplangraph.lm import ContextOverflow, ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.agent.perception import Perception
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners import get_planner
from lookplangraph.planners.react import NOTHING, TextWorld
from sgs.graph import Relation
from sim_adapters.graph_env import GraphEnvironment
from vlm.descriptions import describe_truth
from vlm.gam import GraphAugmentation

from test_baselines import apple_task, run

SOLVE = ["think: The apple is in the fridge, in the kitchen.", "go to kitchen-1", "go to fridge-1", "open fridge-1",
         "open box-1", "take apple-1 from box-1", "close box-1", "close fridge-1", "go to bedroom-1",
         "put apple-1 on bed-1", "done"]


def world(task=None, env=None, augmentation=None):
    task = task or apple_task()
    env = env or GraphEnvironment(task.graph)
    return TextWorld(task.graph, env, Perception(augmentation))


def test_react_solves_a_task_with_the_whole_transcript():
    result, steps, lm = run("react", SOLVE)
    assert result.success and result.termination == "done" and result.failure is None and result.planner == "react"
    assert result.actions == ["go to kitchen-1", "go to fridge-1", "open fridge-1", "open box-1", "take apple-1 from box-1",
                              "close box-1", "close fridge-1", "go to bedroom-1", "put apple-1 on bed-1", "done"]
    assert result.executed == ["go_to(kitchen-1)", "discover_objects(fridge-1)", "open(fridge-1)", "open(box-1)",
                               "pick_up(apple-1)", "close(box-1)", "close(fridge-1)", "go_to(bedroom-1)", "put_on(bed-1)"]
    assert result.lm_calls == 11 and result.prompt_tokens == sum(s.prompt_tokens for s in steps) > 0
    assert [s.feedback for s in steps[:5]] == [
        "OK.", "You arrive at kitchen-1. Looking quickly around you, you see fridge-1, table-1.",
        "The fridge-1 is closed.", "You open the fridge-1. The fridge-1 is open. In it, you see box-1.",
        "You open the box-1. The box-1 is open. In it, you see apple-1."]
    assert steps[0].reason == "The apple is in the fridge, in the kitchen." and steps[0].executed == []
    # every call sees the whole transcript so far, one command per line
    first, last = lm.requests[0], lm.requests[-1]
    assert first["stop"] == ["\n"]
    # the worked example is a chat of its own: commands are assistant turns, answers user turns
    example = first["messages"][:-1]
    assert [m["role"] for m in example] == ["user"] + ["assistant", "user"] * ((len(example) - 1) // 2) + ["assistant"]
    assert example[1] == {"role": "assistant", "content": "think: The box may be on the shelf here; the fridge will be in the kitchen."}
    assert example[2] == {"role": "user", "content": "OK."} and example[-1] == {"role": "assistant", "content": "done"}
    task = first["messages"][-1]["content"]
    assert task.startswith("Now your task.") and "places: kitchen-1, bedroom-1." in task
    assert "You are in the middle of bedroom-1" in task and "apple-1" not in task
    assert "Your task is: Put the apple from the fridge on the bed." in task
    n = len(first["messages"])
    assert len(last["messages"]) == n + 20 and last["messages"][n] == {"role": "assistant", "content": SOLVE[0]}
    assert last["messages"][n + 1] == {"role": "user", "content": "OK."}


@pytest.mark.parametrize("commands, answer", [
    (["take apple-1 from box-1"], NOTHING),  # never seen
    (["go to kitchen-1", "take apple-2 from fridge-1"], NOTHING),  # not seen yet either
    (["go to kitchen-1", "go to table-1", "take apple-2 from fridge-1"], NOTHING),  # wrong holder
    (["go to kitchen-1", "go to table-1", "take cup-1"], "You pick up the cup-1 from the tray-1."),
    (["go to kitchen-1", "go to table-1", "pick up apple 2"], "You pick up the apple-2 from the table-1."),
    (["go to kitchen-1", "go to box-1"], NOTHING),  # unknown until the fridge is looked at
    (["go to kitchen-1", "go to fridge-1", "go to box-1"], NOTHING),  # inside the closed fridge
    (["go to kitchen-1", "go to fridge-1", "take box-1 from fridge-1"], NOTHING),  # closed
    (["put apple-1 on bed-1"], NOTHING),  # nothing held
    (["go to table-1"], "On the table-1, you see apple-2, tray-1."),  # walks to its room first
    (["go to kitchen-1", "go to table-1", "go to tray-1"], "On the tray-1, you see cup-1."),
    (["turn on lamp-1"], "You turn on the lamp-1."),
    (["turn on lamp-1", "turn on lamp-1"], NOTHING),  # already on
    (["go to kitchen-1", "turn on lamp-1"], NOTHING),  # in another room
    (["go to bedroom-1"], "You are in the middle of bedroom-1. Looking quickly around you, you see lamp-1, bed-1."),
    (["open bed-1"], NOTHING),
    (["fly to the moon"], NOTHING),
    ([""], NOTHING),
    (["inventory"], "You are not carrying anything."),
    (["go to bed-1"], "On the bed-1, you see book-1."),
    (["go to bed-1", "take book-1 from bed-1", "inventory"], "You are carrying: book-1."),
    (["go to kitchen-1", "go to table-1", "take apple-2 from table-1", "go to fridge-1", "put apple-2 in/on fridge-1"],
     NOTHING),  # in/on chooses inside for the fridge, which is closed
    (["go to kitchen-1", "go to table-1", "take apple-2 from table-1", "put apple-2 in/on tray-1"],
     "You put the apple-2 on the tray-1."),
    (["go to kitchen-1", "go to fridge-1", "open fridge-1", "go to table-1", "take apple-2 from table-1",
      "put inside fridge-1"], "You put the apple-2 in the fridge-1."),
])
def test_text_environment_answers(commands, answer):
    w = world()
    for command in commands:
        said, kind, _ = w.step(command)
    assert said == answer
    assert (kind == "nothing") == (answer == NOTHING)
    if kind == "nothing":
        assert w.executed == []


def test_an_observation_comes_from_the_environment_not_the_map():
    task = apple_task()
    env = GraphEnvironment(task.graph)
    env.set_initial(task.graph.evolve(parent={**task.graph.parent, "apple-1": ("book-1", Relation.ONTOP)}).check())
    w = world(task, env)
    for command in ["go to fridge-1", "open fridge-1"]:
        w.step(command)
    assert w.step("open box-1")[0] == "You open the box-1. The box-1 is open. In it, you see nothing."
    w.step("go to bed-1")
    assert w.step("go to book-1")[0] == "On the book-1, you see apple-1."
    assert w.step("take apple-1 from book-1")[0] == "You pick up the apple-1 from the book-1."


def test_the_agent_knows_what_it_holds_at_the_start():
    task = apple_task()
    g = task.graph
    holding = g.evolve(parent={**g.parent, "book-1": (g.agent.name, Relation.HELD)},
                       agent=type(g.agent)(g.agent.name, g.agent.location, "book-1")).check()
    w = TextWorld(holding, GraphEnvironment(holding), Perception(None))
    assert "You are carrying book-1." in w.intro("x")
    assert w.step("put book-1 on bed-1")[0] == "You put the book-1 on the bed-1."


@pytest.mark.parametrize("replies, cfg, termination, calls", [
    (["think: hmm"], {"react_max_steps": 4}, "step_limit", 4),
    (["go to kitchen-1", "go to bedroom-1", "go to kitchen-1"], {"max_actions": 3}, "max_actions", 3),
    (["fly"], {"react_max_steps": 2}, "step_limit", 2),
])
def test_react_limits(replies, cfg, termination, calls):
    result, steps, _ = run("react", replies, **cfg)
    assert result.termination == termination == result.failure and result.lm_calls == calls and not result.success


def test_react_done_too_early_fails_without_a_failure_kind_and_context_overflow_ends_it():
    result, steps, _ = run("react", ["go to kitchen-1", "done"])
    assert result.termination == "done" and result.failure is None and not result.success
    assert result.actions == ["go to kitchen-1", "done"] and result.goal_not_met

    class Overflowing(ScriptedBackend):  # SCRIPTED: the transcript outgrows the context at call 3
        def complete(self, messages, **kw):
            if self.calls == 2:
                raise ContextOverflow("llamacpp:tiny: Requested tokens (4200) exceed context window of 4096")
            return super().complete(messages, **kw)

    task = apple_task()
    steps = []
    result = get_planner("react").run(task, GraphEnvironment(task.graph), Overflowing(SOLVE), PlannerConfig(),
                                      on_step=steps.append)
    assert result.termination == result.failure == "context_overflow" and result.lm_calls == 3
    assert "prompt refused" in steps[-1].feedback and "exceed context window" in steps[-1].feedback
    assert result.executed == ["go_to(kitchen-1)"]


def test_react_looks_through_the_graph_augmentation():
    # SCRIPTED parser replies: what the parser made of the environment's descriptions
    parser = ScriptedBackend([json.dumps({"objects": [{"name": "box", "relation": "inside", "related_to": "fridge-1",
                                                       "states": ["closed"]},
                                                      {"name": "apple", "relation": "inside", "related_to": "box",
                                                       "states": []}]})])
    task = apple_task()
    steps = []
    lm = ScriptedBackend(SOLVE)
    env = GraphEnvironment(task.graph, describer=describe_truth)  # the descriptions the parser reads
    result = get_planner("react").run(task, env, lm, PlannerConfig(), on_step=steps.append,
                                      augmentation=GraphAugmentation("parser", parser=parser))
    assert result.augmentation == "parser" and result.augmentation_calls == 1
    assert steps[2].perceived and steps[2].perceived[0]["node"] == "fridge-1"
    assert result.success, [s.feedback for s in steps]
    assert "Prior" not in json.dumps(parser.requests[0]["messages"])  # no priors: ReAct keeps no memory


def test_cli_runs_react(tmp_path, capsys):
    task_file = tmp_path / "apple.json"
    save_task(apple_task(), task_file)
    out = tmp_path / "run"
    code = main(["run", "--planner", "react", "--task-file", str(task_file), "--lm", "scripted:" + "||".join(SOLVE),
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "SUCCESS" in printed and "take apple-1 from box-1" in printed
    result = json.loads((out / "result.json").read_text())
    assert result["planner"] == "react" and result["config"]["react"]["max_steps"] == 50
