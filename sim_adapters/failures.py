"""Low-level execution failures: the robot's hands and wheels failing, as a wrapper.

:class:`LowLevelFailures` wraps any environment and makes accepted primitive actions fail the way
a low-level controller reports it, each kind with its own rate, drawn with a seed: ``grasp``
(``pick_up`` closes on nothing), ``navigation`` (``go_to`` blocked this time), ``device``
(``turn_on``/``turn_off`` does not respond), ``slip`` (a put lands the object on another surface
of the room) and ``placement`` (``put_inside(c)`` ends on top of ``c``).

A failure that changes nothing is a refused step (``ok`` false), the controller's report as
``feedback`` and ``info["failure"]`` naming its kind. A failure that changes the scene runs
another primitive action in the environment inside: the step is ``ok``, its ``outcome`` is the
action that happened instead, ``feedback`` reports it, and the true graph changes exactly as the
report says; where that action is not possible the failure is not drawn. Failures are transient:
each attempt is drawn anew from ``random.Random(seed)``, made again at every ``reset``, so the
same seed and actions give the same failures. :attr:`LowLevelFailures.repaired` marks a failure
whose action later goes through as asked in the same episode. :data:`FEEDBACK` is the vocabulary,
also what a person in a human-in-the-loop trial answers with (:mod:`sim_adapters.human`).
Concepts: ``docs/guides/failures.md``.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from sgs.actions import Action, make
from sgs.graph import Layer, SceneGraph, affords
from sgs.simulator import Infeasible, apply
from sim_adapters.base import Environment, StepResult
from sim_adapters.wrappers import Wrapper

#: the kinds, in the order they are documented
KINDS = ("grasp", "navigation", "device", "slip", "placement")
#: kinds that change nothing (a person in a trial can report them as they are)
NO_EFFECT = ("grasp", "navigation", "device")
#: the primitive each kind that changes nothing strikes
KIND_OF_ACTION = {"pick_up": "grasp", "go_to": "navigation", "turn_on": "device", "turn_off": "device"}

#: What the controller reports for each kind; ``{action}``, ``{node}`` (the acted-on node),
#: ``{held}``, ``{here}`` (the robot's place) and ``{instead}`` (where the object ended) are
#: filled in.
FEEDBACK: dict[str, str] = {
    "grasp": "grasp failed: the gripper closed but {node} is not in it; it is still where it was",
    "navigation": "navigation failed: the way to {node} was blocked this time (a door would not open); "
                  "the robot is still in {here}",
    "device": "{node} did not respond: the switch was pressed but its state did not change",
    "slip": "{held} slipped from the gripper while being placed and landed on {instead}",
    "placement": "{held} ended on top of {node}, not inside it: the opening was missed",
}


def failure_feedback(kind: str, action: Action, **names: str) -> str:
    """The report of a ``kind`` failure of ``action`` (:data:`FEEDBACK`); ``names`` fill the rest."""
    if kind not in FEEDBACK:
        raise ValueError(f"unknown failure kind {kind!r}; kinds: {', '.join(KINDS)}")
    node = action.node or action.destination or ""
    return FEEDBACK[kind].format(action=action, node=node, **{"held": "", "here": "", "instead": "", **names})


def parse_rates(rate: float | Mapping[str, float]) -> dict[str, float]:
    """Per-kind rates from one rate for every kind or a table ``{kind: rate}`` (kinds missing from
    it do not fail). ``ValueError`` for an unknown kind or a rate outside [0, 1)."""
    rates = dict.fromkeys(KINDS, float(rate)) if isinstance(rate, (int, float)) else dict(rate)
    unknown = sorted(set(rates) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown failure kind(s) {', '.join(unknown)}; kinds: {', '.join(KINDS)}")
    out = {}
    for kind, value in rates.items():
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"failure rate of {kind} must be a number, not {value!r}") from None
        if not 0.0 <= value < 1.0:
            raise ValueError(f"failure rate of {kind} must be in [0, 1), not {value} (at 1 nothing could succeed)")
        out[kind] = value
    return {k: out.get(k, 0.0) for k in KINDS}


class LowLevelFailures(Wrapper):
    """Accepted primitive actions of ``env`` fail as the module doc says, kind ``k`` with
    probability ``rates[k]`` (:func:`parse_rates`: one rate for all kinds, or a table), drawn
    with ``seed`` (an int or a string: an evaluation seeds each task apart, ``"SEED:split/task"``,
    so that tasks do not share one sequence of draws). ``failures`` lists this episode's failures
    as ``(step, kind, action)``; ``repaired[i]`` is the step at which the action of
    ``failures[i]`` later went through as asked (the same action, the same object held), ``None``
    while it has not."""

    def __init__(self, env: Environment, rate: float | Mapping[str, float], seed: int | str = 0):
        super().__init__(env)
        self.rates = parse_rates(rate)
        self.seed = seed
        self._rng = random.Random(self.seed)
        self.failures: list[tuple[int, str, str]] = []
        self.repaired: list[int | None] = []
        self._open: dict[tuple[str, str | None], list[int]] = {}  # (action, object held) -> its unrepaired failures
        self._steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self._rng = random.Random(self.seed)
        self.failures, self.repaired, self._open, self._steps = [], [], {}, 0

    def _draw(self, kind: str) -> bool:
        rate = self.rates[kind]
        return rate > 0 and self._rng.random() < rate

    def step(self, action: Action) -> StepResult:
        self._steps += 1
        fn = action.function_name
        kind = KIND_OF_ACTION.get(fn)
        if kind is None and fn not in ("put_on", "put_inside"):
            return self.env.step(action)
        g = self.env.true_graph()
        if not _feasible(g, action):  # a refused action is refused as usual, never a failure
            return self.env.step(action)
        if kind is None:
            return self._place(action, g)
        if not self._draw(kind):
            return self._as_asked(action, g)
        self._failed(kind, action, g)
        return StepResult(False, failure_feedback(kind, action, here=g.agent.location or ""), info={"failure": kind})

    def _failed(self, kind: str, action: Action, g: SceneGraph) -> None:
        """Record a ``kind`` failure of ``action`` (``g``: the true graph before it)."""
        self._open.setdefault((str(action), g.agent.holding), []).append(len(self.failures))
        self.failures.append((self._steps, kind, str(action)))
        self.repaired.append(None)

    def _as_asked(self, action: Action, g: SceneGraph) -> StepResult:
        """Step ``action`` in the environment as asked (``g``: the true graph before it); if it
        goes through, it repairs the earlier failures of the same attempt."""
        result = self.env.step(action)
        if result.ok and self._open:
            for i in self._open.pop((str(action), g.agent.holding), ()):
                self.repaired[i] = self._steps
        return result

    def _place(self, action: Action, g: SceneGraph) -> StepResult:
        """``put_on``/``put_inside`` (feasible in ``g``, the true graph now): a slip (another
        surface of the room) or, for ``put_inside``, a placement on top; either only where the
        environment can carry it out."""
        held, dest = g.agent.holding, action.destination
        if self._draw("slip"):
            other = self._other_surface(g, dest)
            if other is not None:
                return self._instead("slip", action, make("put_on", None, None, other), g, held=held, instead=other)
        if action.function_name == "put_inside" and self._draw("placement") and affords(g.nodes[dest], "put_on"):
            return self._instead("placement", action, make("put_on", None, None, dest), g, held=held)
        return self._as_asked(action, g)

    def _other_surface(self, g: SceneGraph, dest: str) -> str | None:
        """A surface of the robot's room, other than ``dest``, that the held object can land on:
        an asset that takes ``put_on`` (drawn among them)."""
        here = g.agent.location
        options = sorted(n for n, node in g.nodes.items()
                         if n != dest and node.layer is Layer.ASSET and affords(node, "put_on") and g.place_of(n) == here)
        return self._rng.choice(options) if options else None

    def _instead(self, kind: str, action: Action, other: Action, g: SceneGraph, **names: str) -> StepResult:
        """Run ``other`` in the environment; report it as a ``kind`` failure of ``action`` (``g``:
        the true graph before it)."""
        result = self.env.step(other)
        if not result.ok:  # the environment would not do it either: the action goes as asked
            return self._as_asked(action, g)
        self._failed(kind, action, g)
        info = {**result.info, "failure": kind}
        return StepResult(True, failure_feedback(kind, action, **names), result.observation, info,
                          result.truncated, outcome=other)


def _feasible(g: SceneGraph, action: Action) -> bool:
    """Whether the SGS would carry ``action`` out on ``g``: a failure is drawn only for an action
    that would otherwise succeed."""
    try:
        apply(g, action)
    except Infeasible:
        return False
    return True

