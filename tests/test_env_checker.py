"""The conformance checker (sim_adapters/env_checker.py) on every environment and wrapper, and on
deliberately broken environments: each rule catches its violation.

TEST DOUBLES here: ``ScriptedOperator`` stands in for a person (it answers from the scene graph,
it is no human); the Unity simulator is the local protocol double of tests/unity_double.py; the
image bank is SYNTHETIC (tests/synthetic_bank.py). The broken environments are written to break
one rule each; none is a real adapter."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grasif.goals import GoalSpec, NodeGoal
from lookplangraph.agent.memory import MemoryGraph
from sgs.actions import make
from sgs.graph import Agent
from sgs.io import graph_from_dict, graph_to_dict
from sim_adapters.base import StepResult
from sim_adapters.env_checker import RULES, EnvCheckError, check_env
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.human import HumanEnvironment, done, failed, seen
from sim_adapters.wrappers import DynamicPerturbation, StepLimit, StepRecorder, Wrapper
from vlm.descriptions import describe_truth

from conftest import kitchen_dict

ROOT = Path(__file__).resolve().parent.parent
APPLE_ON_BED = GoalSpec(node_goals=[NodeGoal(node="apple-1", relation="ontop", destination="bed-1")])


@pytest.fixture
def kitchen():
    return graph_from_dict(kitchen_dict())


# ---------------------------------------------------------------------------------------------
# every environment and wrapper passes
# ---------------------------------------------------------------------------------------------
def test_the_graph_environment_passes(kitchen):
    check_env(GraphEnvironment(kitchen))
    check_env(GraphEnvironment(kitchen, describer=describe_truth))


@pytest.mark.parametrize("wrap", [
    lambda env, run: DynamicPerturbation(env, APPLE_ON_BED, 3, mode="anywhere"),
    lambda env, run: StepRecorder(env, run),
    lambda env, run: StepLimit(env, 10),
    lambda env, run: StepLimit(env, 1),  # the discover step reaches the limit, the next is truncated
    lambda env, run: StepLimit(env, 0),  # every step is truncated
    lambda env, run: StepRecorder(StepLimit(DynamicPerturbation(env, APPLE_ON_BED, 0, mode="anywhere"), 5), run),
    lambda env, run: Wrapper(env),
], ids=["dynamic", "recorder", "limit-10", "limit-1", "limit-0", "nested", "plain-wrapper"])
def test_every_wrapper_passes(kitchen, tmp_path, wrap):
    check_env(wrap(GraphEnvironment(kitchen, describer=describe_truth), tmp_path / "run"))


def test_dynamic_mode_passes_with_seeds_that_move_things_differently(kitchen):
    for seed in range(4):
        check_env(DynamicPerturbation(GraphEnvironment(kitchen), APPLE_ON_BED, 3, mode="anywhere"), seed=seed)


class ScriptedOperator:
    """TEST DOUBLE of the human operator (no person): does every step that names nodes of
    ``graph`` and refuses the others; looks at a node by typing a fixed description."""

    def __init__(self, graph):
        self.graph = graph

    def perform(self, request):
        unknown = [n for n in (request.step.node, request.step.destination) if n and n not in self.graph.nodes]
        return failed(f"there is no {unknown[0]} here") if unknown else done()

    def observe(self, request):
        if request.step.node not in self.graph.nodes:
            return failed(f"there is no {request.step.node} here")
        return seen(description=f"a scripted description of {request.step.node}")


def test_the_human_environment_passes_with_a_scripted_operator(kitchen):
    env = HumanEnvironment(kitchen, ScriptedOperator(kitchen), belief=MemoryGraph)
    check_env(env)
    check_env(HumanEnvironment(kitchen, ScriptedOperator(kitchen), belief=lambda g: MemoryGraph(g, priors=False)))


needs_vh = pytest.mark.skipif(importlib.util.find_spec("virtualhome_eval") is None,
                              reason="virtualhome-eval is not installed (pip install --no-deps virtualhome-eval==0.1.1)")


@pytest.fixture(scope="module")
def groceries():
    """file1004_2 of the VirtualHome split, built from the installed package."""
    if importlib.util.find_spec("virtualhome_eval") is None:
        pytest.skip("virtualhome-eval is not installed")
    from grasif import virtualhome as vh

    path, graph = next((p, g) for p, g in vh.program_paths() if p.stem == "file1004_2")
    return vh.make_task(vh.load_source_task(path, graph))


@needs_vh
def test_the_virtualhome_environment_passes(groceries):
    from sim_adapters.virtualhome import EvolvingGraphBackend, VirtualHomeEnvironment

    env = VirtualHomeEnvironment(groceries, EvolvingGraphBackend())
    check_env(env)
    check_env(DynamicPerturbation(VirtualHomeEnvironment(groceries, EvolvingGraphBackend()), groceries.goal, 3, mode="anywhere"))


@needs_vh
def test_the_unity_client_passes_against_the_protocol_double(groceries, tmp_path):
    from grasif import virtualhome as vh
    from sim_adapters.unity import UnityBackend
    from sim_adapters.virtualhome import VirtualHomeEnvironment
    from unity_double import FakeUnity  # TEST DOUBLE of the protocol, not the simulator

    init, _ = vh.task_source_graph(groceries)
    with FakeUnity(next(n for n in init["nodes"] if n["category"] == "Characters")) as fake:
        env = VirtualHomeEnvironment(groceries, UnityBackend(fake.url), image_dir=tmp_path / "images")
        check_env(env)
        assert list((tmp_path / "images").iterdir())  # the observations had images, and the checker saw them
        check_env(StepRecorder(VirtualHomeEnvironment(groceries, UnityBackend(fake.url)), tmp_path / "run"))
        assert fake.violations == []


@pytest.fixture(scope="module")
def bank_task(tmp_path_factory):
    if importlib.util.find_spec("bddl") is None:
        pytest.skip("bddl is not installed (the BEHAVIOR split is built from it)")
    from grasif import behavior as bh
    from tests.synthetic_bank import build_bank

    task = next(t for t in bh.build_tasks() if t.id == "dispose_of_a_pizza_box")
    return task, build_bank(tmp_path_factory.mktemp("bank"), [task])  # SYNTHETIC pictures


def test_the_image_bank_environment_passes(bank_task):
    from sim_adapters.omnigibson import ImageBankEnvironment

    task, bank = bank_task
    check_env(ImageBankEnvironment(task, bank))
    check_env(ImageBankEnvironment(task, bank, describer=describe_truth), discover="electric_refrigerator-1")
    check_env(DynamicPerturbation(ImageBankEnvironment(task, bank), task.goal, 1, mode="anywhere"))


# ---------------------------------------------------------------------------------------------
# each rule catches its violation
# ---------------------------------------------------------------------------------------------
def broken(kitchen, **overrides):
    """A graph environment with methods replaced (each test breaks one rule)."""
    cls = type("Broken", (GraphEnvironment,), overrides)
    return cls(kitchen)


def caught(env, rule, **kwargs) -> str:
    with pytest.raises(EnvCheckError) as info:
        check_env(env, **kwargs)
    assert info.value.rule == rule, str(info.value)
    assert str(info.value).startswith(f"[{rule}]") and RULES[rule] in str(info.value)
    return str(info.value)


def test_a_missing_method_breaks_the_protocol(kitchen):
    class NoTruth:
        def reset(self, *, seed=None, options=None): pass
        def step(self, action): return StepResult(True)

    assert "no method true_graph" in caught(NoTruth(), "protocol")


def test_reset_without_seed_and_options_is_caught(kitchen):
    def reset(self):
        GraphEnvironment.reset(self)

    assert "no keyword argument seed" in caught(broken(kitchen, reset=reset), "reset-signature")

    def reset_with_a_default_seed(self, *, seed=0, options=None):
        GraphEnvironment.reset(self)

    assert "defaults to 0" in caught(broken(kitchen, reset=reset_with_a_default_seed), "reset-signature")


def test_reset_that_returns_something_is_caught(kitchen):
    def reset(self, *, seed=None, options=None):
        GraphEnvironment.reset(self)
        return self.true_graph()

    caught(broken(kitchen, reset=reset), "reset-returns-none")


def test_reset_that_refuses_options_is_caught(kitchen):
    def reset(self, *, seed=None, options=None):
        if options is not None:
            raise ValueError("no options")
        GraphEnvironment.reset(self)

    assert "options={}" in caught(broken(kitchen, reset=reset), "reset-options")


def test_reset_that_does_not_return_to_the_initial_state_is_caught(kitchen):
    def reset(self, *, seed=None, options=None):
        if seed is not None:  # only a seeded reset starts over
            GraphEnvironment.reset(self)

    caught(broken(kitchen, reset=reset), "reset-initial-state")


def test_a_seed_that_does_not_decide_the_initial_state_is_caught(kitchen):
    def reset(self, *, seed=None, options=None):
        if seed is not None:  # the start depends on the seed before this one too
            rooms = self.rooms
            self.initial = self.base.evolve(agent=Agent("agent-1", rooms[(seed + getattr(self, "last", 0)) % 2]))
            self.last = seed
        GraphEnvironment.reset(self)

    env = broken(kitchen, reset=reset)
    env.base, env.rooms = kitchen, kitchen.places
    assert "second time" in caught(env, "reset-determinism")


def test_a_step_that_is_not_the_same_after_the_same_seed_is_caught(kitchen):
    def step(self, action):
        result = GraphEnvironment.step(self, action)
        if result.observation is not None:
            self.looks = getattr(self, "looks", 0) + 1
            if self.looks > 1:  # from the second look on, an object is missed
                return replace(result, observation=replace(result.observation, objects=result.observation.objects[1:]))
        return result

    caught(broken(kitchen, step=step), "reset-determinism")


def test_a_true_graph_that_is_no_scene_graph_is_caught(kitchen):
    caught(broken(kitchen, true_graph=lambda self: graph_to_dict(self._graph)), "true-graph-type")


def test_a_true_graph_the_caller_can_corrupt_is_caught(kitchen):
    message = caught(broken(kitchen, true_graph=lambda self: self._graph), "true-graph-copy")
    assert "changed the environment" in message


@pytest.mark.parametrize("result, says", [
    (lambda r: (r.ok, r.feedback), "not a StepResult"),
    (lambda r: replace(r, ok="yes"), "not a bool"),
    (lambda r: replace(r, feedback=None) if not r.ok else r, "without feedback"),
    (lambda r: replace(r, info=None), "info is NoneType"),
    (lambda r: replace(r, truncated=None), "truncated is None"),
    (lambda r: replace(r, observation={"node": "bed-1"}) if r.observation else r, "not an Observation"),
])
def test_step_results_of_the_wrong_shape_are_caught(kitchen, result, says):
    def step(self, action):
        return result(GraphEnvironment.step(self, action))

    assert says in caught(broken(kitchen, step=step), "step-result")


def test_a_refusal_that_changes_the_scene_is_caught(kitchen):
    def step(self, action):
        result = GraphEnvironment.step(self, action)
        if not result.ok:  # walked on the way, as a non-atomic simulator would
            self._graph = self._graph.evolve(agent=Agent("agent-1", "kitchen-1"))
        return result

    assert "the agent" in caught(broken(kitchen, step=step), "refusal")


def test_an_exception_instead_of_a_refusal_is_caught(kitchen):
    def step(self, action):
        if action.node not in self._graph.nodes:
            raise KeyError(action.node)
        return GraphEnvironment.step(self, action)

    assert "raised KeyError" in caught(broken(kitchen, step=step), "refusal")


def test_a_bad_action_that_is_done_is_caught(kitchen):
    assert "was not refused" in caught(GraphEnvironment(kitchen), "refusal", bad_action=make("go_to", "kitchen-1"))


@pytest.mark.parametrize("change, says", [
    (lambda obs: None, "without an observation"),
    (lambda obs: replace(obs, node="somewhere-1"), "observed 'somewhere-1'"),
    (lambda obs: replace(obs, objects=tuple(reversed(obs.objects))), "neither the node nor an object seen before"),
    (lambda obs: replace(obs, objects=list(obs.objects)), "not a tuple"),
    (lambda obs: replace(obs, image="/no/such/picture.png"), "not an existing file"),
])
def test_an_observation_that_breaks_the_format_is_caught(kitchen, change, says):
    def step(self, action):
        result = GraphEnvironment.step(self, action)
        if result.observation is not None:
            result = replace(result, observation=change(result.observation))
        return result

    env = broken(kitchen, step=step)
    env._graph = env.initial = kitchen.evolve(agent=Agent("agent-1", "kitchen-1"))  # table-1 holds a tray and a cup on it
    assert says in caught(env, "discover", discover="table-1")


def test_a_discover_that_is_refused_is_caught(kitchen):
    assert "fridge-1" in caught(GraphEnvironment(kitchen), "discover", discover="fridge-1")  # in another room


class OldStepLimit(Wrapper):
    """The step limit as it was: a refusal marked in ``info`` only."""

    def step(self, action):
        return StepResult(False, "the step limit is reached", info={"truncated": True})


class LeakyLimit(Wrapper):
    """Says truncated, and goes on executing."""

    def step(self, action):
        return replace(self.env.step(action), truncated=True)


def test_truncation_only_in_info_or_not_kept_is_caught(kitchen):
    assert "in info only" in caught(OldStepLimit(GraphEnvironment(kitchen)), "truncation")
    assert "after a truncated step" in caught(LeakyLimit(GraphEnvironment(kitchen)), "truncation")


def test_optional_members_of_the_wrong_kind_are_caught(kitchen):
    def describe(self, node):
        raise KeyError(node)

    assert "not ValueError" in caught(broken(kitchen, describe=describe), "optional-members")
    assert "not a bool" in caught(broken(kitchen, typed_descriptions="yes"), "optional-members")
    assert "not callable" in caught(broken(kitchen, note_seen=None), "optional-members")


def test_a_close_that_fails_is_caught(kitchen):
    def close(self):
        raise RuntimeError("the simulator is gone")

    assert "the simulator is gone" in caught(broken(kitchen, close=close), "close")
    check_env(broken(kitchen, close=lambda self: None))
    check_env(broken(kitchen, close=close), close=False)


class ForwardingWrapper(Wrapper):
    """The wrappers as they were: every unknown attribute looked up on the environment inside."""

    def __getattr__(self, name):
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class Bare:
    """A wrapper written without the base class: no unwrapped, no get_wrapper_attr."""

    def __init__(self, env):
        self.env = env

    def reset(self, *, seed=None, options=None):
        self.env.reset(seed=seed, options=options)

    def step(self, action):
        return self.env.step(action)

    def true_graph(self):
        return self.env.true_graph()


class Hiding(Bare):
    """Has unwrapped and get_wrapper_attr, but drops the environment's describe and note_seen."""

    @property
    def unwrapped(self):
        return self.env

    def get_wrapper_attr(self, name):
        return getattr(self, name) if hasattr(self, name) else getattr(self.env, name)


