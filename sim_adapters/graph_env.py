"""An environment over a task's true scene graph, executed by the SGS (the paper's graph
simulation with ground-truth graph augmentation).

* ``step`` applies one primitive action to the true graph with :func:`sgs.simulator.apply`; an
  action whose preconditions fail in the true graph (the planner's memory was stale) changes
  nothing and returns the SGS's reason as feedback.
* ``discover_objects(node)`` returns every true object on and inside ``node``, nested objects
  included, whether or not the containers are open (ground-truth augmentation).
* **Dynamic mode** reproduces the changed-environment setting with the wrapper
  :class:`sim_adapters.wrappers.DynamicPerturbation`, which draws the moves
  (:func:`sim_adapters.dynamic.perturb`: the paper's protocol, or the older ``anywhere`` mode)
  and starts the environment from the moved graph (:meth:`GraphEnvironment.set_initial`). The
  memory graph's priors are then stale: the planner has to search.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from grasif.goals import GoalSpec
from sgs.actions import Action
from sgs.graph import SceneGraph
from sgs.simulator import Infeasible, apply
from sim_adapters.base import Observation, StepResult, check_options, graph_copy, observe
from sim_adapters.binding import BindingError, NameBinding

__all__ = ["GraphEnvironment", "Writer", "observe"]

#: What :meth:`GraphEnvironment.describe` is given to write text with: ``writer(truth,
#: node_states, seed) -> text``, where ``truth`` is the node's true observation and ``node_states``
#: its own states; deterministic for a ``seed``, no node names (what a describer would write).
#: The project's is :func:`vlm.descriptions.describe_truth`, passed in where environments are made.
Writer = Callable[[Observation, Sequence[str], "int | str"], str]


class GraphEnvironment:
    """Environment over a true :class:`SceneGraph` (module doc). ``goal`` is accepted for the
    callers that pass it; dynamic mode is the wrapper :class:`sim_adapters.wrappers.DynamicPerturbation`.

    Names an augmentation made up (``mug-7`` for the true ``cup-3``) are bound to true nodes by
    :class:`sim_adapters.binding.NameBinding` once the planner has reported where they were seen
    (:meth:`note_seen`); feedback names the true nodes. :meth:`describe` writes what is on and
    inside a node as text with ``describer`` (a :data:`Writer`), for ``parser`` augmentation;
    without one it raises ``ValueError``. Nothing is random here: ``reset``'s ``seed`` is ignored."""

    def __init__(self, graph: SceneGraph, goal: GoalSpec | None = None, *, describer: Writer | None = None):
        self.initial = graph
        self._graph = self.initial
        self.binding = NameBinding(graph.nodes)
        self.describer = describer

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        check_options(options)
        self._graph = self.initial
        self.binding = NameBinding(self.initial.nodes)

    def set_initial(self, graph: SceneGraph) -> None:
        self.initial = self._graph = graph
        self.binding = NameBinding(graph.nodes)

    def true_graph(self) -> SceneGraph:
        return graph_copy(self._graph)

    def note_seen(self, name: str, parent: str) -> None:
        """An augmentation reported ``name`` on or inside ``parent`` (planner names)."""
        self.binding.note(name, parent)

    def step(self, action: Action) -> StepResult:
        try:
            true_action = self._bound(action)
        except BindingError as exc:
            return StepResult(False, f"{action} failed: {exc}")
        try:
            new = apply(self._graph, true_action)
        except Infeasible as exc:
            return StepResult(False, f"{action} failed: {exc}")
        observation = None
        if action.function_name == "discover_objects":
            observation = observe(self._graph, true_action.node, action.node)
        self._graph = new
        return StepResult(True, None, observation)

    def observe(self, node: str) -> Observation:
        """Every true object on and inside ``node``, parents before children."""
        return observe(self._graph, node)

    def describe(self, node: str, seed: int | str = 0) -> str:
        """What is truly on and inside ``node`` (a planner name) as ``describer`` writes it
        (deterministic for a ``seed``); raises :class:`BindingError` for an unknown name and
        ``ValueError`` when the environment was given no describer."""
        if self.describer is None:
            raise ValueError(f"{type(self).__name__} was given no describer, so it cannot write {node} as text "
                             "(pass describer=..., e.g. vlm.descriptions.describe_truth)")
        true = self.binding.bind(node, self._graph)
        truth = observe(self._graph, true, node)
        states = self._graph.nodes[true].states or ()
        return self.describer(truth, tuple(states), seed)

    def _bound(self, action: Action) -> Action:
        if action.function_name == "done":
            return action
        changes = {}
        for field_name in ("node", "destination"):
            name = getattr(action, field_name, None)
            true = self.binding.bind(name, self._graph) if name is not None else None
            if true != name:
                changes[field_name] = true
        return action.model_copy(update=changes) if changes else action
