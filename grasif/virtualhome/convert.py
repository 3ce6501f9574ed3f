"""VirtualHome graphs in our terms (:func:`convert_graph`), from the source and during an episode.

* Only ON and INSIDE edges are read, plus the character's HOLDS_RH/HOLDS_LH. Category ``Rooms`` →
  places; GRABBABLE → objects; all else → assets in the room they are INSIDE, except
  :data:`DROPPED_CATEGORIES`. Each room keeps one floor asset, its lowest-id floor node, which
  stands for every floor node of the room and holds what has no other kept support.
* An object's parent is the most specific kept, non-room ON/INSIDE target: a target that another
  target is (transitively) on or in is passed over; of the rest ON beats INSIDE, then the lowest id.
* States are copied lowercased; affordances follow from the node's own properties (GRABBABLE →
  pick_up; SURFACES or CONTAINERS → put_on; CONTAINERS → put_inside; CAN_OPEN → open, close;
  HAS_SWITCH → turn_on, turn_off; floors put_on). Names ``class-N`` count per class by ascending id
  over the kept nodes of the initial graph (:class:`Naming`, reused for the final graph).
* A final graph gets the program-aware corrections of :func:`final_corrections`; during an episode
  :func:`convert_state` converts the environment's graph the same way.

Errors: malformed data raises :class:`grasif.dataset.SourceError` naming the file.
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grasif.dataset import SourceError
from grasif.task import Task
from grasif.virtualhome.source import PUT_ACTIONS, SPLIT, Program, read_graphs, source_dir
from sgs.graph import GraphError, Layer, Relation, SceneGraph, affords
from sgs.io import graph_from_dict

#: Categories left out of the converted graphs (one floor per room is kept, see the module doc).
DROPPED_CATEGORIES = frozenset({"Floor", "Floors", "Walls", "Ceiling", "Characters"})
_AFFORDANCE_ORDER = ("pick_up", "put_on", "put_inside", "open", "close", "turn_on", "turn_off")


class RawGraph:
    """Index of one VirtualHome graph: nodes by id, ON/INSIDE targets, rooms, what is held."""

    def __init__(self, data: dict, where: Path):
        self.where = where
        try:
            self.nodes = {int(n["id"]): n for n in data["nodes"]}
            edges = [(int(e["from_id"]), e["relation_type"], int(e["to_id"])) for e in data["edges"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceError(f"{where}: malformed node or edge ({exc!r})") from None
        for i, n in self.nodes.items():
            missing = [k for k in ("class_name", "category", "properties", "states") if not isinstance(n.get(k), (str, list))]
            if missing:
                raise SourceError(f"{where}: malformed node {i}: no {', '.join(missing)}")
        self.rooms = {i for i, n in self.nodes.items() if n["category"] == "Rooms"}
        chars = [i for i, n in self.nodes.items() if n["category"] == "Characters"]
        if len(chars) != 1:
            raise SourceError(f"{where}: expected one character node, found {len(chars)}")
        self.char = chars[0]
        self.targets: dict[int, list[tuple[Relation, int]]] = {}
        self.room_of: dict[int, int] = {}
        self.held: list[int] = []
        for a, rel, b in edges:
            if a not in self.nodes or b not in self.nodes:
                raise SourceError(f"{where}: edge {a} {rel} {b} names an unknown node")
            if rel in ("ON", "INSIDE"):
                if b in self.rooms and rel == "INSIDE":
                    if a in self.room_of and self.room_of[a] != b:
                        raise SourceError(f"{where}: node {a} is inside two rooms ({self.room_of[a]}, {b})")
                    self.room_of[a] = b
                else:
                    self.targets.setdefault(a, []).append((Relation.ONTOP if rel == "ON" else Relation.INSIDE, b))
            elif rel in ("HOLDS_RH", "HOLDS_LH") and a == self.char:
                self.held.append(b)
        self.held.sort()

    def cls(self, i: int) -> str:
        return self.nodes[i]["class_name"].strip().lower().replace(" ", "_")

    def is_floor(self, i: int) -> bool:
        return self.nodes[i]["category"] in ("Floor", "Floors")


@dataclass
class Naming:
    """Decisions made once per task from its initial graph and reused for its final graph."""

    names: dict[int, str]  # kept VirtualHome id -> node name
    layers: dict[int, Layer]
    floor: dict[int, int]  # room id -> id of the floor node kept for it

    def canonical(self, raw: "RawGraph", vh_id: int) -> int | None:
        """The kept id standing for ``vh_id``: itself, its room's floor for any floor node, else None."""
        if vh_id in self.names:
            return vh_id
        if raw.is_floor(vh_id) and vh_id in raw.room_of:
            return self.floor[raw.room_of[vh_id]]
        return None

    @property
    def ids(self) -> dict[str, int]:
        return {name: i for i, name in self.names.items()}


