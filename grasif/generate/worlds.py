"""Generated buildings: homes and offices of several rooms, their assets and their objects, drawn
from a seed (the generator's first half; tasks are :mod:`grasif.generate.tasks`).

A building is a scene graph in the paper's JSON format (:mod:`sgs.io`). Rooms are drawn from
:data:`HOME_ROOMS` or :data:`OFFICE_ROOMS` (an office has people's offices named after their
occupant, :data:`PEOPLE`, which no held-out task uses), each room's assets from its template, and
objects from :data:`OBJECTS`; an object starts on or inside an asset drawn with the object prior
(:mod:`grasif.priors`, counted over the train pool), so a mug starts on a table or in a cabinet.
Some objects start on or inside another object (:data:`NESTS`: keys in a bowl, a stapler in
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

#: assets only the wider building kinds (``house``, ``lab``) have: drawing them does not change the
#: home or office a seed gives
WIDER_ASSETS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "workbench": (("put_on",), ()),
    "tool_cabinet": (("put_inside", "open", "close"), ("closed",)),
    "freezer": (("put_inside", "open", "close"), ("closed",)),
    "dryer": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
    "laundry_shelf": (("put_on",), ()),
    "coat_rack": (("put_on",), ()),
    "shoe_rack": (("put_on",), ()),
    "garden_table": (("put_on",), ()),
    "potting_bench": (("put_on",), ()),
    "bookcase": (("put_on",), ()),
    "crib": (("put_on",), ()),
    "toy_box": (("put_inside", "open", "close"), ("closed",)),
    "chest_of_drawers": (("put_inside", "open", "close"), ("closed",)),
    "floor_lamp": (("turn_on", "turn_off"), ("off",)),
    "ceiling_fan": (("turn_on", "turn_off"), ("off",)),
    "lab_bench": (("put_on",), ()),
    "fume_hood": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
    "incubator": (("put_inside", "open", "close", "turn_on", "turn_off"), ("closed", "off")),
    "lab_fridge": (("put_inside", "open", "close"), ("closed",)),
    "server_rack": (("put_on", "turn_on", "turn_off"), ("off",)),
    "locker": (("put_inside", "open", "close"), ("closed",)),
    "whiteboard_ledge": (("put_on",), ()),
    "trolley": (("put_on",), ()),
    "bin": (("put_inside",), ()),
    "kettle": (("turn_on", "turn_off"), ("off",)),
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

#: The wider kinds' rooms. A ``house`` has two storeys (its rooms carry the property
#: ``upstairs`` or ``downstairs``, so "the upstairs bathroom" tells two apart), a garage, a shed and
#: a patio; a ``lab`` is a research building of labs, a server room, corridors and people's offices.
HOUSE_ROOMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kitchen": (("fridge", "countertop", "cabinet", "sink"), ("freezer", "dishwasher", "stove", "kettle", "table")),
    "living_room": (("couch", "coffee_table"), ("bookcase", "television", "floor_lamp", "ceiling_fan")),
    "hallway": (("coat_rack",), ("shoe_rack", "chest_of_drawers", "floor_lamp")),
    "bedroom": (("bed", "nightstand"), ("chest_of_drawers", "wardrobe", "lamp", "ceiling_fan")),
    "nursery": (("crib", "toy_box"), ("chest_of_drawers", "floor_lamp", "bookcase")),
    "bathroom": (("sink", "bathroom_cabinet"), ("bathtub", "towel_rack", "bin")),
    "laundry": (("washing_machine", "laundry_shelf"), ("dryer", "sink", "bin")),
    "garage": (("workbench", "tool_cabinet"), ("freezer", "shelf", "bin")),
    "shed": (("potting_bench",), ("shelf", "tool_cabinet")),
    "patio": (("garden_table",), ("bin",)),
    "study": (("desk",), ("bookcase", "computer", "lamp", "filing_cabinet")),
}
LAB_ROOMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "office": (("desk",), ("bookcase", "locker", "lamp", "computer")),  # a person's office
    "lab": (("lab_bench", "lab_fridge"), ("fume_hood", "incubator", "trolley", "cabinet", "bin")),
    "server_room": (("server_rack",), ("shelf", "ceiling_fan")),
    "corridor": (("trolley",), ("locker", "bin", "coat_rack")),
    "kitchenette": (("fridge", "countertop", "sink"), ("kettle", "microwave", "cabinet", "bin")),
    "seminar_room": (("meeting_table", "whiteboard_ledge"), ("projector", "bookcase")),
    "workshop": (("workbench", "tool_cabinet"), ("shelf", "bin")),
    "bathroom": (("sink",), ("bin", "towel_rack")),
    "storage_room": (("shelf", "cabinet"), ("locker", "filing_cabinet")),
}
#: which rooms a house has on which storey (the rest are drawn to either)
DOWNSTAIRS = ("kitchen", "living_room", "hallway", "laundry", "garage", "shed", "patio")
UPSTAIRS = ("bedroom", "nursery")

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
#: objects only the wider kinds have (added to :data:`OBJECTS` for them)
WIDER_OBJECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    **{c: (("pick_up",), ()) for c in (
        "screwdriver", "hammer", "tape_measure", "gloves", "goggles", "flashlight", "extension_cord", "cable",
        "watering_can", "trowel", "seed_packet", "toy_car", "stuffed_rabbit", "rattle", "baby_bottle", "sponge",
        "detergent", "sock", "jacket", "umbrella", "test_tube", "pipette", "sample_tube", "lab_notebook",
        "hard_drive", "usb_stick", "ice_pack", "ice_cream")},
    "flask": (("pick_up", "put_inside"), ("clean",)),
    "beaker": (("pick_up", "put_inside"), ("clean",)),
    "backpack": (("pick_up", "put_inside", "open", "close"), ("closed",)),
    "toolbox": (("pick_up", "put_inside", "open", "close"), ("closed",)),
    "laundry_basket": (("pick_up", "put_inside"), ()),
    "tray": (("pick_up", "put_on"), ()),
}
#: the wider kinds' containers and what may start in them (beside :data:`NESTS`)
WIDER_NESTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "toolbox": ("inside", ("screwdriver", "hammer", "tape_measure", "flashlight", "cable", "extension_cord", "gloves")),
    "backpack": ("inside", ("book", "notebook", "lab_notebook", "pen", "phone", "wallet", "keys", "water_bottle",
                            "usb_stick", "glasses", "umbrella")),
    "laundry_basket": ("inside", ("sock", "shirt", "towel", "jacket", "pillow")),
    "tray": ("ontop", ("test_tube", "pipette", "sample_tube", "beaker", "flask", "mug", "cup", "glass")),
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
    wider: bool = False  # a house or a lab: objects may be named through the container they are in


def _pick(rng: random.Random, table: dict, n: int, required: tuple[str, ...] = ()) -> list[str]:
    rest = [k for k in table if k not in required]
    return list(required) + rng.sample(rest, max(0, min(n - len(required), len(rest))))


def _nest(objects: list[dict], rng: random.Random, nests: dict = NESTS) -> None:
    """Move some objects onto or into container objects of the building (module doc: :data:`NESTS`,
    :data:`P_NESTED`); a container stays on its asset, so nothing is more than two deep."""
    containers = [c for c in objects if node_class(c["name"]) in nests]
    for o in objects:
        fits = [c for c in containers if node_class(o["name"]) in nests[node_class(c["name"])][1]]
        if fits and rng.random() < P_NESTED:
            c = rng.choice(fits)
            o["relation"], o["related_to"] = f"{nests[node_class(c['name'])][0]}_of", c["name"]


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


#: the kinds of building :func:`building` draws
BUILDING_KINDS = ("home", "office", "house", "lab")


#: furniture of the wider kinds that may belong to someone ("Rosa's locker", "Ben's chest of drawers")
OWNED_FURNITURE = ("locker", "chest_of_drawers", "nightstand", "bed", "bookcase", "desk", "coat_rack")


def _own_furniture(assets: list[dict], people: list[str], rng: random.Random) -> None:
    """Give some furniture of :data:`OWNED_FURNITURE` an owner among ``people`` (each owner once
    per class), so an instruction can name it by owner."""
    by_class: dict[str, list[dict]] = {}
    for a in assets:
        if node_class(a["name"]) in OWNED_FURNITURE:
            by_class.setdefault(node_class(a["name"]), []).append(a)
    for cls in sorted(by_class):
        owners = rng.sample(people, min(len(people), len(by_class[cls])))
        for a, owner in zip(by_class[cls], owners):
            if rng.random() < P_OWNED:
                a["properties"].append(f"{owner.capitalize()}'s")


def building(kind: str, rng: random.Random, priors: Priors) -> Building:
    """One building of ``kind`` (:data:`BUILDING_KINDS`) drawn with ``rng`` (module doc)."""
    asset_table, object_table, nests = ASSETS, OBJECTS, NESTS
    storeys: dict[str, str] = {}
    if kind == "home":
        rooms = _pick(rng, HOME_ROOMS, rng.randint(3, 5), required=("kitchen", "living_room", "bedroom"))
        templates = HOME_ROOMS
    elif kind == "office":
        people = rng.sample(PEOPLE, rng.randint(2, 5))
        others = _pick(rng, {k: v for k, v in OFFICE_ROOMS.items() if k != "office"}, rng.randint(3, 6),
                       required=("kitchen", "meeting_room"))
        rooms = [f"{p}s_office" for p in people] + others
        templates = OFFICE_ROOMS
    elif kind in ("house", "lab"):
        asset_table, object_table, nests = {**ASSETS, **WIDER_ASSETS}, {**OBJECTS, **WIDER_OBJECTS}, {**NESTS, **WIDER_NESTS}
        if kind == "house":
            templates = HOUSE_ROOMS
            rooms = _pick(rng, HOUSE_ROOMS, rng.randint(6, 9), required=("kitchen", "living_room", "bedroom", "bathroom"))
            rooms += [r for r in ("bedroom", "bathroom") if rng.random() < 0.6]  # a second one, on the other storey
        else:
            templates = LAB_ROOMS
            people = rng.sample(PEOPLE, rng.randint(2, 4))
            others = _pick(rng, {k: v for k, v in LAB_ROOMS.items() if k != "office"}, rng.randint(4, 7),
                           required=("lab", "corridor", "kitchenette"))
            others += ["lab", "corridor"][: rng.randint(0, 2)]  # labs and corridors come in several
            rooms = [f"{p}s_office" for p in people] + others
    else:
        raise ValueError(f"a building is one of {', '.join(BUILDING_KINDS)}, not {kind!r}")
    counts: dict[str, int] = {}

    def name(cls: str) -> str:
        counts[cls] = counts.get(cls, 0) + 1
        return f"{cls}-{counts[cls]}"

    room_entries, assets, objects, kinds, occupants = [], [], [], {}, {}
    for room in rooms:
        template = "office" if room.endswith("s_office") else room
        rname = name(room)
        entry = {"name": rname}
        if kind == "house":
            seen = sum(k == template for k in kinds.values())
            storey = ("downstairs" if template in DOWNSTAIRS else "upstairs" if template in UPSTAIRS
                      else rng.choice(("downstairs", "upstairs")))
            if seen:  # the second bedroom or bathroom is on the other storey than the first
                storey = "upstairs" if storeys[next(r for r, k in kinds.items() if k == template)] == "downstairs" \
                    else "downstairs"
            storeys[rname] = storey
            entry["properties"] = [storey]
        room_entries.append(entry)
        kinds[rname] = template
        if template == "office":
            occupants[rname] = room[: -len("s_office")]
        always, maybe = templates[template]
        chosen = list(always) + [a for a in maybe if rng.random() < 0.5]
        for cls in chosen:
            aff, states = asset_table[cls]
            assets.append({"name": name(cls), "room": rname, "states": list(states), "affordances": list(aff),
                           "properties": []})
    holders = [(a["name"], rel) for a in assets for rel, verb in (("ontop", "put_on"), ("inside", "put_inside"))
               if verb in a["affordances"]]
    n_objects = rng.randint(len(rooms) * 2, len(rooms) * 4)
    for cls in rng.choices(sorted(object_table), k=n_objects):
        weights = [priors.probability(cls, h.rsplit("-", 1)[0], rel) for h, rel in holders]
        holder, rel = rng.choices(holders, weights=weights)[0]
        aff, states = object_table[cls]
        objects.append({"name": name(cls), "relation": f"{rel}_of", "related_to": holder, "states": list(states),
                        "affordances": list(aff), "properties": []})
    _nest(objects, rng, nests)
    people = sorted(occupants.values())
    if kind == "house":
        people = sorted(rng.sample(PEOPLE, rng.randint(2, 4)))  # the family
    if kind in ("house", "lab"):
        _own_furniture(assets, people, rng)
    _describe(objects, people, rng)
    graph = {"nodes": {"rooms": room_entries, "asset": assets, "objects": objects,
                       "agent": {"name": "agent-1", "location": rng.choice(room_entries)["name"], "holding": "nothing"}}}
    return Building(graph, kinds, occupants, wider=kind in ("house", "lab"))
