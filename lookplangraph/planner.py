"""The LookPlanGraph loop (paper Algorithm 1) over one task, one LM and one environment.

Per step: the LM proposes one action from the instruction, the memory-graph view, the previous
reasons and actions and the last feedback. The action is *unresolved* (feedback goes back to the
LM) when the reply cannot be read, when it moves an object that is only a prior, when the SGS
rejects it on the memory graph, when it changes nothing (``go_to`` the room the agent is in,
or a repeat of the last action), when it would bring the memory back to an earlier state
(``refuse_cycles``), when it repeats an action already refused in the same memory state, or
when the environment refuses a step (the memory was stale). Otherwise the SGS's primitive steps
(corrections included) run in the environment one by one and the memory graph mirrors each;
``discover_objects`` merges the observation into memory.

**Correction modes** (``correction``; paper section IV-C, Table V):

* ``rules`` (default): hallucinations and execution errors found on the memory graph are
  re-prompted with feedback, and feasible-but-incomplete actions are corrected by the SGS's rules
  (inserted ``go_to``/``open``, resolved names, ``put_on(o, d)`` read as ``rearrange``);
* ``feedback``: the same feedback, nothing corrected (``check(..., correct=False)``);
* ``none`` (the paper's "No Correction" ablation): only *hallucinations* are re-prompted — an
  unreadable reply, an unknown function, a missing argument, a name that is no node
  (:func:`sgs.simulator.hallucination`). An action with an execution error is not caught: its
  steps (:func:`sgs.simulator.expand_unchecked`) go to the environment, which refuses the first
  infeasible one; the action stays in the plan, recorded in ``EpisodeResult.infeasible``, the
  LM is told nothing, and the episode cannot succeed. Feasible actions are handled as in
  ``feedback`` (an action that changes nothing or closes a cycle is still refused).

**Exclusions** (constrained decoding, :mod:`lookplangraph.decoding`): with ``exclude_refused``
every action refused in the current memory state (and, in ``none`` mode, every action the
environment refused in it) is excluded from the next decodes until the memory state changes:
greedy decoding of the same prompt would otherwise only repeat it. With
``exclude_inapplicable`` the actions on visible names that cannot be accepted in any case
(:func:`lookplangraph.serialize.inapplicable`: ``go_to`` the current room, ``discover_objects``
of a room...) are excluded too. A backend that cannot enforce an exclusion samples instead, and
a reply that still repeats a refused action is refused again without being tried.

The episode ends on ``done``, after ``max_unresolved`` unresolved answers (or, in ``none``
mode, infeasible actions) in a row, or after ``max_actions`` accepted actions. It is then judged
on the environment's true final graph: success when every goal unit holds, nothing else changed
(for goals with ``unchanged_elsewhere``) and no action of the plan was infeasible;
``success_changed_only`` leaves out the side effects; precision M^C/M.

Ablations (paper Table V) are :class:`PlannerConfig` fields: ``graph_style`` (text/json/full),
``priors`` (False: no priors), ``correction`` (above). ``vocabulary``
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
from sgs.simulator import TARGET_STATE, Infeasible, check, expand_unchecked, hallucination

from lookplangraph.decoding import ActionKey, action_key, flat_names
from lookplangraph.memory import MemoryGraph
from lookplangraph.perception import Perception, PerceptionError
from lookplangraph.prompts import dynamic_prompt, static_prompt
from lookplangraph.serialize import inapplicable, render, visible_names, vocabulary

#: ``PlannerConfig.correction`` values (module doc).
CORRECTION_MODES = ("rules", "feedback", "none")
#: ``PlannerConfig.sgrwr_mode`` values (:mod:`lookplangraph.planners.sgrwr`)
SGRWR_MODES = ("static", "step")


@dataclass
class PlannerConfig:
    """Loop limits and ablation switches (module doc)."""

    max_actions: int = 30
    max_unresolved: int = 3
    graph_style: str = "text"
    priors: bool = True
    correction: str = "rules"  # rules | feedback | none (module doc)
    vocabulary: str = "flat"  # flat: one list of visible names; typed: names per function
    refuse_cycles: bool = True  # an action that returns the memory to an earlier state is feedback
    exclude_refused: bool = True  # a refused action cannot be decoded again in the same memory state
    exclude_inapplicable: bool = True  # nor can an action that is never accepted there
    done_hint: bool = False  # feedback on an action already in effect suggests done() (measured: worse)
    # baselines (lookplangraph.planners): the reply budget of a whole-plan call, Fast Downward's limits
    plan_max_tokens: int = 1536
    fd_time_limit_s: int = 60
    fd_memory_limit_mb: int = 4096
    # LLM+P: decode the problem under a grammar of the domain's syntax, predicates and the scene's
    # names (lookplangraph.planners.pddl.grammar) where the backend can enforce one
    pddl_grammar: bool = True
    # LLM+P: rewrite the problem's (:objects ...) from the scene names it uses (complete_declarations)
    pddl_declare: bool = True
    # dynamic baselines (the paper names no values): ReAct's LM calls per episode (thoughts and
    # refused commands included), SayPlan's search commands and plan resubmissions after the first
    react_max_steps: int = 50
    sayplan_search_steps: int = 50
    sayplan_replans: int = 4
    # SG-RwR (lookplangraph.planners.sgrwr; the paper leaves these open): static (a whole plan, run
    # as written) or step (one action at a time); Reasoner replies per episode; re-prompts after a
    # failed or refused code run before the code is given up; Retriever replies per query; limits of
    # one sandboxed code run (CPU seconds, memory, bytes of output kept); the reply budget of one
    # LM call; refuse to run LM code when the sandbox offers only weak isolation
    sgrwr_mode: str = "static"
    sgrwr_max_rounds: int = 15
    sgrwr_debug_attempts: int = 2
    sgrwr_retriever_turns: int = 4
    sgrwr_code_seconds: float = 5.0
    sgrwr_code_memory_mb: int = 512
    sgrwr_output_bytes: int = 4000
    sgrwr_reply_tokens: int = 512
    sgrwr_require_strong: bool = True
    sgrwr_plan_guard: bool = False  # (ours) send back a plan/action naming a node no answer contained
    sgrwr_debug_hints: bool = False  # (ours) explain known code mistakes when code is sent back (planners/sgrwr/hints.py)
    sgrwr_code_grammar: bool = False  # (ours) the Retriever's replies are a code block until its code has run
    sgrwr_repeat_answers: bool = False  # (ours) a repeated query on unchanged data gets its earlier answer back
    sgrwr_reasoner_grammar: bool = False  # (ours) each Reasoner reply is decoded as one message of one form

    def __post_init__(self):
        if self.correction not in CORRECTION_MODES:
            raise ValueError(f"correction must be one of {', '.join(CORRECTION_MODES)}, not {self.correction!r}")
        if self.sgrwr_mode not in SGRWR_MODES:
            raise ValueError(f"sgrwr_mode must be one of {', '.join(SGRWR_MODES)}, not {self.sgrwr_mode!r}")


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
    excluded: int = 0  # actions the decode was not allowed to produce
    infeasible: str | None = None  # correction "none": the step the environment refused, and why
    perceived: list[dict] = field(default_factory=list)  # augmentations (lookplangraph.perception.Perceived)
    # two-agent planners (SG-RwR): which agent made the call, the form of its reply, the code it
    # wrote and what the sandbox made of it (ok, kind, isolation, seconds, error)
    agent: str | None = None
    form: str | None = None
    code: str | None = None
    sandbox: dict | None = None


@dataclass
class EpisodeResult:
    task_id: str
    split: str
    lm: str
    termination: str  # done | unresolved | max_actions
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
    # planners that run LM-written code (SG-RwR): sandbox runs, those that failed (error, timeout,
    # limit, policy), their seconds, the isolation levels they ran under; LM calls per agent; code
    # sent back by the assume-guard without running; queries answered from an earlier answer
    sandbox_runs: int = 0
    sandbox_failures: int = 0
    sandbox_seconds: float = 0.0
    sandbox_isolation: str | None = None
    agent_calls: dict = field(default_factory=dict)
    guard_refusals: int = 0
    repeated_queries: int = 0


def run_episode(task: Task, env, lm, config: PlannerConfig | None = None,
                on_step: Callable[[StepRecord], None] | None = None, augmentation=None) -> EpisodeResult:
    """Run Algorithm 1 on ``task`` with ``lm`` (anything with ``decide(static, dynamic, names)``
    and a ``name``) in ``env`` (a :class:`sim_adapters.base.Environment`); ``on_step`` sees every
    :class:`StepRecord` as it happens. ``augmentation`` (a :class:`vlm.gam.GraphAugmentation`,
    default ground truth) turns ``discover_objects`` observations into memory
    (:mod:`lookplangraph.perception`); its cost is reported apart from the planner's."""
    cfg = config or PlannerConfig()
    perceive = Perception(augmentation)
    t0 = time.perf_counter()
    env.reset()
    initial_true = env.true_graph()
    memory = MemoryGraph(task.graph, priors=cfg.priors)
    static = static_prompt()
    history: list[tuple[str, str, str]] = []
    records: list[StepRecord] = []
    feedback: str | None = None
    unresolved = 0
    last_accepted: str | None = None
    state = state_key(memory.graph)
    visited = Counter([state])
    refused: dict[ActionKey, str] = {}  # refused in the current memory state -> why
    termination = "max_actions"

    while sum(r.accepted for r in records) < cfg.max_actions:
        if cfg.vocabulary == "typed":
            names = vocabulary(memory, cfg.graph_style)
        else:
            names = visible_names(memory, cfg.graph_style)
        excluded = list(refused) if cfg.exclude_refused else []
        if cfg.exclude_inapplicable:
            excluded += [k for k in inapplicable(memory, flat_names(names)) if k not in refused]
        dynamic = dynamic_prompt(task.instruction, render(memory, cfg.graph_style), history, feedback)
        reply = lm.decide(static, dynamic, names, excluded)
        rec = StepRecord(len(records) + 1, reply.reason, str(reply.action) if reply.action else None, False, reply.text,
                         prompt_tokens=reply.usage.prompt_tokens, completion_tokens=reply.usage.completion_tokens,
                         cached_tokens=reply.usage.cached_tokens, seconds=reply.seconds, excluded=len(excluded))
        records.append(rec)
        key = action_key(reply.action) if reply.action is not None else None
        if key is not None and key in refused and cfg.exclude_refused:
            feedback = rec.feedback = (f"{rec.proposed} was already refused in this situation ({refused[key]}); "
                                       "choose a different action")
        else:
            feedback = attempt_action(reply, memory, env, cfg, rec, last_accepted, visited, perceive)
        new_state = state_key(memory.graph)
        if rec.accepted:
            visited[new_state] += 1
            last_accepted = rec.proposed
            history.append((reply.reason or "", rec.proposed, feedback or _as_done(rec)))
        if new_state != state:
            state, refused = new_state, {}
        elif key is not None and (not rec.accepted or rec.infeasible):
            refused.setdefault(key, rec.feedback or rec.infeasible or "refused")
        if on_step:
            on_step(rec)
        if rec.accepted and reply.action.function_name == "done":
            termination = "done"
            break
        unresolved = 0 if feedback is None and rec.infeasible is None else unresolved + 1
        if unresolved >= cfg.max_unresolved:
            termination = "unresolved"
            break

    infeasible = [f"{r.proposed}: {r.infeasible}" for r in records if r.infeasible]
    return episode_result(task, env, lm, cfg, records, initial=initial_true, t0=t0, termination=termination,
                          augmentation=perceive.mode, actions=[r.proposed for r in records if r.accepted],
                          executed=[step for r in records for step in r.executed], infeasible=infeasible)


