"""Questions in many phrasings: each template of :mod:`.qa` reworded by hand, with the nodes it
names in several surface forms, for training data and for a reworded evaluation set.

* :data:`PHRASINGS` — per template, five or more paraphrases used for **training**, and
  :data:`REWORDED` two more that training never uses (the reworded evaluation set).
* :func:`surface` — how a question names a node: its name (``dining_table-1``), its class when the
  scene has one node of it (``the dining table``), or its class and room when the room has one
  (``the dining table in kitchen-1``).
* :func:`rephrase` — a question of the benchmark's kind, the same answer and gold query
  (:mod:`.gold`), in another phrasing and surface forms.

Rooms and classes keep their names (a room is asked for by name; a class is the value of the
``class`` property the query filters on).
"""

from __future__ import annotations

import random

from sgs.graph import Layer, SceneGraph, node_class

from lookplangraph.cypher.gold import PATTERNS
from lookplangraph.cypher.qa import Question

#: training paraphrases per template; the fields are the template's (:data:`.gold.QUERIES`)
PHRASINGS: dict[str, tuple[str, ...]] = {
    "count_class_scene": (
        "How many {cls} objects does the scene have?", "Count the objects of class {cls} in the whole scene.",
        "What is the number of {cls} objects in the scene?", "How many objects are of class {cls}, in all rooms?",
        "Tell me how many {cls} objects there are altogether."),
    "count_class_room": (
        "How many objects of class {cls} are in {room}?", "Count the {cls} objects in the room {room}.",
        "What is the number of {cls} objects in {room}?", "In {room}, how many {cls} objects are there?",
        "How many {cls} objects can be found in room {room}?"),
    "count_on_asset": (
        "How many objects are directly on or in {asset}?", "Count the objects resting directly on or inside {asset}.",
        "What is the number of objects placed directly on or in {asset}?",
        "How many things sit directly on top of or inside {asset}?",
        "Directly on or in {asset}: how many objects?"),
    "location_room": (
        "Which room is {obj} in?", "What room holds {obj}?", "Where is {obj}? Give the room.",
        "Name the room where {obj} is.", "In what room can I find {obj}?"),
    "location_parent": (
        "What does {obj} rest on or in? Give the node's name.", "Which node is {obj} directly on or inside?",
        "Name the node that {obj} is directly placed on or in.", "What is directly under or around {obj}? Its name.",
        "{obj} is on or in which node, directly?"),
    "state_set": (
        "Which nodes of class {cls} are {state}?", "List the {cls} nodes that are {state}.",
        "Name every {cls} that is {state}.", "What are the names of the {cls} nodes in state {state}?",
        "Give all {cls} nodes whose state is {state}."),
    "state_bool": (
        "Is {node} currently {state}?", "Is it true that {node} is {state}?", "Tell me whether {node} is {state}.",
        "Does {node} have the state {state}?", "{node}: is it {state}?"),
    "state_count_room": (
        "How many assets of {room} are {state}?", "Count the assets in {room} that are {state}.",
        "In {room}, how many assets are {state}?", "What is the number of {state} assets in room {room}?",
        "How many pieces of furniture or fixtures in {room} are {state}?"),
    "contain_deep_set": (
        "Which objects are on or in {node}, at any depth?", "List every object on or inside {node}, nested ones too.",
        "Name all objects that {node} holds, directly or through other objects.",
        "What objects does {node} hold at any level of nesting?",
        "Give every object resting on or in {node}, including objects on or in those objects."),
    "contain_base_asset": (
        "Which asset ultimately holds {obj}?", "{obj} sits on or in another object: which piece of furniture is under it all?",
        "Name the asset at the bottom of the stack that holds {obj}.",
        "What furniture or fixture holds {obj} in the end?", "Following what {obj} rests on, which asset do you reach?"),
    "contain_count_deep": (
        "How many objects does {asset} hold at any depth?", "Count every object on or in {asset}, nested ones included.",
        "What is the number of objects on or inside {asset}, counting objects on or in objects?",
        "How many objects rest on or in {asset}, directly or not?",
        "Including nested objects, how many objects are on or in {asset}?"),
    "argmax_room_class": (
        "Which room holds the most {cls} objects?", "In which room are there the most {cls} objects?",
        "Name the room with the largest number of {cls} objects.", "Where are most of the {cls} objects? Give the room.",
        "What room has more {cls} objects than any other?"),
    "argmax_room_assets": (
        "Which room contains the most assets?", "Name the room with the most furniture and fixtures.",
        "In which room are there the most assets?", "What room has more assets than any other room?",
        "Which room is the most furnished (the most assets)?"),
    "set_classes_on": (
        "Which classes of objects are directly on or in {asset}? Each once.",
        "What kinds of objects sit directly on or inside {asset}? List each class once.",
        "Name the object classes found directly on or in {asset}.",
        "List the distinct classes of the objects directly on or in {asset}.",
        "Directly on or in {asset}, which object classes are there?"),
    "list_rooms_sorted": (
        "Give all room names sorted alphabetically.", "List every room, in alphabetical order.",
        "What are the rooms? Sort them alphabetically.", "Name all rooms from A to Z.",
        "Alphabetically, which rooms are there?"),
    "list_on_asset_sorted": (
        "List the objects directly on or in {asset}, sorted by name.",
        "Which objects are directly on or inside {asset}? Alphabetical order.",
        "Name the objects resting directly on or in {asset}, alphabetically.",
        "Give the names of the objects directly on or in {asset} from A to Z.",
        "Alphabetically, what objects are directly on or in {asset}?"),
    "set_rooms_with_class": (
        "In which rooms is there at least one {cls} object?", "Which rooms have a {cls} object?",
        "List the rooms that contain a {cls} object.", "Name every room with one or more {cls} objects.",
        "Where can {cls} objects be found? Give the rooms."),
}

