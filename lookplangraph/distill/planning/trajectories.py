"""Expert trajectories of the train pool: supervised fine-tuning data and demonstrations, built with
the privileged expert (:mod:`lookplangraph.distill.teacher.expert`) in LookPlanGraph's own loop, so
every example is exactly what the planner sends at a step and what the expert answered there.

``lookplangraph distill data`` writes into ``OUT/``: ``sft.jsonl`` (one chat example per expert
answer the loop accepted: ``{"messages": [system, user, assistant], "meta": {...}}``),
``episodes.jsonl`` (one line per episode, for the validator), ``demonstrations.jsonl.gz`` (the
successful episodes of unaugmented tasks, for retrieval: :mod:`lookplangraph.agent.demonstrations`)
and ``counts.json`` (episodes, examples, tokens).

Only train-pool tasks of the pinned split (:func:`grasif.heldout.in_train_pool`) are accepted: an
evaluation task or a sibling raises :class:`grasif.heldout.LeakError`. Augmented copies
(:mod:`grasif.augment`) keep their labels true; one that would not stay solvable, and a dynamic
seed that moves nothing, is left out and counted.

:func:`validate_data` replays every episode through the SGS (each accepted action feasible, the goal
holds at the end; with the loop's ``close_at_once`` where the episode was made with it) and reads
every answer back as an action whose names, and whose reason's names, stand in its prompt
(:func:`lookplangraph.distill.teacher.expert.ungrounded`). The format and the checks:
``docs/guides/expert.md`` and ``docs/guides/distillation.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from grasif.augment import AugmentError, augment
from grasif.generate import is_generated
from grasif.generate.leaks import check_training
from grasif.goals import evaluate_goal
from grasif.heldout import LeakError, in_train_pool
from grasif.task import Task
from sgs.actions import parse_action
from sgs.graph import node_class
from sgs.simulator import check

from lookplangraph.agent.demonstrations import Demonstration, write_demonstrations
from lookplangraph.agent.replies import parse_answer
from lookplangraph.distill.planning.conversations import (
    ConversationError, MistakeInjector, chained, episode_conversation, trained,
)
from lookplangraph.distill.teacher.expert import Expert, ungrounded
from lookplangraph.evaluation.runner import dynamic_moves, make_env
from lookplangraph.lm import Completion, Usage, structured
from lookplangraph.lm.embedded import DEFAULT_MODEL, is_available, model_path
from lookplangraph.planners.config import ANSWER_FORMATS, PlannerConfig
from lookplangraph.planners.lookplangraph import closed_after_use, goes_on, run_episode

#: augmentation kinds besides the task as it is (None)
AUGMENTATIONS = ("rename", "shuffle", "distract")


class RecordingLM:
    """Wraps a policy's ``complete()`` and keeps each call's messages and reply text."""

    def __init__(self, lm):
        self.lm = lm
        self.name = getattr(lm, "name", type(lm).__name__)
        self.calls: list[tuple[list[dict], str]] = []
        self.schemas: list[Any] = []  # per call: the reply schema it asked for (None: none)

    @property
    def constraints(self) -> frozenset[str]:
        return self.lm.constraints

    def begin_episode(self, *args, **kwargs) -> None:
        self.calls = []
        self.lm.begin_episode(*args, **kwargs)

    def complete(self, messages: list[dict[str, Any]], **request: Any):
        c = self.lm.complete(messages, **request)
        self.calls.append(([dict(m) for m in messages], c.text))
        self.schemas.append(request.get("schema"))
        return c


def schema_names(schema: Any) -> set[str] | None:
    """The node names a decision's reply schema allows in its ``node`` and ``destination`` slots
    (:mod:`lookplangraph.agent.decoding`), None where a slot is free (or there is no schema)."""
    found: set[str] = set()
    free = False

    def walk(value: Any) -> None:
        nonlocal free
        if isinstance(value, dict):
            props = value.get("properties")
            if isinstance(props, dict):
                for key in ("node", "destination"):
                    slot = props.get(key)
                    if slot is not None:
                        options = slot.get("anyOf", [slot])
                        strings = [o for o in options if o.get("type") == "string"]
                        free |= any("enum" not in o for o in strings)
                        found.update(v for o in strings for v in o.get("enum", ()))
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    if not isinstance(schema, dict):
        return None
    walk(schema)
    return None if free else found


class Replay:
    """A data tool, not a model: ``complete()`` answers a conversation's assistant turns in order,
    each only if it is the reply its request's schema allows and the request's messages are the
    conversation so far (:class:`ConversationError` otherwise)."""

    name = "replay"
    constraints = frozenset()  # as the expert: the exclusions stay out of the schema

    def __init__(self, conversation: list[dict[str, Any]]):
        self.conversation = conversation
        self.at = 0  # messages answered so far

    def complete(self, messages: list[dict[str, Any]], *, schema: Any = None, **_: Any) -> Completion:
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        have = [{"role": m["role"], "content": m["content"]} for m in self.conversation[:len(plain)]]
        if plain != have or len(plain) >= len(self.conversation):
            raise ConversationError(f"call {self.at + 1}: the loop's prompt is not the conversation so far")
        answer = self.conversation[len(plain)]["content"]
        try:
            value = json.loads(answer)
        except ValueError:
            raise ConversationError(f"call {self.at + 1}: the answer is not JSON") from None
        _, error = structured.check(value, schema) if schema is not None else (None, None)
        if error is not None:
            raise ConversationError(f"call {self.at + 1}: the answer is not one the schema allows ({error})")
        self.at += 1
        return Completion(text=answer, usage=Usage(0, 0, None), seconds=0.0)


def replays(conversation: list[dict[str, Any]], task: Task, seed: int | None, cfg: PlannerConfig) -> bool:
    """Whether ``conversation``'s answers, replayed in the loop under ``cfg`` in the episode of
    ``task`` and ``seed``, give that very conversation: every prompt, every answer allowed, none
    left over, and the goal reached."""
    lm = Replay(conversation)
    try:
        result = run_episode(task, make_env(task, seed), lm, cfg)
    except ConversationError:
        return False
    return result.success and lm.at == sum(m["role"] == "assistant" for m in conversation)


@dataclass
class Counts:
    episodes: int = 0
    successful: int = 0
    examples: int = 0
    prompt_tokens: int = 0
    answer_tokens: int = 0
    augmentations_left_out: int = 0
    unmoved_left_out: int = 0
    tokenizer: str = ""
    prompt_layout: str = "scene-history"
    answer_format: str = "action+reason"
    recall: str = "here"  # the view's recall (lookplangraph.agent.recall)
    expert: str = ""  # the teacher's name (Expert.name: which search)
    by_kind: dict[str, int] = field(default_factory=dict)
    by_source: dict[str, int] = field(default_factory=dict)  # examples per split (virtualhome, generated-office ...)
    # the conversation layout only (one example per episode): its decisions trained, the injected mistakes
    decisions: int = 0
    mistakes: dict[str, Any] = field(default_factory=dict)
    # answers of several actions (conversation layout): the most in one answer, the trained answers
    # that hold more than one, and the episodes whose chained chat did not replay (written unchained)
    actions_per_answer: int = 1
    chained_answers: int = 0
    chains_not_replayed: int = 0


def data_config(answer_format: str, prompt_layout: str, correction: str = "rules", max_actions: int = 60,
                recall: str = "here") -> PlannerConfig:
    """The planner's settings that make examples in ``answer_format``, ``prompt_layout`` and the
    view's ``recall``; ``ValueError`` for an answer format that does not exist."""
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer format must be one of {', '.join(ANSWER_FORMATS)}, not {answer_format!r}")
    return PlannerConfig(max_actions=max_actions, correction=correction, prompt_layout=prompt_layout, recall=recall,
                         reason_first=answer_format == "reason+action",
                         reason_max_length=0 if answer_format == "action" else None)


