"""The bddl package and its activities: ``<definitions>/<activity>/problem0.bddl``, parsed by bddl.

Every problem is read with bddl's own parser, ``bddl.activity.Conditions(activity, 0, "omnigibson")``
(:func:`read_activity`; :func:`activity` caches it per file). ``definitions`` is bddl's
``activity_definitions`` directory by default, or another directory laid out the same way.
:func:`selection` keeps an activity when every predicate of its init and goal is in
:data:`KEPT_PREDICATES`, except the :data:`EXCLUDED` ones (each with its reason).

Errors: a missing package raises :class:`grasif.dataset.SourceError` with the pip command; a
problem file that cannot be read or parsed raises it naming the file.
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasif.dataset import SourceError

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
#: A bddl synset ``<word>.<pos>.<number>``: its word, part of speech and number.
SYNSET_RE = re.compile(r"^([a-z0-9_'\-]+)\.([a-z])\.(\d+)$")


class _Null:
    """A stdout that forgets: bddl's trivial predicates print every evaluation."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def quiet_stdout():
    """A context that drops what bddl prints to stdout."""
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
        with quiet_stdout():
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


def file_stamp(path: Path) -> tuple:
    """A cache key for a file: (path, modification time, size), or (path, None) when it is missing."""
    try:
        st = path.stat()
    except OSError:
        return (str(path), None)
    return (str(path), st.st_mtime_ns, st.st_size)


def activity(name: str, definitions: str | Path | None = None) -> Activity:
    """:func:`read_activity`, cached per problem file (path, modification time, size)."""
    key = file_stamp(definitions_dir(definitions) / name / PROBLEM_FILE)
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
