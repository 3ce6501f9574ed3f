"""The LookPlanGraph planner: the loop of paper Algorithm 1 over one task, one LM and one environment.

:func:`run_episode` takes a task, an environment, an LM backend and a
:class:`~lookplangraph.planners.config.PlannerConfig` and returns an
:class:`~lookplangraph.planners.episode.EpisodeResult` judged on the environment's true final
graph (strict success, success on the changed nodes only, precision M^C/M). Per step the LM
proposes one action over the memory-graph view (with ``actions_per_answer`` > 1 up to that many,
tried in order while each runs as written and observes nothing: :func:`goes_on`; a ``done()``
after other actions is not tried, the LM answers again on the view they left); an action the
SGS refuses on the memory graph, one that changes nothing, closes a cycle, repeats a refused
action or that the environment refuses is *unresolved* and its feedback goes back to the LM;
otherwise its primitive steps run in the environment and the memory graph mirrors each. Invariants: the LM never sees the true
scene, only the memory graph; an action refused in a memory state is not decoded again in it.

The episode ends on ``done``, after ``max_unresolved`` unresolved answers (in ``none`` mode,
infeasible actions) in a row (a ``done()`` that a reminder sends back is not one),
:data:`MAX_FAILURES_IN_ROW` low-level failures in a row,
``max_actions`` accepted actions, or when a decision's prompt does not fit the LM's context
(``context_overflow``, also the result's ``failure``: a long episode in the conversation layout on
a small ``n_ctx``; what was done before it stands and is judged). Correction modes, the rules beyond the paper's (grounding
check, close_opened, close_at_once, remind_open, remind_switch, search hint), exclusions, cycles, reasons on demand, answers of several
actions and the ablations:
``docs/concepts/loop.md``; low-level failures: ``docs/guides/failures.md``; retrieved
demonstrations: ``docs/guides/expert.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, replace
from functools import lru_cache
from typing import Callable, Sequence

from grasif.heldout import in_train_pool
from grasif.task import Task
from sgs.actions import Action, make, parse_action
from sgs.graph import SceneGraph, node_class
from sgs.simulator import TARGET_STATE, Infeasible, Outcome, apply, corrected, run_plan

from lookplangraph.agent.decide import LMReply, decide, explain
from lookplangraph.agent.demonstrations import DemonstrationIndex, demonstration_block, read_demonstrations
from lookplangraph.agent.conversation import Conversation
from lookplangraph.agent.decoding import ActionKey, action_key, flat_names
from lookplangraph.agent.grounding import refusal
from lookplangraph.agent.journal import Journal
from lookplangraph.agent.situation import held_put, situation
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.perception import Perception, PerceptionError
from lookplangraph.agent.recall import recall_asset_classes, recall_classes
from lookplangraph.agent.search import search_entries
from lookplangraph.agent.switches import reminder as switch_reminder
from lookplangraph.agent.view import inapplicable, names_in, render_view, view, vocabulary
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeLog, EpisodeResult, StepCallback, StepRecord, episode_result
from lookplangraph.agent.prompts import dynamic_prompt, system_prompt
from lookplangraph.lm import ContextOverflow


def run_episode(task: Task, env, lm, config: PlannerConfig | None = None,
                on_step: "StepCallback | Sequence[StepCallback] | None" = None, augmentation=None,
                on_reply: Callable[[LMReply, MemoryGraph], None] | None = None) -> EpisodeResult:
    """Run Algorithm 1 on ``task`` with ``lm`` (an :class:`~lookplangraph.lm.LMBackend`; each
    step is one :func:`~lookplangraph.agent.decide.decide`) in ``env`` (a
    :class:`sim_adapters.base.Environment`). ``on_step`` (one callback or several) sees every
    :class:`StepRecord` once it is complete; ``on_reply`` sees each decision and the memory it was
    made on before the action is checked and carried out (a trial shows it to the operator).
    ``augmentation`` (a :class:`vlm.gam.GraphAugmentation`, default ground truth) turns
    ``discover_objects`` observations into memory (:mod:`lookplangraph.agent.perception`); its
    cost is reported apart from the planner's."""
    cfg = config or PlannerConfig()
    perceive = Perception(augmentation)
    t0 = time.perf_counter()
    env.reset()
    initial_true = env.true_graph()
    memory = MemoryGraph(task.graph, priors=cfg.priors)
    cfg, _ = cfg.settled(getattr(lm, "adapter", None))  # "auto": the prompt the LM's adapter was trained with
    recall = recall_classes(cfg.recall, task.instruction, memory.graph)
    named_assets = recall_asset_classes(cfg.recall, task.instruction, memory.graph)
    static = system_prompt(cfg.system_prompt)
    if cfg.demonstrations > 0:
        static += "\n\n" + task_demonstrations(task, cfg.demonstrations, cfg.demonstration_file,
                                                 cfg.demonstration_chars)
    history: list[tuple[str, str, str]] = []
    journal = Journal(task.instruction) if cfg.prompt_layout == "journal" else None
    chat = Conversation(task.instruction) if cfg.prompt_layout == "conversation" else None
    if cfg.actions_per_answer > 1 and chat is None:
        raise ValueError(f"answers of several actions (actions_per_answer {cfg.actions_per_answer}) are written "
                         f"in the conversation prompt layout, not {cfg.prompt_layout}")
    if (journal is not None or chat is not None) and cfg.graph_style != "text":
        raise ValueError(f"the {cfg.prompt_layout} prompt layout writes the text view, not graph_style {cfg.graph_style!r}")
    log = EpisodeLog(on_step)
    feedback: str | None = None
    unresolved = failed_in_row = 0
    last_accepted: str | None = None
    state = state_key(memory.graph)
    visited = Counter([state])
    refused: dict[ActionKey, str] = {}  # refused in the current memory state -> why
    ungrounded: set[ActionKey] = set()  # refused by the grounding check: excluded in every state
    moved: set[str] = set()  # objects the agent has held: no longer described by where they stood
    reminded = False  # remind_open: a done() has been sent back for what the LM left open
    switch_reminded = False  # remind_switch: a done() has been sent back for a device left as it was
    was_reminder = False  # the last answer was a done() sent back by a reminder: not an unresolved answer
    termination = "max_actions"

    checked = cfg.grounding_check and cfg.correction != "none"

    def step_answer(reply: LMReply, action, reason: str | None, rec: StepRecord) -> str | None:
        """Check, correct and carry out ``action``, one action of ``reply`` (``None``: an
        unreadable reply), into ``rec``, keeping the loop's memory of states, refusals and moved
        objects (``reason``: the one the reply gave it, for the history); the feedback, or None."""
        nonlocal state, refused, last_accepted, reminded, switch_reminded, was_reminder
        key = action_key(action) if action is not None else None
        done = action is not None and action.function_name == "done"
        remind = (cfg.remind_open and cfg.correction != "none" and not reminded and done
                  and opened_by_lm(log.records, memory.graph))
        switch = (cfg.remind_switch and cfg.correction != "none" and not switch_reminded and done and not remind
                  and switch_reminder(task.instruction, memory.graph, acted_on(log.records)))
        was_reminder = bool(remind or switch)
        if remind:  # once an episode; done() stays decodable (the instruction may want it open)
            feedback = rec.feedback = open_reminder(remind)
            reminded = True
        elif switch:  # once an episode; done() is refused in this memory state, as a refused action is
            feedback = rec.feedback = switch
            switch_reminded = True
        elif key is not None and key in refused and cfg.exclude_refused:
            feedback = rec.feedback = (f"{rec.proposed} was already refused in this situation ({refused[key]}); "
                                       "choose a different action")
        elif key is not None and checked and (wrong := refusal(task.instruction, action, memory.graph, moved,
                                                                cfg.place_descriptors)):
            feedback = rec.feedback = wrong
            ungrounded.add(key)  # properties do not change and assets do not move: for the whole episode
        else:
            left_open = opened_by_rules(log.records, memory.graph) if done else ()
            feedback = attempt_action(replace(reply, action=action), memory, env, cfg, rec, last_accepted, visited,
                                      perceive, left_open=left_open)
        new_state = state_key(memory.graph)
        moved.update(a.node for a in map(parse_action, rec.executed) if a.function_name == "pick_up")
        if rec.accepted:
            visited[new_state] += 1
            last_accepted = rec.proposed
            history.append((reason or "", rec.proposed, feedback or _as_done(rec)))
        if journal is not None:
            journal.answered(rec.proposed, reason, feedback, _as_done(rec) if rec.accepted else "")
        if new_state != state:
            state, refused = new_state, {}
        elif key is not None and (not rec.accepted or rec.infeasible) and rec.failure is None and not remind:
            # (a low-level failure is not the action's fault: it may be tried again as it was)
            refused.setdefault(key, rec.feedback or rec.infeasible or "refused")
        log.emit(rec)
        return feedback

    def current_view() -> dict:
        """The memory's view (the prompt text and the names come from it) with the search line."""
        shown = view(memory, cfg.graph_style, recall, named_assets)
        if cfg.search_hint and memory.missing:
            shown["search"] = search_entries(memory.graph, memory.missing, task.instruction)
        return shown

    accepted = 0
    while accepted < cfg.max_actions:
        shown = current_view()
        if cfg.vocabulary == "typed":
            names = vocabulary(memory, cfg.graph_style, shown)
        else:
            names = names_in(shown)
        excluded = list(refused) if cfg.exclude_refused else []
        if cfg.exclude_refused:
            excluded += [k for k in ungrounded if k not in refused]
        if cfg.exclude_inapplicable:
            excluded += [k for k in inapplicable(memory, flat_names(names), holders_only=cfg.discover_holders)
                         if k not in refused]
        if journal is not None:
            dynamic = journal.prompt(shown, memory.missing)
        elif chat is not None:
            dynamic = chat.prompt(shown, memory.missing)
        else:
            dynamic = dynamic_prompt(task.instruction, render_view(shown, cfg.graph_style), history, feedback,
                                     cfg.prompt_layout)
        try:
            reply = decide(lm, static, dynamic, names, excluded, reason_first=cfg.reason_first,
                           reason_max_length=cfg.reason_max_length, actions=cfg.actions_per_answer)
            said = explain(lm, static, dynamic, reply.action) if cfg.explain and reply.action and not reply.reason else None
        except ContextOverflow:  # a property of this prompt: the episode ends, the evaluation goes on
            termination = "context_overflow"
            break
        if on_reply is not None:  # with the reason asked for, so that a trial's operator sees it
            on_reply(replace(reply, reason=said.reason) if said is not None else reply, memory)
        answer = [reply.action, *reply.then]
        for place, action in enumerate(answer, 1):
            if place > 1:  # what the last action changed in the view, for the next user turn
                chat.saw(current_view(), memory.missing)
                rec = log.add(StepRecord(len(log) + 1, None, str(action), False, "", cached_tokens=None,
                                         in_answer=place))
            else:
                rec = log.add(StepRecord(len(log) + 1, said.reason if said else reply.reason,
                                         str(action) if action else None, False,
                                         reply.text, prompt_tokens=reply.usage.prompt_tokens,
                                         completion_tokens=reply.usage.completion_tokens,
                                         cached_tokens=reply.usage.cached_tokens, seconds=reply.seconds,
                                         excluded=len(excluded), explain_seconds=said.seconds if said else 0.0))
            feedback = step_answer(reply, action, reply.reason if place == 1 else None, rec)
            accepted += rec.accepted
            if not (place < len(answer) and goes_on(rec) and accepted < cfg.max_actions
                    and follows_in_answer(answer[place])):
                break
        if chat is not None:
            chat.answered(reply.text, rec.accepted, feedback, _as_done(rec) if rec.accepted else "",
                          not_done=tuple(str(a) for a in answer[place:]))
        if rec.accepted and action is not None and action.function_name == "done":
            termination = "done"
            break
        if rec.failure is not None:  # the robot's hands, not the LM's answer: not counted as unresolved,
            failed_in_row += 1  # but a robot that keeps failing ends the episode too
        elif not was_reminder:  # a done() a reminder sent back was not the LM's mistake: the count stands
            failed_in_row = 0
            unresolved = 0 if feedback is None and rec.infeasible is None else unresolved + 1
        if unresolved >= cfg.max_unresolved or failed_in_row >= MAX_FAILURES_IN_ROW:
            termination = "unresolved"
            break

    records = log.records
    infeasible = [f"{r.proposed}: {r.infeasible}" for r in records if r.infeasible]
    return episode_result(task, env, lm, cfg, records, initial=initial_true, t0=t0, termination=termination,
                          augmentation=perceive.mode, actions=[r.proposed for r in records if r.accepted],
                          executed=[step for r in records for step in r.executed], infeasible=infeasible,
                          failure="context_overflow" if termination == "context_overflow" else None)


