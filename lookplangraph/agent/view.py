"""What the LM sees of the memory graph each step, in three styles (paper Fig. 3, Table V).

:func:`view` gives the relevant part of the memory graph: every place (with its properties),
the agent (its place, what it holds), the assets of the agent's place with their states, the
objects there split into *seen* ones and *unseen priors*, what is known elsewhere (discovered
objects, interacted nodes) and, with ``recall`` (:mod:`lookplangraph.agent.recall`), the unseen
priors of the classes the instruction names in other places (and with ``asset_recall`` the assets of
the classes it names there, key ``named_assets``); the loop adds the ``search`` key
(:func:`lookplangraph.agent.search.search_entries`). Every node is shown with its properties, so
"the red stapler" is decidable from the view alone.

Styles: ``text`` (default: short English lines), ``json`` (the same view as compact JSON: the
"JSON graph" ablation) and ``full`` (every node of every place: the "Full Graph" ablation).
:func:`visible_names` are the view's node names, the vocabulary for constrained decoding;
:func:`inapplicable` and :func:`vocabulary` say which actions on them can never be accepted and
what each function may name. Invariant: the view reads the memory graph only, never the true
scene. Docs: ``docs/concepts/loop.md`` (*Memory graph*, *Recall*).
"""

from __future__ import annotations

import json

from sgs.actions import FUNCTIONS
from sgs.graph import Layer, Relation, SceneGraph, affords
from sgs.simulator import TARGET_STATE

from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.recall import recalled

STYLES = ("text", "json", "full")

#: the view's sections of nodes, in order: the keys :func:`names_in` reads and the journal lists
NODE_SECTIONS = ("assets", "objects", "remembered", "elsewhere", "recalled", "named_assets")


def _states(graph: SceneGraph, name: str, inspected: bool = True) -> list[str]:
    out = list(graph.nodes[name].states or ())
    if inspected and name in graph.inspected:
        out.append("inspected")
    return out


def _where(graph: SceneGraph, name: str) -> tuple[str, str] | None:
    edge = graph.parent.get(name)
    if edge is None or edge[1] not in (Relation.ONTOP, Relation.INSIDE):
        return None
    return edge[1].value, edge[0]


def view(memory: MemoryGraph, style: str = "text", recall: frozenset[str] = frozenset(),
         asset_recall: frozenset[str] = frozenset()) -> dict:
    """The part of the memory graph shown to the LM, as plain data (see module doc). ``recall``:
    object classes whose unseen priors elsewhere are shown too (key ``recalled``, present only
    when ``recall`` is not empty, so a view without it is what it always was). ``asset_recall``:
    asset classes whose assets in other places are shown too (key ``named_assets``, present only
    when ``asset_recall`` is not empty; :func:`lookplangraph.agent.recall.recall_asset_classes`)."""
    g = memory.graph
    here = g.agent.location
    everywhere = style == "full"
    assets, seen, priors, elsewhere, recalls, named = [], [], [], [], [], []
    for name, node in g.nodes.items():
        if node.layer is Layer.PLACE or name == g.agent.holding:
            continue
        place = g.place_of(name)
        entry = {"name": name, "states": _states(g, name)}
        if node.properties:
            entry["properties"] = list(node.properties)
        if node.layer is Layer.OBJECT:
            rel = _where(g, name)
            if rel:
                entry["relation"], entry["parent"] = rel
        if place == here or everywhere:
            if place != here:
                entry["room"] = place
            if node.layer is Layer.ASSET:
                assets.append(entry)
            elif name in memory.unseen:
                priors.append(entry)
            else:
                seen.append(entry)
        elif name in memory.known:
            entry["room"] = place
            elsewhere.append(entry)
        elif name in memory.unseen and recalled(name, recall):
            entry["room"] = place
            recalls.append(entry)
        elif node.layer is Layer.ASSET and recalled(name, asset_recall):
            entry["room"] = place
            named.append(entry)
    out = {
        "places": g.places,
        "place_properties": {p: list(g.nodes[p].properties) for p in g.places if g.nodes[p].properties},
        "agent": {"room": here, "holding": g.agent.holding},
        "assets": assets,
        "objects": seen,
        "remembered": priors,
        "elsewhere": elsewhere,
    }
    if recall:
        out["recalled"] = recalls
    if asset_recall:
        out["named_assets"] = named
    return out


