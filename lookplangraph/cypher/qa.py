"""Scene question answering built from GraSIF scenes: templates, answers computed from the graph.

Every question is about one scene (a GraSIF task's initial graph, which is also the planner's
memory graph at the start of the task) and names the nodes it asks about by their names. Answers
are computed here by code and typed (:mod:`.answers`). Kinds and their templates:

* ``count`` — objects of a class in the scene / in a room; objects directly on or in an asset;
* ``location`` — the room of an object; what it rests on or in;
* ``state`` — which nodes of a class have a state (set); whether a node has a state (boolean);
  how many assets of a room have a state;
* ``containment`` — everything on or in a node through several levels (set); the asset that
  ultimately holds a nested object; how many objects a node holds at any depth;
* ``argmax`` — the room with the most objects of a class / the most assets (unique maximum only);
* ``collection`` — classes on an asset (set); rooms in alphabetical order (list); objects on an
  asset in alphabetical order (list); rooms that contain a class (set).

A template gives at most one question per scene, chosen with a seeded generator, and only when
its answer is unambiguous and small (sets and lists of 1-8 names). :func:`build_questions` picks
round-robin over the templates and scenes, so every kind is represented in every split where the
scenes allow it (BEHAVIOR scenes are one or two rooms: no argmax there, little nesting).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Callable

from pydantic import BaseModel

from sgs.graph import OPPOSITE_STATE, Layer, Relation, SceneGraph, node_class


class Question(BaseModel):
    """One benchmark question. ``scene`` is the GraSIF task id (in ``split``) whose initial graph
    the question is about; ``part``: ``dev`` (scenes the prompts may draw on) or ``heldout``
    (:mod:`.benchmark`)."""

    id: str
    split: str
    scene: str
    kind: str
    template: str
    question: str
    answer_type: str
    answer: Any
    part: str = "dev"


Candidate = tuple[str, str, Any]  # question, answer type, answer
Template = Callable[[SceneGraph, random.Random], "Candidate | None"]
MAX_SET = 8


# -- graph helpers --------------------------------------------------------------------------------
def unheld_objects(g: SceneGraph) -> list[str]:
    """The objects of the scene that are not held."""
    return [n for n in g.names(Layer.OBJECT) if g.parent[n][1] is not Relation.HELD]


def room_of(g: SceneGraph, n: str) -> str:
    """The room (place) ``n`` is in."""
    return g.place_of(n)


def nesting_depth(g: SceneGraph, n: str) -> int:
    """1 for an object on an asset, 2 for an object on that object ..."""
    d = 0
    while g.nodes[n].layer is Layer.OBJECT and g.parent[n][1] is not Relation.HELD:
        n = g.parent[n][0]
        d += 1
    return d


def base_asset(g: SceneGraph, n: str) -> str:
    """The asset that ultimately holds ``n`` (``n`` itself when it is not an object)."""
    while g.nodes[n].layer is Layer.OBJECT:
        n = g.parent[n][0]
    return n


def seeded_pick(rng: random.Random, items):
    """One of ``items`` drawn with ``rng`` from their sorted order (the same for the same seed), or None."""
    items = sorted(items)
    return rng.choice(items) if items else None


# -- templates ------------------------------------------------------------------------------------
def count_class_scene(g, rng):
    counts = Counter(node_class(n) for n in unheld_objects(g))
    cls = seeded_pick(rng, [c for c, k in counts.items() if k >= 2])
    if cls:
        return f"How many objects of class {cls} are there in the whole scene?", "number", counts[cls]


def count_class_room(g, rng):
    by = Counter((room_of(g, n), node_class(n)) for n in unheld_objects(g))
    classes = Counter(c for (_, c) in by)
    key = seeded_pick(rng, [k for k in by if classes[k[1]] >= 2])  # the class is in several rooms
    if key:
        return f"How many {key[1]} objects are in the room {key[0]}?", "number", by[key]


def count_on_asset(g, rng):
    kids = {a: len(g.children(a)) for a in g.names(Layer.ASSET)}
    a = seeded_pick(rng, [a for a, k in kids.items() if k >= 2])
    if a:
        return f"How many objects are directly on top of or inside {a}?", "number", kids[a]


def location_room(g, rng):
    n = seeded_pick(rng, [n for n in unheld_objects(g) if len(g.names(Layer.PLACE)) > 1])
    if n:
        return f"In which room is {n}?", "string", room_of(g, n)


def location_parent(g, rng):
    n = seeded_pick(rng, unheld_objects(g))
    if n:
        par, rel = g.parent[n]
        return f"What is {n} directly on top of or inside? Give the name of that node.", "string", par


def state_set(g, rng):
    options = []
    by_class: dict[str, list[str]] = {}
    for n, node in g.nodes.items():
        if node.layer is not Layer.PLACE:
            by_class.setdefault(node_class(n), []).append(n)
    for cls, names in by_class.items():
        states = {s for n in names for s in g.nodes[n].states or ()}
        for s in states:
            have = [n for n in names if g.nodes[n].has(s)]
            if 1 <= len(have) <= MAX_SET and len(have) < len(names):
                options.append((cls, s, tuple(sorted(have))))
    if options:
        cls, s, have = rng.choice(sorted(options))
        return f"Which {cls} nodes are {s}? Give their names.", "set", list(have)


def state_bool(g, rng):
    options = [(n, s) for n, node in g.nodes.items() if node.layer is not Layer.PLACE
               for s in node.states or () if s in OPPOSITE_STATE]
    if options:
        n, s = rng.choice(sorted(options))
        asked = s if rng.random() < 0.5 else OPPOSITE_STATE[s]
        return f"Is {n} {asked}?", "boolean", g.nodes[n].has(asked)


def state_count_room(g, rng):
    by = Counter((room_of(g, a), s) for a in g.names(Layer.ASSET) for s in g.nodes[a].states or ())
    key = seeded_pick(rng, [k for k, v in by.items() if v >= 1])
    if key:
        return f"How many assets in the room {key[0]} are {key[1]}?", "number", by[key]


def contain_deep_set(g, rng):
    options = []
    for n in g.nodes:
        if g.nodes[n].layer is Layer.PLACE:
            continue
        below = [d for d in g.descendants(n) if g.nodes[d].layer is Layer.OBJECT]
        if 2 <= len(below) <= MAX_SET and any(nesting_depth(g, d) - nesting_depth(g, n) >= 2 for d in below):
            options.append(n)
    n = seeded_pick(rng, options)
    if n:
        below = sorted(d for d in g.descendants(n))
        return (f"Which objects are on top of or inside {n}, directly or through other objects (at any depth)?",
                "set", below)


def contain_base_asset(g, rng):
    n = seeded_pick(rng, [n for n in unheld_objects(g) if nesting_depth(g, n) >= 2])
    if n:
        return (f"{n} rests on or inside another object. Which asset (furniture or fixture) ultimately holds it?",
                "string", base_asset(g, n))


def contain_count_deep(g, rng):
    options = []
    for a in g.names(Layer.ASSET):
        below = list(g.descendants(a))
        if len(below) > len(g.children(a)):  # some object holds another
            options.append((a, len(below)))
    pick = seeded_pick(rng, options)
    if pick:
        return f"How many objects are on top of or inside {pick[0]} at any depth (objects on or in objects count too)?", \
            "number", pick[1]


def argmax_room_class(g, rng):
    by: dict[str, Counter] = {}
    for n in unheld_objects(g):
        by.setdefault(node_class(n), Counter())[room_of(g, n)] += 1
    options = []
    for cls, rooms in by.items():
        top = rooms.most_common()
        if len(top) >= 2 and top[0][1] > top[1][1]:
            options.append((cls, top[0][0]))
    pick = seeded_pick(rng, options)
    if pick:
        return f"Which room has the most {pick[0]} objects?", "string", pick[1]


def argmax_room_assets(g, rng):
    rooms = Counter(room_of(g, a) for a in g.names(Layer.ASSET))
    top = rooms.most_common()
    if len(top) >= 2 and top[0][1] > top[1][1]:
        return "Which room has the most assets?", "string", top[0][0]


def set_classes_on(g, rng):
    options = [a for a in g.names(Layer.ASSET) if 2 <= len({node_class(c) for c in g.children(a)}) <= MAX_SET]
    a = seeded_pick(rng, options)
    if a:
        return (f"What classes of objects are directly on top of or inside {a}? Give each class once.", "set",
                sorted({node_class(c) for c in g.children(a)}))


def list_rooms_sorted(g, rng):
    rooms = sorted(g.names(Layer.PLACE))
    if 2 <= len(rooms) <= MAX_SET:
        return "List the names of all rooms in alphabetical order.", "list", rooms


def list_on_asset_sorted(g, rng):
    a = seeded_pick(rng, [a for a in g.names(Layer.ASSET) if 2 <= len(g.children(a)) <= MAX_SET])
    if a:
        return (f"List the names of the objects directly on top of or inside {a}, in alphabetical order.", "list",
                sorted(g.children(a)))


def set_rooms_with_class(g, rng):
    by: dict[str, set[str]] = {}
    for n in unheld_objects(g):
        by.setdefault(node_class(n), set()).add(room_of(g, n))
    cls = seeded_pick(rng, [c for c, rooms in by.items() if 2 <= len(rooms) <= MAX_SET])
    if cls:
        return f"Which rooms contain at least one {cls} object?", "set", sorted(by[cls])


#: template name -> (kind, function), in the round-robin order
TEMPLATES: dict[str, tuple[str, Template]] = {
    "count_class_scene": ("count", count_class_scene),
    "count_class_room": ("count", count_class_room),
    "count_on_asset": ("count", count_on_asset),
    "location_room": ("location", location_room),
    "location_parent": ("location", location_parent),
    "state_set": ("state", state_set),
    "state_bool": ("state", state_bool),
    "state_count_room": ("state", state_count_room),
    "contain_deep_set": ("containment", contain_deep_set),
    "contain_base_asset": ("containment", contain_base_asset),
    "contain_count_deep": ("containment", contain_count_deep),
    "argmax_room_class": ("argmax", argmax_room_class),
    "argmax_room_assets": ("argmax", argmax_room_assets),
    "set_classes_on": ("collection", set_classes_on),
    "list_rooms_sorted": ("collection", list_rooms_sorted),
    "list_on_asset_sorted": ("collection", list_on_asset_sorted),
    "set_rooms_with_class": ("collection", set_rooms_with_class),
}


def build_questions(split: str, scenes: list[tuple[str, SceneGraph]], n: int, seed: int = 0,
                    part: str = "dev", templates: tuple[str, ...] | None = None) -> list[Question]:
    """``n`` questions (fewer if the scenes do not allow them) over ``scenes`` (task id, graph),
    deterministic for a seed: scenes are shuffled with ``random.Random(f"{seed}:{split}")``, each
    template is tried once per scene with a generator seeded by scene and template, and questions
    are taken round-robin over the templates. Ids are ``SPLIT-qa-NNN`` (``SPLIT-heldout-qa-NNN``
    for ``part="heldout"``). ``templates``: only these templates (default all of :data:`TEMPLATES`;
    ``ValueError`` naming an unknown one); a template's questions do not depend on the others'."""
    chosen = tuple(TEMPLATES) if templates is None else tuple(templates)
    unknown = [t for t in chosen if t not in TEMPLATES]
    if unknown or not chosen:
        raise ValueError(f"unknown question templates {', '.join(unknown) or '(none given)'}; the templates are "
                         + ", ".join(TEMPLATES))
    order = sorted(scenes, key=lambda s: s[0])
    random.Random(f"{seed}:{split}").shuffle(order)
    pools: dict[str, list[Question]] = {t: [] for t in chosen}
    for scene_id, graph in order:
        for name in chosen:
            kind, make = TEMPLATES[name]
            made = make(graph, random.Random(f"{seed}:{split}:{scene_id}:{name}"))
            if made is None:
                continue
            text, kind_of_answer, answer = made
            pools[name].append(Question(id="", split=split, scene=scene_id, kind=kind, template=name, question=text,
                                        answer_type=kind_of_answer, answer=answer, part=part))
    out: list[Question] = []
    seen: set[tuple[str, str]] = set()
    usage: Counter = Counter()  # questions per scene so far: spread them over the scenes
    while len(out) < n and any(pools.values()):
        for name in chosen:
            pool = pools[name]
            fresh = [q for q in pool if (q.scene, q.question) not in seen]
            pool[:] = fresh
            if not fresh:
                continue
            q = min(fresh, key=lambda q: usage[q.scene])  # min keeps the first of equals: scene order
            pool.remove(q)
            seen.add((q.scene, q.question))
            usage[q.scene] += 1
            out.append(q)
            if len(out) == n:
                break
    prefix = "qa" if part == "dev" else f"{part}-qa"
    for i, q in enumerate(out, start=1):
        q.id = f"{split}-{prefix}-{i:03d}"
    return out
