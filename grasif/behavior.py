"""GraSIF split "behavior": BEHAVIOR-1K activities from their BDDL problems (paper appendix H2).

Source: the package ``bddl==3.6.0`` (``pip install --no-deps bddl==3.6.0 numpy networkx future``),
``bddl/activity_definitions/<activity>/problem0.bddl`` (1016 activities). Every problem is read with
bddl's own parser, ``bddl.activity.Conditions(activity, 0, "omnigibson")`` (objects, init, goal),
and abilities come from ``bddl.object_taxonomy.ObjectTaxonomy``. :func:`build_tasks` takes another
directory laid out the same way through ``definitions``. A missing package raises
:class:`grasif.dataset.SourceError` naming it; a problem file that cannot be read or parsed, or that
breaks a rule below, raises it naming the file.

Selection (:func:`selection`)
-----------------------------
An activity is kept when every predicate of its init and goal is in :data:`KEPT_PREDICATES`
(``ontop inside inroom open toggled_on``): 187 of 1016. :data:`EXCLUDED` removes 9 of them whose
goal cannot be reached or was mis-authored, leaving **178** tasks (the paper reports 177; it names
no list, and we found no tenth defect):

* ``stacking_wood``: every log on the table or on a log, exactly two on the table and exactly two
  on logs — six logs with one parent each cannot satisfy all three;
* ``cleaning_up_plates_and_food`` (each pizza on a plate *and* inside a fridge),
  ``sorting_books_on_shelf`` (books inside the bookcase *and* on another book): need two parents;
* ``packing_cleaning_suppies_into_car`` (moves the car), ``packing_moving_van`` (moves the chairs):
  the goal moves an ``inroom`` instance, an immovable asset here;
* ``collecting_wood``, ``putting_wood_in_fireplace``, ``recycling_office_papers``,
  ``make_a_car_emergency_kit``: a ``forall`` whose body names instance ``_1`` instead of the
  variable (``(forall (?log.n.01 - log.n.01) (ontop ?log.n.01_1 ?floor.n.01_2))``), so the goal
  asks for one object where the activity means all.

Graph (:func:`convert`)
-----------------------
* Places: the room types of the ``inroom`` facts, named ``<room>-1`` (``living_room-1``), in order
  of first mention. Assets: the instances with an ``inroom`` fact. Objects: every other instance
  except the agent, ``ontop``/``inside`` the one parent its init gives (a problem where one has no
  or two parents, or an asset also has a parent, is rejected). The agent ``agent-1`` stands in the
  room of the floor its ``(ontop agent.n.01_1 floor)`` names, holding nothing.
* Names: ``<word>-<N>`` from ``<word>.<pos>.<sense>_<N>`` (``wicker_basket.n.01_3`` →
  ``wicker_basket-3``); a wildcard instance ``<synset>_*`` takes the next free number. Two synsets of
  one activity with the same word would both become ``<word>_<pos><sense>`` (none in 3.6.0).
  Provenance ``instances`` maps every node name (rooms included) to its bddl term.
* Abilities of a synset are its taxonomy abilities; for a non-leaf synset (``container.n.01``) an
  ability counts when more than half of its leaf descendants have it. Affordances: objects
  ``pick_up``; ``rigidBody`` → ``put_on``; ``fillable`` or ``openable`` → ``put_inside``;
  ``openable`` → ``open``/``close`` and state ``open`` if the init says ``(open x)``, else
  ``closed``; ``toggleable`` → ``turn_on``/``turn_off`` and state ``on`` if ``(toggled_on x)``, else
  ``off``. Every ``ontop``/``inside`` target of the kept init and goal files has the affordance.

Goal
----
The goal is the BDDL goal itself in :mod:`grasif.formula` syntax (:func:`goal_formula`), one
top-level conjunct per bddl goal condition, so plan precision counts bddl's conditions. Terms
become node names (with or without bddl's ``?``), categories their class, variables ``?<class>``;
``ontop``/``inside`` test the direct parent edge, ``toggled_on`` the ``on`` state, ``open`` the
``open`` state. :class:`BddlGoalChecker` judges bddl's own compiled goal (``TrivialBackend``) on a
graph's facts; ``tests/test_behavior.py`` checks that both agree on every task's initial state,
the states along its plan and about 18,000 random states (all agree, every condition too).

Instruction (:func:`instruction`)
---------------------------------
``"<Activity title>: <clause>; <clause>."``, rendered from the formula by templates that keep
counts and quantifiers exact: forall → "all four <class>"/"each of the four ...", exists → "one of
the two ..."/"at least one of ...", forn → "exactly four of the seven table knives", forpairs →
"one candle inside each of the four wicker baskets" (equal counts), "at least one ... inside each
..." (more children), "each ... inside a different one of ..." (fewer children); an exists over an
``and`` → "put A and B together inside one of the two cartons, keep C out of that carton".
Placements into the same destination merge; open/close/switch clauses come last. A node is "the
<class>" when its class has one node, else "the <class> in the <room>", else "the <class> from
<its initial parent>", else its name; nodes that make up their whole class are "both/all N ...".

Ground-truth plan (:func:`ground_truth_plan`)
---------------------------------------------
Candidates: the final state of a depth-first branch-and-bound search over the formula
(:class:`_Search`: fewest moves, opens and switches, one parent per object, assets fixed) and
each of bddl's ground goal options (``get_ground_goal_state_options``, up to 20) whose literals
give each object one parent and move no asset. A candidate becomes ``rearrange`` steps for the
unmet parents — each preceded by ``open`` of the closed containers on the way, after a ``go_to``
when needed — then ``open``/``turn_on``/``turn_off``/``close`` for the states, the agent's room
first and closing last; an object that must leave its parent goes onto its room's floor. Steps
whose removal keeps the plan successful (with and without corrections) are dropped and the
shortest plan is kept. Every plan succeeds with precision 1 with and without the SGS's
corrections and fails without its last state-changing step. Mean 5.45 steps (20 at most); 9.84
primitive actions without ``go_to`` (pick-up and put counted apart), the paper's 9.8. Nodes:
10.04 places+assets+objects per task, 12.04 with the scene root and the agent (paper 12.1); rooms
1.236 (paper 1.23).
"""

from __future__ import annotations

import contextlib
import itertools
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasif.dataset import SourceError
from grasif.goals import GoalSpec
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import make, parse_action
from sgs.graph import GraphError, Layer, Relation, SceneGraph, affords, node_class
from sgs.io import graph_from_dict
from sgs.simulator import check, run_plan

SPLIT = "behavior"
#: The paper's Table I row for this split.
PAPER = {"tasks": 177, "rooms": 1.23, "nodes": 12.1, "actions": 9.8}

PACKAGE = "bddl"
SOURCE_VERSION = "3.6.0"
SIMULATOR = "omnigibson"
PROBLEM_FILE = "problem0.bddl"
#: An activity is kept when its init and goal use only these predicates.
KEPT_PREDICATES = frozenset({"ontop", "inside", "inroom", "open", "toggled_on"})
#: Kept by the predicate filter but left out, with the reason (see the module doc).
EXCLUDED = {
    "stacking_wood": "unsatisfiable with one parent per object: every log on the table or on a log, "
    "exactly two on the table and exactly two on logs",
    "cleaning_up_plates_and_food": "needs two parents: each pizza on a plate and inside a fridge",
    "sorting_books_on_shelf": "needs two parents: every book inside the bookcase and some books on other books",
    "packing_cleaning_suppies_into_car": "the goal moves the car, an inroom asset",
    "packing_moving_van": "the goal moves the chairs, inroom assets",
    "collecting_wood": "mis-authored: (forall ?log ...) body names log.n.01_1, not the variable",
    "putting_wood_in_fireplace": "mis-authored: (forall ?log ...) body names log.n.01_1, not the variable",
    "recycling_office_papers": "mis-authored: (forall ?legal_document ...) body names legal_document.n.01_1",
    "make_a_car_emergency_kit": "mis-authored: (forall ?water_bottle ...) body names water_bottle.n.01_1",
}
AGENT_SYNSET = "agent.n.01"
_OPERATORS = frozenset({"and", "or", "not", "imply", "forall", "exists", "forn", "forpairs", "fornpairs"})
_AFFORDANCE_ORDER = ("pick_up", "put_on", "put_inside", "open", "close", "turn_on", "turn_off")
_SYNSET_RE = re.compile(r"^([a-z0-9_'\-]+)\.([a-z])\.(\d+)$")
_INSTANCE_RE = re.compile(r"^(.+)_(\d+|\*)$")