def visible_names(memory: MemoryGraph, style: str = "text") -> list[str]:
    """Names the LM may use this step: places, the held object and every node in the view."""
    return names_in(view(memory, style))


def names_in(v: dict) -> list[str]:
    """:func:`visible_names` of a view already computed (:func:`view`): a planner that also
    renders it computes the view once per step."""
    names = list(v["places"])
    if v["agent"]["holding"]:
        names.append(v["agent"]["holding"])
    for key in NODE_SECTIONS:
        names += [e["name"] for e in v.get(key, ())]
    names += [c["name"] for e in v.get("search", ()) for c in e["candidates"] if c["name"] not in names]
    return names


def entry_line(e: dict) -> str:
    """``name[, property, ...,] [relation parent] [in room] [(states)]``: the properties as an
    apposition ("stapler-2, red, inside cardboard_box-1 in storage_room-1")."""
    text = e["name"]
    place = (f" {e['relation']} {e['parent']}" if "relation" in e else "") + (f" in {e['room']}" if "room" in e else "")
    if e.get("properties"):
        text += ", " + ", ".join(e["properties"]) + ("," if place else "")
    text += place
    if e["states"]:
        text += f" ({', '.join(e['states'])})"
    return text


def render(memory: MemoryGraph, style: str = "text") -> str:
    """The view as prompt text in ``style`` (``text``, ``json`` or ``full``)."""
    if style not in STYLES:
        raise ValueError(f"unknown graph style {style!r}; styles: {', '.join(STYLES)}")
    return render_view(view(memory, style), style)


def render_view(v: dict, style: str = "text") -> str:
    """:func:`render` of a view already computed by :func:`view` in the same ``style``."""
    if style not in STYLES:
        raise ValueError(f"unknown graph style {style!r}; styles: {', '.join(STYLES)}")
    if style == "json":
        return json.dumps(v, separators=(",", ":"))
    agent = v["agent"]
    lines = [
        places_line(v),
        f"You are in {agent['room']} and hold {agent['holding'] or 'nothing'}.",
    ]
    sections = (
        ("assets", "Assets here" if style == "text" else "Assets"),
        ("objects", "Objects seen here" if style == "text" else "Objects seen"),
        ("remembered", "Objects remembered here, not seen yet (they may have moved)" if style == "text"
         else "Objects remembered, not seen yet (they may have moved)"),
        ("elsewhere", "Known in other places"),
        ("recalled", "Objects the instruction names, remembered in other places (they may have moved)"),
        ("named_assets", "Assets the instruction names, in other places"),
    )
    for key, title in sections:
        if v.get(key):
            lines.append(f"{title}: " + "; ".join(entry_line(e) for e in v[key]) + ".")
        elif key in ("assets", "objects"):
            lines.append(f"{title}: none.")
    return "\n".join(lines + render_search(v))


def places_line(v: dict) -> str:
    """The view's first line: every place, with its properties."""
    described = v.get("place_properties", {})
    places = [f"{p} ({', '.join(described[p])})" if p in described else p for p in v["places"]]
    return f"Places: {', '.join(places)}."


def render_search(v: dict) -> list[str]:
    """The lines of the view's ``search`` entries (the loop's ``search_hint``), one per object."""
    lines = []
    for e in v.get("search", ()):
        places = ", ".join(c["name"] + (" here" if c["room"] == v["agent"]["room"] else f" in {c['room']}")
                           for c in e["candidates"])
        lines.append(f"Not found where remembered: {e['name']} (was {e['relation']} {e['parent']} in {e['room']})"
                     + (f"; likeliest places not looked at yet: {places}." if places else "; every place was looked at."))
    return lines