def make_naming(raw: RawGraph) -> Naming:
    floor: dict[int, int] = {}
    for i in sorted(raw.nodes):
        if raw.is_floor(i) and i in raw.room_of:
            floor.setdefault(raw.room_of[i], i)
    kept = sorted(i for i, n in raw.nodes.items() if n["category"] not in DROPPED_CATEGORIES or i in floor.values())
    missing = [raw.cls(r) for r in sorted(raw.rooms) if r not in floor]
    if missing:
        raise SourceError(f"{raw.where}: no floor node in room(s) {', '.join(missing)}")
    counter: dict[str, int] = {}
    names, layers = {}, {}
    for i in kept:
        cls = raw.cls(i)
        counter[cls] = counter.get(cls, 0) + 1
        names[i] = f"{cls}-{counter[cls]}"
        if i in raw.rooms:
            layers[i] = Layer.PLACE
        elif "GRABBABLE" in raw.nodes[i]["properties"]:
            layers[i] = Layer.OBJECT
        else:
            layers[i] = Layer.ASSET
    return Naming(names, layers, floor)


def _affordances(node: dict, is_floor: bool) -> list[str]:
    if is_floor:
        return ["put_on"]
    props = set(node["properties"])
    have = set()
    if "GRABBABLE" in props:
        have.add("pick_up")
    if props & {"SURFACES", "CONTAINERS"}:
        have.add("put_on")
    if "CONTAINERS" in props:
        have.add("put_inside")
    if "CAN_OPEN" in props:
        have |= {"open", "close"}
    if "HAS_SWITCH" in props:
        have |= {"turn_on", "turn_off"}
    return [a for a in _AFFORDANCE_ORDER if a in have]


def _states(node: dict) -> list[str]:
    return sorted({s.lower() for s in node["states"]})


def is_under(raw, a: int, b: int) -> bool:
    """Whether VirtualHome's ON/INSIDE edges lead from ``a`` to ``b`` (``a`` is on or in ``b``,
    through other objects; rooms end the search)."""
    seen, stack = set(), [a]
    while stack:
        for _, t in raw.targets.get(stack.pop(), []):
            if t == b:
                return True
            if t not in seen and t not in raw.rooms:
                seen.add(t)
                stack.append(t)
    return False


def _object_parent(raw: RawGraph, naming: Naming, i: int) -> tuple[Relation, int] | None:
    """Most specific kept non-room ON/INSIDE target of ``i`` (see module doc), or ``None``."""
    cands: dict[int, Relation] = {}
    for rel, t in raw.targets.get(i, []):
        k = naming.canonical(raw, t)
        if k is not None and k != i and k not in raw.rooms:
            cands[k] = Relation.ONTOP if Relation.ONTOP in (rel, cands.get(k)) else rel
    if not cands:
        return None

    specific = [c for c in cands if not any(o != c and is_under(raw, o, c) for o in cands)] or list(cands)
    best = min(specific, key=lambda c: (cands[c] is not Relation.ONTOP, c))
    return cands[best], best


