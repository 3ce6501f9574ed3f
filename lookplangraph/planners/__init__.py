"""Planners side by side under one protocol (:mod:`.base`): LookPlanGraph and the paper's
baselines. ``get_planner(name)`` gives one by its ``--planner`` name."""

from lookplangraph.planners.base import PLANNER_NAMES, Planner, get_planner

__all__ = ["PLANNER_NAMES", "Planner", "get_planner"]