def episode_result(task: Task, env, lm, cfg: PlannerConfig, records: list[StepRecord], *, initial: SceneGraph,
                   t0: float, termination: str, augmentation: str, actions: list[str], executed: list[str],
                   infeasible: list[str] | None = None, **fields) -> EpisodeResult:
    """The :class:`EpisodeResult` of a planner that acts step by step (LookPlanGraph, ReAct,
    SG-RwR's step mode): the goal judged on the environment's true graph against ``initial``
    (an infeasible step fails it), LM calls, tokens and seconds summed over ``records``, the
    augmentations they list, ``t0`` (``time.perf_counter()`` at the start) to now as wall time;
    ``fields`` are further :class:`EpisodeResult` fields (``planner``, ``failure`` ...)."""
    infeasible = infeasible or []
    goal = evaluate_goal(task.goal, env.true_graph(), initial)
    perceived = [p for r in records for p in r.perceived]
    return EpisodeResult(
        task_id=task.id, split=task.split, lm=getattr(lm, "name", type(lm).__name__), termination=termination,
        success=goal.success and not infeasible, success_changed_only=goal.success_changed_only and not infeasible,
        precision=goal.precision, actions=actions, executed=executed, lm_calls=len(records),
        prompt_tokens=sum(r.prompt_tokens for r in records), completion_tokens=sum(r.completion_tokens for r in records),
        cached_tokens=sum(r.cached_tokens or 0 for r in records),
        lm_seconds=round(sum(r.seconds for r in records), 3), wall_s=round(time.perf_counter() - t0, 3),
        goal_not_met=goal.not_met(),
        config=asdict(cfg), moves=list(getattr(env, "moves", [])), infeasible=infeasible,
        augmentation=augmentation, augmentation_calls=len(perceived),
        augmentation_prompt_tokens=sum(p["prompt_tokens"] for p in perceived),
        augmentation_completion_tokens=sum(p["completion_tokens"] for p in perceived),
        augmentation_seconds=round(sum(p["seconds"] for p in perceived), 3), **fields,
    )