@lru_cache(maxsize=2)
def _index(path: str | None) -> DemonstrationIndex:
    return DemonstrationIndex(read_demonstrations(path), is_held_out=lambda split, tid: not in_train_pool(split, tid))


def task_demonstrations(task: Task, k: int, path: str | None = None, max_chars: int = 2400) -> str:
    """The ``k`` demonstrations most like ``task`` as prompt text (:mod:`lookplangraph.agent.demonstrations`):
    retrieved by its instruction and the classes of its rooms, never the task itself."""
    rooms = sorted({node_class(p) for p in task.graph.places})
    chosen = [d for d in _index(path).top(task.instruction, rooms, k + 1) if d.task_id != task.id][:k]
    return demonstration_block(chosen, max_chars)


#: Low-level execution failures in a row (sim_adapters.failures) that end an episode as unresolved;
#: they do not count towards ``max_unresolved`` (the LM's answer was fine), but a robot whose
#: every attempt fails cannot go on for ever.
MAX_FAILURES_IN_ROW = 10

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


def goes_on(rec: StepRecord) -> bool:
    """Whether the loop tries the next action of an answer after ``rec``'s: it was carried out as
    written (nothing refused, corrected or failed; a ``rearrange`` expanded into its own steps is
    as written) and neither observed something nor ended the task."""
    return (rec.accepted and rec.feedback is None and rec.infeasible is None and rec.failure is None
            and not corrected(rec.corrections) and not rec.observed and not rec.perceived
            and not rec.proposed.startswith(("discover_objects(", "done(")))