def augmented(task: Task, kind: str | None, seed: int = 0) -> Task | None:
    """``task`` itself (kind None) or its augmented copy; None when the copy cannot keep the label."""
    if kind is None:
        return task
    try:
        return augment(task, kind, seed)
    except AugmentError:
        return None


def episode_key(seed: int | None) -> str:
    """What tells a task's episodes apart for :class:`MistakeInjector`'s draws: the dynamic seed."""
    return f"seed={seed}"


@dataclass
class EpisodeTrace:
    """What the loop did in an expert episode beside its examples, decision by decision: the step
    record and the reply schema asked for (its names: :func:`schema_names`)."""

    records: list = field(default_factory=list)
    schemas: list = field(default_factory=list)


def expert_episode(task: Task, seed: int | None, cfg: PlannerConfig, expert: "Expert | MistakeInjector | None" = None,
                   trace: EpisodeTrace | None = None):
    """One expert episode of LookPlanGraph: ``(result, [(messages, answer, accepted)], demonstration)``.
    ``expert`` may be a :class:`~lookplangraph.distill.planning.conversations.MistakeInjector`
    around the expert (its mistakes are then among the answers; its ``injected`` says which).
    ``trace``: filled with the loop's step records and reply schemas (:class:`EpisodeTrace`)."""
    lm = RecordingLM(expert or Expert())
    env = make_env(task, seed)
    if isinstance(lm.lm, MistakeInjector):
        lm.lm.episode_key = episode_key(seed)
    lm.begin_episode(task, env, "lookplangraph", cfg)
    records = [] if trace is None else trace.records
    result = run_episode(task, env, lm, cfg, on_step=records.append)
    if trace is not None:
        trace.schemas[:] = lm.schemas
    steps = list(zip(lm.calls, records))
    examples = [(messages, answer, rec.accepted) for (messages, answer), rec in steps]
    accepted = [rec for _, rec in steps if rec.accepted]
    lines = []
    for i, rec in enumerate(accepted):
        line = rec.proposed
        if rec.observed is not None and rec.proposed.startswith("discover_objects"):
            later = " ".join(r.proposed for r in accepted[i + 1:])
            useful = [o for o in rec.observed if not o.startswith("not found") and o.split()[0] in later]
            gone = [o for o in rec.observed if o.startswith("not found")]
            line += " -> saw " + (", ".join(useful) if useful else "nothing needed")
            if gone:
                line += "; " + gone[0]
        lines.append(line)
    rooms = tuple(sorted({node_class(p) for p in task.graph.places}))
    demo = Demonstration(task.id, task.split, seed, task.instruction, rooms, tuple(lines))
    return result, examples, demo


