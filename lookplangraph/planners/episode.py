"""The episode contract every planner returns: :class:`StepRecord` (one LM call and what became
of it, a line of the trace), :class:`EpisodeResult` (one task's verdict, costs and plan),
:class:`EpisodeLog` (the records of an episode and the callbacks told of each), and
:func:`episode_result`, which judges a step-wise episode on the environment's true graph.

A planner with fields of its own subclasses both records (SG-RwR's
:class:`~lookplangraph.planners.sgrwr.records.SGRwRStep` and
:class:`~lookplangraph.planners.sgrwr.records.SGRwRResult`); the trace and results files hold
each record's own fields, and readers take what they know."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields as dataclass_fields
from typing import Callable, Iterable, TypeVar

from grasif.goals import evaluate_goal
from grasif.task import Task
from sgs.graph import SceneGraph

from lookplangraph.planners.config import PlannerConfig


@dataclass
class StepRecord:
    """One LM call and what became of it (a line of the JSON-lines trace). With answers of several
    actions (``actions_per_answer``) each action is a record: the first carries the call's text,
    tokens and seconds, the others (``in_answer`` 2, 3) none of them."""

    call: int
    reason: str | None
    proposed: str | None
    accepted: bool
    text: str
    executed: list[str] = field(default_factory=list)
    corrections: list[str] = field(default_factory=list)
    feedback: str | None = None
    observed: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    seconds: float = 0.0
    excluded: int = 0  # actions the decode was not allowed to produce
    infeasible: str | None = None  # correction "none": the step the environment refused, and why
    perceived: list[dict] = field(default_factory=list)  # augmentations (lookplangraph.agent.perception.Perceived)
    failure: str | None = None  # a low-level execution failure's kind (sim_adapters.failures), if one happened
    explain_seconds: float = 0.0  # setting explain: the LM's time writing ``reason`` after the decision
    in_answer: int = 1  # the action's place in its answer: 1 is the LM call's own, 2 and 3 came with it


@dataclass
class EpisodeResult:
    task_id: str
    split: str
    lm: str
    termination: str  # done | unresolved | max_actions (| context_overflow, round_limit ...: planners' own ends)
    success: bool
    success_changed_only: bool  # goal units met, side effects not counted
    precision: float
    actions: list[str]  # accepted LM actions
    executed: list[str]  # primitive actions executed in the environment
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    lm_seconds: float
    wall_s: float
    goal_not_met: list[str]
    config: dict
    moves: list[str] = field(default_factory=list)
    infeasible: list[str] = field(default_factory=list)  # plan actions the environment refused (mode none)
    augmentation: str = "ground_truth"  # how discover_objects observations became memory (perception)
    augmentation_calls: int = 0  # tokens and seconds of augmentation LMs, not in the planner's tokens
    augmentation_prompt_tokens: int = 0
    augmentation_completion_tokens: int = 0
    augmentation_seconds: float = 0.0
    planner: str = "lookplangraph"  # lookplangraph.planners name
    failure: str | None = None  # baselines: why no plan ran (a kind: parse_error, unsolvable, infeasible_step ...)
    success_with_correction: bool | None = None  # static plans: the verdict had the SGS corrected them
    low_level_failures: list[str] = field(default_factory=list)  # "kind: action" per failure (sim_adapters.failures)
    low_level_repaired: int = 0  # how many of them were repaired: the same action later went through as asked


R = TypeVar("R", bound=EpisodeResult)


def extend(result: EpisodeResult, cls: type[R], **own) -> R:
    """``result`` as an instance of its subclass ``cls`` with that planner's ``own`` fields."""
    return cls(**{f.name: getattr(result, f.name) for f in dataclass_fields(result)}, **own)


StepCallback = Callable[[StepRecord], None]


