"""GraSIF split "virtualhome": VirtualHome RobotHow programs in TrimmedTestScene1 (paper appendix H1).

:func:`build_tasks` reads the RobotHow programs and graphs of ``virtualhome-eval==0.1.1`` (or a
directory laid out the same way) and returns the tasks of a selection (:data:`SELECTIONS`),
sorted by id; anything missing or malformed raises :class:`grasif.dataset.SourceError` naming the
file. Modules, lowest first: ``source`` (files, programs, selections), ``convert`` (VirtualHome
graphs in our terms, also during an episode), ``goal``, ``instruction``, ``translate``
(ground-truth plans), ``tasks`` (the split), ``crosscheck`` (against VirtualHome's simulator).
How the split is built: ``docs/benchmark/splits.md``.
"""

from grasif.virtualhome.convert import (
    DROPPED_CATEGORIES, Naming, convert_graph, convert_state, is_under, make_naming, raw_index, task_naming,
    task_source_graph,
)
from grasif.virtualhome.crosscheck import CrossCheckReport, CrossCheckResult, cross_check
from grasif.virtualhome.goal import GOAL_STATES, task_goal
from grasif.virtualhome.instruction import instruction, label
from grasif.virtualhome.source import (
    ALLOWED_ACTIONS, DATASET, EXCLUDED_TITLES, GRAPHS, PACKAGE, PAPER, PAPER_EXTRA_TITLES, PROGRAMS, SELECTIONS,
    SPLIT, Program, Step, program_paths, read_graphs, read_program, source_dir, source_version,
)
from grasif.virtualhome.tasks import SourceTask, build_tasks, load_source, load_source_task, make_task
from grasif.virtualhome.translate import TranslationError, compact_plan, translate_program

__all__ = [
    "SPLIT", "PAPER", "PACKAGE", "DATASET", "PROGRAMS", "GRAPHS", "ALLOWED_ACTIONS", "EXCLUDED_TITLES",
    "PAPER_EXTRA_TITLES", "SELECTIONS", "DROPPED_CATEGORIES", "GOAL_STATES", "source_dir", "source_version", "Step",
    "Program", "read_program", "read_graphs", "program_paths", "Naming", "make_naming", "is_under", "convert_graph",
    "task_source_graph", "task_naming", "raw_index", "convert_state", "task_goal", "label", "instruction",
    "TranslationError", "translate_program", "compact_plan", "SourceTask", "load_source_task", "load_source",
    "make_task", "build_tasks", "CrossCheckResult", "CrossCheckReport", "cross_check",
]
