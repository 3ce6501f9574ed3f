"""The small protocol every environment adapter implements, after Gymnasium's conventions.

The planner only ever calls :meth:`Environment.reset`, :meth:`Environment.step` with *primitive*
actions (the SGS has already expanded and corrected them) and reads the :class:`StepResult`.
``discover_objects`` answers with an :class:`Observation`: what the robot saw on and inside the
node. :meth:`Environment.true_graph` is for evaluation only; a planner must not read it.

The rules (checked by :func:`sim_adapters.env_checker.check_env`):

* ``reset(*, seed=None, options=None)`` returns ``None`` and starts an episode from the
  environment's initial state. ``seed``: where the environment draws anything at random (dynamic
  mode's moves, :class:`sim_adapters.wrappers.DynamicPerturbation`) it draws with this seed, and
  ``reset()`` without one keeps the last seed; the same seed gives the same initial state.
  Environments without randomness (all the simulators here) accept a seed and ignore it.
  ``options``: a dict of environment-specific settings for this reset (``None`` or a dict).
* ``step(action)`` returns a :class:`StepResult`. A refused step (``ok`` false) changes nothing
  and its ``feedback`` says why. A step limit reached is ``truncated`` (not an ordinary failure).
* ``true_graph()`` returns a copy (:func:`graph_copy`): a caller that changes its containers
  changes nothing in the environment.
* optional members, which wrappers pass on explicitly: ``describe(node) -> str`` (the node as
  text, for a parser; ``ValueError`` when it cannot), ``note_seen(name, parent)`` (names an
  augmentation made up), ``typed_descriptions`` (an observation without an image is described by
  ``describe``), ``set_initial(graph)`` (:class:`EditableEnvironment`: needed by dynamic mode) and
  ``close()``.

Dynamic mode, recording and a step limit are wrappers (:mod:`sim_adapters.wrappers`).
Concepts: ``docs/guides/environments.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable

from sgs.actions import Action
from sgs.graph import Layer, SceneGraph


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
    ``feedback`` says why (the environment differs from what the planner believed).

    ``truncated`` (Gymnasium's word): the episode reached a step limit. The step that reaches it
    runs as usual and says so; every later step until ``reset`` is refused (``ok`` false, feedback
    naming the limit) with ``truncated`` set, so a consumer that reads only ``ok`` and
    ``feedback`` still sees a refusal it can report.

    ``outcome``: the primitive action whose effect the environment produced *instead* of the one
    asked (a low-level failure that changed the scene, :mod:`sim_adapters.failures`): ``ok`` is
    true (something happened), ``feedback`` says what, and a planner's memory follows
    ``outcome``, not the action it sent. ``info["failure"]`` names the kind of a low-level
    failure, with or without an outcome."""

    ok: bool
    feedback: str | None = None
    observation: Observation | None = None
    info: dict = field(default_factory=dict)
    truncated: bool = False
    outcome: Action | None = None

    @property
    def failure(self) -> str | None:
        """The kind of the low-level failure this step met (``info["failure"]``), or None."""
        return self.info.get("failure") if self.info else None


@runtime_checkable
class Environment(Protocol):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode from the initial state (module doc: what ``seed`` and ``options`` mean)."""

    def step(self, action: Action) -> StepResult:
        """Execute one primitive action."""

    def true_graph(self) -> SceneGraph:
        """A copy of the environment's current ground truth, for evaluation only."""


@runtime_checkable
class EditableEnvironment(Environment, Protocol):
    def set_initial(self, graph: SceneGraph) -> None:
        """Start this and every later episode from ``graph``: the current initial graph with objects
        moved (what :func:`sim_adapters.dynamic.perturb` makes). Raise ``ValueError`` naming the
        node for a change the environment cannot make."""


def check_options(options: Mapping[str, Any] | None) -> None:
    """``TypeError`` unless ``options`` (of ``reset``) is ``None`` or a mapping."""
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"reset options are a dict or None, not {type(options).__name__}")


def graph_copy(graph: SceneGraph) -> SceneGraph:
    """A copy of ``graph`` that shares no container with it (nodes, edges and the agent are
    immutable values): what ``true_graph()`` returns."""
    return SceneGraph(dict(graph.nodes), dict(graph.parent), graph.agent, frozenset(graph.inspected),
                      dict(graph.meta))


def observe(graph: SceneGraph, node: str, name: str | None = None) -> Observation:
    """Every object of ``graph`` on and inside ``node``, nested ones included, parents before
    children (ground-truth augmentation). ``name``: the node's name in the observation, when the
    planner calls it differently."""
    seen = []
    for child in graph.descendants(node):
        n = graph.nodes[child]
        if n.layer is not Layer.OBJECT:
            continue
        par, rel = graph.parent[child]
        seen.append(SeenObject(child, rel.value, name if name is not None and par == node else par,
                               tuple(n.states or ()), n.affordances))
    return Observation(name or node, tuple(seen))
