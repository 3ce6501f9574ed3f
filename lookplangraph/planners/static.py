"""What static planners share: the whole scene in the prompt, and a whole plan run step by step.

A static planner (LLM-as-P, LLM+P) writes its plan once from the task's map (``task.graph``;
in dynamic mode the environment has changed since, and a stale plan fails honestly). Then
:func:`execute` runs the plan's primitive actions in the environment one by one **as written**
(no correction): the first step the environment refuses ends the plan (failure kind
``infeasible_step``, the step and reason in ``EpisodeResult.infeasible``), and success is judged on
the environment's final graph like every planner's. ``success_with_correction`` is the extra
verdict of GraSIF's validator with the SGS's corrections on the same plan (what it would have
scored had the SGS fixed, say, a pick from a closed fridge).

Tokens per action: every prompt and completion token of every call, over the plan's actions.
"""

from __future__ import annotations

import json

from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import PRIMITIVES, Action
from sgs.graph import SceneGraph
from sgs.io import graph_to_dict

from lookplangraph.lm import Completion
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeResult, StepRecord, episode_result

#: functions a static plan may use: the primitives that change or move something
PLAN_FUNCTIONS = tuple(sorted(PRIMITIVES - {"discover_objects", "done"}))


def scene_json(graph: SceneGraph) -> str:
    """The whole scene graph as compact JSON (the paper's format, no spaces)."""
    return json.dumps(graph_to_dict(graph), separators=(",", ":"), ensure_ascii=False)


def call_record(call: int, c: Completion, proposed: str | None, accepted: bool, feedback: str | None) -> StepRecord:
    """A trace entry for one whole-plan LM call."""
    return StepRecord(call, None, proposed, accepted, c.text, feedback=feedback, prompt_tokens=c.usage.prompt_tokens,
                      completion_tokens=c.usage.completion_tokens, cached_tokens=c.usage.cached_tokens, seconds=c.seconds)


def execute(task: Task, env, planner: str, lm, config: PlannerConfig, records: list[StepRecord],
            plan: list[Action] | None, failure: str | None, t0: float) -> EpisodeResult:
    """Run ``plan`` (None: there is none, ``failure`` says why) in ``env`` and judge it (module doc)."""
    env.reset()
    initial = env.true_graph()
    executed: list[str] = []
    infeasible: list[str] = []
    for action in plan or []:
        if action.function_name == "done":
            continue
        if action.function_name not in PLAN_FUNCTIONS:
            infeasible.append(f"{action}: not one of the plan's functions ({', '.join(PLAN_FUNCTIONS)})")
            break
        result = env.step(action)
        if not result.ok:
            infeasible.append(f"{action}: {result.feedback}")
            break
        if result.outcome is not None:  # a low-level failure did something else: the plan stops there
            executed.append(str(result.outcome))
            infeasible.append(f"{action}: {result.feedback}")
            break
        executed.append(str(action))
    if infeasible and failure is None:
        failure = "infeasible_step"
    if records and infeasible:
        records[-1].infeasible = infeasible[0]
    if records:
        records[-1].executed = list(executed)
    corrected = validate_plan(initial, plan, task.goal, correct=True).success if plan is not None else None
    result = episode_result(task, env, lm, config, records, initial=initial, t0=t0,
                            termination="done" if plan is not None else "no_plan", augmentation="ground_truth",
                            actions=[str(a) for a in plan or []], executed=executed, infeasible=infeasible,
                            planner=planner, failure=failure, success_with_correction=corrected)
    if plan is None:  # no plan, no success, even where the goal happens to hold already
        result.success = result.success_changed_only = False
    return result