#: Appended to the feedback on an action whose effect is already in place: a small model repeats
#: the last step of a finished task instead of answering done().
DONE_HINT = "; if the instruction is carried out now, answer done()"


def _already_so(graph: SceneGraph, action) -> bool:
    """Whether what ``action`` would bring about already holds in ``graph`` (a toggle already in
    its state, an object already where ``rearrange`` or ``put`` would take it, ``go_to`` the
    agent's own room)."""
    fn, node = action.function_name, action.node
    if fn == "go_to":
        return node == graph.agent.location
    if fn in TARGET_STATE:
        return node in graph.nodes and graph.nodes[node].has(TARGET_STATE[fn])
    if fn == "rearrange" and action.relation in ("ontop", "inside"):
        edge = graph.parent.get(node)
        return edge is not None and edge[0] == action.destination and edge[1].value == action.relation
    return False


def _as_done(rec: StepRecord) -> str:
    """The primitive steps of an accepted action when they are more than the action itself (the
    LM then knows that, say, the fridge was opened on the way and is still open). Nothing for an
    infeasible action of correction ``none``: the LM is not told how far it got."""
    if rec.executed and rec.executed != [rec.proposed] and rec.infeasible is None:
        return "done as: " + ", ".join(rec.executed)
    return ""


def state_key(g: SceneGraph):
    """What a memory graph says about the scene, as a hashable value (for cycle detection; also
    used by SG-RwR's step mode)."""
    return (frozenset((n, v.states) for n, v in g.nodes.items()), frozenset(g.parent.items()),
            g.agent.location, g.agent.holding, g.inspected)


