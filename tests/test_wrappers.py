"""Environment wrappers (sim_adapters.wrappers) around the graph environment."""
import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make
from sgs.io import graph_to_dict
from sim_adapters.base import EditableEnvironment, Environment, Observation, StepResult
from sim_adapters.dynamic import perturb
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.wrappers import DynamicPerturbation, StepLimit, StepRecorder, Wrapper

from conftest import kitchen_dict


def kitchen_task() -> Task:
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")])
    return Task(id="k", split="examples", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": "scripted"})


def test_graph_environment_implements_the_protocols(kitchen):
    env = GraphEnvironment(kitchen)
    assert isinstance(env, Environment) and isinstance(env, EditableEnvironment)
    assert isinstance(StepLimit(env, 3), Environment)


@pytest.mark.parametrize("seed", [0, 3, 7])
def test_dynamic_perturbation_is_perturb_applied_to_the_initial_graph(seed):
    task = kitchen_task()
    graph, notes = perturb(task.graph, task.goal, seed, mode="anywhere")
    inner = GraphEnvironment(task.graph)
    env = DynamicPerturbation(inner, task.goal, seed, mode="anywhere")
    assert env.moves == [] and inner.true_graph() == task.graph  # the constructor does nothing
    env.reset()
    assert env.moves == notes and graph_to_dict(env.true_graph()) == graph_to_dict(graph)
    env.step(make("go_to", "kitchen-1"))
    env.reset()  # every episode starts from the perturbed graph
    assert graph_to_dict(env.true_graph()) == graph_to_dict(graph)


def test_reset_with_a_seed_draws_the_moves_anew_from_the_unmoved_graph():
    task = kitchen_task()
    env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 3, mode="anywhere")
    env.reset(seed=0)
    graph, notes = perturb(task.graph, task.goal, 0, mode="anywhere")
    assert env.seed == 0 and env.moves == notes and env.true_graph() == graph
    env.reset()  # keeps seed 0
    assert env.moves == notes and env.true_graph() == graph
    env.reset(seed=3, options={})
    graph, notes = perturb(task.graph, task.goal, 3, mode="anywhere")
    assert env.moves == notes == ["apple-1: inside box-1 -> inside cup-1"] and env.true_graph() == graph


def test_wrappers_pass_on_only_what_they_name_and_reach_the_rest_explicitly(kitchen, tmp_path):
    task = kitchen_task()
    inner = GraphEnvironment(task.graph)
    recorder = StepRecorder(DynamicPerturbation(inner, task.goal, 3, mode="anywhere"), tmp_path)
    env = StepLimit(recorder, 10)
    env.reset()
    assert env.moves == ["apple-1: inside box-1 -> inside cup-1"]  # a forwarded member
    assert env.unwrapped is inner
    assert env.note_seen == inner.note_seen and env.set_initial == inner.set_initial
    assert not hasattr(env, "typed_descriptions") and getattr(env, "typed_descriptions", False) is False
    assert not hasattr(env, "binding") and not hasattr(env, "records")  # no implicit lookup ...
    assert env.get_wrapper_attr("binding") is inner.binding  # ... but an explicit one
    assert env.get_wrapper_attr("records") is recorder.records and env.get_wrapper_attr("max_steps") == 10
    assert env.has_wrapper_attr("initial") and not env.has_wrapper_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no_such_attribute"):
        env.get_wrapper_attr("no_such_attribute")
    with pytest.raises(AttributeError):
        env.no_such_attribute
    assert not hasattr(StepLimit(GraphEnvironment(kitchen), 1), "moves")  # only where one is inside


def test_dynamic_mode_needs_an_environment_that_can_start_elsewhere(kitchen):
    class Fixed:
        def reset(self, *, seed=None, options=None): pass
        def step(self, action): return StepResult(True)
        def true_graph(self): return kitchen

    with pytest.raises(TypeError, match="Fixed cannot start from an edited graph"):
        DynamicPerturbation(Fixed(), kitchen_task().goal, 0, mode="anywhere")


def test_step_limit_truncates_and_then_refuses_without_calling_the_environment(kitchen):
    env = StepLimit(GraphEnvironment(kitchen), 2)
    env.reset()
    first = env.step(make("go_to", "kitchen-1"))
    assert first.ok and not first.truncated
    last = env.step(make("discover_objects", "table-1"))
    assert last.ok and last.truncated and last.observation is not None  # ran, and reached the limit
    refused = env.step(make("go_to", "bedroom-1"))
    assert not refused.ok and refused.truncated and "step limit of 2" in refused.feedback
    assert refused.info == {"truncated": True}  # the older spelling stays
    assert env.true_graph().agent.location == "kitchen-1"
    env.reset()
    assert env.step(make("go_to", "kitchen-1")).ok
    assert StepLimit(GraphEnvironment(kitchen), 0).step(make("go_to", "kitchen-1")).truncated


def test_step_recorder_writes_each_step_and_copies_images(kitchen, tmp_path):
    picture = tmp_path / "camera.png"
    picture.write_bytes(b"\x89PNG fake image bytes")

    class Camera(Wrapper):  # an environment that renders: its observations carry an image
        def step(self, action):
            result = self.env.step(action)
            if result.observation is None:
                return result
            return StepResult(True, None, Observation(result.observation.node, result.observation.objects, str(picture)))

    run = tmp_path / "run"
    env = StepRecorder(Camera(GraphEnvironment(kitchen)), run)
    env.reset()
    env.step(make("go_to", "kitchen-1"))
    seen = env.step(make("discover_objects", "table-1"))
    env.step(make("pick_up", "apple-9"))
    rows = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines()]
    assert [r["action"] for r in rows] == ["go_to(kitchen-1)", "discover_objects(table-1)", "pick_up(apple-9)"]
    assert [r["ok"] for r in rows] == [True, True, False] and "apple-9" in rows[2]["feedback"]
    assert rows[1]["observed"] == ["apple-2 ontop table-1", "tray-1 ontop table-1", "cup-1 ontop tray-1"]
    copy = run / "images" / "002_table-1.png"
    assert rows[1]["image"] == str(copy) and seen.observation.image == str(copy)
    assert copy.read_bytes() == picture.read_bytes()
    assert env.records == rows
    env.reset()
    assert (run / "steps.jsonl").read_text() == "" and env.records == []


def test_the_planner_runs_unchanged_on_a_wrapped_environment(tmp_path):
    task = kitchen_task()
    env = StepRecorder(DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 3, mode="anywhere"), tmp_path)
    lm = ScriptedBackend([J("go_to", "kitchen-1"), J("discover_objects", "fridge-1"), J("discover_objects", "table-1"),
                          J("rearrange", "apple-1", "ontop", "bed-1"), J("done")])  # SCRIPTED, not an LM
    result = run_episode(task, env, lm, PlannerConfig())
    assert result.success and result.moves == ["apple-1: inside box-1 -> inside cup-1"]
    assert len(env.records) == len(result.executed)