def follows_in_answer(action: Action) -> bool:
    """Whether the loop tries ``action`` after another action of the same answer: anything but
    ``done()``, which ends a task only on a view that shows what the actions before it did."""
    return action.function_name != "done"


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
                   visited: Counter, perceive: Perception, *, left_open: Sequence[str] = ()) -> str | None:
    """Validate, correct and execute one reply (an object with ``action`` and ``error``) as the
    loop does, also for SG-RwR's step mode; fill ``rec``; return feedback or ``None``.
    ``left_open``: the containers a ``done()`` closes first under ``close_opened``
    (:func:`opened_by_rules`). (The ``grounding_check`` is the loop's, before this.)"""
    action = reply.action
    if action is None:
        rec.feedback = reply.error or "your answer could not be read as an action"
        return rec.feedback
    if action.function_name == "done":
        rec.accepted = True
        if cfg.correction == "rules" and cfg.close_opened and left_open:
            _close_before_done(left_open, memory, env, rec, perceive)
        return None
    if cfg.correction == "none":
        fb = memory.hallucination(action)
        if fb is None:
            outcome = memory.check(action, correct=False)
            if not outcome.ok:  # an execution error: not caught, the environment meets it
                return _execute_unchecked(action, memory, env, rec, perceive)
    else:
        fb = memory.unseen_feedback(action)
        if fb is None:
            outcome = checked(action, memory, cfg)
            fb = outcome.feedback
    if fb is not None and cfg.refusal_situation:
        fb += f" ({situation(memory.graph, memory.unseen)})"
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
    _execute(outcome.actions, memory, env, rec, perceive)
    rec.accepted = bool(rec.executed)
    return rec.feedback


