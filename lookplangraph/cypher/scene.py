"""How a :class:`~sgs.graph.SceneGraph` becomes a property graph: labels, properties, relationships.

Nodes (every label has ``name`` (unique key), ``class``, ``states``, ``affordances``,
``properties``; lists of strings, empty when the source gave none):

* ``Room`` — a place of the scene graph;
* ``Asset`` — furniture and fixtures (``(:Asset)-[:IN_ROOM]->(:Room)``);
* ``Object`` — movable things, plus ``seen``: true when the agent has looked at it, false for an
  object only remembered from the map (the memory graph's unseen priors; a plain graph has all
  objects seen);
* ``Agent`` — the robot (``(:Agent)-[:AT]->(:Room)``, ``(:Agent)-[:HOLDS]->(:Object)``).

Relationships point from the child to its parent: ``(:Object)-[:ON_TOP_OF]->(:Asset|:Object)``,
``(:Object)-[:INSIDE]->(:Asset|:Object)``, ``(:Asset)-[:IN_ROOM]->(:Room)``.

``class`` is :func:`sgs.graph.node_class` of the name (``coffee_table-2`` → ``coffee_table``)
unless a relabel overrides it (:meth:`SceneRows.build` ``relabels``). The mapping only reads the
graph it is given: a store loaded from the planner's memory graph never sees the true graph's
hidden objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from sgs.graph import Layer, Relation, SceneGraph, node_class

#: node label of each scene-graph layer
LABEL_OF_LAYER = {Layer.PLACE: "Room", Layer.ASSET: "Asset", Layer.OBJECT: "Object"}
NODE_LABELS = ("Room", "Asset", "Object", "Agent")
#: relationship type of each parent relation of the scene graph
REL_OF_RELATION = {Relation.IN_ROOM: "IN_ROOM", Relation.ONTOP: "ON_TOP_OF", Relation.INSIDE: "INSIDE"}
#: relationship type -> (from label, to labels)
RELATIONSHIPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "IN_ROOM": ("Asset", ("Room",)),
    "ON_TOP_OF": ("Object", ("Asset", "Object")),
    "INSIDE": ("Object", ("Asset", "Object")),
    "AT": ("Agent", ("Room",)),
    "HOLDS": ("Agent", ("Object",)),
}
#: properties of every node label, in catalog order (``seen`` only on Object)
PROPERTIES = ("name", "class", "states", "affordances", "properties")


@dataclass
class SceneRows:
    """Rows to insert: ``nodes[label]`` are property dicts; ``edges[(type, from, to)]`` are
    ``{"a": child name, "b": parent name}`` dicts."""

    nodes: dict[str, list[dict]] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], list[dict]] = field(default_factory=dict)

    @property
    def node_count(self) -> int:
        return sum(len(v) for v in self.nodes.values())

    @classmethod
    def build(cls, graph: SceneGraph, unseen: Iterable[str] = (), relabels: Mapping[str, str] | None = None) -> "SceneRows":
        """Rows of ``graph``; objects in ``unseen`` get ``seen: false``; ``relabels`` maps node
        names to a class that replaces the one read from the name."""
        unseen = set(unseen)
        relabels = relabels or {}
        rows = cls(nodes={label: [] for label in NODE_LABELS})
        for name, node in graph.nodes.items():
            label = LABEL_OF_LAYER[node.layer]
            row = {"name": name, "class": relabels.get(name) or node_class(name), "states": list(node.states or ()),
                   "affordances": list(node.affordances or ()), "properties": list(node.properties or ())}
            if label == "Object":
                row["seen"] = name not in unseen
            rows.nodes[label].append(row)
        agent = graph.agent
        rows.nodes["Agent"].append({"name": agent.name, "class": "agent", "states": [], "affordances": [],
                                    "properties": []})
        for child, (par, rel) in graph.parent.items():
            if rel is Relation.HELD:
                continue  # written as HOLDS below
            kind = REL_OF_RELATION[rel]
            key = (kind, LABEL_OF_LAYER[graph.nodes[child].layer], LABEL_OF_LAYER[graph.nodes[par].layer])
            rows.edges.setdefault(key, []).append({"a": child, "b": par})
        if agent.location is not None:
            rows.edges.setdefault(("AT", "Agent", "Room"), []).append({"a": agent.name, "b": agent.location})
        if agent.holding is not None:
            rows.edges.setdefault(("HOLDS", "Agent", "Object"), []).append({"a": agent.name, "b": agent.holding})
        return rows
