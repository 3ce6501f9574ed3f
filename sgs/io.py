"""Load and save scene graphs in the LookPlanGraph paper's JSON format (appendix C).

Accepted input, all written back as read (``graph_to_dict(graph_from_dict(d)) == d``):

* ``{"nodes": {"rooms": [...], "asset": [...], "objects": [...], "agent": {...}}}`` (appendix C),
  or the same without the ``"nodes"`` wrapper;
* the prompt variants: ``room``/``object`` for the layer keys, ``id`` for ``name``, ``located``
  for an asset's ``room``, the agent as a one-element list, ``holding`` as ``"nothing"``/``""``;
* objects give ``relation`` (``ontop_of``/``inside_of``; ``ontop``/``inside`` are accepted too)
  and ``related_to``; an object the agent holds has ``"relation": "held"`` and
  ``"related_to": <agent name>``;
* keys this model does not know are kept per node and written back.

A graph that breaks a structure rule raises :class:`sgs.graph.GraphError` naming every bad node;
nothing is returned half-loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sgs.graph import Agent, GraphError, Layer, Node, Relation, SceneGraph

_LAYER_KEYS = {
    Layer.PLACE: ("rooms", "room", "places"),
    Layer.ASSET: ("asset", "assets"),
    Layer.OBJECT: ("objects", "object"),
}
_RELATION_WORDS = {
    "ontop_of": Relation.ONTOP,
    "ontop": Relation.ONTOP,
    "on_top_of": Relation.ONTOP,
    "inside_of": Relation.INSIDE,
    "inside": Relation.INSIDE,
    "held": Relation.HELD,
    "held_by": Relation.HELD,
}
_DEFAULT_WORD = {Relation.ONTOP: "ontop_of", Relation.INSIDE: "inside_of", Relation.HELD: "held"}
_EMPTY_HANDS = ("nothing", "", None, "none")
_LIST_FIELDS = ("states", "affordances", "properties")


def load_graph(path: str | Path) -> SceneGraph:
    """Read a graph file. Errors name the file: ``GraphError`` for bad structure, ``ValueError`` for bad JSON."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    try:
        return graph_from_dict(data)
    except GraphError as exc:
        raise GraphError([f"{path}: {p}" for p in exc.problems]) from None


def save_graph(graph: SceneGraph, path: str | Path) -> None:
    Path(path).write_text(json.dumps(graph_to_dict(graph), indent=1) + "\n")