def build_data(tasks: list[Task], out: Path, *, seeds: list[int | None], augmentations: tuple[str, ...] = AUGMENTATIONS,
               correction: str = "rules", max_actions: int = 60, progress: Callable[[int, int, dict], None] | None = None,
               manifest: dict | None = None, prompt_layout: str = "scene-history",
               answer_format: str = "action+reason", generated: list[Task] = (),
               heldout: list[Task] | None = None, expert: Expert | None = None, recall: str = "here",
               mistakes: float = 0.0, mistake_seed: int = 0, actions_per_answer: int = 1) -> Counts:
    """Write ``sft.jsonl``, ``episodes.jsonl``, ``demonstrations.jsonl.gz`` and ``counts.json``
    into ``out`` (module doc); each file appears whole or not at all. ``prompt_layout`` (the
    user message's order) and ``answer_format`` (:data:`~lookplangraph.planners.config.ANSWER_FORMATS`)
    and ``recall`` (the view's, :mod:`lookplangraph.agent.recall`) are the format of the examples,
    recorded in ``counts.json`` and from there in the adapter.
    ``generated``: tasks of :mod:`grasif.generate`, checked against ``heldout`` (the evaluation
    tasks, required with them) by :func:`grasif.generate.leaks.check_training` first. ``expert``: the
    teacher (default :class:`~lookplangraph.distill.teacher.expert.Expert`, the belief-space search);
    its name is recorded in ``counts.json``.

    In the ``conversation`` layout each successful episode is one example, its whole chat
    (:mod:`~lookplangraph.distill.planning.conversations`: refused answers and injected mistakes
    untrained), and ``mistakes`` is the share of episodes given one injected mistake (seeded by
    ``mistake_seed``, at a decision before the end of the episode's clean run, which is played
    first); ``counts.json`` then also says how many decisions are trained and what
    was injected. ``actions_per_answer`` > 1 (conversation layout) chains each conversation's
    answers (:func:`~lookplangraph.distill.planning.conversations.chained`) where replaying the
    chained chat in the loop (:func:`replays`) gives it back; the others are written unchained
    and counted."""
    leaked = [f"{t.split}/{t.id}" for t in tasks if not in_train_pool(t.split, t.id, manifest)]
    if leaked:
        raise LeakError(f"not in the train pool (evaluation tasks or their siblings): {', '.join(leaked[:8])}")
    if generated:
        if heldout is None:
            raise ValueError("generated tasks are checked against the held-out tasks: pass heldout")
        check_training(list(generated), heldout)
        tasks = [*tasks, *generated]
    cfg = data_config(answer_format, prompt_layout, correction, max_actions, recall)
    chats = prompt_layout == "conversation"
    if mistakes and not chats:
        raise ValueError("injected mistakes are written only in the conversation layout (--prompt-layout conversation)")
    if actions_per_answer > 1 and not chats:
        raise ValueError("answers of several actions are written only in the conversation layout (--prompt-layout conversation)")
    chain_cfg = replace(cfg, actions_per_answer=actions_per_answer)  # checks the value
    out.mkdir(parents=True, exist_ok=True)
    expert = expert or Expert()
    teacher = MistakeInjector(expert, mistakes, mistake_seed) if chats and mistakes > 0 else expert
    counts = Counts(prompt_layout=prompt_layout, answer_format=answer_format, recall=recall, expert=expert.name,
                    actions_per_answer=actions_per_answer)
    tokens = _token_counter()
    counts.tokenizer = tokens.__doc__ or ""
    demos: list[Demonstration] = []
    kinds: list[str | None] = [None, *augmentations]
    total, done = len(tasks) * len(seeds) * len(kinds), 0
    sft_tmp, ep_tmp = out / "sft.jsonl.part", out / "episodes.jsonl.part"
    with open(sft_tmp, "w") as sft, open(ep_tmp, "w") as eps:
        for task in tasks:
            for kind in kinds:
                for seed in seeds:
                    done += 1
                    copy = augmented(task, kind, seed or 0)
                    if copy is None:
                        counts.augmentations_left_out += 1
                        continue
                    if seed is not None and not dynamic_moves(copy, seed):
                        counts.unmoved_left_out += 1  # the dynamic mode leaves this task as it is: the static episode again
                        continue
                    if isinstance(teacher, MistakeInjector):  # its mistake is drawn before the clean run's end
                        teacher.episode_key = episode_key(seed)
                        teacher.episode_decisions = len(expert_episode(copy, seed, cfg, expert)[1]) \
                            if teacher.draws_mistake(copy) else None
                    trace = EpisodeTrace()
                    result, examples, demo = expert_episode(copy, seed, cfg, teacher, trace)
                    meta = {"split": task.split, "task_id": task.id, "seed": seed,
                            "augmentation": None if kind is None else {"kind": kind, "seed": seed or 0},
                            "correction": correction, "close_at_once": cfg.close_at_once and correction == "rules"}
                    counts.episodes += 1
                    counts.by_kind[kind or "none"] = counts.by_kind.get(kind or "none", 0) + 1
                    eps.write(json.dumps({**meta, "success": result.success, "actions": result.actions,
                                          "termination": result.termination}) + "\n")
                    if progress:
                        progress(done, total, {"task_id": task.id, "success": result.success})
                    if not result.success:
                        continue  # only what reached the goal teaches
                    counts.successful += 1
                    if kind is None and not is_generated(task):  # the shipped demonstrations are the train pool's
                        demos.append(demo)
                    if chats:
                        chain = (copy, seed, chain_cfg, trace) if actions_per_answer > 1 else None
                        _write_conversation(sft, examples, teacher, meta, counts, tokens, task.split, chain)
                        continue
                    for step, (messages, answer, accepted) in enumerate(examples, 1):
                        if not accepted:
                            continue
                        chat = [{"role": m["role"], "content": m["content"]} for m in messages]
                        chat.append({"role": "assistant", "content": answer})
                        sft.write(json.dumps({"messages": chat, "meta": {**meta, "step": step}}) + "\n")
                        counts.examples += 1
                        counts.by_source[task.split] = counts.by_source.get(task.split, 0) + 1
                        counts.prompt_tokens += sum(tokens(m["content"]) for m in messages)
                        counts.answer_tokens += tokens(answer)
    sft_tmp.replace(out / "sft.jsonl")
    ep_tmp.replace(out / "episodes.jsonl")
    write_demonstrations(demos, out / "demonstrations.jsonl.gz")
    record = dict(counts.__dict__)
    if not chats:
        record.pop("decisions")
        record.pop("mistakes")
    if actions_per_answer == 1:
        for key in ("actions_per_answer", "chained_answers", "chains_not_replayed"):
            record.pop(key)
    (out / "counts.json").write_text(json.dumps(record, indent=1) + "\n")
    return counts


