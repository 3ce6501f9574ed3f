"""The scene graph as the data SG-RwR's code runs on, and the trusted prelude that loads it.

:func:`graph_data` turns a :class:`~sgs.graph.SceneGraph` into plain JSON data (nodes, edges,
agent) that crosses into the sandbox; the trusted prelude (``prelude.py`` beside this module, run
before any LM code in the sandboxed child, with ``DATA`` bound to that data) builds the networkx
DiGraph ``G`` that the schema (``prompts/sgrwr_schema.txt``) describes and defines the Reasoner's
tools. What each agent's code may use:

* the **Retriever**: ``G`` (and ``nx``); the tools are removed from its namespace;
* the **Reasoner**: the tools only; ``G`` and ``nx`` are removed from its namespace (the tools keep
  the graph in a closure, which LM code cannot reach: the sandbox's AST policy refuses ``_``
  attributes). The Reasoner thus never reads scene data except through its tools' answers.

In step mode the data is the memory graph; objects that are only remembered from the map
(:attr:`lookplangraph.agent.memory.MemoryGraph.unseen`) have ``seen`` False.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from sgs.graph import Layer, Relation, SceneGraph, node_class

#: ``layer`` values in ``G`` (the graph model's ``place`` is a room to the LM)
LAYER_NAMES = {Layer.PLACE: "room", Layer.ASSET: "asset", Layer.OBJECT: "object"}
#: modules LM code may import (the sandbox refuses every other import)
ALLOWED_IMPORTS = frozenset({"networkx", "math", "collections", "itertools", "re", "json", "heapq", "functools"})
#: the names each agent's code sees besides Python's builtins
AGENT_NAMES = {"retriever": ("G", "nx"), "reasoner": ("room_of", "closed_around", "fetch_steps", "place_steps")}


def graph_data(graph: SceneGraph, unseen: set[str] | frozenset[str] | None = None) -> dict:
    """``graph`` as JSON-ready data: ``nodes`` (name, layer, class, states, affordances,
    properties and, when ``unseen`` is given, ``seen`` for objects), ``edges`` (child, holder, relation) and ``agent``
    (name, location, holding). Missing state or affordance lists become empty lists."""
    nodes = []
    for name, node in graph.nodes.items():
        entry = {"name": name, "layer": LAYER_NAMES[node.layer], "class": node_class(name),
                 "states": list(node.states or ()), "affordances": list(node.affordances or ()),
                 "properties": list(node.properties or ())}
        if unseen is not None and node.layer is Layer.OBJECT:
            entry["seen"] = name not in unseen
        nodes.append(entry)
    edges = []
    for child, (holder, rel) in graph.parent.items():
        edges.append([child, graph.agent.name if rel is Relation.HELD else holder, rel.value])
    agent = graph.agent
    return {"nodes": nodes, "edges": edges,
            "agent": {"name": agent.name, "location": agent.location, "holding": agent.holding}}


@lru_cache(maxsize=None)
def prelude_source() -> str:
    """The trusted prelude's Python source (``prelude.py``; it builds ``G`` and the tools)."""
    return resources.files(__package__).joinpath("prelude.py").read_text(encoding="utf-8")


def prelude(agent: str) -> str:
    """The prelude for ``agent`` (``reasoner`` or ``retriever``): the common source, then the
    removal of what the other agent's code may use (module doc)."""
    if agent not in AGENT_NAMES:
        raise ValueError(f"agent is reasoner or retriever, not {agent!r}")
    other = AGENT_NAMES["reasoner" if agent == "retriever" else "retriever"]
    return prelude_source() + "\n" + "\n".join(f"del {name}" for name in other) + "\n"
