"""Graph augmentation inside the planner loop (lookplangraph/agent/perception.py), name binding in the
graph environment (sim_adapters/binding.py) and the run/eval flags for it.

Every LM here is ScriptedBackend: SCRIPTED replies written for these tests, not a language model
(a real model parses descriptions in tests/test_vlm.py's measured counterpart, README "Graph
augmentation")."""

from __future__ import annotations

import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task, save_task
from lookplangraph.lm import ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sim_adapters.binding import BindingError, NameBinding
from sim_adapters.graph_env import GraphEnvironment
from vlm.descriptions import describe_truth
from vlm.gam import GraphAugmentation

from conftest import kitchen_dict


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": "scripted"})


def parsed(*rows):
    """A SCRIPTED parser reply: (name, relation, related_to[, states]) rows."""
    return json.dumps({"objects": [{"name": r[0], "relation": r[1], "related_to": r[2],
                                    "states": list(r[3]) if len(r) > 3 else []} for r in rows]})


def cup_task():
    goal = GoalSpec(node_goals=[NodeGoal(node="cup-1", relation="ontop", destination="bed-1")])
    return Task(id="cup", split="test", instruction="Put the cup from the kitchen table on the bed.",
                initial_graph=kitchen_dict(), goal=goal)


def test_parser_augmentation_runs_an_episode_with_made_up_names_bound_to_true_nodes():
    task = cup_task()
    planner = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("pick_up", "mug-1"),
                               J("pick_up", "cup-1"), J("go_to", "bedroom-1"), J("put_on", "bed-1"), J("done")])
    # with no priors every name is new to memory: "cup 2" becomes cup-1, the first cup it knows
    parser = ScriptedBackend([parsed(("tray", "ontop", "table-1"), ("cup 2", "ontop", "tray"),
                                     ("apple", "ontop", "table-1"), ("mug", "ontop", "tray"))])
    env = GraphEnvironment(task.graph, describer=describe_truth)
    steps = []
    result = run_episode(task, env, planner, PlannerConfig(priors=False), on_step=steps.append,
                         augmentation=GraphAugmentation("parser", parser=parser))
    # the parser saw the environment's text description of the table, with no names in it
    user = parser.requests[0]["messages"][1]["content"]
    assert "table-1" in user and "tray" in user and "cup" in user and "cup-1" not in user.split("Description")[-1]
    discover = steps[1]
    assert discover.observed == ["tray-1 ontop table-1", "apple-1 ontop table-1", "cup-1 ontop tray-1",
                                 "mug-1 ontop tray-1"]
    # a mug is not there: the environment cannot bind it and says so
    assert not steps[2].accepted and "no unbound mug on or inside tray-1" in steps[2].feedback
    assert steps[3].accepted and env.binding.bound["cup-1"] == "cup-1"
    assert result.success and result.termination == "done"
    # with no priors the parser's apple-1 is the apple it saw on the table, not the true apple-1 in the fridge
    assert env.binding.bind("apple-1", env.true_graph()) == "apple-2"
    # augmentation cost is reported apart from the planner's tokens
    [entry] = discover.perceived
    assert entry["mode"] == "parser" and entry["prompt_tokens"] > 0 and entry["node"] == "table-1"
    assert result.augmentation == "parser" and result.augmentation_calls == 1
    assert result.augmentation_prompt_tokens == entry["prompt_tokens"]
    assert result.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert result.prompt_tokens + result.completion_tokens < sum(s.prompt_tokens + s.completion_tokens for s in steps) \
        + result.augmentation_prompt_tokens + result.augmentation_completion_tokens


def test_priors_are_confirmed_by_class_and_unseen_ones_removed():
    task = cup_task()
    planner = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("done")])
    parser = ScriptedBackend([parsed(("tray", "ontop", "table-1"), ("cup", "ontop", "tray"), ("banana", "ontop", "tray"))])
    steps = []
    env = GraphEnvironment(task.graph, describer=describe_truth)
    run_episode(task, env, planner, PlannerConfig(), on_step=steps.append,
                augmentation=GraphAugmentation("parser", parser=parser))
    assert steps[1].observed == ["tray-1 ontop table-1", "cup-1 ontop tray-1", "banana-1 ontop tray-1",
                                 "not found: apple-2"]
    # the parser was told the priors remembered under the table and the room's names
    user = parser.requests[0]["messages"][1]["content"]
    assert "apple-2" in user and "cup-1" in user and "box-1" in user


def test_a_parser_reply_that_is_not_json_empties_the_node_with_a_note_not_a_crash():
    task = cup_task()
    planner = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("done")])
    parser = ScriptedBackend(["I see a tray and a cup."])  # SCRIPTED unreadable reply
    steps = []
    env = GraphEnvironment(task.graph, describer=describe_truth)
    result = run_episode(task, env, planner, PlannerConfig(), on_step=steps.append,
                         augmentation=GraphAugmentation("parser", parser=parser))
    assert steps[1].accepted and any("does not fit the schema" in n for n in steps[1].perceived[0]["notes"])
    assert result.termination == "done" and not result.success


