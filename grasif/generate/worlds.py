"""Generated buildings: homes and offices of several rooms, their assets and their objects, drawn
from a seed (the generator's first half; tasks are :mod:`grasif.generate.tasks`).

A building is a scene graph in the paper's JSON format (:mod:`sgs.io`). Rooms are drawn from
:data:`HOME_ROOMS` or :data:`OFFICE_ROOMS` (an office has people's offices named after their
occupant, :data:`PEOPLE`, which no held-out task uses), each room's assets from its template, and
objects from :data:`OBJECTS`; an object starts on or inside an asset drawn with the object prior
(:mod:`grasif.priors`, counted over the train pool), so a mug starts on a table or in a cabinet.
Since v3 some objects start on or inside another object (:data:`NESTS`: keys in a bowl, a stapler in
a box, bread on a plate; chance :data:`P_NESTED` each where the building has a container that
takes its class), so a scene has objects that rest on an asset only through another object.
Containers start closed, devices off. Objects of a class the building holds more than once may
carry properties that tell them apart, as the office split's do: a colour (:data:`COLOURS`, for
the classes of :data:`COLOURED`) and, in an office, an occupant's name on a personal thing
(:data:`PERSONAL`: "Chen's mug"). Deterministic for a seed and an index.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from grasif.priors import Priors
from sgs.graph import node_class

#: asset class -> (affordances, initial states)
ASSETS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "fridge": (("put_inside", "open", "close"), ("closed",)),
    "cabinet": (("put_inside", "open", "close"), ("closed",)),
    "countertop": (("put_on",), ()),
    "microwave": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
    "sink": (("put_inside",), ()),
    "stove": (("put_on", "turn_on", "turn_off"), ("off",)),
    "dishwasher": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
    "coffee_machine": (("put_inside", "turn_on", "turn_off"), ("off",)),
    "table": (("put_on",), ()),
    "dining_table": (("put_on",), ()),
    "couch": (("put_on",), ()),
    "coffee_table": (("put_on",), ()),
    "shelf": (("put_on",), ()),
    "television": (("turn_on", "turn_off"), ("off",)),
    "lamp": (("turn_on", "turn_off"), ("off",)),
    "bed": (("put_on",), ()),
    "nightstand": (("put_on",), ()),
    "dresser": (("put_inside", "open", "close"), ("closed",)),
    "wardrobe": (("put_inside", "open", "close"), ("closed",)),
    "bathroom_cabinet": (("put_inside", "open", "close"), ("closed",)),
    "bathtub": (("put_inside",), ()),
    "towel_rack": (("put_on",), ()),
    "desk": (("put_on",), ()),
    "computer": (("turn_on", "turn_off"), ("off",)),
    "filing_cabinet": (("put_inside", "open", "close"), ("closed",)),
    "meeting_table": (("put_on",), ()),
    "projector": (("turn_on", "turn_off"), ("off",)),
    "printer": (("put_on", "turn_on", "turn_off"), ("off",)),
    "reception_desk": (("put_on",), ()),
    "washing_machine": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
}

#: room class -> (assets it always has, assets it may have)
HOME_ROOMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kitchen": (("fridge", "countertop", "cabinet", "sink"), ("microwave", "stove", "dishwasher", "table", "coffee_machine")),
    "living_room": (("couch", "coffee_table"), ("shelf", "television", "lamp", "cabinet")),
    "bedroom": (("bed", "nightstand"), ("dresser", "wardrobe", "lamp", "desk")),
    "bathroom": (("sink", "bathroom_cabinet"), ("bathtub", "towel_rack", "washing_machine")),
    "dining_room": (("dining_table",), ("cabinet", "shelf", "lamp")),
    "home_office": (("desk",), ("computer", "shelf", "filing_cabinet", "lamp")),
}
OFFICE_ROOMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "office": (("desk",), ("shelf", "filing_cabinet", "lamp", "computer")),  # a person's office
    "meeting_room": (("meeting_table",), ("projector", "shelf", "cabinet")),
    "kitchen": (("fridge", "countertop", "cabinet"), ("microwave", "sink", "coffee_machine", "dishwasher", "table")),
    "printing_room": (("printer", "shelf"), ("cabinet",)),
    "storage_room": (("shelf", "cabinet"), ("filing_cabinet",)),
    "lounge": (("couch", "coffee_table"), ("shelf", "television", "lamp")),
    "lobby": (("reception_desk",), ("couch",)),
}

#: object class -> (affordances, states)
OBJECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{c: (("pick_up",), ()) for c in (
        "apple", "banana", "orange", "bread", "milk", "cheese", "yogurt", "cereal", "juice", "fork", "knife", "spoon",
        "book", "notebook", "pen", "marker", "stapler", "folder", "paper", "envelope", "keys", "wallet", "phone",
        "remote_control", "towel", "shirt", "pillow", "toothbrush", "soap", "candle", "headphones", "charger",
        "magazine", "glasses", "water_bottle")},
    **{c: (("pick_up",), ("clean",)) for c in ("mug", "cup", "glass")},
    "plate": (("pick_up", "put_on"), ("clean",)),
    "bowl": (("pick_up", "put_inside"), ("clean",)),
    "basket": (("pick_up", "put_inside"), ()),
    "box": (("pick_up", "put_inside", "open", "close"), ("closed",)),
    "laptop": (("pick_up", "turn_on", "turn_off"), ("off",)),
}

#: object class that takes things (and how) -> the classes that may start on or in it
NESTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "box": ("inside", ("stapler", "pen", "marker", "keys", "charger", "headphones", "phone", "wallet", "envelope",
                       "paper", "candle", "notebook", "folder", "glasses", "remote_control", "soap", "toothbrush")),
    "basket": ("inside", ("apple", "banana", "orange", "bread", "towel", "shirt", "magazine", "book", "pillow",
                          "keys", "remote_control")),
    "bowl": ("inside", ("apple", "banana", "orange", "keys", "fork", "spoon")),
    "plate": ("ontop", ("apple", "banana", "bread", "cheese", "orange", "fork", "knife", "spoon")),
}
#: chance that an object whose class a container of the building takes (:data:`NESTS`) starts on or in one
P_NESTED = 0.25

#: colours an object of a repeated class may be told apart by
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "grey", "orange")
#: classes whose things come in colours (not food, paper or cutlery)
COLOURED = ("mug", "cup", "plate", "bowl", "book", "notebook", "pen", "marker", "stapler", "folder", "envelope",
            "towel", "shirt", "pillow", "candle", "headphones", "water_bottle", "box", "basket", "laptop", "phone",
            "toothbrush", "wallet")
#: classes of things that belong to someone in an office ("Chen's laptop")
PERSONAL = ("mug", "cup", "laptop", "notebook", "keys", "wallet", "phone", "glasses", "headphones", "water_bottle",
            "charger")
#: chance that the objects of a repeated class are told apart by colour / that a personal thing in an
#: office has an owner
P_COLOURED, P_OWNED = 0.6, 0.5

#: occupants of generated offices (no held-out task names them)
PEOPLE = ("alice", "ben", "chen", "dana", "elif", "farid", "grace", "hugo", "ines", "jonas", "kofi", "lucia",
          "mateo", "nadia", "oskar", "rosa", "sami", "yuki")


@dataclass
class Building:
    """A generated building: the graph (paper JSON format), and for each room its kind
    (``office`` for a person's) and occupant."""

    graph: dict
    kinds: dict[str, str]
    occupants: dict[str, str]


def _pick(rng: random.Random, table: dict, n: int, required: tuple[str, ...] = ()) -> list[str]:
    rest = [k for k in table if k not in required]
    return list(required) + rng.sample(rest, max(0, min(n - len(required), len(rest))))


def _nest(objects: list[dict], rng: random.Random) -> None:
    """Move some objects onto or into container objects of the building (module doc: :data:`NESTS`,
    :data:`P_NESTED`); a container stays on its asset, so nothing is more than two deep."""
    containers = [c for c in objects if node_class(c["name"]) in NESTS]
    for o in objects:
        fits = [c for c in containers if node_class(o["name"]) in NESTS[node_class(c["name"])][1]]
        if fits and rng.random() < P_NESTED:
            c = rng.choice(fits)
            o["relation"], o["related_to"] = f"{NESTS[node_class(c['name'])][0]}_of", c["name"]


def _describe(objects: list[dict], people: list[str], rng: random.Random) -> None:
    """Give the objects of each class the building holds more than once properties that may tell
    them apart (module doc): distinct colours to all of a class (chance :data:`P_COLOURED`), and
    distinct owners among ``people`` to personal things (chance :data:`P_OWNED` each)."""
    by_class: dict[str, list[dict]] = {}
    for o in objects:
        by_class.setdefault(o["name"].rsplit("-", 1)[0], []).append(o)
    for cls in sorted(by_class):
        same = by_class[cls]
        if len(same) < 2:
            continue
        if cls in COLOURED and len(same) <= len(COLOURS) and rng.random() < P_COLOURED:
            for o, colour in zip(same, rng.sample(COLOURS, len(same))):
                o["properties"].append(colour)
        if people and cls in PERSONAL:
            owners = rng.sample(people, min(len(people), len(same)))
            for o, owner in zip(same, owners):
                if rng.random() < P_OWNED:
                    o["properties"].append(f"{owner.capitalize()}'s")


def building(kind: str, rng: random.Random, priors: Priors) -> Building:
    """One building of ``kind`` (``home`` or ``office``) drawn with ``rng`` (module doc)."""
    if kind == "home":
        rooms = _pick(rng, HOME_ROOMS, rng.randint(3, 5), required=("kitchen", "living_room", "bedroom"))
        templates = HOME_ROOMS
    elif kind == "office":
        people = rng.sample(PEOPLE, rng.randint(2, 5))
        others = _pick(rng, {k: v for k, v in OFFICE_ROOMS.items() if k != "office"}, rng.randint(3, 6),
                       required=("kitchen", "meeting_room"))
        rooms = [f"{p}s_office" for p in people] + others
        templates = OFFICE_ROOMS
    else:
        raise ValueError(f"a building is a home or an office, not {kind!r}")
    counts: dict[str, int] = {}

    def name(cls: str) -> str:
        counts[cls] = counts.get(cls, 0) + 1
        return f"{cls}-{counts[cls]}"

    room_entries, assets, objects, kinds, occupants = [], [], [], {}, {}
    for room in rooms:
        template = "office" if room.endswith("s_office") else room
        rname = name(room)
        room_entries.append({"name": rname})
        kinds[rname] = template
        if template == "office":
            occupants[rname] = room[: -len("s_office")]
        always, maybe = templates[template]
        chosen = list(always) + [a for a in maybe if rng.random() < 0.5]
        for cls in chosen:
            aff, states = ASSETS[cls]
            assets.append({"name": name(cls), "room": rname, "states": list(states), "affordances": list(aff),
                           "properties": []})
    holders = [(a["name"], rel) for a in assets for rel, verb in (("ontop", "put_on"), ("inside", "put_inside"))
               if verb in a["affordances"]]
    n_objects = rng.randint(len(rooms) * 2, len(rooms) * 4)
    for cls in rng.choices(sorted(OBJECTS), k=n_objects):
        weights = [priors.probability(cls, h.rsplit("-", 1)[0], rel) for h, rel in holders]
        holder, rel = rng.choices(holders, weights=weights)[0]
        aff, states = OBJECTS[cls]
        objects.append({"name": name(cls), "relation": f"{rel}_of", "related_to": holder, "states": list(states),
                        "affordances": list(aff), "properties": []})
    _nest(objects, rng)
    _describe(objects, sorted(occupants.values()), rng)
    graph = {"nodes": {"rooms": room_entries, "asset": assets, "objects": objects,
                       "agent": {"name": "agent-1", "location": rng.choice(room_entries)["name"], "holding": "nothing"}}}
    return Building(graph, kinds, occupants)
