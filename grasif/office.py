"""GraSIF office split: an office building and its tasks, authored for this project.

SayPlan's office scene graph is not public (paper appendix H3), so the split is authored here in
the same spirit, as readable source data in ``grasif/data/office/``: ``building.json`` (one scene
graph in the paper's JSON format, :mod:`sgs.io`) and ``tasks.json`` (``{"about": ..., "tasks":
[...]}``; a task has ``id``, ``kind`` (:data:`KINDS`), ``instruction``, ``edits``, ``goal`` (a
:class:`grasif.goals.GoalSpec`) and ``plan``). A task's initial graph is the building with its
``edits`` applied in this order: ``add`` (object entries in the paper's format), ``move`` (an
object to a new parent), ``set_states`` (state words, each replacing its opposite), ``agent``
(start room and/or a held object).

Every goal gets ``unchanged_elsewhere``. The ground-truth plans are short LM-level plans:
``rearrange`` for moves, the ``go_to``/``open`` steps left to the SGS, and a ``close`` for every
container the SGS opens on the way, after its last use. :func:`build_tasks` raises
:class:`grasif.dataset.SourceError` naming the file and the task or node for unreadable JSON, a
bad building graph, edits or goals that name unknown nodes, a goal part that already holds in
the initial graph, or a plan that does not succeed through the SGS (with its corrections).
Concepts: ``docs/benchmark/splits.md`` (Office split).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grasif.dataset import SourceError
from grasif.goals import GoalSpec, already_met
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import ActionSyntaxError, parse_plan
from sgs.graph import OPPOSITE_STATE, GraphError, node_class
from sgs.io import graph_from_dict

SPLIT = "office"
PAPER = {"tasks": 29, "rooms": 37, "nodes": 202.6, "actions": 4.2}

#: Where the split's source files live (package data).
SOURCE_DIR = Path(__file__).resolve().parent / "data" / "office"
BUILDING_FILE = "building.json"
TASKS_FILE = "tasks.json"

#: Task kinds: find a described (moved or hidden) object and bring it somewhere; move objects;
#: switch, open or close; moves and state changes together; device sequences (coffee, tea,
#: heating food) whose order matters.
KINDS = ("search", "rearrange", "state", "mixed", "sequence")

PROVENANCE = (
    "authored for the LookPlanGraph project: an office building and tasks in the spirit of SayPlan Office "
    "(Rana et al. 2023, whose graph is not public; LookPlanGraph appendix H3), not SayPlan's data"
)


# ---------------------------------------------------------------------------------------------
# source models (tasks.json)
# ---------------------------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentEdit(_Strict):
    location: str | None = None
    holding: str | None = None


class MoveEdit(_Strict):
    node: str
    relation: Literal["ontop_of", "inside_of"]
    related_to: str


class Edits(_Strict):
    add: list[dict[str, Any]] = Field(default_factory=list)
    move: list[MoveEdit] = Field(default_factory=list)
    set_states: dict[str, list[str]] = Field(default_factory=dict)
    agent: AgentEdit | None = None

    def is_empty(self) -> bool:
        return not (self.add or self.move or self.set_states or self.agent)


class TaskSource(_Strict):
    id: str = Field(min_length=1)
    kind: Literal["search", "rearrange", "state", "mixed", "sequence"]
    instruction: str = Field(min_length=1)
    edits: Edits = Field(default_factory=Edits)
    goal: GoalSpec
    plan: list[str] = Field(min_length=1)


class TasksFile(_Strict):
    about: str = ""
    tasks: list[dict[str, Any]]  # each checked as a TaskSource, so errors can name the task


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SourceError(f"{path}: missing source file of an authored building") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None


def _pydantic_problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'entry'}: {err['msg']}" for err in exc.errors(include_url=False)
    )


def load_building(source_dir: str | Path | None = None) -> dict[str, Any]:
    """The building graph as a JSON dict (checked: it loads as a valid scene graph)."""
    path = Path(source_dir if source_dir is not None else SOURCE_DIR) / BUILDING_FILE
    data = _read_json(path)
    try:
        graph_from_dict(data)
    except GraphError as exc:
        raise SourceError(f"{path}: invalid building graph: {'; '.join(exc.problems)}") from None
    # Edits address entries by these keys, so the building keeps to the appendix-C spelling.
    body = data.get("nodes")
    if not isinstance(body, dict) or any(not isinstance(body.get(k), list) for k in ("rooms", "asset", "objects")):
        raise SourceError(f'{path}: the building must be {{"nodes": {{"rooms": [...], "asset": [...], "objects": [...], "agent": {{...}}}}}}')
    for key in ("rooms", "asset", "objects"):
        for i, entry in enumerate(body[key]):
            if "name" not in entry:
                raise SourceError(f"{path}: {key}[{i}]: give the node's name as 'name'")
    return data


def load_sources(source_dir: str | Path | None = None) -> tuple[dict[str, Any], list[TaskSource]]:
    """The building dict and the task entries of ``tasks.json``, checked for form (not yet applied)."""
    source_dir = Path(source_dir if source_dir is not None else SOURCE_DIR)
    building = load_building(source_dir)
    path = source_dir / TASKS_FILE
    raw = _read_json(path)
    try:
        doc = TasksFile.model_validate(raw)
    except ValidationError as exc:
        raise SourceError(f"{path}: {_pydantic_problems(exc)}") from None
    sources: list[TaskSource] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc.tasks):
        label = entry.get("id") if isinstance(entry, dict) and isinstance(entry.get("id"), str) else f"tasks[{i}]"
        try:
            src = TaskSource.model_validate(entry)
        except ValidationError as exc:
            raise SourceError(f"{path}: task {label}: {_pydantic_problems(exc)}") from None
        if src.id in seen:
            raise SourceError(f"{path}: task {src.id}: duplicate task id")
        seen.add(src.id)
        try:
            parse_plan(src.plan)
        except ActionSyntaxError as exc:
            raise SourceError(f"{path}: task {src.id}: plan {exc}") from None
        sources.append(src)
    return building, sources


def apply_edits(building: dict[str, Any], edits: Edits) -> dict[str, Any]:
    """A copy of ``building`` with ``edits`` applied; raises ``ValueError`` naming the bad node."""
    data = copy.deepcopy(building)
    body = data["nodes"] if "nodes" in data else data
    objects = body.setdefault("objects", [])
    by_name: dict[str, dict[str, Any]] = {}
    for key in ("rooms", "asset", "objects"):
        for entry in body.get(key, []):
            by_name[entry.get("name")] = entry
    for entry in edits.add:
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"add: object entry without a name: {entry!r}")
        if name in by_name:
            raise ValueError(f"add: {name} is already a node of the building")
        entry = copy.deepcopy(entry)
        objects.append(entry)
        by_name[name] = entry
    object_names = {e["name"] for e in objects}
    for move in edits.move:
        if move.node not in object_names:
            raise ValueError(f"move: {move.node!r} is not an object of the building")
        if move.related_to not in by_name:
            raise ValueError(f"move: {move.node} to unknown node {move.related_to!r}")
        by_name[move.node]["relation"], by_name[move.node]["related_to"] = move.relation, move.related_to
    for name, words in edits.set_states.items():
        if name not in by_name:
            raise ValueError(f"set_states: unknown node {name!r}")
        states = list(by_name[name].get("states") or [])
        for word in words:
            states = [s for s in states if s not in (word, OPPOSITE_STATE.get(word))] + [word]
        by_name[name]["states"] = states
    if edits.agent is not None:
        agent = body.setdefault("agent", {"name": "agent-1", "location": None, "holding": "nothing"})
        if edits.agent.location is not None:
            if edits.agent.location not in {r.get("name") for r in body.get("rooms", [])}:
                raise ValueError(f"agent: location {edits.agent.location!r} is not a room of the building")
            agent["location"] = edits.agent.location
        if edits.agent.holding is not None:
            held = edits.agent.holding
            if held not in object_names:
                raise ValueError(f"agent: holding {held!r}, which is not an object of the building")
            agent["holding"] = held
            by_name[held]["relation"], by_name[held]["related_to"] = "held", agent.get("name", "agent-1")
    return data


def build_task(src: TaskSource, building: dict[str, Any], tasks_path: Path, split: str = SPLIT,
               source: str = PROVENANCE, files: list[str] | None = None, extra: dict[str, Any] | None = None) -> Task:
    """One authored task: ``building`` with ``src``'s edits, checked as the module doc says
    (:class:`SourceError` naming ``tasks_path`` and the task). ``split``, ``source``, ``files`` and
    ``extra`` (more provenance keys) let another authored split (:mod:`grasif.dev`) build its own."""
    where = f"{tasks_path}: task {src.id}"
    try:
        initial = apply_edits(building, src.edits)
    except ValueError as exc:
        raise SourceError(f"{where}: edits: {exc}") from None
    try:
        graph = graph_from_dict(initial)
    except GraphError as exc:
        raise SourceError(f"{where}: the edited building is not a valid graph: {'; '.join(exc.problems)}") from None
    if src.goal.is_empty():
        raise SourceError(f"{where}: empty goal (every authored task changes something)")
    goal = src.goal.model_copy(update={"unchanged_elsewhere": True})  # the paper's success: no side effects
    try:
        problems = goal.check_names(graph)
    except ValueError as exc:  # a formula that does not parse
        raise SourceError(f"{where}: goal: {exc}") from None
    # A class nobody has can never be counted (check_names only looks at destinations).
    classes = {node_class(n) for n in graph.nodes}
    problems += [f"count goal: no node of class {g.cls!r}" for g in goal.count_goals if g.cls not in classes]
    if problems:
        raise SourceError(f"{where}: goal: {'; '.join(problems)}")
    met = already_met(goal, graph)
    if met:
        raise SourceError(f"{where}: goal part already holds in the initial graph: {', '.join(met)}")
    report = validate_plan(graph, src.plan, goal)
    if not report.success:
        bad = [f"step {s.index} {s.action}: {s.feedback}" for s in report.infeasible]
        bad += report.goal.not_met()
        raise SourceError(f"{where}: the ground-truth plan does not reach the goal: {'; '.join(bad)}")
    files = files if files is not None else [f"grasif/data/office/{BUILDING_FILE}", f"grasif/data/office/{TASKS_FILE}"]
    provenance: dict[str, Any] = {"source": source, "files": files, "kind": src.kind}
    if not src.edits.is_empty():
        provenance["edits"] = src.edits.model_dump(mode="json", exclude_defaults=True)
    provenance.update(extra or {})
    return Task(
        id=src.id,
        split=split,
        instruction=src.instruction,
        initial_graph=initial,
        goal=goal,
        ground_truth_plan=list(src.plan),
        provenance=provenance,
    )


def build_tasks(source_dir: str | Path | None = None) -> list[Task]:
    """The office tasks, sorted by id; deterministic. ``source_dir`` defaults to :data:`SOURCE_DIR`.

    Raises :class:`SourceError` naming the file and the task or node for any problem (module doc).
    """
    source_dir = Path(source_dir if source_dir is not None else SOURCE_DIR)
    building, sources = load_sources(source_dir)
    tasks = [build_task(src, building, source_dir / TASKS_FILE) for src in sources]
    return sorted(tasks, key=lambda t: t.id)


__all__ = [
    "SPLIT", "PAPER", "KINDS", "SOURCE_DIR", "build_tasks", "build_task", "load_building", "load_sources", "apply_edits",
    "Edits", "MoveEdit", "AgentEdit", "TaskSource",
]
