"""Plan validation: run a plan through the SGS from a task's initial graph and check its goal.

A plan succeeds when every step is feasible (after the SGS's rule-based corrections, unless they
are switched off) and the final graph satisfies the goal: every goal unit is met and, for a goal
with ``unchanged_elsewhere``, nothing else changed (no side effect: a container left open, an
unrelated object moved or left in the hand). ``success_changed_only`` is the lenient verdict that
ignores side effects (still no infeasible step). Infeasible steps are reported with their
feedback and leave the graph unchanged; validation goes on with the next step so that one report
lists every problem of a plan.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from grasif.goals import GoalItem, GoalResult, GoalSpec, evaluate_goal
from sgs.actions import ActionSyntaxError, parse_action
from sgs.graph import SceneGraph
from sgs.simulator import check


class StepReport(BaseModel):
    index: int  # 1-based position in the plan
    action: str
    ok: bool
    primitives: list[str] = []
    corrections: list[str] = []
    feedback: str | None = None


class ValidationReport(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    steps: list[StepReport]
    goal: GoalResult
    final_graph: SceneGraph

    @property
    def infeasible(self) -> list[StepReport]:
        return [s for s in self.steps if not s.ok]

    @property
    def success(self) -> bool:
        """Strict: no infeasible step, every goal unit met, no side effect."""
        return not self.infeasible and self.goal.success

    @property
    def success_changed_only(self) -> bool:
        """Lenient: no infeasible step and every goal unit met; side effects not counted."""
        return not self.infeasible and self.goal.success_changed_only

    @property
    def side_effects(self) -> list[GoalItem]:
        return self.goal.side_effects

    @property
    def precision(self) -> float:
        return self.goal.precision

    @property
    def primitive_count(self) -> int:
        return sum(len(s.primitives) for s in self.steps)

    def summary(self) -> dict[str, Any]:
        """Plain-JSON verdict (no graph)."""
        return {
            "success": self.success,
            "success_changed_only": self.success_changed_only,
            "precision": self.precision,
            "correct": self.goal.correct,
            "total": self.goal.total,
            "infeasible_steps": [s.model_dump() for s in self.infeasible],
            "goals": [i.model_dump() for i in self.goal.items],
            "side_effects_checked": self.goal.frame_checked,
            "side_effects": [i.model_dump() for i in self.goal.side_effects],
            "steps": len(self.steps),
            "primitive_actions": self.primitive_count,
        }


def validate_plan(initial: SceneGraph, plan: list[Any], goal: GoalSpec, *, correct: bool = True) -> ValidationReport:
    """Validate ``plan`` (action strings, dicts or :class:`sgs.actions.Action`) from ``initial``."""
    graph = initial
    steps: list[StepReport] = []
    for i, raw in enumerate(plan, start=1):
        try:
            action = parse_action(raw)
        except ActionSyntaxError as exc:
            steps.append(StepReport(index=i, action=str(raw), ok=False, feedback=str(exc)))
            continue
        out = check(graph, action, correct=correct)
        steps.append(StepReport(
            index=i, action=str(action), ok=out.ok, primitives=[str(a) for a in out.actions],
            corrections=list(out.corrections), feedback=out.feedback,
        ))
        graph = out.graph
    return ValidationReport(steps=steps, goal=evaluate_goal(goal, graph, initial), final_graph=graph)
