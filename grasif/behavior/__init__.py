"""GraSIF split "behavior": BEHAVIOR-1K activities from their BDDL problems (paper appendix H2).

:func:`build_tasks` reads the problems of ``bddl==3.6.0`` (or a directory laid out like its
``activity_definitions``) and returns the split's tasks, sorted by id and deterministic; a missing
package or a broken problem file raises :class:`grasif.dataset.SourceError` naming it. Modules,
lowest first: ``source`` (bddl, activities, the selection), ``convert`` (the scene graph), ``goal``
(the goal formula, bddl's own check), ``search`` and ``plan`` (ground-truth plans), ``english``
and ``instruction`` (the wording), ``tasks`` (the split). How the split is built:
``docs/benchmark/splits.md``.
"""

from grasif.behavior.convert import Converted, abilities, convert
from grasif.behavior.goal import BddlGoalChecker, goal_formula
from grasif.behavior.instruction import instruction, title
from grasif.behavior.plan import (
    emit_plan, ground_options, ground_truth_plan, plan_from_literals, plan_succeeds, search_plan,
)
from grasif.behavior.source import (
    AGENT_SYNSET, EXCLUDED, KEPT_PREDICATES, PACKAGE, PAPER, PROBLEM_FILE, SOURCE_VERSION, SPLIT, Activity, activity,
    activity_names, definitions_dir, read_activity, require_bddl, selection, source_version,
)
from grasif.behavior.tasks import build_tasks, make_task

__all__ = [
    "SPLIT", "PAPER", "PACKAGE", "SOURCE_VERSION", "PROBLEM_FILE", "KEPT_PREDICATES", "EXCLUDED", "AGENT_SYNSET",
    "Activity", "require_bddl", "source_version", "definitions_dir", "activity_names", "read_activity", "activity",
    "selection", "Converted", "abilities", "convert", "goal_formula", "BddlGoalChecker", "ground_options",
    "plan_from_literals", "emit_plan", "search_plan", "plan_succeeds", "ground_truth_plan", "title", "instruction",
    "make_task", "build_tasks",
]