def _write_conversation(sft, examples, teacher, meta: dict, counts: Counts, tokens: Callable[[str], int],
                        source: str, chain: tuple | None = None) -> None:
    """One episode's conversation as an ``sft.jsonl`` line: its accepted answers trained, refused
    ones and injected mistakes not (:func:`~lookplangraph.distill.planning.conversations.episode_conversation`);
    ``chain``: ``(task, seed, config, trace)`` to chain its answers in, as :func:`build_data` says."""
    injected = teacher.injected if isinstance(teacher, MistakeInjector) else None
    wrong = set(injected.steps) if injected else set()
    marks = [accepted and step not in wrong for step, (_, _, accepted) in enumerate(examples, 1)]
    chat = episode_conversation([(messages, answer) for messages, answer, _ in examples], marks)
    if chain is not None:
        task, seed, cfg, trace = chain
        joined = chained(chat, cfg.actions_per_answer, [goes_on(r) for r in trace.records],
                         [schema_names(schema) for schema in trace.schemas])
        if joined != chat:
            if replays(joined, task, seed, cfg):
                chat = joined
                counts.chained_answers += sum(trained(m) and m["content"].startswith("[") for m in chat)
            else:
                counts.chains_not_replayed += 1
    marks = [trained(m) for m in chat if m["role"] == "assistant"]
    mistakes = [{"step": s, "kind": k, "refused": not examples[s - 1][2]}
                for s, k in zip(injected.steps, injected.kinds)] if injected else []
    answers = {"answers": len(marks)} if len(marks) != len(examples) else {}  # chained: fewer answers than actions
    sft.write(json.dumps({"messages": chat, "meta": {**meta, "decisions": len(examples), "trained": sum(marks),
                                                      **answers, "mistakes": mistakes}}) + "\n")
    counts.examples += 1
    counts.decisions += sum(marks)
    counts.by_source[source] = counts.by_source.get(source, 0) + 1
    for m in chat:
        if trained(m):
            counts.answer_tokens += tokens(m["content"])
        else:
            counts.prompt_tokens += tokens(m["content"])
    if mistakes:
        got = counts.mistakes
        got["episodes"] = got.get("episodes", 0) + 1
        for m in mistakes:
            got[m["kind"]] = got.get(m["kind"], 0) + 1
            got["refused"] = got.get("refused", 0) + m["refused"]


