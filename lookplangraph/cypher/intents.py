"""Scene questions as *intents*: what a question asks, apart from how it is worded.

An intent (:class:`Intent`) draws what to ask about from a scene graph (its *slots*: node names,
classes, rooms, states, properties, the relationship types the question's preposition stands for)
and computes the answer by code, typed as :mod:`.answers` types them. Its gold query is a
read-only Cypher query over the slots (:func:`gold_query`); :func:`intent_gold` runs it on a store
and checks that the rows give the computed answer, as :mod:`.gold` does for the templates. The
words are drawn apart (:mod:`.intent_words`), so one intent is asked in many phrasings.

Intents by kind (:data:`INTENTS`):

* ``count`` — objects of a class in the scene, in a room, directly on or in a node;
* ``locate`` — the room of an object; the node it rests on or in;
* ``contents`` — the objects directly on or in a node; all of them, at any depth;
* ``support`` — the asset (furniture or fixture) that ultimately holds a nested object;
* ``list`` — the nodes of a class; the objects of a class in a room; the nodes of a class with
  a state; the nodes with a colour or an owner (``properties``: ``red``, ``Tom's``);
* ``chain`` — the objects on or in the containers of a class that rest on an asset;
* ``rooms`` — the rooms with a class; which of two rooms has more objects of a class;
* ``state`` — whether a node has a state; whether any node of a class has it.

:data:`HELDOUT_INTENTS` are never asked in training data (``tests/test_cypher_intents.py``).
An intent that a scene does not allow (no nesting, one room, no properties) draws nothing.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from sgs.graph import OPPOSITE_STATE, Layer, Relation, SceneGraph, node_class

from lookplangraph.cypher.answers import answers_equal
from lookplangraph.cypher.gold import CHAIN, Gold, GoldError, answer_from_rows
from lookplangraph.cypher.qa import MAX_SET, base_asset, nesting_depth, room_of, seeded_pick, unheld_objects

#: colours a ``properties`` entry may name (a node named "the red mug"); an owner ends in ``'s``
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "grey", "gray", "orange", "brown", "pink", "purple")
#: the relationship types a preposition stands for (slot ``rel``)
ONTOP, INSIDE, EITHER = "ON_TOP_OF", "INSIDE", "ON_TOP_OF|INSIDE"
#: slots written into a query as they are (relationship types); the others are quoted strings
RAW_SLOTS = ("rel", "rel2")

Drawn = tuple[dict[str, str], Any]  # slots, answer


@dataclass(frozen=True)
class Intent:
    """One intent: its kind, answer type, how it draws slots and an answer from a graph, and
    its gold query (``{slot}`` fields; module doc)."""

    name: str
    kind: str
    answer_type: str
    draw: Callable[[SceneGraph, random.Random], "Drawn | None"]
    query: str


# -- graph helpers --------------------------------------------------------------------------------
def _rel(g: SceneGraph, children) -> str:
    rels = {g.parent[c][1] for c in children}
    return ONTOP if rels == {Relation.ONTOP} else INSIDE if rels == {Relation.INSIDE} else EITHER


def _things(g: SceneGraph) -> list[str]:
    """Assets and objects (what a question may name as a node)."""
    return [n for n, node in g.nodes.items() if node.layer is not Layer.PLACE]


def _object_kids(g: SceneGraph, n: str) -> list[str]:
    return [c for c in g.children(n) if g.nodes[c].layer is Layer.OBJECT and g.parent[c][1] is not Relation.HELD]


def _room_counts(g: SceneGraph) -> dict[str, Counter]:
    """class -> Counter of rooms holding its (not held) objects."""
    by: dict[str, Counter] = {}
    for n in unheld_objects(g):
        by.setdefault(node_class(n), Counter())[room_of(g, n)] += 1
    return by


def is_colour(p: str) -> bool:
    return p in COLOURS


def is_owner(p: str) -> bool:
    return p.endswith("'s") and len(p) > 2


# -- intents --------------------------------------------------------------------------------------
def count_scene(g, rng):
    counts = Counter(node_class(n) for n in g.names(Layer.OBJECT))
    cls = seeded_pick(rng, [c for c, k in counts.items() if k >= 2]) or seeded_pick(rng, counts)
    return ({"cls": cls}, counts[cls]) if cls else None


def count_room(g, rng):
    by, rooms = _room_counts(g), sorted(g.places)
    cls = seeded_pick(rng, by)
    if cls is None or len(rooms) < 2:
        return None
    empty = [r for r in rooms if not by[cls][r]]
    room = seeded_pick(rng, empty) if empty and rng.random() < 0.2 else seeded_pick(rng, by[cls])
    return {"cls": cls, "room": room}, by[cls][room]


def count_on(g, rng):
    node = seeded_pick(rng, [n for n in _things(g) if _object_kids(g, n)])
    if node is None:
        return None
    kids = _object_kids(g, node)
    cls = seeded_pick(rng, {node_class(c) for c in kids})
    mine = [c for c in kids if node_class(c) == cls]
    return {"cls": cls, "node": node, "rel": _rel(g, mine)}, len(mine)


def locate_room(g, rng):
    obj = seeded_pick(rng, unheld_objects(g)) if len(g.places) > 1 else None
    return ({"obj": obj}, room_of(g, obj)) if obj else None


def locate_holder(g, rng):
    obj = seeded_pick(rng, unheld_objects(g))
    return ({"obj": obj, "rel": _rel(g, [obj])}, g.parent[obj][0]) if obj else None


def contents_direct(g, rng):
    node = seeded_pick(rng, [n for n in _things(g) if 1 <= len(_object_kids(g, n)) <= MAX_SET])
    if node is None:
        return None
    kids = _object_kids(g, node)
    return {"node": node, "rel": _rel(g, kids)}, sorted(kids)


def contents_deep(g, rng):
    def below(n):
        return [d for d in g.descendants(n) if g.nodes[d].layer is Layer.OBJECT]
    node = seeded_pick(rng, [n for n in _things(g) if 2 <= len(below(n)) <= MAX_SET and len(below(n)) > len(g.children(n))])
    return ({"node": node}, sorted(below(node))) if node else None


def support(g, rng):
    obj = seeded_pick(rng, [n for n in unheld_objects(g) if nesting_depth(g, n) >= 2])
    return ({"obj": obj}, base_asset(g, obj)) if obj else None


def list_class(g, rng):
    by: dict[str, list[str]] = {}
    for n in _things(g):
        by.setdefault(node_class(n), []).append(n)
    rooms = {node_class(r) for r in g.places}  # the query's class filter would find rooms too
    cls = seeded_pick(rng, [c for c, ns in by.items() if 2 <= len(ns) <= MAX_SET and c not in rooms])
    return ({"cls": cls}, sorted(by[cls])) if cls else None


def list_room(g, rng):
    by = _room_counts(g)
    cls = seeded_pick(rng, [c for c, rooms in by.items() if len(rooms) >= 2])
    if cls is None:
        return None
    room = seeded_pick(rng, [r for r, k in by[cls].items() if k <= MAX_SET])
    if room is None:
        return None
    return {"cls": cls, "room": room}, sorted(n for n in unheld_objects(g) if node_class(n) == cls and room_of(g, n) == room)


def list_state(g, rng):
    options = []
    by: dict[str, list[str]] = {}
    for n in _things(g):
        by.setdefault(node_class(n), []).append(n)
    for cls, names in by.items():
        for s in sorted({s for n in names for s in g.nodes[n].states or ()}):
            have = [n for n in names if g.nodes[n].has(s)]
            if 1 <= len(have) <= MAX_SET and len(have) < len(names):
                options.append((cls, s, tuple(sorted(have))))
    if not options:
        return None
    cls, s, have = rng.choice(sorted(options))
    return {"cls": cls, "state": s}, list(have)


def list_property(g, rng):
    by: dict[str, list[str]] = {}
    for n, node in g.nodes.items():
        for p in node.properties or ():
            if is_colour(p) or is_owner(p):
                by.setdefault(p, []).append(n)
    prop = seeded_pick(rng, [p for p, ns in by.items() if len(ns) <= MAX_SET])
    return ({"prop": prop}, sorted(by[prop])) if prop else None


def chain_contents(g, rng):
    options = {}
    for a in g.names(Layer.ASSET):
        for c in _object_kids(g, a):
            inner = _object_kids(g, c)
            if inner:
                options.setdefault((a, node_class(c)), []).append(c)
    key = seeded_pick(rng, [k for k, cs in options.items() if sum(len(_object_kids(g, c)) for c in cs) <= MAX_SET])
    if key is None:
        return None
    containers = options[key]
    inner = [o for c in containers for o in _object_kids(g, c)]
    return {"asset": key[0], "cls": key[1], "rel": _rel(g, inner), "rel2": _rel(g, containers)}, sorted(inner)


def rooms_with_class(g, rng):
    by = _room_counts(g)
    cls = seeded_pick(rng, [c for c, rooms in by.items() if len(rooms) <= MAX_SET]) if len(g.places) > 1 else None
    return ({"cls": cls}, sorted(by[cls])) if cls else None


def compare_rooms(g, rng):
    by, rooms = _room_counts(g), sorted(g.places)
    options = [(c, r1, r2) for c in by for i, r1 in enumerate(rooms) for r2 in rooms[i + 1:]
               if by[c][r1] != by[c][r2] and (by[c][r1] or 0) + (by[c][r2] or 0) >= 2]
    if not options:
        return None
    cls, r1, r2 = rng.choice(sorted(options))
    if rng.random() < 0.5:
        r1, r2 = r2, r1
    return {"cls": cls, "room": r1, "room2": r2}, (r1 if by[cls][r1] > by[cls][r2] else r2)


def state_check(g, rng):
    options = [(n, s) for n in _things(g) for s in g.nodes[n].states or () if s in OPPOSITE_STATE]
    if not options:
        return None
    n, s = rng.choice(sorted(options))
    asked = s if rng.random() < 0.5 else OPPOSITE_STATE[s]
    return {"node": n, "state": asked}, g.nodes[n].has(asked)


def state_any(g, rng):
    by: dict[str, list[str]] = {}
    for n in _things(g):
        by.setdefault(node_class(n), []).append(n)
    options = [(c, s) for c, ns in by.items() if len(ns) >= 2
               for s in sorted({s for n in ns for s in g.nodes[n].states or () if s in OPPOSITE_STATE})]
    if not options:
        return None
    cls, s = rng.choice(sorted(options))
    asked = s if rng.random() < 0.5 else OPPOSITE_STATE[s]
    return {"cls": cls, "state": asked}, any(g.nodes[n].has(asked) for n in by[cls])


_IN_ROOM = f"-{CHAIN}->(:Asset)-[:IN_ROOM]->"
INTENTS: dict[str, Intent] = {i.name: i for i in (
    Intent("count_scene", "count", "number", count_scene, "MATCH (o:Object) WHERE o.class = {cls} RETURN count(o)"),
    Intent("count_room", "count", "number", count_room,
           f"MATCH (o:Object){_IN_ROOM}(:Room {{{{name: {{room}}}}}}) WHERE o.class = {{cls}} RETURN count(DISTINCT o)"),
    Intent("count_on", "count", "number", count_on,
           "MATCH (o:Object)-[:{rel}]->(n {{name: {node}}}) WHERE o.class = {cls} RETURN count(o)"),
    Intent("locate_room", "locate", "string", locate_room,
           f"MATCH (o:Object {{{{name: {{obj}}}}}}){_IN_ROOM}(r:Room) RETURN r.name"),
    Intent("locate_holder", "locate", "string", locate_holder,
           "MATCH (o:Object {{name: {obj}}})-[:ON_TOP_OF|INSIDE]->(p) RETURN p.name"),
    Intent("contents_direct", "contents", "set", contents_direct,
           "MATCH (o:Object)-[:{rel}]->(n {{name: {node}}}) RETURN o.name ORDER BY o.name"),
    Intent("contents_deep", "contents", "set", contents_deep,
           f"MATCH (o:Object)-{CHAIN}->(n {{{{name: {{node}}}}}}) RETURN DISTINCT o.name ORDER BY o.name"),
    Intent("support", "support", "string", support, f"MATCH (o:Object {{{{name: {{obj}}}}}})-{CHAIN}->(a:Asset) RETURN a.name"),
    Intent("list_class", "list", "set", list_class, "MATCH (n) WHERE n.class = {cls} RETURN n.name ORDER BY n.name"),
    Intent("list_room", "list", "set", list_room,
           f"MATCH (o:Object){_IN_ROOM}(:Room {{{{name: {{room}}}}}}) WHERE o.class = {{cls}} "
           "RETURN DISTINCT o.name ORDER BY o.name"),
    Intent("list_state", "list", "set", list_state,
           "MATCH (n) WHERE n.class = {cls} AND list_contains(n.states, {state}) RETURN n.name ORDER BY n.name"),
    Intent("list_property", "list", "set", list_property,
           "MATCH (n) WHERE list_contains(n.properties, {prop}) RETURN n.name ORDER BY n.name"),
    Intent("chain_contents", "chain", "set", chain_contents,
           "MATCH (o:Object)-[:{rel}]->(c:Object)-[:{rel2}]->(a {{name: {asset}}}) WHERE c.class = {cls} "
           "RETURN DISTINCT o.name ORDER BY o.name"),
    Intent("rooms_with_class", "rooms", "set", rooms_with_class,
           f"MATCH (o:Object){_IN_ROOM}(r:Room) WHERE o.class = {{cls}} RETURN DISTINCT r.name ORDER BY r.name"),
    Intent("compare_rooms", "rooms", "string", compare_rooms,
           f"MATCH (o:Object){_IN_ROOM}(r:Room) WHERE o.class = {{cls}} AND r.name IN [{{room}}, {{room2}}] "
           "RETURN r.name, count(DISTINCT o) AS k ORDER BY k DESC LIMIT 1"),
    Intent("state_check", "state", "boolean", state_check,
           "MATCH (n {{name: {node}}}) RETURN list_contains(n.states, {state})"),
    Intent("state_any", "state", "boolean", state_any,
           "MATCH (n) WHERE n.class = {cls} AND list_contains(n.states, {state}) RETURN count(n) > 0"),
)}

#: intents never asked in training data: a trained agent meets them first in evaluation
HELDOUT_INTENTS: tuple[str, ...] = ("chain_contents", "compare_rooms")
#: the intents training data may ask
TRAIN_INTENTS: tuple[str, ...] = tuple(i for i in INTENTS if i not in HELDOUT_INTENTS)


def check_intents(names) -> tuple[str, ...]:
    """``names`` as a tuple; ``ValueError`` naming an unknown intent (or none given)."""
    names = tuple(names)
    unknown = [n for n in names if n not in INTENTS]
    if unknown or not names:
        raise ValueError(f"unknown intents {', '.join(unknown) or '(none given)'}; the intents are " + ", ".join(INTENTS))
    return names


def cypher_string(value: str) -> str:
    """``value`` as a Cypher string literal: single quotes, or double quotes when it holds one
    (``"Tom's"``)."""
    if "'" in value:
        if '"' in value or "\\" in value:
            raise ValueError(f"cannot quote {value!r} in a gold query")
        return f'"{value}"'
    return f"'{value}'"


def gold_query(intent: str, slots: dict[str, str]) -> str:
    """The gold query of ``intent`` with ``slots`` filled in (module doc)."""
    filled = {k: (v if k in RAW_SLOTS else cypher_string(v)) for k, v in slots.items()}
    return INTENTS[intent].query.format(**filled)


def intent_gold(q, store) -> Gold:
    """The gold query of intent question ``q`` (an :class:`~.intent_bench.IntentQuestion`) run
    on ``store`` (its scene loaded), checked against ``q``'s answer (:class:`~.gold.GoldError`
    when it differs)."""
    query = gold_query(q.template, q.slots)
    rows = store.query(query).rows
    answer = answer_from_rows(q.answer_type, rows)
    if not answers_equal(q.answer_type, q.answer, answer):
        raise GoldError(f"{q.id} ({q.template}): the gold query gives {answer!r}, the computed answer is {q.answer!r}")
    return Gold(query, rows, answer)