def checked(action: Action, memory: MemoryGraph, cfg: PlannerConfig) -> Outcome:
    """The SGS's check of ``action`` on the memory graph under ``cfg``'s correction mode (``rules``
    corrects; ``feedback`` and ``none`` check as written) and the rules that change its steps:
    ``held_slot`` (a put naming a place in the object slot read as the put of what the agent
    holds) and ``close_at_once`` (:func:`closed_after_use`). What the loop carries out, and what
    the trial console shows."""
    rules = cfg.correction == "rules"
    read_as = held_put(action, memory.graph) if rules and cfg.held_slot else None
    outcome = memory.check(read_as, correct=True) if read_as is not None else None
    if outcome is not None and outcome.ok:
        note = f"read {action} as {read_as}: you hold {memory.graph.agent.holding}"
        outcome = replace(outcome, corrections=(note, *outcome.corrections))
    else:  # not read so, or no better read so: the feedback is on what the LM wrote
        outcome = memory.check(action, correct=rules)
    if outcome.ok and rules and cfg.close_at_once:
        outcome = closed_after_use(outcome, memory.graph)
    return outcome


def _execute(steps, memory: MemoryGraph, env, rec: StepRecord, perceive: Perception) -> None:
    """Run checked primitive ``steps`` in ``env`` one by one, the memory graph mirroring each, until
    one fails; fill ``rec.executed`` (and ``rec.feedback``/``failure``/``observed``)."""
    for step in steps:
        result = env.step(step)
        if not result.ok:
            if result.failure:  # the robot's hands or wheels, not the plan: the scene is as it was
                rec.failure = result.failure
                rec.feedback = f"{result.feedback} (a low-level failure; nothing changed, the step may be tried again)"
            else:
                rec.feedback = f"{result.feedback}; your memory of the scene was out of date"
            break
        happened = result.outcome or step  # a low-level failure may have done something else
        try:
            memory.apply(happened)
        except Infeasible as exc:  # memory and environment disagree; the environment is right
            rec.feedback = f"{happened} happened, but memory could not follow: {exc}"
            break
        rec.executed.append(str(happened))
        if result.outcome is not None:
            rec.failure = result.failure or "outcome"
            rec.feedback = f"{result.feedback} (a low-level failure: {happened} happened instead of {step})"
            break
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


