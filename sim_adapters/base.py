"""The small protocol every environment adapter implements.

The planner only ever calls :meth:`Environment.reset`, :meth:`Environment.step` with *primitive*
actions (the SGS has already expanded and corrected them) and reads the :class:`StepResult`.
``discover_objects`` answers with an :class:`Observation`: what the robot saw on and inside the
node. :meth:`Environment.true_graph` is for evaluation only; a planner must not read it.

Behaviour that is not the simulator's own (dynamic perturbation, recording, a step limit) is a
wrapper around any environment (:mod:`sim_adapters.wrappers`). An environment that can start from
an edited graph (:class:`EditableEnvironment`) supports dynamic mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sgs.actions import Action
from sgs.graph import SceneGraph


@dataclass(frozen=True)
class SeenObject:
    """One object seen by ``discover_objects``: where it is and what it is like."""

    name: str
    relation: str  # "ontop" | "inside"
    parent: str  # the inspected node or an object seen with it
    states: tuple[str, ...] = ()
    affordances: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Observation:
    """What ``discover_objects(node)`` revealed: every object on and inside ``node``, nested
    objects included, parents before children. ``image`` is a path when the adapter renders one."""

    node: str
    objects: tuple[SeenObject, ...] = ()
    image: str | None = None


@dataclass(frozen=True)
class StepResult:
    """Outcome of one primitive action in the environment. ``ok`` false: nothing changed and
    ``feedback`` says why (the environment differs from what the planner believed)."""

    ok: bool
    feedback: str | None = None
    observation: Observation | None = None
    info: dict = field(default_factory=dict)


@runtime_checkable
class Environment(Protocol):
    def reset(self) -> None:
        """Return to the task's initial state (the same state on every call)."""

    def step(self, action: Action) -> StepResult:
        """Execute one primitive action."""

    def true_graph(self) -> SceneGraph:
        """The environment's current ground truth, for evaluation only."""


@runtime_checkable
class EditableEnvironment(Environment, Protocol):
    def set_initial(self, graph: SceneGraph) -> None:
        """Start this and every later episode from ``graph``: the current initial graph with objects
        moved (what :func:`sim_adapters.graph_env.perturb` makes). Raise ``ValueError`` naming the
        node for a change the environment cannot make."""