# ---------------------------------------------------------------------------------------------
# the bddl package
# ---------------------------------------------------------------------------------------------
class _Null:
    """A stdout that forgets: bddl's trivial predicates print every evaluation."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def _quiet():
    return contextlib.redirect_stdout(_Null())


def require_bddl(package: str = PACKAGE):
    """The imported ``bddl`` package; :class:`SourceError` naming it when it is not installed."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise SourceError(
            f"the behavior split needs the package bddl ({package}), which is not installed: "
            f"pip install --no-deps bddl=={SOURCE_VERSION} numpy networkx future"
        )
    try:
        import bddl.activity  # noqa: F401
        import bddl.config
        import bddl.object_taxonomy  # noqa: F401
        import bddl.trivial_backend  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means the package is unusable
        raise SourceError(f"the package bddl cannot be imported: {type(exc).__name__}: {exc}") from None
    return bddl


def source_version() -> str:
    try:
        return importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def definitions_dir(definitions: str | Path | None = None) -> Path:
    """bddl's ``activity_definitions`` directory, or ``definitions`` (laid out the same way)."""
    if definitions is None:
        definitions = require_bddl().config.ACTIVITY_CONFIGS_PATH
    root = Path(definitions)
    if not root.is_dir():
        raise SourceError(f"{root}: no BDDL activity definitions here")
    return root


def activity_names(definitions: str | Path | None = None) -> list[str]:
    """Sorted names of the activities that have a ``problem0.bddl``."""
    root = definitions_dir(definitions)
    return sorted(p.name for p in root.iterdir() if (p / PROBLEM_FILE).is_file())


# ---------------------------------------------------------------------------------------------
# activities
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Activity:
    """One parsed problem: bddl's ``Conditions`` and its parts (``objects``: synset → instances)."""

    name: str
    path: Path
    conds: Any
    objects: dict[str, list[str]]
    init: list
    goal: list

    @property
    def predicates(self) -> frozenset[str]:
        out: set[str] = set()
        for expr in self.init + self.goal:
            _collect_predicates(expr, out)
        return frozenset(out)


def _children(expr: list) -> list:
    """Sub-formulas of a parsed BDDL formula (quantifier specs and counts left out)."""
    head = expr[0]
    if head in ("and", "or", "not", "imply"):
        return expr[1:]
    if head in ("forall", "exists"):
        return [expr[2]]
    if head in ("forn", "forpairs"):
        return [expr[3]]
    if head == "fornpairs":
        return [expr[4]]
    return []


def _collect_predicates(expr, out: set[str]) -> None:
    if not isinstance(expr, list) or not expr or not isinstance(expr[0], str):
        raise ValueError(f"not a formula: {expr!r}")
    if expr[0] in _OPERATORS:
        for sub in _children(expr):
            _collect_predicates(sub, out)
    else:
        out.add(expr[0])


def read_activity(name: str, definitions: str | Path | None = None) -> Activity:
    """Parse ``<definitions>/<name>/problem0.bddl`` with bddl; :class:`SourceError` naming the file."""
    bddl = require_bddl()
    path = definitions_dir(definitions) / name / PROBLEM_FILE
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read the problem file ({exc})") from None
    try:
        with _quiet():
            conds = bddl.activity.Conditions(name, 0, SIMULATOR, predefined_problem=text)
        objects, init, goal = conds.parsed_objects, conds.parsed_initial_conditions, conds.parsed_goal_conditions
        if not isinstance(objects, dict) or not objects or not isinstance(init, list) or not init:
            raise ValueError("no objects or no init")
        if not isinstance(goal, list) or not goal or not all(isinstance(g, list) and g for g in goal):
            raise ValueError("no goal")
        act = Activity(name, path, conds, objects, init, goal)
        act.predicates  # noqa: B018 - checks the formulas' form
    except SourceError:
        raise
    except Exception as exc:  # noqa: BLE001 - bddl's parser raises anything on a broken file
        raise SourceError(f"{path}: bddl cannot parse the problem ({type(exc).__name__}: {exc})") from None
    return act


_ACTIVITY_CACHE: dict[tuple, Activity] = {}


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_mtime_ns, st.st_size)


def activity(name: str, definitions: str | Path | None = None) -> Activity:
    """:func:`read_activity`, cached per problem file (path, modification time, size)."""
    key = _stamp(definitions_dir(definitions) / name / PROBLEM_FILE)
    if key not in _ACTIVITY_CACHE:
        _ACTIVITY_CACHE[key] = read_activity(name, definitions)
    return _ACTIVITY_CACHE[key]


def selection(definitions: str | Path | None = None) -> tuple[list[str], dict[str, str]]:
    """(kept activity names, {left-out name: reason}) over all activities of the directory.

    The reason is "predicates outside the kept set: ..." or the :data:`EXCLUDED` entry.
    """
    kept, left = [], {}
    for name in activity_names(definitions):
        extra = activity(name, definitions).predicates - KEPT_PREDICATES
        if extra:
            left[name] = "predicates outside the kept set: " + ", ".join(sorted(extra))
        elif name in EXCLUDED:
            left[name] = EXCLUDED[name]
        else:
            kept.append(name)
    return kept, left


# ---------------------------------------------------------------------------------------------
# graph
# ---------------------------------------------------------------------------------------------
_TAXONOMY = None
_ABILITY_CACHE: dict[str, frozenset[str]] = {}


def abilities(synset: str) -> frozenset[str]:
    """Taxonomy abilities of ``synset``; for a non-leaf synset, those of more than half of its
    leaf descendants. Unknown synsets raise ``KeyError``."""
    global _TAXONOMY
    if synset in _ABILITY_CACHE:
        return _ABILITY_CACHE[synset]
    if _TAXONOMY is None:
        _TAXONOMY = require_bddl().object_taxonomy.ObjectTaxonomy()
    tax = _TAXONOMY
    if not tax.is_valid_synset(synset):
        raise KeyError(synset)
    if tax.is_leaf(synset):
        out = frozenset(tax.get_abilities(synset))
    else:
        leaves = tax.get_leaf_descendants(synset)
        counts: dict[str, int] = {}
        for leaf in leaves:
            for ab in tax.get_abilities(leaf):
                counts[ab] = counts.get(ab, 0) + 1
        out = frozenset(ab for ab, n in counts.items() if 2 * n > len(leaves))
    _ABILITY_CACHE[synset] = out
    return out


@dataclass(frozen=True, eq=False)
class Converted:
    """An activity's scene graph (paper JSON) with the name maps.

    ``names``: bddl instance → node name; ``rooms``: bddl room type → place name; ``classes``:
    synset → class; ``instances``: node name → bddl term (the provenance map).
    """

    graph: dict
    names: dict[str, str]
    rooms: dict[str, str]
    classes: dict[str, str]

    @property
    def instances(self) -> dict[str, str]:
        out = {place: room for room, place in self.rooms.items()}
        out.update({name: inst for inst, name in self.names.items()})
        return out


def _class_names(act: Activity) -> dict[str, str]:
    words: dict[str, list[str]] = {}
    for synset in act.objects:
        if synset == AGENT_SYNSET:
            continue
        m = _SYNSET_RE.match(synset)
        if not m:
            raise SourceError(f"{act.path}: {synset!r} is not a synset like word.n.01")
        word = re.sub(r"[^a-z0-9_\-]", "_", m.group(1)).strip("_-") or "thing"
        words.setdefault(word, []).append(synset)
    out = {}
    for word, synsets in words.items():
        for synset in synsets:
            if len(synsets) == 1:
                out[synset] = word
            else:
                m = _SYNSET_RE.match(synset)
                out[synset] = f"{word}_{m.group(2)}{m.group(3)}"
    return out