def attempt_action(reply, memory: MemoryGraph, env, cfg: PlannerConfig, rec: StepRecord, last_accepted: str | None,
                   visited: Counter, perceive: Perception) -> str | None:
    """Validate, correct and execute one reply (an object with ``action`` and ``error``) as the
    loop does, also for SG-RwR's step mode; fill ``rec``; return feedback or ``None``."""
    action = reply.action
    if action is None:
        rec.feedback = reply.error or "your answer could not be read as an action"
        return rec.feedback
    if action.function_name == "done":
        rec.accepted = True
        return None
    if cfg.correction == "none":
        fb = hallucination(memory.graph, action)
        if fb is None:
            outcome = check(memory.graph, action, correct=False)
            if not outcome.ok:  # an execution error: not caught, the environment meets it
                return _execute_unchecked(action, memory, env, rec, perceive)
    else:
        fb = memory.unseen_feedback(action)
        if fb is None:
            outcome = check(memory.graph, action, correct=cfg.correction == "rules")
            fb = outcome.feedback
    if fb is None and outcome.graph == memory.graph:
        if last_accepted == rec.proposed:
            fb = f"you just did {rec.proposed} and it changed nothing; choose another action"
        else:
            fb = f"{rec.proposed} changes nothing (you are already there or it is already so); choose another action"
    if fb is None and cfg.refuse_cycles and visited[state_key(outcome.graph)] >= 2:
        fb = (f"{rec.proposed} would bring the scene back to a state it has already been in twice; "
              "you are going in circles, choose a step that moves the task forward")
    if fb is not None:
        if cfg.done_hint and _already_so(memory.graph, action):
            fb += DONE_HINT
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
            try:
                observation = _perceive(perceive, result.observation, memory, env, rec)
            except PerceptionError as exc:
                rec.feedback = f"{step} happened, but nothing could be learnt from it: {exc}"
                break
            removed = memory.discover(observation)
            rec.observed = [f"{o.name} {o.relation} {o.parent}" for o in observation.objects]
            if removed:
                rec.observed.append("not found: " + ", ".join(removed))
    rec.accepted = bool(rec.executed)
    return rec.feedback


def _perceive(perceive: Perception, observation, memory: MemoryGraph, env, rec: StepRecord):
    """The observation for memory; the augmentation's trace entry goes to ``rec.perceived``."""
    observation, entry = perceive(observation, memory, env)
    if entry is not None:
        rec.perceived.append(asdict(entry))
    return observation


def _execute_unchecked(action, memory: MemoryGraph, env, rec: StepRecord, perceive: Perception) -> None:
    """Correction ``none``: run ``action``'s steps as written until the environment refuses one;
    the action stays in the plan (accepted) with ``rec.infeasible`` set. No feedback for the LM."""
    rec.accepted = True
    for step in expand_unchecked(memory.graph, action):
        result = env.step(step)
        if not result.ok:
            rec.infeasible = result.feedback or f"{step} failed"
            return None
        try:
            memory.apply(step)
        except Infeasible as exc:  # the environment did it although memory thought it could not
            rec.infeasible = f"{step} happened, but memory could not follow: {exc}"
            return None
        rec.executed.append(str(step))
        if result.observation is not None:
            try:
                memory.discover(_perceive(perceive, result.observation, memory, env, rec))
            except PerceptionError as exc:
                rec.infeasible = f"{step} happened, but nothing could be learnt from it: {exc}"
                return None
    return None

