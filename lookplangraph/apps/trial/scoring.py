"""The goal checklist of a trial: :func:`checklist` turns a task's goal into the lines the operator
marks met / not met by looking, :func:`score` turns the marks into success and precision as the
benchmark counts them (the rules: :mod:`lookplangraph.apps.trial`), :func:`ask_checklist` asks
them in a terminal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from grasif.formula import Formula
from grasif.goals import GoalSpec, evaluate_goal
from grasif.task import Task
from sim_adapters.human import TrialPaused

from lookplangraph.apps.trial.record import TrialError


# -- the checklist -----------------------------------------------------------------------------
@dataclass
class ChecklistItem:
    """One line the operator marks met / not met. ``weight`` counts toward precision (0: the
    "nothing else changed" line, which counts toward success only); ``reported`` is what the
    planner's graph of the operator's reports says (a hint, None when unknown)."""

    text: str
    weight: int = 1
    kind: str = "goal"  # goal | frame | instruction
    reported: bool | None = None


_REL_WORDS = {"ontop": "on top of", "inside": "inside"}


def _states_words(states: list[str], absent: list[str]) -> str:
    words = list(states) + [f"not {s}" for s in absent]
    return " and ".join(words)


def checklist(task: Task, final=None, initial=None) -> list[ChecklistItem]:
    """The goal checklist of ``task`` (module doc); with the reported ``final`` graph (and the
    ``initial`` one) each line carries the planner's own verdict as a hint."""
    goal: GoalSpec = task.goal
    verdict = None
    if final is not None:
        try:
            verdict = evaluate_goal(goal, final, initial if initial is not None else task.graph)
        except ValueError:
            verdict = None
    reported = [i.ok for i in verdict.items] if verdict is not None else []
    items: list[ChecklistItem] = []
    for g in goal.node_goals:
        parts = []
        if g.relation == "held":
            parts.append("is in your hand")
        elif g.relation is not None:
            parts.append(f"is {_REL_WORDS[g.relation]} {g.destination}")
        if g.states or g.absent_states:
            parts.append("is " + _states_words(g.states, g.absent_states))
        items.append(ChecklistItem(f"{g.node} {' and '.join(parts)}"))
    for g in goal.count_goals:
        extra = f", {' and '.join(g.states)}" if g.states else ""
        items.append(ChecklistItem(f"at least {g.count} {g.cls.replace('_', ' ')} objects are "
                                   f"{_REL_WORDS[g.relation]} {g.destination}{extra}", weight=g.count))
    if goal.formula:
        for conjunct in Formula.parse(goal.formula).conjuncts():
            items.append(ChecklistItem(f"holds: {conjunct}"))
    for item, ok in zip(items, reported):
        item.reported = ok
    if not items:
        items.append(ChecklistItem(f"the instruction is carried out: “{task.instruction}”", kind="instruction"))
    if goal.unchanged_elsewhere or goal.is_empty():
        ok = None
        if verdict is not None and verdict.frame_checked:
            ok = not verdict.side_effects
        items.append(ChecklistItem("nothing else was changed (what was opened is closed again, devices as found, "
                                   "hands empty)",
                                   weight=0, kind="frame", reported=ok))
    return items


def score(items: list[ChecklistItem], marks: list[bool]) -> dict:
    """Success, changed-only success and precision of checklist ``marks`` (module doc)."""
    if len(marks) != len(items):
        raise TrialError(f"the checklist has {len(items)} lines; {len(marks)} marks were given")
    units = [(i, m) for i, m in zip(items, marks) if i.kind != "frame"]
    total = sum(i.weight for i, _ in units)
    met = sum(i.weight for i, m in units if m)
    return {"success": all(marks), "success_changed_only": all(m for _, m in units),
            "precision": met / total if total else 1.0}


# -- the terminal --------------------------------------------------------------------------------
def ask_checklist(items: list[ChecklistItem], read: Callable[[str], str] | None = None,
                  write: Callable[[str], None] = print) -> list[bool]:
    """The checklist in a terminal: each line ``y`` (met) or ``n`` (not met)."""
    read = read or (lambda prompt: input(prompt))
    write("\nThe planner has stopped. Check the goal by looking: is each line true now?")
    marks = []
    for k, item in enumerate(items, 1):
        hint = "" if item.reported is None else f"  [the planner believes: {'met' if item.reported else 'not met'}]"
        while True:
            try:
                line = read(f"  {k}/{len(items)} {item.text}{hint} — met? y/n > ").strip().lower()
            except EOFError:
                raise TrialPaused("input ended before the checklist was complete") from None
            if line in ("y", "yes", "n", "no"):
                marks.append(line.startswith("y"))
                break
            if line in ("q", "quit"):
                raise TrialPaused("the operator stopped at the checklist")
            write("  answer y or n (q to stop; the checklist is asked again on --resume)")
    return marks