def graph_from_dict(data: Any) -> SceneGraph:
    """Build and check a :class:`SceneGraph` from the paper's JSON structure (see module doc)."""
    if not isinstance(data, dict):
        raise GraphError([f"a graph is a JSON object, got {type(data).__name__}"])
    wrapped = "nodes" in data
    body = data["nodes"] if wrapped else data
    if not isinstance(body, dict):
        raise GraphError(["'nodes' must be a JSON object"])
    meta: dict[str, Any] = {"wrapped": wrapped, "keys": {}, "relation_words": {}}
    problems: list[str] = []
    nodes: dict[str, Node] = {}
    parent: dict[str, tuple[str, Relation]] = {}
    raw_parent: dict[str, tuple[str, str]] = {}  # checked once all nodes are known

    known_keys = {k for keys in _LAYER_KEYS.values() for k in keys} | {"agent", "inspected"}
    meta["outer_extra"] = {k: v for k, v in data.items() if k not in ("nodes", "inspected")} if wrapped else {}
    meta["body_extra"] = {k: v for k, v in body.items() if k not in known_keys}

    for layer, keys in _LAYER_KEYS.items():
        present = [k for k in keys if k in body]
        if len(present) > 1:
            problems.append(f"both {present[0]!r} and {present[1]!r} given for the {layer.value} layer")
        if not present:
            continue
        key = present[0]
        meta["keys"][layer] = key
        entries = body[key]
        if not isinstance(entries, list):
            problems.append(f"{key!r} must be a list of nodes")
            continue
        for i, entry in enumerate(entries):
            _read_node(entry, layer, f"{key}[{i}]", nodes, raw_parent, meta, problems)

    agent = _read_agent(body.get("agent"), meta, problems)
    for name, (par, word) in raw_parent.items():
        rel = _RELATION_WORDS.get(word) if word != "in_room" else Relation.IN_ROOM
        node = nodes[name]
        if rel is None:
            problems.append(f"object {name}: unknown relation {word!r} (use ontop_of or inside_of)")
            continue
        if rel is Relation.HELD:
            if par != agent.name:
                problems.append(f"object {name}: marked held by {par!r}, but the agent is {agent.name!r}")
                continue
        elif node.layer is Layer.OBJECT and par in nodes and nodes[par].layer is Layer.PLACE:
            problems.append(f"object {name}: directly in place {par} without an asset; relate it to an asset")
            continue
        elif par not in nodes:
            problems.append(f"{node.layer.value} {name}: unknown parent {par!r}")
            continue
        meta["relation_words"].setdefault(rel, word)
        parent[name] = (par, rel)
    if agent.holding is not None and agent.holding in raw_parent and raw_parent[agent.holding][1] not in ("held", "held_by"):
        problems.append(
            f"object {agent.holding}: two parents: held by the agent and {raw_parent[agent.holding][1]} {raw_parent[agent.holding][0]}"
        )
    elif agent.holding is not None and agent.holding in nodes and agent.holding not in parent:
        parent[agent.holding] = (agent.name, Relation.HELD)
    inspected = data.get("inspected", []) if wrapped else body.get("inspected", [])
    if problems:
        raise GraphError(problems)
    graph = SceneGraph(nodes, parent, agent, frozenset(inspected), meta)
    meta["inspected_order"] = list(inspected)
    return graph.check()


def _read_node(entry, layer, where, nodes, raw_parent, meta, problems) -> None:
    if not isinstance(entry, dict):
        problems.append(f"{where}: a node is a JSON object, got {entry!r}")
        return
    name_key = "name" if "name" in entry else "id" if "id" in entry else None
    if name_key is None or not isinstance(entry[name_key], str) or not entry[name_key]:
        problems.append(f"{where}: node without a 'name'")
        return
    meta["keys"].setdefault("name", name_key)
    name = entry[name_key]
    if name in nodes:
        problems.append(f"{layer.value} {name}: duplicate name (also a {nodes[name].layer.value})")
        return
    lists = {}
    for key in _LIST_FIELDS:
        value = entry.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            problems.append(f"{layer.value} {name}: {key!r} must be a list of strings")
            value = None
        lists[key] = tuple(value) if value is not None else None
    room_key = "room" if "room" in entry else "located" if "located" in entry else None
    has_rel = "related_to" in entry or "relation" in entry
    extra = {k: v for k, v in entry.items() if k not in (name_key, room_key, "relation", "related_to", *_LIST_FIELDS)}
    extra["__order__"] = list(entry)
    nodes[name] = Node(name, layer, lists["states"], lists["affordances"], lists["properties"], extra)
    if layer is Layer.PLACE:
        if room_key or has_rel:
            problems.append(f"place {name}: a place has no parent")
        return
    if room_key and has_rel:
        problems.append(f"{layer.value} {name}: two parents: {room_key} {entry[room_key]!r} and related_to {entry.get('related_to')!r}")
        return
    if layer is Layer.ASSET:
        if not room_key:
            problems.append(f"asset {name}: needs a 'room' (every asset is in exactly one place)")
            return
        meta["keys"].setdefault("asset_room", room_key)
        raw_parent[name] = (entry[room_key], "in_room")
        return
    if room_key:
        problems.append(f"object {name}: directly in place {entry[room_key]!r} without an asset; give relation and related_to")
        return
    related, word = entry.get("related_to"), entry.get("relation")
    if isinstance(related, list):
        if len(related) == 1:
            related = related[0]
        else:
            problems.append(f"object {name}: two parents {related} (an object has exactly one)")
            return
    if not isinstance(related, str) or not isinstance(word, str):
        problems.append(f"object {name}: needs 'relation' and 'related_to'")
        return
    raw_parent[name] = (related, word)


