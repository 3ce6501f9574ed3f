"""The memory graph (paper section IV-B): the planner's belief about the scene.

:class:`MemoryGraph` starts as a copy of the task's initial graph in which every object is an
*unseen prior*, except what the agent holds (``priors=False``, the "No Priors" ablation: no
objects at all). :meth:`MemoryGraph.apply` mirrors a primitive action the environment executed
(the nodes it names become *known*; a picked-up prior becomes seen); :meth:`MemoryGraph.discover`
merges what ``discover_objects(node)`` observed: seen objects placed where they were seen,
priors under ``node`` that were not seen removed and kept in :attr:`MemoryGraph.missing` until
seen again. Acting on an unseen prior is refused (:meth:`unseen_feedback`).

Invariant: the agent reaches the SGS only through this graph (:meth:`check`,
:meth:`hallucination`, :meth:`expand_unchecked`), so actions are validated against the belief,
never against the environment. :meth:`render` serializes what the LM sees
(:mod:`lookplangraph.agent.view`). Docs: ``docs/concepts/loop.md`` (*Memory graph*).
"""

from __future__ import annotations

from dataclasses import replace

from sgs.actions import Action
from sgs.graph import Layer, Node, Relation, SceneGraph
from sgs.simulator import Outcome, apply, check, expand_unchecked, hallucination
from sim_adapters.base import Observation

#: functions whose ``node`` must be a confirmed (seen) object
_NEEDS_SEEN = ("pick_up", "rearrange")


class MemoryGraph:
    """Belief graph + which objects are unseen priors + which nodes are known (see module doc)."""

    def __init__(self, graph: SceneGraph, *, priors: bool = True):
        objects = graph.names(Layer.OBJECT)
        if not priors:
            graph = _without(graph, set(objects))
            objects = []
        self.graph: SceneGraph = graph
        self.unseen: set[str] = set(objects) - {graph.agent.holding}
        self.known: set[str] = set()
        #: priors discover() did not find where remembered and nobody has seen since: name ->
        #: (relation, holder, room) as the memory remembered them
        self.missing: dict[str, tuple[str, str, str]] = {}

    # -- what the agent may act on -------------------------------------------------------------
    def unseen_feedback(self, action: Action) -> str | None:
        """Feedback when ``action`` moves an object whose place is only a prior, else ``None``."""
        if action.function_name in _NEEDS_SEEN and action.node in self.unseen:
            g = self.graph
            near = g.parent[action.node][0]
            holder = near  # look at the outermost holder: discover_objects reveals nested objects too
            while holder in self.unseen and g.parent[holder][1] in (Relation.ONTOP, Relation.INSIDE):
                holder = g.parent[holder][0]
            return (f"{action.node} is only remembered {g.parent[action.node][1].value} {near}, "
                    f"not seen; confirm where it is with discover_objects({holder}) first")
        return None

    # -- the SGS on the belief ----------------------------------------------------------------------
    def check(self, action: Action, *, correct: bool = True) -> Outcome:
        """:func:`sgs.simulator.check` of ``action`` on the belief (corrections when ``correct``)."""
        return check(self.graph, action, correct=correct)

    def hallucination(self, action: Action) -> str | None:
        """Feedback when ``action`` names an unknown function or node or misses an argument
        (:func:`sgs.simulator.hallucination`), else ``None``."""
        return hallucination(self.graph, action)

    def expand_unchecked(self, action: Action) -> list[Action]:
        """``action``'s primitive steps as written, feasible or not (:func:`sgs.simulator.expand_unchecked`)."""
        return expand_unchecked(self.graph, action)

    # -- updates after the environment acted ---------------------------------------------------
    def apply(self, action: Action) -> None:
        """Mirror a primitive action the environment executed (raises ``Infeasible`` if the
        memory disagrees, which the planner reports)."""
        self.graph = apply(self.graph, action)
        for name in (action.node, action.destination):
            if name is not None and name in self.graph.nodes and self.graph.nodes[name].layer is not Layer.PLACE:
                self.known.add(name)
                if action.function_name == "pick_up":
                    self.unseen.discard(name)

    def discover(self, observation: Observation) -> list[str]:
        """Merge an observation of ``observation.node``; return the removed priors."""
        g = self.graph
        nodes = dict(g.nodes)
        parent = dict(g.parent)
        seen = set()
        for obj in observation.objects:
            if obj.parent not in nodes:
                continue  # a parent the observation did not report first: skip rather than guess
            old = nodes.get(obj.name)
            if old is None:
                nodes[obj.name] = Node(obj.name, Layer.OBJECT, tuple(obj.states), obj.affordances)
            else:
                nodes[obj.name] = replace(old, states=tuple(obj.states))
            parent[obj.name] = (obj.parent, Relation(obj.relation))
            seen.add(obj.name)
        # Priors under the node that were not seen are gone. Seen objects were re-parented above,
        # so whatever still hangs under a removed prior is unseen too and goes with it.
        removed = [n for n in g.descendants(observation.node) if n in self.unseen and n not in seen]
        for name in removed:
            holder, rel = g.parent[name]
            self.missing[name] = (rel.value, holder, g.place_of(name))
            nodes.pop(name, None)
            parent.pop(name, None)
        dangling = [c for c, (p, _) in parent.items() if p not in nodes and p != g.agent.name]
        while dangling:
            for c in dangling:
                nodes.pop(c)
                parent.pop(c)
            removed += dangling
            dangling = [c for c, (p, _) in parent.items() if p not in nodes and p != g.agent.name]
        # the observation covered everything under the node, nested objects included
        self.graph = g.evolve(nodes=nodes, parent=parent, inspected=g.inspected | seen)
        self.unseen -= seen
        self.unseen -= set(removed)
        for name in seen:
            self.missing.pop(name, None)
        self.known |= seen
        self.known.add(observation.node)
        return removed


def _without(graph: SceneGraph, drop: set[str]) -> SceneGraph:
    nodes = {n: v for n, v in graph.nodes.items() if n not in drop}
    parent = {n: e for n, e in graph.parent.items() if n not in drop}
    agent = graph.agent if graph.agent.holding not in drop else replace(graph.agent, holding=None)
    return graph.evolve(nodes=nodes, parent=parent, agent=agent)