def convert_graph(raw: RawGraph, naming: Naming, placed: dict[int, tuple[Relation, int]] | None = None,
                  held: int | None = None) -> dict:
    """The converted graph in the paper's JSON format. ``held``: the object the agent holds (by
    default the one the character holds, if only one); ``placed`` overrides objects' parents."""
    placed = placed or {}
    if held is None:
        held_objects = _held_objects(raw, naming)
        if len(held_objects) > 1:
            raise SourceError(f"{raw.where}: the character holds {len(held_objects)} objects; say which one is held")
        held = held_objects[0] if held_objects else None
    rooms, assets, objects = [], [], []
    names = naming.names
    floors = set(naming.floor.values())
    for i, name in names.items():
        if i not in raw.nodes:
            raise SourceError(f"{raw.where}: node {i} ({name}) of the initial graph is missing")
        node = raw.nodes[i]
        layer = naming.layers[i]
        if layer is Layer.PLACE:
            rooms.append({"name": name})
            continue
        room = raw.room_of.get(i)
        if room is None:
            raise SourceError(f"{raw.where}: node {i} ({name}) is inside no room")
        common = {"states": [] if i in floors else _states(node), "affordances": _affordances(node, i in floors), "properties": []}
        if layer is Layer.ASSET:
            assets.append({"name": name, "room": names[room], **common})
            continue
        if i == held:
            objects.append({"name": name, "relation": "held", "related_to": "agent-1", **common})
            continue
        rel, parent = placed.get(i) or _object_parent(raw, naming, i) or (Relation.ONTOP, naming.floor[room])
        objects.append({"name": name, "relation": f"{rel.value}_of", "related_to": names[parent], **common})
    location = raw.room_of.get(raw.char)
    if location is None:
        raise SourceError(f"{raw.where}: the character is inside no room")
    agent = {"name": "agent-1", "location": names[location], "holding": names[held] if held is not None else "nothing"}
    return {"nodes": {"rooms": rooms, "asset": assets, "objects": objects, "agent": agent}}


def _held_objects(raw: RawGraph, naming: Naming) -> list[int]:
    """What the character holds that is an object for us (VirtualHome also lets it grab water)."""
    return [i for i in raw.held if naming.layers.get(i) is Layer.OBJECT]


def to_scene_graph(data: dict, where: Path) -> SceneGraph:
    """The scene graph of converted ``data``; :class:`SourceError` naming ``where`` when it is invalid."""
    try:
        return graph_from_dict(data)
    except GraphError as exc:
        raise SourceError(f"{where}: the converted graph is invalid: {exc}") from None


def _replay_places(program: Program, raw_init: RawGraph, naming: Naming) -> dict[int, tuple]:
    """For each object the program moves: (where it last went, where it was last taken from).
    A place is (relation, kept id); ``None`` while held or after DROP/RELEASE/PUTON."""
    places: dict[int, tuple] = {}
    for s in program.steps:
        if not s.args or naming.layers.get(s.args[0][1]) is not Layer.OBJECT:
            continue
        o = s.args[0][1]
        where, taken = places.get(o) or (_object_parent(raw_init, naming, o), None)
        if s.action == "GRAB":
            where, taken = None, where
        elif s.action in PUT_ACTIONS and naming.canonical(raw_init, s.args[1][1]) is not None:
            where = (PUT_ACTIONS[s.action], naming.canonical(raw_init, s.args[1][1]))
        elif s.action == "PUTOBJBACK":
            where = taken
        elif s.action in ("DROP", "RELEASE", "PUTON"):
            where = None
        else:
            continue
        places[o] = (where, taken)
    return places