class EpisodeLog:
    """The records of one episode and the callbacks told of each (registered once, at the start).

    A planner :meth:`add` s a record when its LM call returns and :meth:`emit` s it when it is
    complete (what became of the call is filled in); each record is emitted once, in the order
    it is emitted, to every callback (the runner writes the trace with one)."""

    def __init__(self, callbacks: StepCallback | Iterable[StepCallback | None] | None = None):
        if callbacks is None or callable(callbacks):
            callbacks = [callbacks]
        self.callbacks: list[StepCallback] = [c for c in callbacks if c is not None]
        self.records: list[StepRecord] = []
        self._emitted: set[int] = set()

    def __len__(self) -> int:
        return len(self.records)

    def add(self, rec: StepRecord) -> StepRecord:
        self.records.append(rec)
        return rec

    def emit(self, rec: StepRecord) -> None:
        """Tell every callback of ``rec`` (once per record)."""
        if id(rec) in self._emitted:
            return
        self._emitted.add(id(rec))
        for callback in self.callbacks:
            callback(rec)

    def flush(self) -> None:
        """Emit every record not emitted yet, in call order (the end of an episode)."""
        for rec in self.records:
            self.emit(rec)


def episode_result(task: Task, env, lm, cfg: PlannerConfig, records: "list[StepRecord] | EpisodeLog", *, initial: SceneGraph,
                   t0: float, termination: str, augmentation: str, actions: list[str], executed: list[str],
                   infeasible: list[str] | None = None, **fields) -> EpisodeResult:
    """The :class:`EpisodeResult` of a planner that acts step by step (LookPlanGraph, ReAct,
    SG-RwR's step mode): the goal judged on the environment's true graph against ``initial``
    (an infeasible step fails it), LM calls, tokens and seconds summed over ``records``, the
    augmentations they list, ``t0`` (``time.perf_counter()`` at the start) to now as wall time;
    ``fields`` are further :class:`EpisodeResult` fields (``planner``, ``failure`` ...)."""
    records = list(records.records if isinstance(records, EpisodeLog) else records)
    infeasible = infeasible or []
    goal = evaluate_goal(task.goal, env.true_graph(), initial)
    perceived = [p for r in records for p in r.perceived]
    return EpisodeResult(
        task_id=task.id, split=task.split, lm=getattr(lm, "name", type(lm).__name__), termination=termination,
        success=goal.success and not infeasible, success_changed_only=goal.success_changed_only and not infeasible,
        precision=goal.precision, actions=actions, executed=executed, lm_calls=sum(r.in_answer == 1 for r in records),
        prompt_tokens=sum(r.prompt_tokens for r in records), completion_tokens=sum(r.completion_tokens for r in records),
        cached_tokens=sum(r.cached_tokens or 0 for r in records),
        lm_seconds=round(sum(r.seconds for r in records), 3), wall_s=round(time.perf_counter() - t0, 3),
        goal_not_met=goal.not_met(),
        config=asdict(cfg), moves=list(getattr(env, "moves", [])), infeasible=infeasible,
        low_level_failures=[f"{kind}: {action}" for _, kind, action in failures_of(env)],
        low_level_repaired=sum(step is not None for step in failures_of(env, "repaired")),
        augmentation=augmentation, augmentation_calls=len(perceived),
        augmentation_prompt_tokens=sum(p["prompt_tokens"] for p in perceived),
        augmentation_completion_tokens=sum(p["completion_tokens"] for p in perceived),
        augmentation_seconds=round(sum(p["seconds"] for p in perceived), 3), **fields,
    )


def failures_of(env, attr: str = "failures") -> list:
    """The episode's low-level failures, ``(step, kind, action)``, of the
    :class:`sim_adapters.failures.LowLevelFailures` among ``env``'s wrappers (``attr="repaired"``:
    the step that repaired each, or ``None``); none without one."""
    find = getattr(env, "get_wrapper_attr", None)
    try:
        return list(find(attr) if find is not None else getattr(env, attr, []))
    except AttributeError:
        return []