def _still_open(records: Sequence[StepRecord], graph: SceneGraph) -> dict[str, bool]:
    """The containers an executed step opened and no later step closed, each with whether the LM
    opened it itself (the last step of an ``open`` it proposed; otherwise a correction did), in
    the order they were opened."""
    opened: dict[str, bool] = {}
    for r in records:
        own = r.proposed is not None and r.proposed.startswith("open(")
        for i, step in enumerate(map(parse_action, r.executed)):
            if step.function_name in ("open", "close"):
                opened.pop(step.node, None)
            if step.function_name == "open":
                opened[step.node] = own and i == len(r.executed) - 1
    return {n: own for n, own in opened.items() if n in graph.nodes and graph.nodes[n].has("open")}


def opened_by_rules(records: Sequence[StepRecord], graph: SceneGraph) -> list[str]:
    """The containers a correction opened (an ``open`` step other than the last step of an ``open``
    the LM proposed) that no later step closed and that are open in ``graph``, the last opened
    first (a box opened inside a fridge is closed before the fridge). What the LM opened itself
    stays as it left it."""
    return [n for n, own in reversed(_still_open(records, graph).items()) if not own]


def opened_by_lm(records: Sequence[StepRecord], graph: SceneGraph) -> list[str]:
    """The containers the LM opened with its own ``open(...)`` that no later step closed and that
    are open in ``graph``, in the order it opened them (what ``remind_open`` names)."""
    return [n for n, own in _still_open(records, graph).items() if own]


def acted_on(records: Sequence[StepRecord]) -> set[str]:
    """The nodes that the executed steps of ``records`` named (what ``remind_switch`` narrows a
    class of several devices to)."""
    return {n for rec in records for step in map(parse_action, rec.executed)
            for n in (step.node, step.destination) if n}