def test_vlm_augmentation_without_an_image_is_feedback():
    task = cup_task()
    planner = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("done")])
    gam = GraphAugmentation("vlm", describer=ScriptedBackend(["unused"]), parser=ScriptedBackend([parsed()]))
    steps = []
    run_episode(task, GraphEnvironment(task.graph), planner, PlannerConfig(), on_step=steps.append, augmentation=gam)
    assert "brought no image; vlm augmentation needs one" in steps[1].feedback


def test_ground_truth_augmentation_is_unchanged_and_costs_nothing():
    task = cup_task()
    planner = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("done")])
    steps = []
    result = run_episode(task, GraphEnvironment(task.graph), planner, PlannerConfig(), on_step=steps.append)
    assert steps[1].observed == ["apple-2 ontop table-1", "tray-1 ontop table-1", "cup-1 ontop tray-1"]
    assert steps[1].perceived == [] and result.augmentation == "ground_truth" and result.augmentation_calls == 0


def test_name_binding_rules(kitchen):
    b = NameBinding(kitchen.nodes)
    assert b.bind("cup-1", kitchen) == "cup-1"
    b.note("glass-4", "tray-1")
    with pytest.raises(BindingError, match="no unbound glass on or inside tray-1"):
        b.bind("glass-4", kitchen)
    with pytest.raises(BindingError, match="not a node of the scene and was not seen anywhere"):
        b.bind("spoon-1", kitchen)
    b.note("apple-9", "table-1")
    b.note("apple-8", "table-1")
    assert b.bind("apple-9", kitchen) == "apple-2"
    with pytest.raises(BindingError, match="no unbound apple"):
        b.bind("apple-8", kitchen)  # the only apple there is taken
    b.clear()
    with pytest.raises(BindingError, match="apple-9 is not a node of the scene and was not seen anywhere"):
        b.bind("apple-9", kitchen)


def test_graph_environment_describes_nodes_without_names():
    env = GraphEnvironment(cup_task().graph, describer=describe_truth)
    text = env.describe("table-1")
    assert "tray" in text and "cup" in text and "apple" in text and "-1" not in text
    assert env.describe("table-1") == text  # deterministic
    assert "closed" in env.describe("fridge-1")  # the node's own state and the closed box
    with pytest.raises(ValueError, match="given no describer"):  # the text comes from the describer passed in
        GraphEnvironment(cup_task().graph).describe("table-1")


# -- flags ------------------------------------------------------------------------------------
def test_cli_refuses_vlm_augmentation_without_images_or_describer(capsys):
    assert main(["run", "--split", "office", "--task", "office-01", "--augmentation", "vlm"]) == 2
    assert "needs a describer: --vlm SPEC" in capsys.readouterr().err
    assert main(["run", "--split", "office", "--task", "office-01", "--augmentation", "vlm",
                 "--vlm", "openai:x@http://127.0.0.1:9/v1"]) == 2
    assert "--augmentation vlm needs images; --env graph renders none" in capsys.readouterr().err
    assert main(["run", "--split", "office", "--task", "office-01", "--env", "omnigibson-bank"]) == 2
    assert "needs the image bank: omnigibson-bank@BANK_DIR" in capsys.readouterr().err
    assert main(["run", "--split", "office", "--task", "office-01", "--env", "omnigibson-bank@/nonexistent"]) == 2
    assert "runs only the behavior split" in capsys.readouterr().err


def test_cli_runs_a_parser_augmented_episode_with_scripted_lms(tmp_path, capsys):
    task_file = tmp_path / "cup.json"
    save_task(cup_task(), task_file)
    out = tmp_path / "run"
    planner = "||".join([J("go_to", "kitchen-1"), J("discover_objects", "table-1"), J("pick_up", "cup-1"),
                         J("go_to", "bedroom-1"), J("put_on", "bed-1"), J("done")])
    parser = parsed(("tray", "ontop", "table-1"), ("cup", "ontop", "tray"), ("apple", "ontop", "table-1"))
    code = main(["run", "--task-file", str(task_file), "--augmentation", "parser", "--lm", "scripted:" + planner,
                 "--parser-lm", "scripted:" + parser, "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "augmentation parser" in printed and "parser augmentation of table-1" in printed
    result = json.loads((out / "result.json").read_text())
    assert result["augmentation"] == "parser" and result["augmentation_calls"] == 1 and result["success"]
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert trace[1]["perceived"][0]["objects"] == ["tray-1 ontop table-1", "apple-2 ontop table-1", "cup-1 ontop tray-1"]
