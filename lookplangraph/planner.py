"""The LookPlanGraph loop (paper Algorithm 1) over one task, one LM and one environment.

Per step: the LM proposes one action from the instruction, the memory-graph view, the previous
reasons and actions and the last feedback. The action is *unresolved* (feedback goes back to the
LM) when the reply cannot be read, when it moves an object that is only a prior, when the SGS
rejects it on the memory graph, when it changes nothing (``go_to`` the room the agent is in,
or a repeat of the last action), when it would bring the memory back to an earlier state
(``refuse_cycles``), or when the environment refuses a step (the memory was stale). Otherwise the SGS's primitive steps
(corrections included) run in the environment one by one and the memory graph mirrors each;
``discover_objects`` merges the observation into memory.

The episode ends on ``done``, after ``max_unresolved`` unresolved answers in a row, or after
``max_actions`` accepted actions. It is then judged on the environment's true final graph:
success when every goal unit holds, precision M^C/M.

Ablations (paper Table V) are :class:`PlannerConfig` fields: ``graph_style`` (text/json/full),
``priors`` (False: no priors), ``correction`` (False: no rule-based correction). ``vocabulary``
says what constrained decoding may name: ``flat`` (default; every name in the view) or ``typed``
(each function only the names it can take, :func:`lookplangraph.serialize.vocabulary`).
``refuse_cycles`` (default on) makes an action unresolved, with feedback, when it would bring the
memory graph back to a state it has already been in twice during the episode: one return is
allowed (turn a coffee machine on, then off), a second is an oscillation (on, off, on, off; go_to
back and forth without doing anything), which a small model otherwise keeps up until the action
limit.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable

from grasif.goals import evaluate_goal
from grasif.task import Task
from sgs.graph import SceneGraph
from sgs.simulator import Infeasible, check

from lookplangraph.memory import MemoryGraph
from lookplangraph.prompts import dynamic_prompt, static_prompt
from lookplangraph.serialize import render, visible_names, vocabulary


@dataclass
class PlannerConfig:
    """Loop limits and ablation switches (module doc)."""

    max_actions: int = 30
    max_unresolved: int = 3
    graph_style: str = "text"
    priors: bool = True
    correction: bool = True
    vocabulary: str = "flat"  # flat: one list of visible names; typed: names per function
    refuse_cycles: bool = True  # an action that returns the memory to an earlier state is feedback


@dataclass
class StepRecord:
    """One LM call and what became of it (a line of the JSON-lines trace)."""

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


@dataclass
class EpisodeResult:
    task_id: str
    split: str
    lm: str
    termination: str  # done | unresolved | max_actions
    success: bool
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


def run_episode(task: Task, env, lm, config: PlannerConfig | None = None,
                on_step: Callable[[StepRecord], None] | None = None) -> EpisodeResult:
    """Run Algorithm 1 on ``task`` with ``lm`` (anything with ``decide(static, dynamic, names)``
    and a ``name``) in ``env`` (a :class:`sim_adapters.base.Environment`); ``on_step`` sees every
    :class:`StepRecord` as it happens."""
    cfg = config or PlannerConfig()
    t0 = time.perf_counter()
    env.reset()
    memory = MemoryGraph(task.graph, priors=cfg.priors)
    static = static_prompt()
    history: list[tuple[str, str, str]] = []
    records: list[StepRecord] = []
    feedback: str | None = None
    unresolved = 0
    last_accepted: str | None = None
    visited = Counter([_state_key(memory.graph)])
    termination = "max_actions"

    while sum(r.accepted for r in records) < cfg.max_actions:
        if cfg.vocabulary == "typed":
            names = vocabulary(memory, cfg.graph_style)
        else:
            names = visible_names(memory, cfg.graph_style)
        dynamic = dynamic_prompt(task.instruction, render(memory, cfg.graph_style), history, feedback)
        reply = lm.decide(static, dynamic, names)
        rec = StepRecord(len(records) + 1, reply.reason, str(reply.action) if reply.action else None, False, reply.text,
                         prompt_tokens=reply.usage.prompt_tokens, completion_tokens=reply.usage.completion_tokens,
                         cached_tokens=reply.usage.cached_tokens, seconds=reply.seconds)
        records.append(rec)
        feedback = _attempt(reply, memory, env, cfg, rec, last_accepted, visited)
        if rec.accepted:
            visited[_state_key(memory.graph)] += 1
            last_accepted = rec.proposed
            history.append((reply.reason or "", rec.proposed, feedback or ""))
        if on_step:
            on_step(rec)
        if rec.accepted and reply.action.function_name == "done":
            termination = "done"
            break
        unresolved = 0 if feedback is None else unresolved + 1
        if unresolved >= cfg.max_unresolved:
            termination = "unresolved"
            break

    final = env.true_graph()
    goal = evaluate_goal(task.goal, final)
    return EpisodeResult(
        task_id=task.id, split=task.split, lm=getattr(lm, "name", type(lm).__name__), termination=termination,
        success=goal.success, precision=goal.precision, actions=[r.proposed for r in records if r.accepted],
        executed=[step for r in records for step in r.executed], lm_calls=len(records),
        prompt_tokens=sum(r.prompt_tokens for r in records), completion_tokens=sum(r.completion_tokens for r in records),
        cached_tokens=sum(r.cached_tokens or 0 for r in records),
        lm_seconds=round(sum(r.seconds for r in records), 3), wall_s=round(time.perf_counter() - t0, 3),
        goal_not_met=[f"{i.label}: expected {i.expected}; found {i.actual}" for i in goal.items if not i.ok],
        config=asdict(cfg), moves=list(getattr(env, "moves", [])),
    )


def _state_key(g: SceneGraph):
    """What a memory graph says about the scene, as a hashable value (for cycle detection)."""
    return (frozenset((n, v.states) for n, v in g.nodes.items()), frozenset(g.parent.items()),
            g.agent.location, g.agent.holding, g.inspected)


def _attempt(reply, memory: MemoryGraph, env, cfg: PlannerConfig, rec: StepRecord, last_accepted: str | None,
             visited: Counter) -> str | None:
    """Validate, correct and execute one reply; fill ``rec``; return feedback or ``None``."""
    action = reply.action
    if action is None:
        rec.feedback = reply.error or "your answer could not be read as an action"
        return rec.feedback
    if action.function_name == "done":
        rec.accepted = True
        return None
    fb = memory.unseen_feedback(action)
    if fb is None:
        outcome = check(memory.graph, action, correct=cfg.correction)
        fb = outcome.feedback
    if fb is None and outcome.graph == memory.graph:
        if last_accepted == rec.proposed:
            fb = f"you just did {rec.proposed} and it changed nothing; choose another action"
        else:
            fb = f"{rec.proposed} changes nothing (you are already there or it is already so); choose another action"
    if fb is None and cfg.refuse_cycles and visited[_state_key(outcome.graph)] >= 2:
        fb = (f"{rec.proposed} would bring the scene back to a state it has already been in twice; "
              "you are going in circles, choose a step that moves the task forward")
    if fb is not None:
        rec.feedback = fb
        return fb
    rec.corrections = list(outcome.corrections)
    for step in outcome.actions:
        result = env.step(step)
        if not result.ok:
            rec.feedback = f"{result.feedback}; your memory of the scene was out of date"
            break
        try:
            memory.apply(step)
        except Infeasible as exc:  # memory and environment disagree; the environment is right
            rec.feedback = f"{step} happened, but memory could not follow: {exc}"
            break
        rec.executed.append(str(step))
        if result.observation is not None:
            removed = memory.discover(result.observation)
            rec.observed = [f"{o.name} {o.relation} {o.parent}" for o in result.observation.objects]
            if removed:
                rec.observed.append("not found: " + ", ".join(removed))
    rec.accepted = bool(rec.executed)
    return rec.feedback