def final_corrections(program: Program, raw_init: RawGraph, naming: Naming, raw_final: RawGraph):
    """Program-aware corrections of a converted final graph: returns (held id or None, placed).

    * Lost support: GRAB deletes ON/INSIDE edges in both directions, so what lies on or in a
      grabbed object is left with no supporting node although nothing moved it. An object that
      VirtualHome leaves unsupported and not held goes back to its last support: where the
      program last put it, else its initial parent (not after DROP/RELEASE/PUTON: the floor).
    * One hand: of the objects the character holds at the end, the one grabbed last stays held;
      the others go back where they were last taken from.
    """
    moves = _replay_places(program, raw_init, naming)
    placed: dict[int, tuple[Relation, int]] = {}
    for i, layer in naming.layers.items():
        if layer is not Layer.OBJECT or i in raw_final.held or _object_parent(raw_final, naming, i) is not None:
            continue
        last = moves[i][0] if i in moves else _object_parent(raw_init, naming, i)
        if last is not None:
            placed[i] = last
    held = _held_objects(raw_final, naming)
    if len(held) <= 1:
        return (held[0] if held else None), placed
    grabbed = [s.args[0][1] for s in program.steps if s.action == "GRAB"]
    last_held = max(held, key=lambda i: max((k for k, o in enumerate(grabbed) if o == i), default=-1))
    for o in held:
        if o != last_held:
            placed[o] = moves[o][1] or (Relation.ONTOP, naming.floor[raw_init.room_of[o]])
    return last_held, placed


# -- during an episode (sim_adapters.virtualhome) ------------------------------------------------
def task_source_graph(task: Task, source: Path | None = None) -> tuple[dict, Path]:
    """The initial VirtualHome graph a built task came from (provenance ``graphs``, read from
    ``source``, default the installed package) and its path; :class:`SourceError` if missing."""
    rel = task.provenance.get("graphs")
    if task.split != SPLIT or not rel:
        raise SourceError(f"task {task.split}/{task.id} does not come from VirtualHome (no provenance 'graphs')")
    path = (Path(source) if source is not None else source_dir()) / rel
    return read_graphs(path)[0], path


def task_naming(init: dict, where: Path, expected: dict[str, int] | None = None) -> Naming:
    """The naming of an initial VirtualHome graph; with ``expected`` (a task's provenance ``ids``)
    a :class:`SourceError` when the graph names its nodes differently (another package version)."""
    naming = make_naming(RawGraph(init, where))
    if expected is not None and naming.ids != expected:
        diff = sorted(set(naming.ids.items()) ^ set(expected.items()))[:5]
        raise SourceError(f"{where}: its node names differ from the task's provenance ids (first: {diff})")
    return naming


def raw_index(data: dict, where: Path) -> RawGraph:
    """An index of a VirtualHome graph (nodes by id, ON/INSIDE targets, rooms, held ids)."""
    return RawGraph(data, where)


def convert_state(raw: RawGraph, naming: Naming, last_support: dict[int, tuple[Relation, int]]) -> SceneGraph:
    """A VirtualHome graph during an episode, in our terms (the environment's true graph).

    The character holds at most one object (the adapter keeps to one hand). An object left without
    supporting node and not held (GRAB deletes the ON/INSIDE edges of what lay on or in the grabbed
    object, see :func:`final_corrections`) goes to ``last_support[id]``, where it last was."""
    held = _held_objects(raw, naming)
    if len(held) > 1:
        raise SourceError(f"{raw.where}: the character holds {len(held)} objects; one hand is modelled")
    placed = {i: last_support[i] for i, layer in naming.layers.items()
              if layer is Layer.OBJECT and i not in held and i in last_support
              and _object_parent(raw, naming, i) is None}
    return to_scene_graph(convert_graph(raw, naming, placed=placed, held=held[0] if held else None), raw.where)


def affords_relation(node, relation: Relation) -> bool:
    """Whether ``node`` takes things put ``relation`` it (``put_on`` for ONTOP, else ``put_inside``)."""
    return affords(node, "put_on" if relation is Relation.ONTOP else "put_inside")