#: paraphrases never used in training: the reworded evaluation set
REWORDED: dict[str, tuple[str, ...]] = {
    "count_class_scene": ("Across the whole place, how many {cls} objects exist?", "Total number of {cls} objects?"),
    "count_class_room": ("How many {cls} objects does room {room} contain?", "{room} has how many {cls} objects?"),
    "count_on_asset": ("On or in {asset} directly, how many objects are there?", "Number of objects directly on or in {asset}?"),
    "location_room": ("{obj} is located in which room?", "Tell me the room of {obj}."),
    "location_parent": ("What node directly supports or contains {obj}?", "Directly under or around {obj} is which node?"),
    "state_set": ("The {cls} nodes that are {state}: which are they?", "Which {cls} have state {state}?"),
    "state_bool": ("Would you say {node} is {state}?", "Check: is {node} {state}?"),
    "state_count_room": ("Number of {state} assets in {room}?", "{room}: how many of its assets are {state}?"),
    "contain_deep_set": ("Everything on or in {node}, however deep: which objects?", "All objects held by {node}, nested included?"),
    "contain_base_asset": ("Under {obj}, at the very bottom, which asset is there?", "Which furniture ultimately carries {obj}?"),
    "contain_count_deep": ("Total objects on or in {asset}, nested included?", "{asset} holds how many objects, at any depth?"),
    "argmax_room_class": ("Most {cls} objects: which room?", "The room richest in {cls} objects is which?"),
    "argmax_room_assets": ("Most assets: which room?", "The room with the greatest number of assets is which?"),
    "set_classes_on": ("Object classes directly on or in {asset}, each once?", "What object types lie directly on or in {asset}?"),
    "list_rooms_sorted": ("Rooms, alphabetically?", "Sort the room names from A to Z."),
    "list_on_asset_sorted": ("Objects directly on or in {asset}, A to Z?", "Sorted by name: the objects directly on or in {asset}."),
    "set_rooms_with_class": ("Rooms having any {cls} object?", "Which rooms include {cls} objects?"),
}

#: fields that name nodes (the others are classes, states and rooms, kept as they are)
NODE_FIELDS = ("asset", "obj", "node")


def surface(g: SceneGraph, name: str, rng: random.Random) -> str:
    """One way to name node ``name`` (module doc), drawn with ``rng`` among those that name it
    alone in ``g``."""
    cls = node_class(name)
    words = cls.replace("_", " ")
    same = [n for n in g.nodes if node_class(n) == cls and g.nodes[n].layer is not Layer.PLACE]
    forms = [name]
    if len(same) == 1:
        forms.append(f"the {words}")
    room = g.place_of(name)
    if room and len([n for n in same if g.place_of(n) == room]) == 1 and len(same) > 1:
        forms.append(f"the {words} in {room}")
    return rng.choice(forms)


def rephrase(q: Question, g: SceneGraph, rng: random.Random, reworded: bool = False) -> Question:
    """``q`` in another phrasing (:data:`PHRASINGS`, or :data:`REWORDED` for the evaluation set)
    and surface forms, the same answer; ``ValueError`` when ``q`` is not in its template's words."""
    m = PATTERNS[q.template].match(q.question)
    if m is None:
        raise ValueError(f"{q.id}: not in template {q.template!r}'s words")
    fields = m.groupdict()
    for f in NODE_FIELDS:
        if f in fields:
            fields[f] = surface(g, fields[f], rng)
    text = rng.choice((REWORDED if reworded else PHRASINGS)[q.template]).format(**fields)
    return q.model_copy(update={"question": text[0].upper() + text[1:], "id": q.id + ("-rw" if reworded else "-p")})