def open_reminder(left_open: Sequence[str]) -> str:
    """The feedback on a ``done()`` sent back under ``remind_open``: what the LM left open."""
    it = "it" if len(left_open) == 1 else "them"
    return (f"{', '.join(left_open)} {'is' if len(left_open) == 1 else 'are'} still open (you opened {it}); "
            f"close {it} unless the instruction asks for {it} open, then answer done()")


def _close_before_done(left_open: Sequence[str], memory: MemoryGraph, env, rec: StepRecord,
                       perceive: Perception) -> None:
    """Rule ``close_opened``: before ``done()``, close what the corrections opened (walking where
    needed, as the SGS corrects a ``close``); a container that cannot be closed now is skipped."""
    _, outcomes = run_plan(memory.graph, [make("close", node) for node in left_open])
    closed = [(node, o) for node, o in zip(left_open, outcomes) if o.ok]
    for node, o in closed:
        rec.corrections += [*o.corrections, f"closed {node} before done(): a correction had opened it"]
    _execute([step for _, o in closed for step in o.actions], memory, env, rec, perceive)


def closed_after_use(outcome: Outcome, graph: SceneGraph) -> Outcome:
    """Rule ``close_at_once``: ``outcome`` (a checked action's steps from ``graph``) with each
    container that one of its corrections opened closed again right after the step that needed it
    open: the ``put_inside`` into it, or the ``pick_up`` of something inside it (innermost first).
    Where a close would stop a later step of the action (the apple taken out of a box in the
    fridge and put into the fridge) or the SGS refuses it, the outcome stays as it was and
    ``close_opened`` closes what is left at ``done()``. An ``open`` the LM asked for is the last
    step of its action, so nothing it opened itself is closed. An outcome without an ``open``
    (most are) is returned as it is, without replaying its steps."""
    if not any(step.function_name == "open" for step in outcome.actions):
        return outcome
    opened: list[str] = []  # in the order opened: outermost first
    steps, notes, g = [], [], graph
    try:
        for step in outcome.actions:
            before, g = g, apply(g, step)
            steps.append(step)
            if step.function_name == "open":
                opened.append(step.node)
                continue
            if step.function_name == "put_inside":
                used = [c for c in opened if c == (step.destination or step.node)]
            elif step.function_name == "pick_up":
                used = [c for c in reversed(opened) if before.is_ancestor(c, step.node)]
            else:
                continue
            for c in used:
                g = apply(g, make("close", c))
                steps.append(make("close", c))
                notes.append(f"closed {c} after {step}: a correction had opened it")
                opened.remove(c)
    except Infeasible:
        return outcome
    if not notes:
        return outcome
    return replace(outcome, actions=tuple(steps), graph=g, corrections=(*outcome.corrections, *notes))


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
    for step in memory.expand_unchecked(action):
        result = env.step(step)
        if not result.ok:
            rec.infeasible = result.feedback or f"{step} failed"
            rec.failure = result.failure
            return None
        happened = result.outcome or step  # a low-level failure may have done something else
        try:
            memory.apply(happened)
        except Infeasible as exc:  # the environment did it although memory thought it could not
            rec.infeasible = f"{happened} happened, but memory could not follow: {exc}"
            return None
        rec.executed.append(str(happened))
        if result.outcome is not None:
            rec.failure, rec.infeasible = result.failure or "outcome", result.feedback
            return None
        if result.observation is not None:
            try:
                memory.discover(_perceive(perceive, result.observation, memory, env, rec))
            except PerceptionError as exc:
                rec.infeasible = f"{step} happened, but nothing could be learnt from it: {exc}"
                return None
    return None


class LookPlanGraph:
    """LookPlanGraph under the planner protocol (:mod:`lookplangraph.planners.base`): one LM call
    per action over the memory graph, checked and corrected by the SGS (:func:`run_episode`)."""

    name = "lookplangraph"

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        return run_episode(task, env, lm, config, on_step=on_step, augmentation=augmentation)