def vocabulary(memory: MemoryGraph, style: str = "text", v: dict | None = None) -> dict[str, dict[str, list[str]]]:
    """Per-function names for constrained decoding (:data:`lookplangraph.lm.Vocabulary`),
    drawn from the view: ``go_to`` other places; ``discover_objects`` nodes not yet inspected;
    ``pick_up`` objects in view, seen or remembered (not held); ``rearrange`` those or the held
    object onto or into the seen non-place nodes of the view; ``put_on``/``put_inside`` (when
    holding) those nodes; ``open``/``close``/``turn_on``/``turn_off`` nodes that afford it and are
    not already so; ``done`` always. A remembered prior may be named for moving so that the
    planner can answer "discover its holder first"; it is never a destination or toggled.
    ``v``: the memory's view in ``style`` when already computed."""

    g = memory.graph
    v = view(memory, style) if v is None else v
    here, held = v["agent"]["room"], v["agent"]["holding"]
    entries = [e["name"] for key in ("assets", "objects", "remembered", "elsewhere", "named_assets")
               for e in v.get(key, ())]
    seen = [e["name"] for key in ("objects", "elsewhere") for e in v[key] if g.nodes[e["name"]].layer is Layer.OBJECT]
    holders = entries + ([held] if held else [])
    out: dict[str, dict[str, list[str]]] = {}
    others = [p for p in v["places"] if p != here]
    if others:
        out["go_to"] = {"node": others}
    fresh = [n for n in entries if n not in g.inspected and n not in memory.unseen]
    if fresh:
        out["discover_objects"] = {"node": fresh}
    # priors stay nameable for moving: the planner then answers "discover its holder first"
    priors = [e["name"] for e in v["remembered"]]
    if (seen or priors) and not held:
        out["pick_up"] = {"node": seen + priors}
    movable = seen + priors + ([held] if held else [])
    def takes(n: str) -> bool:
        return n not in memory.unseen and (affords(g.nodes[n], "put_on") or affords(g.nodes[n], "put_inside"))

    supports = [n for n in holders if takes(n)]
    if movable and supports:
        out["rearrange"] = {"node": movable, "destination": supports}
    if held:
        dests = [n for n in entries if n != held and takes(n)]
        if dests:
            out["put_on"] = {"destination": dests}
            out["put_inside"] = {"destination": dests}
    for fn, state in (("open", "open"), ("close", "closed"), ("turn_on", "on"), ("turn_off", "off")):
        nodes = [n for n in holders if n not in memory.unseen and affords(g.nodes[n], fn) and not g.nodes[n].has(state)]
        if nodes:
            out[fn] = {"node": nodes}
    out["done"] = {}
    return out


def inapplicable(memory: MemoryGraph, names: list[str], *,
                 holders_only: bool = False) -> list[tuple[str, str | None, None, None]]:
    """Actions on ``names`` that no correction can make acceptable in the memory's current state,
    as :data:`lookplangraph.agent.decoding.ActionKey`: a call without the node it needs
    (``turn_on(null)``; ``rearrange`` aside, whose key cannot say "any relation");
    ``go_to`` the agent's own place or a node that is no place;
    ``discover_objects`` of a place or of an inspected node (with ``holders_only``, the loop's
    ``discover_holders``, also of an object that nothing can be put on or in: looking at it finds
    nothing); ``pick_up`` of a place or asset;
    ``open``/``close``/``turn_on``/``turn_off`` of a place or of a node that does not afford it.
    The planner excludes them from the decode (they would only come back as feedback), leaving
    everything else, feedback included, as the flat vocabulary has it. A toggle already in effect
    stays decodable: a small model proposes it when it believes the task is finished, and its
    feedback then suggests done() (excluding it made the model wander to other devices)."""
    g = memory.graph
    out: list[tuple[str, str | None, None, None]] = [
        (fn, None, None, None) for fn, slots in FUNCTIONS.items() if slots and fn != "rearrange"]
    out.append(("go_to", g.agent.location, None, None))
    for n in names:
        node = g.nodes.get(n)
        if node is None:
            continue
        if node.layer is not Layer.PLACE:
            out.append(("go_to", n, None, None))
        if node.layer is Layer.PLACE or n in g.inspected or (
                holders_only and node.layer is Layer.OBJECT
                and not (affords(node, "put_on") or affords(node, "put_inside"))):
            out.append(("discover_objects", n, None, None))
        if node.layer is not Layer.OBJECT:
            out.append(("pick_up", n, None, None))
        for fn in TARGET_STATE:
            if node.layer is Layer.PLACE or not affords(node, fn):
                out.append((fn, n, None, None))
    return out