def test_wrappers_that_forward_implicitly_or_hide_members_are_caught(kitchen):
    env = GraphEnvironment(kitchen, describer=describe_truth)
    assert "ForwardingWrapper.__getattr__" in caught(ForwardingWrapper(env), "wrapper-attributes")
    assert "no get_wrapper_attr" in caught(Bare(env), "wrapper-attributes")
    assert "does not pass on describe" in caught(Hiding(env), "wrapper-attributes")


# ---------------------------------------------------------------------------------------------
# layers point one way
# ---------------------------------------------------------------------------------------------
def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def project(name: str) -> bool:
    return name.split(".")[0] in ("sgs", "grasif", "sim_adapters", "vlm", "lookplangraph")




def test_sim_adapters_import_neither_lookplangraph_nor_vlm():
    for path in sorted((ROOT / "sim_adapters").glob("*.py")):
        bad = sorted(m for m in imports(path) if m.split(".")[0] in ("lookplangraph", "vlm"))
        assert bad == [], f"{path.name} imports {bad}"
    code = ("import sys, pkgutil, importlib, sim_adapters\n"
            "for m in pkgutil.iter_modules(sim_adapters.__path__): importlib.import_module('sim_adapters.' + m.name)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lookplangraph', 'vlm')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == []


def test_vlm_depends_only_on_sgs_the_protocol_and_the_lm_layer():
    allowed = ("sgs.", "sim_adapters.base.", "lookplangraph.lm.", "vlm.")
    for path in sorted((ROOT / "vlm").glob("*.py")):
        bad = sorted(m for m in imports(path) if project(m) and not (m + ".").startswith(allowed)
                     and m not in ("sim_adapters", "lookplangraph"))
        assert bad == [], f"vlm/{path.name} imports {bad}"
