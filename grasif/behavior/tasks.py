"""The split's tasks: :func:`make_task` (one kept activity) and :func:`build_tasks` (all of them).

A task holds the converted initial graph (:mod:`.convert`), the goal formula (:mod:`.goal`), the
instruction (:mod:`.instruction`), the ground-truth plan (:mod:`.plan`) and its provenance: the
source package and version, the activity, its problem file and the map node name → bddl term.
:func:`build_tasks` is deterministic and sorted by id. Errors: a missing package or a broken or
unplannable problem raises :class:`grasif.dataset.SourceError` naming it.
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

from pathlib import Path

from grasif.behavior.convert import convert
from grasif.behavior.goal import goal_formula
from grasif.behavior.instruction import instruction
from grasif.behavior.plan import ground_truth_plan
from grasif.behavior.source import (
    PACKAGE, PROBLEM_FILE, SPLIT, file_stamp, activity, activity_names, definitions_dir, selection, source_version,
)
from grasif.dataset import SourceError
from grasif.goals import GoalSpec
from grasif.task import Task
from sgs.io import graph_from_dict

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
    key = tuple(file_stamp(root / name / PROBLEM_FILE) for name in activity_names(root))
    if key not in _TASK_CACHE:
        kept, _ = selection(definitions)
        _TASK_CACHE[key] = sorted((make_task(n, definitions) for n in kept), key=lambda t: t.id)
    return [t.model_copy(deep=True) for t in _TASK_CACHE[key]]