def _instance_names(act: Activity, classes: dict[str, str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for synset, instances in act.objects.items():
        if synset == AGENT_SYNSET:
            continue
        numbers, wild = [], []
        for inst in instances:
            m = _INSTANCE_RE.match(inst)
            if not m or m.group(1) != synset:
                raise SourceError(f"{act.path}: instance {inst!r} of {synset} is not named {synset}_<N>")
            if m.group(2) == "*":
                wild.append(inst)
            else:
                numbers.append(int(m.group(2)))
                names[inst] = f"{classes[synset]}-{int(m.group(2))}"
        top = max(numbers, default=0)
        for i, inst in enumerate(wild, start=1):
            names[inst] = f"{classes[synset]}-{top + i}"
    if len(set(names.values())) != len(names):
        raise SourceError(f"{act.path}: two instances would get the same node name")
    return names


def convert(act: Activity) -> Converted:
    """The initial scene graph of a kept activity (module doc); :class:`SourceError` naming the file."""
    where = act.path
    classes = _class_names(act)
    names = _instance_names(act, classes)
    synset_of = {inst: s for s, insts in act.objects.items() for inst in insts}
    inroom: dict[str, str] = {}
    parents: dict[str, list[tuple[str, str]]] = {}
    is_open: set[str] = set()
    is_on: set[str] = set()
    room_order: list[str] = []
    agent_support = None
    for fact in act.init:
        positive = fact[0] != "not"
        atom = fact if positive else fact[1]
        pred, args = atom[0], atom[1:]
        if pred not in KEPT_PREDICATES:
            raise SourceError(f"{where}: init predicate {pred!r} is outside {sorted(KEPT_PREDICATES)}")
        for a in args[:1] + (args[1:] if pred != "inroom" else []):
            if a not in synset_of:
                raise SourceError(f"{where}: init fact {atom} names an unknown instance {a!r}")
        if not positive:
            if pred in ("open", "toggled_on"):
                continue  # closed / off is the default
            raise SourceError(f"{where}: negated init fact {atom} is not supported")
        if synset_of[args[0]] == AGENT_SYNSET:
            if pred != "ontop" or agent_support is not None:
                raise SourceError(f"{where}: the agent must be placed by one (ontop agent floor) fact")
            agent_support = args[1]
        elif pred == "inroom":
            inroom[args[0]] = args[1]
            if args[1] not in room_order:
                room_order.append(args[1])
        elif pred in ("ontop", "inside"):
            parents.setdefault(args[0], []).append((pred, args[1]))
        elif pred == "open":
            is_open.add(args[0])
        else:
            is_on.add(args[0])
    rooms = {room: f"{re.sub(r'[^a-z0-9_]', '_', room)}-1" for room in room_order}
    if not rooms:
        raise SourceError(f"{where}: no inroom fact, so no room")
    if agent_support not in inroom:
        raise SourceError(f"{where}: the agent must stand on an inroom instance (a floor), got {agent_support!r}")

    asset_entries, object_entries = [], []
    for synset, instances in act.objects.items():
        if synset == AGENT_SYNSET:
            continue
        try:
            abl = abilities(synset)
        except KeyError:
            raise SourceError(f"{where}: synset {synset!r} is not in bddl's object taxonomy") from None
        for inst in instances:
            name = names[inst]
            affordances = set()
            states = []
            if "rigidBody" in abl:
                affordances.add("put_on")
            if "fillable" in abl or "openable" in abl:
                affordances.add("put_inside")
            if "openable" in abl:
                affordances |= {"open", "close"}
                states.append("open" if inst in is_open else "closed")
            elif inst in is_open:
                raise SourceError(f"{where}: (open {inst}) but {synset} is not openable")
            if "toggleable" in abl:
                affordances |= {"turn_on", "turn_off"}
                states.append("on" if inst in is_on else "off")
            elif inst in is_on:
                raise SourceError(f"{where}: (toggled_on {inst}) but {synset} is not toggleable")
            entry: dict[str, Any] = {"name": name}
            if inst in inroom:
                if inst in parents:
                    raise SourceError(f"{where}: {inst} is inroom {inroom[inst]} and also {parents[inst][0][0]} {parents[inst][0][1]}")
                entry["room"] = rooms[inroom[inst]]
                target = asset_entries
            else:
                got = parents.get(inst, [])
                if len(got) != 1:
                    raise SourceError(f"{where}: object {inst} needs exactly one ontop/inside parent in the init, has {len(got)}")
                rel, par = got[0]
                if synset_of.get(par) == AGENT_SYNSET:
                    raise SourceError(f"{where}: {inst} is {rel} the agent")
                entry["relation"] = f"{rel}_of"
                entry["related_to"] = names[par]
                affordances.add("pick_up")
                target = object_entries
            entry["states"] = states
            entry["affordances"] = [a for a in _AFFORDANCE_ORDER if a in affordances]
            entry["properties"] = []
            target.append(entry)
    graph = {"nodes": {
        "rooms": [{"name": rooms[r]} for r in room_order],
        "asset": asset_entries,
        "objects": object_entries,
        "agent": {"name": "agent-1", "location": rooms[inroom[agent_support]], "holding": "nothing"},
    }}
    try:
        graph_from_dict(graph)
    except GraphError as exc:
        raise SourceError(f"{where}: the converted graph is invalid: {'; '.join(exc.problems)}") from None
    for inst, name in names.items():
        if node_class(name) != classes[synset_of[inst]]:
            raise SourceError(f"{where}: node name {name} does not read back as class {classes[synset_of[inst]]}")
    return Converted(graph, names, rooms, classes)


# ---------------------------------------------------------------------------------------------
# goal formula
# ---------------------------------------------------------------------------------------------
class _FormulaWriter:
    """BDDL goal → :mod:`grasif.formula` text (module doc); one instance per activity."""

    def __init__(self, act: Activity, conv: Converted):
        self.act, self.conv = act, conv
        self.var_names: dict[str, str] = {}

    def var(self, label: str, category: str) -> str:
        label = label.lstrip("?")
        if label not in self.var_names:
            m = _SYNSET_RE.match(label)
            base = self.conv.classes.get(label) or (re.sub(r"[^a-z0-9_]", "_", m.group(1)) if m else re.sub(r"[^a-z0-9_]", "_", label)) or "x"
            name, k = base, 0
            while name in self.var_names.values():
                k += 1
                name = f"{base}_{chr(ord('a') + k)}"
            self.var_names[label] = name
        return self.var_names[label]

    def spec(self, spec, bound: dict[str, str]) -> tuple[str, dict[str, str]]:
        if not (isinstance(spec, list) and len(spec) == 3 and spec[1] == "-"):
            raise SourceError(f"{self.act.path}: malformed quantifier variable {spec!r}")
        label, _, category = spec
        if category not in self.act.objects or category == AGENT_SYNSET:
            raise SourceError(f"{self.act.path}: goal quantifies over {category!r}, which has no objects")
        v = self.var(label, category)
        return f"(?{v} - {self.conv.classes[category]})", {**bound, label.lstrip("?"): v}

    def term(self, t: str, bound: dict[str, str], pred: str) -> str:
        s = t.lstrip("?")
        if s in bound:
            return "?" + bound[s]
        if s in self.conv.names:
            return self.conv.names[s]
        if pred == "inroom" and s in self.conv.rooms:
            return self.conv.rooms[s]
        raise SourceError(f"{self.act.path}: goal term {t!r} is neither a bound variable nor an object")

    def write(self, expr, bound: dict[str, str]) -> str:
        head = expr[0]
        if head in ("and", "or", "not", "imply"):
            if (head == "not" and len(expr) != 2) or (head == "imply" and len(expr) != 3):
                raise SourceError(f"{self.act.path}: malformed {head} in the goal")
            return f"({head} " + " ".join(self.write(e, bound) for e in expr[1:]) + ")"
        if head in ("forall", "exists"):
            spec, inner = self.spec(expr[1], bound)
            return f"({head} {spec} {self.write(expr[2], inner)})"
        if head == "forn":
            spec, inner = self.spec(expr[2], bound)
            return f"(forn ({int(expr[1][0])}) {spec} {self.write(expr[3], inner)})"
        if head == "forpairs":
            s1, inner = self.spec(expr[1], bound)
            s2, inner = self.spec(expr[2], inner)
            return f"(forpairs {s1} {s2} {self.write(expr[3], inner)})"
        if head == "fornpairs":
            s1, inner = self.spec(expr[2], bound)
            s2, inner = self.spec(expr[3], inner)
            return f"(fornpairs ({int(expr[1][0])}) {s1} {s2} {self.write(expr[4], inner)})"
        if head not in KEPT_PREDICATES:
            raise SourceError(f"{self.act.path}: goal predicate {head!r} is outside {sorted(KEPT_PREDICATES)}")
        return f"({head} " + " ".join(self.term(t, bound, head) for t in expr[1:]) + ")"


def goal_formula(act: Activity, conv: Converted) -> str:
    """The activity's goal in :mod:`grasif.formula` syntax, one top-level conjunct per bddl condition."""
    writer = _FormulaWriter(act, conv)
    parts = [writer.write(g, {}) for g in act.goal]
    if len(parts) == 1 and act.goal[0][0] != "and":
        return parts[0]
    return "(and " + " ".join(parts) + ")"


# ---------------------------------------------------------------------------------------------
# bddl's own goal check
# ---------------------------------------------------------------------------------------------
class BddlGoalChecker:
    """bddl's compiled goal (``TrivialBackend``) judged on the facts of a :class:`SceneGraph`.

    ``instances`` maps node names to bddl instances (a task's provenance). Facts: ``ontop``/``inside``
    from each parent edge, ``open`` from the ``open`` state, ``toggled_on`` from ``on``. Calling it
    returns bddl's (success, [verdict per goal condition]).
    """

    def __init__(self, act: Activity, instances: dict[str, str]):
        bddl = require_bddl()
        from bddl.trivial_backend import TrivialBackend, TrivialGenericObject, TrivialSimulator

        self.instances = instances
        self.sim = TrivialSimulator()
        scope = bddl.activity.get_object_scope(act.conds)
        for key in scope:
            scope[key] = TrivialGenericObject(key, self.sim)
        with _quiet():
            self.goal = bddl.activity.get_goal_conditions(act.conds, TrivialBackend(), scope, generate_ground_options=False)
        self._evaluate = bddl.activity.evaluate_goal_conditions

    def facts(self, graph: SceneGraph) -> dict[str, set]:
        inst = self.instances
        out: dict[str, set] = {"ontop": set(), "inside": set(), "open": set(), "toggled_on": set()}
        for child, (par, rel) in graph.parent.items():
            if rel is Relation.ONTOP:
                out["ontop"].add((inst[child], inst[par]))
            elif rel is Relation.INSIDE:
                out["inside"].add((inst[child], inst[par]))
        for name, node in graph.nodes.items():
            if node.has("open"):
                out["open"].add((inst[name],))
            if node.has("on"):
                out["toggled_on"].add((inst[name],))
        return out

    def __call__(self, graph: SceneGraph) -> tuple[bool, list[bool]]:
        for key, value in self.facts(graph).items():
            setattr(self.sim, key, value)
        with _quiet():
            ok, result = self._evaluate(self.goal)
        satisfied = set(result["satisfied"])
        return bool(ok), [i in satisfied for i in range(len(self.goal))]


# ---------------------------------------------------------------------------------------------
# ground-truth plans
# ---------------------------------------------------------------------------------------------
def ground_options(act: Activity) -> list[list]:
    """bddl's ground goal options (lists of literals over bddl instances); empty when bddl has none."""
    bddl = require_bddl()
    from bddl.trivial_backend import TrivialBackend

    backend = TrivialBackend()
    scope = bddl.activity.get_object_scope(act.conds)
    try:
        with _quiet():
            goal = bddl.activity.get_goal_conditions(act.conds, backend, scope)
            options = bddl.activity.get_ground_goal_state_options(act.conds, backend, scope, goal)
    except AssertionError:
        return []
    return [[head.body for head in option] for option in options]


class _Infeasible(Exception):
    pass


_STATE_ACTION = {"open": "open", "closed": "close", "on": "turn_on", "off": "turn_off"}


def plan_from_literals(graph: SceneGraph, literals: list, conv: Converted) -> list[str] | None:
    """A plan that makes every ground literal (over bddl instances) true, or ``None`` when the
    literals need two parents for an object, move an asset or cannot be carried out."""
    names = {**conv.names, **conv.rooms}
    moves: dict[str, tuple[str, str]] = {}
    keep_out: dict[str, set[tuple[str, str]]] = {}
    want: dict[str, str] = {}
    for lit in literals:
        negative = lit[0] == "not"
        pred, *args = lit[1] if negative else lit
        args = [names.get(a) for a in args]
        if None in args:
            return None
        if pred in ("ontop", "inside"):
            a, b = args
            if negative:
                keep_out.setdefault(a, set()).add((pred, b))
            elif moves.setdefault(a, (pred, b)) != (pred, b):
                return None
        elif pred in ("open", "toggled_on"):
            word = {("open", False): "open", ("open", True): "closed", ("toggled_on", False): "on", ("toggled_on", True): "off"}[pred, negative]
            if want.setdefault(args[0], word) != word:
                return None
        elif pred == "inroom":
            if (graph.place_of(args[0]) == args[1]) == negative:
                return None
        else:
            return None
    return emit_plan(graph, moves, keep_out, want)


def emit_plan(graph: SceneGraph, moves: dict[str, tuple[str, str]], keep_out: dict[str, set[tuple[str, str]]],
              want: dict[str, str]) -> list[str] | None:
    """Plan steps for final parents ``moves`` (object → (relation, destination)), parents each
    object must not end with (``keep_out``) and final states ``want`` (node → open/closed/on/off).

    Rearranges first (with ``open`` for closed containers on the way, after a ``go_to`` when the
    agent is elsewhere), then state changes, those in the agent's room first, closing last. An
    object whose initial parent is kept out and that is not moved goes onto its room's floor.
    ``None`` when something cannot be carried out (an asset to move, a step the SGS rejects
    without corrections).
    """
    moves = {a: m for a, m in moves.items() if graph.parent.get(a) != (m[1], Relation(m[0]))}
    if any(graph.nodes[a].layer is not Layer.OBJECT for a in moves):
        return None
    for a, banned in keep_out.items():
        if a in moves or graph.nodes[a].layer is not Layer.OBJECT:
            if a in moves and moves[a] in banned:
                return None
            continue
        par, rel = graph.parent[a]
        if (rel.value, par) in banned:
            room = graph.place_of(a)
            spots = [n for n in graph.names(Layer.ASSET) if graph.place_of(n) == room
                     and affords(graph.nodes[n], "put_on") and ("ontop", n) not in banned]
            spots.sort(key=lambda n: node_class(n) != "floor")
            if not spots:
                return None
            moves[a] = ("ontop", spots[0])
    plan: list[str] = []
    state = {"g": graph}

    def emit(action) -> None:
        out = check(state["g"], action, correct=False)
        if not out.ok:
            raise _Infeasible(out.feedback)
        state["g"] = out.graph
        plan.append(str(action))

    def go(place: str) -> None:
        if state["g"].agent.location != place:
            emit(make("go_to", place))

    def reach(node: str, open_self: bool) -> None:
        g = state["g"]
        for c in g.enclosing_closed(node) + ([node] if open_self and g.nodes[node].has("closed") else []):
            go(state["g"].place_of(c))
            emit(make("open", c))

    try:
        for a, (rel, b) in moves.items():
            reach(a, False)
            reach(b, rel == "inside")
            emit(make("rearrange", a, rel, b))
        for last in (False, True):  # closing comes last: it may hide what other steps need
            todo = [n for n, w in want.items() if (w == "closed") == last and not state["g"].nodes[n].has(w)]
            while todo:  # the agent's room first, then room by room
                here = [n for n in todo if state["g"].place_of(n) == state["g"].agent.location]
                node = (here or todo)[0]
                todo.remove(node)
                reach(node, False)
                go(state["g"].place_of(node))
                emit(make(_STATE_ACTION[want[node]], node))
    except _Infeasible:
        return None
    return plan


# -- a search for cheap final states ------------------------------------------------------------
_REL = {"ontop": Relation.ONTOP, "inside": Relation.INSIDE}
_WORD = {"open": "open", "toggled_on": "on"}
_SWITCH = {"open": ("open", "close"), "on": ("turn_on", "turn_off")}


class _Search:
    """Depth-first branch and bound over the goal formula for a final state that changes the
    fewest parents and states of the initial graph, with one parent per object and assets fixed.

    A partial state is (parents: object → (dest, Relation), forbid: object → banned parents,
    states: (node, word) → bool); unassigned objects keep their initial parent. ``forn`` picks
    exactly N instances, ``forpairs``/``fornpairs`` a one-to-one matching (sufficient for bddl's
    relaxed check). Gives up on ``inroom`` of objects and on negated ``forn``/pair quantifiers.
    """

    def __init__(self, graph: SceneGraph, limit: int = 3000):
        from grasif.formula import category_class

        self.g, self.limit, self.calls = graph, limit, 0
        self.cat = category_class
        self.index: dict[str, list[str]] = {}
        for n in graph.nodes:
            self.index.setdefault(node_class(n), []).append(n)
        self.best = None
        self.best_cost = float("inf")
        self._enclosing: dict[str, tuple[str, ...]] = {}

    def enclosing(self, name: str) -> tuple[str, ...]:
        got = self._enclosing.get(name)
        if got is None:
            got = self._enclosing[name] = tuple(self.g.enclosing_closed(name))
        return got

    # -- the current final state --
    def parent(self, st, a):
        return st[0].get(a) or self.g.parent.get(a)

    def state(self, st, a, word):
        got = st[2].get((a, word))
        return self.g.nodes[a].has(word) if got is None else got

    def cost(self, st) -> int:
        """Steps the state needs: moves, opens of closed containers on the way (initial graph),
        state changes, and a close for an opened container that must end closed."""
        g = self.g
        gp, nodes = g.parent, g.nodes
        moved = [(a, p) for a, p in st[0].items() if gp.get(a) != p]
        c = len(moved) + sum(1 for a, banned in st[1].items() if a not in st[0] and gp.get(a) in banned)
        opened: set[str] = set()
        enc = self.enclosing
        for a, (dest, rel) in moved:
            opened.update(enc(a))
            opened.update(enc(dest))
            if rel is Relation.INSIDE and nodes[dest].has("closed"):
                opened.add(dest)
        c += len(opened)
        for (a, w), v in st[2].items():
            if a in opened and w == "open":
                c += not v  # opened on the way, closed again
            elif nodes[a].has(w) != v:
                c += 1
        return c

    def dom(self, category: str) -> list[str]:
        return self.index.get(self.cat(category), [])

    def holds(self, f, env, st) -> bool:
        from grasif import formula as F

        if isinstance(f, F.Atom):
            args = [env[n] if v else n for n, v in f.args]
            if f.predicate in _REL:
                return self.parent(st, args[0]) == (args[1], _REL[f.predicate])
            if f.predicate == "inroom":
                a = args[0]
                while self.g.nodes[a].layer is not Layer.PLACE:
                    edge = self.parent(st, a)
                    if edge is None or edge[1] is Relation.HELD:
                        return False
                    a = edge[0]
                return a == args[1]
            return self.state(st, args[0], _WORD.get(f.predicate, f.predicate))
        if isinstance(f, F.And):
            return all(self.holds(x, env, st) for x in f.items)
        if isinstance(f, F.Or):
            return any(self.holds(x, env, st) for x in f.items)
        if isinstance(f, F.Not):
            return not self.holds(f.item, env, st)
        if isinstance(f, F.Imply):
            return (not self.holds(f.antecedent, env, st)) or self.holds(f.consequent, env, st)
        if isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            hits = sum(self.holds(f.body, {**env, f.var: x}, st) for x in self.dom(f.category))
            n = len(self.dom(f.category))
            return hits == n if isinstance(f, F.ForAll) else hits >= 1 if isinstance(f, F.Exists) else hits == f.n
        rows, cols, width = 0, set(), 0
        for i, x in enumerate(self.dom(f.category1)):
            ys = [y for y in self.dom(f.category2) if y != x]
            width = len(ys) if i == 0 else width
            hit = [j for j, y in enumerate(ys) if self.holds(f.body, {**env, f.var1: x, f.var2: y}, st)]
            rows += bool(hit)
            cols.update(hit)
        need = min(len(self.dom(f.category1)), width) if isinstance(f, F.ForPairs) else f.n
        return rows >= need and len(cols) >= need

    # -- search --
    def solve(self, formula) -> tuple | None:
        self.run(((formula, {}, True),), ({}, {}, {}))
        return self.best

    def run(self, goals, st) -> None:
        self.calls += 1
        if self.calls > self.limit:
            return
        cost = self.cost(st)
        if cost >= self.best_cost:
            return
        if not goals:
            self.best, self.best_cost = st, cost
            return
        goal, rest = goals[0], goals[1:]
        if goal[0] == "match":
            return self.match(goal, rest, st)
        self.step(*goal, rest, st)

    def branch(self, options, rest, st) -> None:
        """Try each option (a tuple of goals), those already true first."""
        ranked = sorted(options, key=lambda o: not all(self.holds(f, e, st) == p for f, e, p in o))
        for option in ranked:
            self.run(tuple(option) + rest, st)

    def step(self, f, env, pos, rest, st) -> None:
        from grasif import formula as F

        if isinstance(f, F.Atom):
            return self.atom(f, env, pos, rest, st)
        if isinstance(f, F.Not):
            return self.run(((f.item, env, not pos),) + rest, st)
        if isinstance(f, (F.And, F.Or)):
            if isinstance(f, F.And) == pos:
                return self.run(tuple((x, env, pos) for x in f.items) + rest, st)
            return self.branch([((x, env, pos),) for x in f.items], rest, st)
        if isinstance(f, F.Imply):
            if pos:
                return self.branch([((f.antecedent, env, False),), ((f.consequent, env, True),)], rest, st)
            return self.run(((f.antecedent, env, True), (f.consequent, env, False)) + rest, st)
        if isinstance(f, (F.ForAll, F.Exists)):
            items = [(f.body, {**env, f.var: x}, pos) for x in self.dom(f.category)]
            if isinstance(f, F.ForAll) == pos:
                return self.run(tuple(items) + rest, st)
            return self.branch([(item,) for item in items], rest, st)
        if not pos:
            return  # negated forn / pair quantifiers: not searched
        if isinstance(f, F.ForN):
            dom = self.dom(f.category)
            if f.n > len(dom):
                return
            dom = sorted(dom, key=lambda x: not self.holds(f.body, {**env, f.var: x}, st))
            for chosen in itertools.combinations(dom, f.n):
                picked = set(chosen)
                goals = tuple((f.body, {**env, f.var: x}, x in picked) for x in dom)
                self.run(goals + rest, st)
                if self.calls > self.limit:
                    return
            return
        rows, cols = self.dom(f.category1), self.dom(f.category2)
        width = len([y for y in cols if rows and y != rows[0]])
        need = min(len(rows), width) if isinstance(f, F.ForPairs) else f.n
        if len(rows) <= len(cols):
            goal = ("match", f.body, env, f.var1, f.var2, tuple(rows), tuple(cols), frozenset(), need)
        else:
            goal = ("match", f.body, env, f.var2, f.var1, tuple(cols), tuple(rows), frozenset(), need)
        self.run((goal,) + rest, st)

    def match(self, goal, rest, st) -> None:
        _, body, env, vs, vl, smalls, larges, used, need = goal
        if need <= 0:
            return self.run(rest, st)
        if len(smalls) < need:
            return
        s, others = smalls[0], smalls[1:]
        options = []
        for t in larges:
            if t != s and t not in used:
                nxt = ("match", body, env, vs, vl, others, larges, used | {t}, need - 1)
                options.append(((body, {**env, vs: s, vl: t}, True), nxt))
        ranked = sorted(options, key=lambda o: not self.holds(o[0][0], o[0][1], st))
        for first, nxt in ranked:
            self.run((first, nxt) + rest, st)
        if len(others) >= need:  # leave s unmatched (fornpairs)
            self.run((("match", body, env, vs, vl, others, larges, used, need),) + rest, st)

    def atom(self, f, env, pos, rest, st) -> None:
        args = [env[n] if v else n for n, v in f.args]
        nodes, gp = self.g.nodes, self.g.parent
        a = args[0]
        if f.predicate in _REL:
            want = (args[1], _REL[f.predicate])
            if nodes[a].layer is not Layer.OBJECT:
                if not pos:
                    self.run(rest, st)
                return
            have = st[0].get(a)
            if have is not None:
                if (have == want) == pos:
                    self.run(rest, st)
                return
            if not pos:
                forbid = dict(st[1])
                forbid[a] = forbid.get(a, frozenset()) | {want}
                return self.run(rest, (st[0], forbid, st[2]))
            if want in st[1].get(a, ()):
                return
            b = args[1]
            if gp.get(a) != want:
                if b == a or not affords(nodes[b], "put_on" if want[1] is Relation.ONTOP else "put_inside"):
                    return
                x = b
                while nodes[x].layer is Layer.OBJECT:
                    if x == a:
                        return
                    x = self.parent(st, x)[0]
            parents = dict(st[0])
            parents[a] = want
            return self.run(rest, (parents, st[1], st[2]))
        if f.predicate == "inroom":
            if nodes[a].layer is Layer.ASSET and (gp[a][0] == args[1]) == pos:
                self.run(rest, st)
            return
        word = _WORD.get(f.predicate, f.predicate)
        got = st[2].get((a, word))
        if got is not None:
            if got == pos:
                self.run(rest, st)
            return
        if nodes[a].has(word) != pos and (word not in _SWITCH or not affords(nodes[a], _SWITCH[word][0])):
            return
        states = dict(st[2])
        states[(a, word)] = pos
        self.run(rest, (st[0], st[1], states))


def search_plan(graph: SceneGraph, goal: GoalSpec, limit: int = 3000) -> list[str] | None:
    """A plan for the cheapest final state :class:`_Search` finds for ``goal.formula``, or ``None``."""
    from grasif.formula import Formula

    found = _Search(graph, limit).solve(Formula.parse(goal.formula))
    if found is None:
        return None
    parents, forbid, states = found
    moves = {a: (rel.value, dest) for a, (dest, rel) in parents.items()}
    keep_out = {a: {(rel.value, dest) for dest, rel in banned} for a, banned in forbid.items()}
    want = {a: (w if v else {"open": "closed", "on": "off"}[w]) for (a, w), v in states.items()}
    return emit_plan(graph, moves, keep_out, want)


def plan_succeeds(graph: SceneGraph, plan: list[str], goal: GoalSpec) -> bool:
    """Whether ``plan`` reaches ``goal`` with every step feasible, with and without corrections."""
    return all(validate_plan(graph, plan, goal, correct=c).success for c in (False, True))


def _reaches(graph: SceneGraph, actions: list, formula, correct: bool) -> bool:
    """:func:`plan_succeeds` for one correction mode, on parsed actions and a parsed formula."""
    final, outcomes = run_plan(graph, actions, correct=correct)
    return all(o.ok for o in outcomes) and formula.evaluate(final)


def _minimize(graph: SceneGraph, plan: list[str], formula) -> list[str]:
    """Drop steps, last first, while the plan still succeeds in both correction modes."""
    actions = [parse_action(step) for step in plan]
    changed = True
    while changed:
        changed = False
        for i in range(len(actions) - 1, -1, -1):
            trial = actions[:i] + actions[i + 1:]
            if _reaches(graph, trial, formula, False) and _reaches(graph, trial, formula, True):
                actions, changed = trial, True
    return [str(a) for a in actions]


def ground_truth_plan(act: Activity, conv: Converted, graph: SceneGraph, goal: GoalSpec) -> list[str] | None:
    """The shortest plan over the candidates (module doc) that succeeds with and without the SGS's
    corrections, after dropping needless steps; ``[]`` when the goal holds already; ``None`` if
    no candidate reaches the goal."""
    from grasif.formula import Formula

    formula = Formula.parse(goal.formula)
    if formula.evaluate(graph):
        return []
    candidates = [search_plan(graph, goal)] + [plan_from_literals(graph, lits, conv) for lits in ground_options(act)]
    unique = sorted({tuple(p) for p in candidates if p is not None}, key=lambda p: (len(p), candidates.index(list(p))))
    best: list[str] | None = None
    for plan in unique:
        if best is not None and len(plan) > len(best) + 4:
            break
        actions = [parse_action(step) for step in plan]
        if not _reaches(graph, actions, formula, False):
            continue
        plan = _minimize(graph, list(plan), formula)
        if best is None or len(plan) < len(best):
            best = plan
    if best is not None and not plan_succeeds(graph, best, goal):
        return None
    return best


# ---------------------------------------------------------------------------------------------
# instructions
# ---------------------------------------------------------------------------------------------
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
#: Plural of the last word where the usual rules fail.
_IRREGULAR = {"die": "dice", "knife": "knives", "pocketknife": "pocketknives", "leaf": "leaves", "shelf": "shelves",
              "half": "halves", "cactus": "cacti", "potato": "potatoes", "tomato": "tomatoes", "mango": "mangoes"}
#: Mass nouns and the unit that counts them ("three pieces of money").
_MASS = {"money": "piece", "mail": "piece", "silver": "piece", "ice": "piece", "paraffin": "piece", "postage": "piece",
         "paper": "sheet", "turf": "piece", "firewood": "piece", "bait": "piece", "fishing gear": "piece",
         "toilet tissue": "roll", "plywood": "piece", "lettuce": "head", "spinach": "bunch", "chard": "bunch",
         "bok choy": "head", "sweet corn": "ear", "sushi": "piece", "toast": "slice", "cheddar": "piece",
         "swiss cheese": "piece", "broken glass": "piece", "sports equipment": "piece", "wrapping paper": "sheet",
         "broccoli": "head", "tights": "pair", "sunglasses": "pair", "shears": "pair", "pliers": "pair",
         "undergarment": "piece"}


def _number(n: int) -> str:
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else str(n)


def _words(cls: str) -> str:
    """``bottle__of__perfume`` → ``bottle of perfume``."""
    return re.sub(r"_+", " ", cls).strip()


def _plural_word(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def _plural(words: str) -> str:
    """Plural noun phrase: ``bottle of perfume`` → ``bottles of perfume``; mass nouns take their unit."""
    if words in _MASS:
        return f"{_plural_word(_MASS[words])} of {words}"
    head, sep, tail = words.partition(" of ")
    parts = head.split(" ")
    parts[-1] = _plural_word(parts[-1])
    return " ".join(parts) + sep + tail


def _one(words: str) -> str:
    """``one candle``, ``one piece of swiss cheese``."""
    return f"one {_MASS[words]} of {words}" if words in _MASS else f"one {words}"


def _join(items: list[str], word: str = "and") -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


_PREP = {"ontop": "on", "inside": "inside"}


class _Put:
    """A placement clause: ``subjects`` (("node", name) or ("text", phrase)) go ``relation`` ``dest``.

    ``mode``: "plain"; "each" (dest is "one of the N ...", each subject may pick its own);
    "together" (all subjects into the same one of them).
    """

    __slots__ = ("subjects", "relation", "dest", "mode")

    def __init__(self, subjects, relation, dest, mode="plain"):
        self.subjects, self.relation, self.dest, self.mode = list(subjects), relation, dest, mode


class _Speaker:
    """Renders a goal formula on an initial graph into imperative English clauses.

    Noun phrases: a node is "the <class>" when its class has one node, then "the <class> in the
    <room>", then "the <class> from <its parent>", then its name; nodes that make up a whole class
    are "both/all N <class>". A quantified variable is "all N <class>"/"each of the N <class>"
    (forall), "one of the N <class>"/"at least one of ..." (exists), "exactly K of the N <class>"
    (forn), and "that <class>" inside its scope.
    """

    def __init__(self, graph: SceneGraph):
        from grasif import formula as F

        self.F = F
        self.g = graph
        self.index: dict[str, list[str]] = {}
        for n in graph.nodes:
            if graph.nodes[n].layer is not Layer.PLACE:
                self.index.setdefault(node_class(n), []).append(n)
        self.var_cat: dict[str, str] = {}

    # -- noun phrases --
    def members(self, category: str) -> list[str]:
        return self.index.get(self.F.category_class(category), [])

    def count(self, category: str) -> int:
        return len(self.members(category))

    def cw(self, category: str) -> str:
        return _words(self.F.category_class(category))

    def ref(self, name: str, depth: int = 0) -> str:
        g = self.g
        cls = node_class(name)
        if g.nodes[name].layer is Layer.PLACE:
            return f"the {_words(cls)}"
        same = self.index.get(cls, [name])
        words = _words(cls)
        if len(same) == 1:
            return f"the {words}"
        room = g.place_of(name)
        if sum(g.place_of(n) == room for n in same) == 1:
            return f"the {words} in the {_words(node_class(room))}"
        edge = g.parent.get(name)
        if depth == 0 and edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
            if sum(g.parent.get(n) == edge for n in same) == 1:
                return f"the {words} from {self.ref(edge[0], 1)}"
        return name

    def term(self, arg: tuple[str, bool], env: dict[str, str]) -> str:
        name, is_var = arg
        return env[name] if is_var else self.ref(name)

    def every(self, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"both {_plural(w)}" if n == 2 else f"all {_number(n)} {_plural(w)}"

    def each(self, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"each of the {_number(n)} {_plural(w)}"

    def one_of(self, category: str, at_least: bool = False) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"{'at least ' if at_least else ''}one of the {_number(n)} {_plural(w)}"

    def exactly(self, k: int, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        if k == n:
            return self.every(category)
        if k == 0:
            return f"none of the {_number(n)} {_plural(w) if n != 1 else w}"
        return f"exactly {_number(k)} of the {_number(n)} {w if n == 1 else _plural(w)}"

    def that(self, category: str) -> str:
        return f"the {self.cw(category)}" if self.count(category) == 1 else f"that {self.cw(category)}"

    def subjects(self, subjects: list) -> list[str]:
        """Phrases for a subject list; nodes that make up their whole class become "both/all N"."""
        nodes = [s[1] for s in subjects if s[0] == "node"]
        whole = {c for c in {node_class(n) for n in nodes}
                 if len(self.index.get(c, ())) > 1 and set(self.index[c]) <= set(nodes)}
        out, done = [], set()
        for kind, value in subjects:
            if kind == "node" and node_class(value) in whole:
                if node_class(value) not in done:
                    done.add(node_class(value))
                    out.append(self.every(node_class(value)))
            else:
                out.append(self.ref(value) if kind == "node" else value)
        return out

    # -- structure helpers --
    def unwrap(self, f):
        while isinstance(f, self.F.And) and len(f.items) == 1:
            f = f.items[0]
        return f

    def mentions(self, f, var: str) -> bool:
        if isinstance(f, self.F.Atom):
            return (var, True) in f.args
        return any(self.mentions(c, var) for c in f.children())

    def initially_any(self, atom, env_nodes: dict[str, list[str]]) -> bool:
        """Whether ``atom`` holds initially for some binding of its variables."""
        choices = [env_nodes.get(n, [n]) if v else [n] for n, v in atom.args]
        for args in itertools.product(*choices):
            if atom.predicate in _REL:
                if self.g.parent.get(args[0]) == (args[1], _REL[atom.predicate]):
                    return True
            elif atom.predicate == "inroom":
                if self.g.place_of(args[0]) == args[1]:
                    return True
            elif self.g.nodes[args[0]].has(_WORD.get(atom.predicate, atom.predicate)):
                return True
        return False

    def bound(self, env: dict[str, str]) -> dict[str, list[str]]:
        return {v: self.members(self.var_cat[v]) for v in env if v in self.var_cat}

    def bind(self, q, env: dict[str, str], text: str) -> dict[str, str]:
        self.var_cat[q.var] = q.category
        return {**env, q.var: text}

    # -- clauses --
    def clauses(self, formula) -> list[str]:
        """One clause per top-level conjunct, placements first (merged when they share a
        destination), then the clauses that only open, close or switch."""
        F = self.F
        conjuncts = formula.items if isinstance(formula, F.And) else (formula,)
        placements: list = []
        switches: list[str] = []
        for c in conjuncts:
            puts = self.puts(c)
            if puts is not None:
                placements.extend(puts)
            elif self.only_switches(c):
                switches.append(self.imperative(c, {}))
            else:
                placements.append(self.imperative(c, {}))
        return self.merge(placements) + switches

    def only_switches(self, f) -> bool:
        if isinstance(f, self.F.Atom):
            return f.predicate not in _REL and f.predicate != "inroom"
        return all(self.only_switches(c) for c in f.children())

    def merge(self, items: list) -> list[str]:
        groups: dict[tuple, _Put] = {}
        order: list = []
        for item in items:
            if isinstance(item, str) or item.mode == "together":
                order.append(item)
                continue
            key = (item.relation, item.dest, item.mode)
            if key in groups:
                groups[key].subjects += item.subjects
            else:
                groups[key] = _Put(item.subjects, *key)
                order.append(groups[key])
        return [item if isinstance(item, str) else self.say_put(item) for item in order]

    def say_put(self, put: _Put) -> str:
        subjects = self.subjects(put.subjects)
        prep = _PREP[put.relation]
        if put.mode == "together" and not put.dest.startswith("the ") and (len(subjects) > 1 or not subjects[0].startswith("the ")):
            return f"put {_join(subjects)} together {prep} {put.dest}"
        if put.mode == "each" and not put.dest.startswith("the "):
            if len(subjects) == 1 and subjects[0].startswith(("all ", "both ")):
                return f"put each of the {subjects[0].split(' ', 1)[1]} {prep} {put.dest}"
            if len(subjects) > 1:
                return f"put each of these {prep} {put.dest}: {_join(subjects)}"
        return f"put {_join(subjects)} {prep} {put.dest}"

    def puts(self, f) -> list | None:
        """The placements ``f`` asks for when it is a plain placement (or an ``and`` of them)."""
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.And):
            out = []
            for c in f.items:
                got = self.puts(c)
                if got is None:
                    return None
                out += got
            return out
        if isinstance(f, F.Atom) and f.predicate in _REL and not f.args[0][1] and not f.args[1][1]:
            return [_Put([("node", f.args[0][0])], f.predicate, self.ref(f.args[1][0]))]
        if not isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            return None
        body = self.unwrap(f.body)
        if isinstance(body, F.Atom) and body.predicate in _REL:
            (a, av), (b, bv) = body.args
            if av and a == f.var and not bv:
                subject = (self.every(f.category) if isinstance(f, F.ForAll)
                           else self.one_of(f.category, at_least=True) if isinstance(f, F.Exists)
                           else self.exactly(f.n, f.category))
                return [_Put([("text", subject)], body.predicate, self.ref(b))]
            if isinstance(f, F.Exists) and bv and b == f.var and not av:
                return [_Put([("node", a)], body.predicate, self.one_of(f.category), self.mode("each", f.category))]
            return None
        if isinstance(f, F.ForAll) and isinstance(body, F.Exists):
            inner = self.unwrap(body.body)
            if (isinstance(inner, F.Atom) and inner.predicate in _REL and f.var != body.var
                    and inner.args == ((f.var, True), (body.var, True))):
                return [_Put([("text", self.every(f.category))], inner.predicate, self.one_of(body.category),
                             self.mode("each", body.category))]
        if isinstance(f, F.Exists):
            into = self.into(f)
            if into is not None and len(into) == 1 and not into[0][2]:
                rel, subjects, _ = into[0]
                return [_Put(subjects, rel, self.one_of(f.category), self.mode("together", f.category))]
        return None

    def mode(self, mode: str, category: str) -> str:
        """``mode``, or "plain" when the category has one node (then "one of them" is "the X")."""
        return mode if self.count(category) > 1 else "plain"

    def into(self, q):
        """For a quantifier whose body is an ``and``: [(relation, subjects, rest)] of the parts that
        put things into its variable, ``rest`` the other parts; ``None`` if there are none."""
        F = self.F
        parts = self.unwrap(q.body)
        parts = parts.items if isinstance(parts, F.And) else (parts,)
        groups: dict[str, list] = {}
        rest = []
        for x in parts:
            x = self.unwrap(x)
            got = None
            if isinstance(x, F.Atom) and x.predicate in _REL and x.args[1] == (q.var, True) and not x.args[0][1]:
                got = (x.predicate, ("node", x.args[0][0]))
            elif isinstance(x, F.ForAll):
                inner = self.unwrap(x.body)
                if (isinstance(inner, F.Atom) and inner.predicate in _REL and x.var != q.var
                        and inner.args == ((x.var, True), (q.var, True))):
                    got = (inner.predicate, ("text", self.every(x.category)))
            if got is None:
                rest.append(x)
            else:
                groups.setdefault(got[0], []).append(got[1])
        if not groups:
            return None
        return [(rel, subjects, rest if i == 0 else []) for i, (rel, subjects) in enumerate(groups.items())]

    def imperative(self, f, env: dict[str, str]) -> str:
        """A verb phrase that makes ``f`` true; ``env``: variable → how to say it."""
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.Atom):
            return self.atom(f, env, True)
        if isinstance(f, F.Not) and isinstance(self.unwrap(f.item), F.Atom):
            return self.atom(self.unwrap(f.item), env, False)
        if isinstance(f, F.And):
            parts: list = []
            for x in f.items:
                puts = self.puts(x) if not env else None
                parts.extend(puts if puts is not None else [self.imperative(x, env)])
            return _join(self.merge(parts))
        if isinstance(f, F.Or):
            alts = self.alternatives(f, env)
            if alts is not None:
                return alts
            return "either " + _join([self.imperative(x, env) for x in f.items], "or")
        if isinstance(f, F.ForAll):
            return self.forall(f, env)
        if isinstance(f, (F.Exists, F.ForN)):
            quant = self.one_of(f.category, at_least=True) if isinstance(f, F.Exists) else self.exactly(f.n, f.category)
            if self.into(f) is not None:
                return self.chosen(f, env)
            body = self.unwrap(f.body)
            inner = self.bind(f, env, quant)
            if isinstance(body, F.Or):
                alts = self.alternatives(body, inner)
                if alts is not None:
                    return alts
            if isinstance(body, (F.Atom, F.Not)):
                return self.imperative(body, inner)
        if isinstance(f, F.ForPairs):
            return self.pairs(f, env)
        return "make sure that " + self.declarative(f, env)

    def atom(self, a, env, positive: bool) -> str:
        p = a.predicate
        s = self.term(a.args[0], env)
        before = self.initially_any(a, self.bound(env))
        if p in _REL:
            d = self.term(a.args[1], env)
            if positive:
                return f"put {s} {_PREP[p]} {d}"
            return f"{'take' if before else 'keep'} {s} {'out of' if p == 'inside' else 'off'} {d}"
        if p == "inroom":
            d = self.term(a.args[1], env)
            return f"bring {s} to {d}" if positive else f"keep {s} out of {d}"
        if p == "open":
            return f"open {s}" if positive else (f"close {s}" if before else f"leave {s} closed")
        if p == "toggled_on":
            return f"turn on {s}" if positive else (f"turn off {s}" if before else f"leave {s} off")
        return f"make sure {s} is {'' if positive else 'not '}{p.replace('_', ' ')}"

    def forall(self, f, env) -> str:
        F = self.F
        body = self.unwrap(f.body)
        atom = self.unwrap(body.item) if isinstance(body, F.Not) else body
        if isinstance(atom, F.Atom):
            if atom.args[0] == (f.var, True) and not any(v and n == f.var for n, v in atom.args[1:]):
                return self.imperative(body, self.bind(f, env, self.every(f.category)))
            if (atom.predicate in _REL and atom.args[1] == (f.var, True) and not atom.args[0][1]):
                if body is atom:
                    return f"put {self.ref(atom.args[0][0])} {_PREP[atom.predicate]} {self.each(f.category)}"
                return self.imperative(body, self.bind(f, env, self.every(f.category)))
        if isinstance(body, F.Or):
            alts = self.alternatives(body, self.bind(f, env, self.each(f.category)))
            if alts is not None:
                return alts
        if isinstance(body, F.ForN):
            inner = self.unwrap(body.body)
            if (isinstance(inner, F.Atom) and inner.predicate in _REL
                    and inner.args == ((body.var, True), (f.var, True))):
                return f"put {self.exactly(body.n, body.category)} {_PREP[inner.predicate]} {self.each(f.category)}"
        if isinstance(body, F.Imply) and not self.mentions(body.antecedent, f.var):
            rest = F.ForAll(f.var, f.category, body.consequent)
            return f"if {self.declarative(body.antecedent, env)}, {self.imperative(rest, env)}"
        return f"for {self.each(f.category)}, " + self.imperative(body, self.bind(f, env, self.that(f.category)))

    def alternatives(self, f, env) -> str | None:
        """``put S on A or inside one of the N Bs`` when every alternative places the same subject."""
        F = self.F
        flat: list = []
        stack = list(f.items)
        while stack:
            x = self.unwrap(stack.pop(0))
            if isinstance(x, F.Or):
                stack = list(x.items) + stack
            else:
                flat.append(x)
        subject, places = None, []
        for x in flat:
            q = None
            if isinstance(x, F.Exists) and isinstance(self.unwrap(x.body), F.Atom):
                q, x = x, self.unwrap(x.body)
            if not (isinstance(x, F.Atom) and x.predicate in _REL):
                return None
            if q is not None and x.args[1] != (q.var, True):
                return None
            if subject is None:
                subject = x.args[0]
            elif x.args[0] != subject:
                return None
            if q is not None:
                places.append((x.predicate, ("text", self.one_of(q.category))))
            elif x.args[1][1]:
                places.append((x.predicate, ("text", env[x.args[1][0]])))
            else:
                places.append((x.predicate, ("node", x.args[1][0])))
        by_prep: dict[str, list] = {}
        for rel, dest in places:
            by_prep.setdefault(rel, []).append(dest)
        phrases = []
        for rel, dests in by_prep.items():
            nodes = [d[1] for d in dests if d[0] == "node"]
            texts = []
            for cls in dict.fromkeys(node_class(n) for n in nodes):
                members = self.index.get(cls, [])
                if len(members) > 1 and set(members) <= set(nodes):
                    texts.append(("class", cls))
            whole = {c for _, c in texts}
            said, words = set(), []
            for kind, value in dests:
                if kind == "node" and node_class(value) in whole:
                    if node_class(value) not in said:
                        said.add(node_class(value))
                        words.append(self.one_of(node_class(value)))
                else:
                    words.append(self.ref(value) if kind == "node" else value)
            phrases.append((_PREP[rel], words))
        if len(phrases) == 2 and phrases[0][1] == phrases[1][1] and len(phrases[0][1]) == 1:
            return f"put {self.term(subject, env)} {phrases[0][0]} or {phrases[1][0]} {phrases[0][1][0]}"
        return f"put {self.term(subject, env)} " + _join([f"{prep} {_join(words, 'or')}" for prep, words in phrases], "or")

    def chosen(self, f, env) -> str:
        """exists/forn over an ``and`` that fills its variable: "put A and B together inside one
        of the N Xs, keep C out of that X and put that X on D"."""
        F = self.F
        quant = self.one_of(f.category) if isinstance(f, F.Exists) else self.exactly(f.n, f.category)
        that = self.that(f.category)
        inner = self.bind(f, env, that)
        parts = []
        rest = []
        for i, (rel, subjects, others) in enumerate(self.into(f)):
            words = self.subjects(subjects)
            plural = len(words) > 1 or not words[0].startswith("the ")
            together = " together" if plural and not quant.startswith("the ") else ""
            parts.append(f"put {_join(words)}{together} {_PREP[rel]} {quant if i == 0 else that}")
            rest = rest + others
        keep: dict[str, list] = {}
        for x in rest:
            neg = self.unwrap(x.item) if isinstance(x, F.Not) else None
            if isinstance(neg, F.Atom) and neg.predicate in _REL and neg.args[1] == (f.var, True) and not neg.args[0][1]:
                keep.setdefault(neg.predicate, []).append(("node", neg.args[0][0]))
                continue
            if isinstance(x, F.ForAll):
                b = self.unwrap(x.body)
                a = self.unwrap(b.item) if isinstance(b, F.Not) else None
                if isinstance(a, F.Atom) and a.predicate in _REL and a.args == ((x.var, True), (f.var, True)) and x.var != f.var:
                    keep.setdefault(a.predicate, []).append(("text", self.every(x.category)))
                    continue
            parts.append(self.imperative(x, inner))
        for rel, subjects in keep.items():
            parts.insert(1, f"keep {_join(self.subjects(subjects))} {'out of' if rel == 'inside' else 'off'} {that}")
        return _join(parts)

    def pairs(self, f, env) -> str:
        F = self.F
        body = self.unwrap(f.body)
        if (isinstance(body, F.Atom) and body.predicate in _REL and f.var1 != f.var2
                and {body.args[0], body.args[1]} == {(f.var1, True), (f.var2, True)}):
            child_var = body.args[0][0]
            child_cat = f.category1 if child_var == f.var1 else f.category2
            parent_cat = f.category2 if child_var == f.var1 else f.category1
            nc, npar = self.count(child_cat), self.count(parent_cat)
            prep, cw = _PREP[body.predicate], self.cw(child_cat)
            if nc == npar:
                return f"put {_one(cw)} {prep} {self.each(parent_cat)}"
            if nc > npar:
                return f"put at least {_one(cw)} {prep} {self.each(parent_cat)}"
            return f"put {self.each(child_cat)} {prep} a different one of the {_number(npar)} {_plural(self.cw(parent_cat))}"
        return "make sure that " + self.declarative(f, env)

    # -- declarative fallback --
    def declarative(self, f, env) -> str:
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.Atom):
            s = self.term(f.args[0], env)
            if f.predicate in _REL:
                return f"{s} is {_PREP[f.predicate]} {self.term(f.args[1], env)}"
            if f.predicate == "inroom":
                return f"{s} is in {self.term(f.args[1], env)}"
            return f"{s} is {'switched on' if f.predicate == 'toggled_on' else f.predicate.replace('_', ' ')}"
        if isinstance(f, F.Not):
            if isinstance(self.unwrap(f.item), F.Atom):
                return self.declarative(f.item, env).replace(" is ", " is not ", 1)
            return "it is not the case that " + self.declarative(f.item, env)
        if isinstance(f, F.And):
            return _join([self.declarative(x, env) for x in f.items])
        if isinstance(f, F.Or):
            return "either " + _join([self.declarative(x, env) for x in f.items], "or")
        if isinstance(f, F.Imply):
            return f"if {self.declarative(f.antecedent, env)}, then {self.declarative(f.consequent, env)}"
        if isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            quant = (self.each(f.category) if isinstance(f, F.ForAll) else self.one_of(f.category, at_least=True)
                     if isinstance(f, F.Exists) else self.exactly(f.n, f.category))
            return f"for {quant}, " + self.declarative(f.body, self.bind(f, env, self.that(f.category)))
        self.var_cat[f.var1], self.var_cat[f.var2] = f.category1, f.category2
        inner = {**env, f.var1: self.that(f.category1), f.var2: self.that(f.category2)}
        head = (f"at least {_number(f.n)} of the {_plural(self.cw(f.category1))} and {_number(f.n)} of the "
                f"{_plural(self.cw(f.category2))}" if isinstance(f, F.ForNPairs) else
                f"as many {_plural(self.cw(f.category1))} and {_plural(self.cw(f.category2))} as the smaller group has")
        return f"{head} form pairs, each with a different partner, where " + self.declarative(f.body, inner)


def title(activity_name: str) -> str:
    """``putting_away_games`` → ``Putting away games``."""
    text = activity_name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def instruction(activity_name: str, graph: SceneGraph, formula: str) -> str:
    """``"<Title>: <clause>; <clause>."`` for the goal ``formula`` on the initial ``graph``."""
    from grasif.formula import Formula

    clauses = _Speaker(graph).clauses(Formula.parse(formula))
    return f"{title(activity_name)}: {'; '.join(clauses)}."


# ---------------------------------------------------------------------------------------------
# tasks
# ---------------------------------------------------------------------------------------------
def make_task(name: str, definitions: str | Path | None = None) -> Task:
    """The task of one kept activity; :class:`SourceError` naming the file if it cannot be built."""
    act = activity(name, definitions)
    conv = convert(act)
    formula = goal_formula(act, conv)
    goal = GoalSpec(formula=formula)
    graph = graph_from_dict(conv.graph)
    problems = goal.check_names(graph)
    if problems:
        raise SourceError(f"{act.path}: goal: {'; '.join(problems)}")
    plan = ground_truth_plan(act, conv, graph, goal)
    if plan is None:
        raise SourceError(f"{act.path}: no plan reaches the goal with one parent per object and fixed assets")
    return Task(
        id=name,
        split=SPLIT,
        instruction=instruction(name, graph, formula),
        initial_graph=conv.graph,
        goal=goal,
        ground_truth_plan=plan,
        provenance={
            "source": f"{PACKAGE}=={source_version()}",
            "activity": name,
            "file": str(act.path) if definitions is not None else f"bddl/activity_definitions/{name}/{PROBLEM_FILE}",
            "instances": conv.instances,
        },
    )


_TASK_CACHE: dict[tuple, list[Task]] = {}


def build_tasks(definitions: str | Path | None = None) -> list[Task]:
    """The split's tasks (the kept activities, see :func:`selection`), sorted by id; deterministic.

    ``definitions``: a directory laid out like bddl's ``activity_definitions`` (default: the
    installed package's). Built once per set of problem files (path, modification time, size) and
    process; callers get copies. Raises
    :class:`SourceError` naming the package or file when the source is missing or broken.
    """
    root = definitions_dir(definitions)
    key = tuple(_stamp(root / name / PROBLEM_FILE) for name in activity_names(root))
    if key not in _TASK_CACHE:
        kept, _ = selection(definitions)
        _TASK_CACHE[key] = sorted((make_task(n, definitions) for n in kept), key=lambda t: t.id)
    return [t.model_copy(deep=True) for t in _TASK_CACHE[key]]


__all__ = [
    "SPLIT", "PAPER", "KEPT_PREDICATES", "EXCLUDED", "build_tasks", "make_task", "selection", "activity",
    "read_activity", "activity_names", "convert", "goal_formula", "instruction", "ground_truth_plan",
    "BddlGoalChecker", "require_bddl",
]