def _recorded_actions_per_answer(out: Path) -> int:
    """The most actions an answer of the data in ``out`` may hold, as its ``counts.json`` says (1 if absent)."""
    try:
        return int(json.loads((out / "counts.json").read_text()).get("actions_per_answer") or 1)
    except (OSError, ValueError):
        return 1


def _token_counter() -> Callable[[str], int]:
    try:
        from llama_cpp import Llama

        if not is_available(DEFAULT_MODEL):
            raise ImportError
        vocab = Llama(str(model_path(DEFAULT_MODEL)), vocab_only=True, verbose=False)
    except Exception:  # no llama.cpp or no model: an estimate, and it says so
        def estimate(text: str) -> int:
            """characters / 4 (estimate: llama.cpp or the embedded model is missing)"""
            return len(text) // 4
        return estimate

    def count(text: str) -> int:
        """the embedded model's tokenizer (qwen2.5-coder-1.5b GGUF vocabulary)"""
        return len(vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))
    return count


@dataclass
class ValidationReport:
    episodes: int = 0
    examples: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def validate_data(out: Path, tasks_by_key: dict[tuple[str, str], Task],
                  progress: Callable[[int, int, dict], None] | None = None) -> ValidationReport:
    """Replay ``out``'s episodes through the SGS and read back every example (module doc)."""
    report = ValidationReport()
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines() if line.strip()]
    for n, ep in enumerate(episodes, 1):
        if not ep["success"]:
            continue
        report.episodes += 1
        where = f"{ep['split']}/{ep['task_id']} seed={ep['seed']} aug={ep['augmentation']}"
        task = tasks_by_key.get((ep["split"], ep["task_id"]))
        if task is None:
            report.problems.append(f"{where}: no such task in the build")
            continue
        aug = ep["augmentation"]
        task = augmented(task, aug["kind"], aug["seed"]) if aug else task
        env = make_env(task, ep["seed"])
        env.reset()
        g = initial = env.true_graph()
        for action in ep["actions"]:
            a = parse_action(action)
            if a.function_name == "done":
                continue
            outcome = check(g, a, correct=ep["correction"] == "rules")
            if outcome.ok and ep.get("close_at_once"):  # the loop's rule (episodes written before it: off)
                outcome = closed_after_use(outcome, g)
            if not outcome.ok:
                report.problems.append(f"{where}: {action} is infeasible on replay: {outcome.feedback}")
                break
            g = outcome.graph
        else:
            if not evaluate_goal(task.goal, g, initial).success:
                report.problems.append(f"{where}: the goal does not hold after the replay")
        if progress:
            progress(n, len(episodes), {"task_id": ep["task_id"], "success": True})
    per_answer = _recorded_actions_per_answer(out)  # answers of several actions: each action checked
    for n, line in enumerate((out / "sft.jsonl").read_text().splitlines(), 1):
        messages = json.loads(line)["messages"]
        report.examples += 1
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        chat = len(turns) > 1
        shown: list[str] = []  # the user turns before the answer at hand
        for i, m in enumerate(messages):
            if m["role"] == "user":
                shown.append(m["content"])
            if m["role"] != "assistant" or (chat and not trained(m)) or (not chat and i != turns[-1]):
                continue  # a conversation: every trained answer; a one-decision example: its answer
            where = f"sft.jsonl line {n}" + (f", turn {i}" if chat else "")
            actions, reason, error = parse_answer(messages[i]["content"], per_answer)
            if not actions:
                report.problems.append(f"{where}: the answer is not an action ({error})")
                continue
            prompt = "\n".join(shown)
            for action in actions:
                for name in (action.node, action.destination):
                    if name and name not in prompt:
                        report.problems.append(f"{where}: {action} names {name}, which its prompt does not show")
            unseen = ungrounded(reason, prompt) if reason else []
            if unseen:
                report.problems.append(f"{where}: the reason names {', '.join(unseen)}, which its prompt does "
                                       f"not show: {reason!r}")
    return report
