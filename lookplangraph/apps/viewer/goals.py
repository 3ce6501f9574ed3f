"""The goal units of an episode and which were met at the end, for the viewer.

Sources, best first:

* a trial's marked checklist (``result.json``'s ``checklist``): one unit per line, met as the
  operator marked it;
* the task's goal (:func:`grasif.goals.evaluate_goal` gives the unit labels) with the results
  row's ``goal_not_met`` lines (``"<label>: expected ...; found ..."``, then ``"side effect:
  ..."`` lines): a unit is met unless a line names it. A goal that keeps everything else as it
  was adds the unit "nothing else changed", unmet when side effects are listed (each one then
  follows as an unmet unit);
* without the task: only the unmet units (from ``goal_not_met``), said so in the note.

A unit is ``{"label", "expected", "met", "detail"}``: ``expected`` what the goal asks of it
(empty when the label says it all), ``detail`` what was found instead when unmet; ``met`` is None
while the episode is unfinished.
"""

from __future__ import annotations

import re

from grasif.goals import evaluate_goal
from grasif.task import Task

SIDE = "side effect: "


def goal_units(task: Task | None, result: dict | None, checklist: list[dict] | None = None) -> tuple[list[dict], str | None]:
    """``(units, note)`` (module doc)."""
    if checklist:
        return [{"label": str(i.get("text", "")), "expected": "", "met": bool(i.get("met")),
                 "detail": "marked by the operator" + ("" if i.get("reported") is None else
                                                       f"; the planner's graph said {'met' if i['reported'] else 'not met'}")}
                for i in checklist if isinstance(i, dict)], None
    not_met = [str(s) for s in (result or {}).get("goal_not_met") or []]
    side = [s[len(SIDE):] for s in not_met if s.startswith(SIDE)]
    unit_lines = [s for s in not_met if not s.startswith(SIDE)]
    if task is None:
        units = [_unmet(s) for s in unit_lines] + [_unmet(s, "side effect: ") for s in side]
        return units, "the task is not at hand: only the unmet goal units are known"
    goal = task.goal
    if goal.is_empty():
        met = None if result is None else bool(result.get("success"))
        return [{"label": "nothing changes (the task asks for no change)", "expected": "", "met": met, "detail": ""}], None
    try:
        units_only = goal.model_copy(update={"unchanged_elsewhere": False})  # labels only: no side effects to look for
        items = [(i.label, i.expected) for i in evaluate_goal(units_only, task.graph).items]
    except ValueError as exc:
        return [], f"the goal cannot be read: {exc}"
    units = []
    lines = list(unit_lines)
    for label, expected in items:
        line = next((s for s in lines if s.startswith(label + ": expected ")), None)
        if line is not None:
            lines.remove(line)  # two units with one label (count goals of one class) take a line each
        unit = _unmet(line) if line is not None else {"label": label, "expected": _expected(expected), "detail": ""}
        unit["met"] = None if result is None else line is None
        units.append(unit)
    units += [_unmet(s) for s in lines]  # a line no label matches: kept rather than lost
    if goal.unchanged_elsewhere:
        units.append({"label": "nothing else changed", "expected": "", "met": None if result is None else not side,
                      "detail": f"{len(side)} side effect(s)" if side else ""})
        units += [_unmet(s, "side effect: ") for s in side]
    return units, None


def _expected(text: str) -> str:
    return "" if text == "true" else text


def _unmet(line: str, prefix: str = "") -> dict:
    """An unmet unit from a ``goal_not_met`` line ``"<label>: expected E; found F"``."""
    label, _, rest = line.partition(": expected ")
    expected, _, found = rest.partition("; found ")
    if not rest:
        return {"label": prefix + line, "expected": "", "met": False, "detail": ""}
    return {"label": prefix + label, "expected": _expected(expected), "met": False, "detail": f"found {found}" if found else ""}


def goal_nodes(task: Task | None) -> list[str]:
    """Names of the task's map that its goal names (node goals' nodes and destinations, count
    goals' destinations, node names written in a formula): the page marks them in the graph."""
    if task is None:
        return []
    goal, nodes = task.goal, task.graph.nodes
    names = [n for g in goal.node_goals for n in (g.node, g.destination) if n]
    names += [g.destination for g in goal.count_goals]
    if goal.formula:
        names += [w for w in re.findall(r"[\w.-]+", goal.formula) if w in nodes]
    return [n for n in dict.fromkeys(names) if n in nodes]