def _read_agent(raw, meta, problems) -> Agent:
    meta["agent_form"] = None
    if raw is None:
        return Agent()
    if isinstance(raw, list):
        if len(raw) != 1 or not isinstance(raw[0], dict):
            problems.append("'agent' must be one agent object")
            return Agent()
        meta["agent_form"], raw = "list", raw[0]
    elif isinstance(raw, dict):
        meta["agent_form"] = "dict"
    else:
        problems.append("'agent' must be a JSON object")
        return Agent()
    name_key = "name" if "name" in raw else "id" if "id" in raw else None
    meta["agent_name_key"] = name_key
    holding = raw.get("holding")
    meta["empty_hands"] = holding if holding in _EMPTY_HANDS else meta.get("empty_hands", "nothing")
    meta["agent_extra"] = {k: v for k, v in raw.items() if k not in (name_key, "location", "holding")}
    meta["agent_order"] = list(raw)
    return Agent(
        name=raw[name_key] if name_key else "agent-1",
        location=raw.get("location"),
        holding=None if holding in _EMPTY_HANDS else holding,
    )


def graph_to_dict(graph: SceneGraph) -> dict[str, Any]:
    """The paper's JSON structure for ``graph``, in the key spelling the graph was read with."""
    meta = graph.meta
    keys = meta.get("keys", {})
    name_key = keys.get("name", "name")
    room_key = keys.get("asset_room", "room")
    words = {**_DEFAULT_WORD, **meta.get("relation_words", {})}
    body: dict[str, Any] = {}
    layers: dict[Layer, list] = {layer: [] for layer in _LAYER_KEYS}
    for name, node in graph.nodes.items():
        fields: dict[str, Any] = {name_key: name}
        edge = graph.parent.get(name)
        if edge is not None:
            par, rel = edge
            if rel is Relation.IN_ROOM:
                fields[room_key] = par
            else:
                fields["relation"] = words[rel]
                fields["related_to"] = par
        for key in _LIST_FIELDS:
            value = getattr(node, key)
            if value is not None:
                fields[key] = list(value)
        extra = node.extra
        fields.update({k: v for k, v in extra.items() if k != "__order__"})
        order = extra.get("__order__")
        if order:
            renamed = {"room": room_key, "located": room_key, "id": name_key, "name": name_key}
            ranked = {renamed.get(k, k): i for i, k in enumerate(order)}
            fields = dict(sorted(fields.items(), key=lambda kv: ranked.get(kv[0], len(ranked))))
        layers[node.layer].append(fields)
    for layer, entries in layers.items():
        key = keys.get(layer)
        if key is None and not entries:
            continue
        body[key or _LAYER_KEYS[layer][0]] = entries
    body.update(meta.get("body_extra", {}))
    agent = graph.agent
    if meta.get("agent_form") is not None or agent.location is not None or agent.holding is not None:
        raw = {
            meta.get("agent_name_key") or "name": agent.name,
            "location": agent.location,
            "holding": agent.holding if agent.holding is not None else meta.get("empty_hands", "nothing"),
        }
        raw.update(meta.get("agent_extra", {}))
        order = meta.get("agent_order")
        if order:
            raw = dict(sorted(raw.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
        body["agent"] = [raw] if meta.get("agent_form") == "list" else raw
    inspected = _ordered_inspected(graph)
    if meta.get("wrapped", True):
        out = {"nodes": body, **meta.get("outer_extra", {})}
        if inspected:
            out["inspected"] = inspected
        return out
    if inspected:
        body["inspected"] = inspected
    return body


def _ordered_inspected(graph: SceneGraph) -> list[str]:
    first = [n for n in graph.meta.get("inspected_order", []) if n in graph.inspected]
    return first + sorted(graph.inspected.difference(first))
