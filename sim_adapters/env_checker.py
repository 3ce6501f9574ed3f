"""One conformance check for every environment and wrapper, after Gymnasium's
``gymnasium.utils.env_checker.check_env``.

:func:`check_env` drives an environment through the protocol of :mod:`sim_adapters.base` and
raises :class:`EnvCheckError` naming the first rule it breaks (:data:`RULES`). It resets the
environment, looks at one node, tries one step that must be refused, and closes it at the end
(``close=False`` keeps it open), so give it a fresh environment. What it needs to know about the
scene it reads from ``true_graph()``: ``discover`` defaults to an asset in the agent's room (one
with objects on or in it where there is one), ``bad_action`` to picking up an object no scene
has; pass either where the environment needs another (an image bank pictures some nodes only).

    from sim_adapters.env_checker import check_env
    check_env(GraphEnvironment(task.graph))
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from sgs.actions import Action, make
from sgs.graph import Layer, SceneGraph
from sim_adapters.base import Observation, SeenObject, StepResult

#: every rule, by the name :class:`EnvCheckError` gives, and what it asks
RULES = {
    "protocol": "reset, step and true_graph are methods",
    "reset-signature": "reset takes the keyword arguments seed and options, both defaulting to None",
    "reset-returns-none": "reset returns None",
    "reset-options": "reset accepts options=None and options={} with or without a seed",
    "reset-initial-state": "reset() without a seed returns to the state the last reset started from",
    "reset-determinism": "the same seed gives the same initial state (whatever seed came in between) "
                         "and the same result of the same step",
    "true-graph-type": "true_graph() returns a SceneGraph",
    "true-graph-copy": "true_graph() returns a copy: changing it changes nothing in the environment",
    "step-result": "step returns a StepResult: ok a bool, feedback None or text (text when ok is false), "
                   "observation None or an Observation, info a dict, truncated a bool",
    "refusal": "a step that cannot be done is refused (ok false, never an exception) with feedback, "
               "and changes nothing",
    "discover": "discover_objects(node) returns an Observation of node: SeenObjects on or inside, "
                "parents before children, image None or an existing file",
    "truncation": "a step limit is reported as truncated (not only in info); after a truncated step "
                  "every step until reset is refused, truncated, with feedback, and changes nothing",
    "optional-members": "describe(node) returns text or raises ValueError; note_seen and set_initial are "
                        "callable; typed_descriptions is a bool",
    "close": "close(), where there is one, runs without an error",
    "wrapper-attributes": "a wrapper has unwrapped and get_wrapper_attr, passes on the optional members of the "
                          "environment inside, and looks nothing else up implicitly (no __getattr__)",
}

#: the optional members of the protocol that a wrapper must pass on
OPTIONAL_MEMBERS = ("describe", "note_seen", "typed_descriptions", "set_initial")


class EnvCheckError(AssertionError):
    """An environment breaks rule ``rule`` (a key of :data:`RULES`); the message says how."""

    def __init__(self, rule: str, message: str):
        self.rule = rule
        super().__init__(f"[{rule}] {message} (rule: {RULES[rule]})")


def _require(ok: bool, rule: str, message: str) -> None:
    if not ok:
        raise EnvCheckError(rule, message)


def _snapshot(graph: SceneGraph) -> tuple:
    return dict(graph.nodes), dict(graph.parent), graph.agent, frozenset(graph.inspected)


def _differences(before: tuple, after: tuple) -> str:
    nodes = sorted({n for n in set(before[0]) | set(after[0]) if before[0].get(n) != after[0].get(n)})
    edges = sorted({n for n in set(before[1]) | set(after[1]) if before[1].get(n) != after[1].get(n)})
    parts = ([f"nodes {', '.join(nodes[:5])}"] if nodes else []) + ([f"edges of {', '.join(edges[:5])}"] if edges else [])
    if before[2] != after[2]:
        parts.append(f"the agent ({before[2]} -> {after[2]})")
    if before[3] != after[3]:
        parts.append(f"inspected {sorted(before[3] ^ after[3])[:5]}")
    return "; ".join(parts) or "nothing"


def _is_wrapper(env: Any) -> bool:
    """Whether ``env`` wraps another environment (holds it as ``env``)."""
    inner = getattr(env, "env", None)
    return inner is not None and callable(getattr(inner, "step", None))


class _Checker:
    def __init__(self, env: Any, discover: str | None, bad_action: Action | None, seed: int):
        self.env, self.node, self.seed = env, discover, seed
        self.bad = bad_action if bad_action is not None else make("pick_up", "no_such_object-0")
        self.truncated = False  # a step of this episode came back truncated

    # -- the pieces ----------------------------------------------------------------------------
    def reset(self, **kwargs) -> None:
        try:
            value = self.env.reset(**kwargs)
        except TypeError as exc:
            raise EnvCheckError("reset-signature" if "argument" in str(exc) else "reset-options",
                                f"reset({_call(kwargs)}) raised TypeError: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - any error of reset breaks the rule
            raise EnvCheckError("reset-options", f"reset({_call(kwargs)}) raised {type(exc).__name__}: {exc}") from None
        _require(value is None, "reset-returns-none", f"reset({_call(kwargs)}) returned {value!r}")
        self.truncated = False

    def graph(self) -> SceneGraph:
        graph = self.env.true_graph()
        _require(isinstance(graph, SceneGraph), "true-graph-type",
                 f"true_graph() returned {type(graph).__name__}, not a SceneGraph")
        return graph

    def step(self, action: Action, rule: str = "step-result") -> StepResult:
        before = _snapshot(self.graph())
        try:
            result = self.env.step(action)
        except Exception as exc:  # noqa: BLE001
            raise EnvCheckError(rule if rule == "refusal" else "step-result",
                                f"step({action}) raised {type(exc).__name__}: {exc}") from None
        where = f"step({action})"
        _require(isinstance(result, StepResult), "step-result", f"{where} returned {type(result).__name__}, not a StepResult")
        _require(isinstance(result.ok, bool), "step-result", f"{where}: ok is {result.ok!r}, not a bool")
        _require(result.feedback is None or isinstance(result.feedback, str), "step-result",
                 f"{where}: feedback is {type(result.feedback).__name__}, not text")
        _require(result.ok or bool(result.feedback and result.feedback.strip()), "step-result",
                 f"{where} was refused without feedback saying why")
        _require(result.observation is None or isinstance(result.observation, Observation), "step-result",
                 f"{where}: observation is {type(result.observation).__name__}, not an Observation")
        _require(isinstance(result.info, dict), "step-result", f"{where}: info is {type(result.info).__name__}, not a dict")
        _require(isinstance(result.truncated, bool), "step-result",
                 f"{where}: truncated is {result.truncated!r}, not a bool")
        _require(not result.info.get("truncated") or result.truncated, "truncation",
                 f"{where} says truncated in info only; set StepResult.truncated")
        after = _snapshot(self.graph())
        if self.truncated:
            _require(not result.ok and result.truncated, "truncation",
                     f"{where} after a truncated step came back ok={result.ok}, truncated={result.truncated}")
            _require(after == before, "truncation", f"{where} after a truncated step changed {_differences(before, after)}")
        if not result.ok:
            _require(after == before, "refusal", f"{where} was refused but changed {_differences(before, after)}")
        self.truncated = self.truncated or result.truncated
        return result

    def discover_node(self) -> str:
        if self.node is not None:
            return self.node
        g = self.graph()
        here = [n for n in g.names(Layer.ASSET) if g.place_of(n) == g.agent.location]
        if not here:
            raise ValueError(f"no asset in the agent's room ({g.agent.location}); pass discover=NODE to check_env")
        full = [n for n in here if any(g.nodes[d].layer is Layer.OBJECT for d in g.descendants(n))]
        return (full or here)[0]

    def check_observation(self, result: StepResult, node: str) -> None:
        where = f"discover_objects({node})"
        if result.truncated and not result.ok:
            return  # refused for the step limit: nothing to look at
        _require(result.ok, "discover", f"{where} was refused ({result.feedback}); if the environment cannot look at "
                                        "that node, pass check_env another with discover=NODE")
        obs = result.observation
        _require(isinstance(obs, Observation), "discover", f"{where} succeeded without an observation")
        _require(obs.node == node, "discover", f"{where} observed {obs.node!r}")
        _require(isinstance(obs.objects, tuple), "discover", f"{where}: objects is {type(obs.objects).__name__}, not a tuple")
        placed = {node}
        for o in obs.objects:
            _require(isinstance(o, SeenObject), "discover", f"{where}: {o!r} is not a SeenObject")
            _require(o.relation in ("ontop", "inside"), "discover", f"{where}: {o.name} is {o.relation!r} its parent")
            _require(o.parent in placed, "discover",
                     f"{where}: {o.name} is {o.relation} {o.parent}, neither the node nor an object seen before it")
            _require(isinstance(o.states, tuple) and all(isinstance(s, str) for s in o.states), "discover",
                     f"{where}: the states of {o.name} are not a tuple of text")
            placed.add(o.name)
        if obs.image is not None:
            _require(isinstance(obs.image, str) and Path(obs.image).is_file(), "discover",
                     f"{where}: image {obs.image!r} is not an existing file")

    # -- the rules, in order -------------------------------------------------------------------
    def protocol(self) -> None:
        for name in ("reset", "step", "true_graph"):
            _require(callable(getattr(self.env, name, None)), "protocol", f"{type(self.env).__name__} has no method {name}")
        try:
            params = inspect.signature(self.env.reset).parameters
        except (TypeError, ValueError):
            return
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return
        for name in ("seed", "options"):
            p = params.get(name)
            _require(p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD), "reset-signature",
                     f"{type(self.env).__name__}.reset has no keyword argument {name}")
            _require(p.default is None, "reset-signature",
                     f"{type(self.env).__name__}.reset's {name} defaults to {p.default!r}, not None")

    def wrapper(self) -> None:
        env = self.env
        if not _is_wrapper(env):
            return
        name = type(env).__name__
        getattr_owner = next((c.__name__ for c in type(env).__mro__ if "__getattr__" in vars(c)), None)
        _require(getattr_owner is None, "wrapper-attributes",
                 f"{name} looks attributes up on the environment inside implicitly ({getattr_owner}.__getattr__); "
                 "pass on the members it means by name and reach the rest with get_wrapper_attr")
        _require(callable(getattr(env, "get_wrapper_attr", None)), "wrapper-attributes", f"{name} has no get_wrapper_attr")
        unwrapped = getattr(env, "unwrapped", None)
        _require(unwrapped is not None and not _is_wrapper(unwrapped), "wrapper-attributes",
                 f"{name}.unwrapped is {type(unwrapped).__name__}, not the innermost environment")
        inner = env.env
        for member in OPTIONAL_MEMBERS:
            if hasattr(inner, member):
                _require(hasattr(env, member), "wrapper-attributes",
                         f"{name} does not pass on {member} of the environment inside")
        own = set(dir(type(env))) | set(vars(env))
        hidden = [a for a in vars(unwrapped) if not a.startswith("_") and a not in own and a not in OPTIONAL_MEMBERS]
        for attr in hidden[:3]:
            _require(not hasattr(env, attr), "wrapper-attributes",
                     f"{name} passes on {attr!r} of the environment inside implicitly")
            try:
                found = env.get_wrapper_attr(attr)
            except AttributeError as exc:
                raise EnvCheckError("wrapper-attributes", f"{name}.get_wrapper_attr({attr!r}) raised AttributeError: "
                                                          f"{exc}") from None
            _require(found is getattr(unwrapped, attr), "wrapper-attributes",
                     f"{name}.get_wrapper_attr({attr!r}) is not the environment's {attr}")
        try:
            env.get_wrapper_attr("no_such_attribute_of_any_environment")
        except AttributeError:
            pass
        else:
            raise EnvCheckError("wrapper-attributes", f"{name}.get_wrapper_attr finds an attribute nobody has")

    def copy(self) -> None:
        graph = self.graph()
        before = _snapshot(graph)
        graph.nodes.clear()
        graph.parent.clear()
        graph.inspected = frozenset({"corrupted-by-the-caller"})
        if isinstance(graph.meta, dict):
            graph.meta.clear()
        after = _snapshot(self.graph())
        _require(after == before, "true-graph-copy",
                 f"changing what true_graph() returned changed the environment: {_differences(before, after)}")

    def optional_members(self, node: str) -> None:
        env = self.env
        for member in ("note_seen", "set_initial"):
            if hasattr(env, member):
                _require(callable(getattr(env, member)), "optional-members", f"{member} is not callable")
        if hasattr(env, "typed_descriptions"):
            _require(isinstance(env.typed_descriptions, bool), "optional-members",
                     f"typed_descriptions is {env.typed_descriptions!r}, not a bool")
        describe = getattr(env, "describe", None)
        if describe is None:
            return
        _require(callable(describe), "optional-members", "describe is not callable")
        try:
            text = describe(node)
        except ValueError:
            return
        except Exception as exc:  # noqa: BLE001
            raise EnvCheckError("optional-members", f"describe({node}) raised {type(exc).__name__}: {exc}, "
                                                    "not ValueError") from None
        _require(isinstance(text, str), "optional-members", f"describe({node}) returned {type(text).__name__}, not text")

    def run(self, close: bool) -> None:
        self.protocol()
        self.wrapper()
        self.reset()
        self.graph()
        for kwargs in ({"options": None}, {"options": {}}, {"seed": self.seed, "options": {}}, {"seed": None}):
            self.reset(**kwargs)
        self.copy()

        self.reset(seed=self.seed)
        start = _snapshot(self.graph())
        node = self.discover_node()
        first = self.step(make("discover_objects", node))
        self.check_observation(first, node)
        self.optional_members(node)
        refused = self.step(self.bad, rule="refusal")
        _require(not refused.ok, "refusal", f"step({self.bad}) was not refused (pass check_env a bad_action this "
                                            "environment cannot do)")
        if self.truncated:
            self.step(make("done"))  # a step any environment does: after truncation it is refused too

        self.reset()
        again = _snapshot(self.graph())
        _require(again == start, "reset-initial-state",
                 f"reset() started from another state than the reset before: {_differences(start, again)}")
        self.reset(seed=self.seed + 1)
        self.reset(seed=self.seed)
        again = _snapshot(self.graph())
        _require(again == start, "reset-determinism",
                 f"reset(seed={self.seed}) gave another initial state the second time: {_differences(start, again)}")
        second = self.step(make("discover_objects", node))
        _require(_outcome(second) == _outcome(first), "reset-determinism",
                 f"discover_objects({node}) after reset(seed={self.seed}) gave another result the second time")
        if close and hasattr(self.env, "close"):
            try:
                self.env.close()
            except Exception as exc:  # noqa: BLE001
                raise EnvCheckError("close", f"close() raised {type(exc).__name__}: {exc}") from None


def _outcome(result: StepResult) -> tuple:
    obs = result.observation
    return result.ok, result.feedback, result.truncated, (obs.node, obs.objects) if obs is not None else None


def _call(kwargs: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


def check_env(env: Any, *, discover: str | None = None, bad_action: Action | None = None, seed: int = 0,
              close: bool = True) -> None:
    """Check ``env`` against every rule of :data:`RULES` (module doc); :class:`EnvCheckError`
    names the first one broken. ``discover``: a node the environment can look at from its initial
    state; ``bad_action``: a step it must refuse there; ``seed``: the seed of the determinism
    checks (``seed + 1`` is used too); ``close``: close the environment at the end."""
    _Checker(env, discover, bad_action, seed).run(close)
