"""DAgger: the student's own states, labelled by the expert (Ross et al., 2011).

A DAgger round rolls the student out in LookPlanGraph's loop and, at every state it visits, asks
the privileged expert (:mod:`lookplangraph.distill.teacher.expert`) what it would answer there. The
student's answer is what is executed, and the expert's bookkeeping follows it
(:meth:`~lookplangraph.distill.teacher.policy.Policy.follow`); the expert's answer becomes a
training example for that exact prompt.

``lookplangraph distill dagger`` appends to ``OUT/`` (a round resumes where it stopped, and rounds
may share a directory with ``distill data``): ``sft.jsonl`` (one example per labelled state,
``meta.source = "dagger"``; ``meta.student_success`` says whether the student's episode reached
the goal, so a mix can take ``@student_success=False``), ``dagger_episodes.jsonl``,
``dagger_counts.json`` (with ``by_kind``: episodes and successes by the task's
``provenance["kind"]`` and by static or dynamic, recounted from the episodes file), and
``counts.json`` brought up to date; an episode's line keeps the student's answers, so that another
teacher can label the same episodes again without the student (:mod:`.replay`). In the conversation layout
(:mod:`.conversations`) an episode gives its chat (the student's answers trained where the expert
agrees) and one branch per other state: with ``branches="answer"`` the chat up to it and the
expert's answer, the one trained turn; with ``branches="continuation"`` the expert takes over
there (the student's answers before it replayed, so the state is the same) and every answer of
its own to the episode's end is trained, so a ``go_to`` comes with the look after it and a
``pick_up`` with its ``put`` (``meta.kind`` is ``branch`` or ``continuation``). A round whose
prompt layout, answer format, recall or teacher differs from the directory's is refused
(:class:`DaggerError`). A label is left out when it is ``done()`` while the goal does not hold,
or when it names a node its prompt does not show. Only train-pool or leak-checked generated tasks
may be rolled out (the caller's guard). See ``docs/guides/distillation.md``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from grasif.goals import evaluate_goal
from grasif.task import Task

from lookplangraph.agent.replies import parse_reply
from lookplangraph.distill.planning.conversations import episode_conversation
from lookplangraph.distill.planning.replay import RecordedStudent, round_key
from lookplangraph.distill.teacher.expert import Expert, ungrounded
from lookplangraph.evaluation.runner import dynamic_moves, make_env, trim_torn_line
from lookplangraph.lm import Completion
from lookplangraph.planners.config import PlannerConfig, answer_format
from lookplangraph.planners.lookplangraph import run_episode


class DaggerError(ValueError):
    """A round that cannot add to its directory: the directory's examples have another format."""


class Labeller:
    """An LM for the planner that answers with ``student`` and records, for every call, the
    prompt and what ``expert`` answers there (module doc)."""

    def __init__(self, student, expert: Expert):
        self.student, self.expert = student, expert
        self.name = getattr(student, "name", type(student).__name__)
        self.labels: list[dict[str, Any]] = []

    @property
    def constraints(self) -> frozenset[str]:
        return self.student.constraints

    def begin_episode(self, task: Task, env, planner: str = "lookplangraph", config=None) -> None:
        self.expert.begin_episode(task, env, planner, config)
        self.task, self.env = task, env
        self.labels = []

    def complete(self, messages: list[dict[str, Any]], **request: Any):
        label = self.expert.complete(messages, **request)
        reply = self.student.complete(messages, **request)
        action, _, _ = parse_reply(reply.text)
        self.expert.follow(None if action is None else str(action))
        expert_action, reason, _ = parse_reply(label.text)
        gives_up = expert_action is not None and expert_action.function_name == "done" and \
            not evaluate_goal(self.task.goal, self.env.true_graph(), self.expert.initial).success
        self.labels.append({"messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                            "label": label.text, "text": reply.text, "student": None if action is None else str(action),
                            "expert": None if expert_action is None else str(expert_action), "reason": reason or "",
                            "gives_up": gives_up})
        return reply


#: what a conversation round writes for a state where the expert answers otherwise (module doc)
BRANCHES = ("answer", "continuation")


class Takeover:
    """An LM for the planner that gives the ``replay`` answers first (the student's, as it gave
    them) and then the expert's own: the expert plans on from the state the replay leaves, its
    bookkeeping following every answer. ``calls`` holds each call's messages, answer and label."""

    def __init__(self, name: str, replay: list[str], expert: Expert):
        self.name, self.replay, self.expert = name, replay, expert
        self.calls: list[dict[str, Any]] = []

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        label = self.expert.complete(messages, **request)
        text = self.replay[len(self.calls)] if len(self.calls) < len(self.replay) else label.text
        action, _, _ = parse_reply(text)
        self.expert.follow(None if action is None else str(action))
        self.calls.append({"messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                           "text": text, "label": label.text})
        return Completion(text=text)


@dataclass
class DaggerCounts:
    episodes: int = 0
    student_successes: int = 0
    states: int = 0
    examples: int = 0
    agreed: int = 0
    left_out_done: int = 0
    left_out_ungrounded: int = 0
    continuations: int = 0
    continuations_diverged: int = 0
    replays_diverged: int = 0
    seconds: float = 0.0

    @property
    def states_per_hour(self) -> float:
        return self.states / self.seconds * 3600 if self.seconds else 0.0


def _key(task: Task, seed: int | None) -> str:
    return round_key(task.split, task.id, seed)


def run_round(tasks: list[Task], student, out: Path, *, cfg: PlannerConfig, seeds: list[int | None],
              round_: int = 1, episodes: int | None = None, expert: Expert | None = None,
              branches: str = "answer",
              progress: Callable[[int, int, dict], None] | None = None) -> DaggerCounts:
    """One DAgger round (module doc): the student on each task and seed, ``episodes`` of them at
    most (those already in ``out/dagger_episodes.jsonl`` are skipped: the round resumes; so is a
    dynamic seed that moves nothing in a task, the static episode again). ``branches`` (one of
    :data:`BRANCHES`, conversation layout only) says what a state the expert answers otherwise
    gives. A :class:`~lookplangraph.distill.planning.replay.RecordedStudent` replays its round's
    episodes instead, in its order (``seeds`` unused; ``tasks`` must hold every one's task, else
    :class:`DaggerError`); an episode whose replay diverged writes no example. Returns the counts of the whole directory's rounds so far, also
    written to ``out/dagger_counts.json``."""
    if branches not in BRANCHES:
        raise DaggerError(f"branches is one of {', '.join(BRANCHES)}, not {branches!r}")
    if branches != "answer" and cfg.prompt_layout != "conversation":
        raise DaggerError(f"branches={branches!r} needs the conversation layout, not {cfg.prompt_layout}")
    out.mkdir(parents=True, exist_ok=True)
    layout = cfg.prompt_layout
    answer = answer_format(cfg.reason_first, cfg.reason_max_length)
    teacher = (expert or Expert()).name
    recall = cfg.recall if cfg.recall != "auto" else "here"
    data_counts = json.loads((out / "counts.json").read_text()) if (out / "counts.json").exists() else \
        {"examples": 0, "prompt_layout": layout, "answer_format": answer, "recall": recall, "expert": teacher,
         "by_source": {}}
    have = (data_counts.get("prompt_layout"), data_counts.get("answer_format"), data_counts.get("recall", "here"))
    if have != (layout, answer, recall):
        raise DaggerError(f"{out} holds examples in the {have[0]} layout with {have[1]} answers and recall {have[2]}; "
                          f"this round writes {layout} with {answer} and recall {recall}")
    if data_counts.get("expert", teacher) != teacher:
        raise DaggerError(f"{out} holds examples labelled by {data_counts['expert']!r}; this round's teacher is "
                          f"{teacher!r}: label with the same teacher (--expert), or use another --out")
    sft, eps = out / "sft.jsonl", out / "dagger_episodes.jsonl"
    for path in (sft, eps):
        trim_torn_line(path)
    done = {json.loads(line)["key"] for line in eps.read_text().splitlines() if line.strip()} if eps.exists() else set()
    counts = _read_counts(out)
    replay = student if isinstance(student, RecordedStudent) else None
    if replay is not None:
        by_id = {(t.split, t.id): t for t in tasks}
        missing = [round_key(*ep) for ep in replay.episodes if ep[:2] not in by_id]
        if missing:
            raise DaggerError(f"{len(missing)} recorded episodes are of tasks not among those given (the first: "
                              f"{missing[0]}): replay with the round's own tasks")
        todo = [(by_id[split, task_id], seed) for split, task_id, seed in replay.episodes
                if round_key(split, task_id, seed) not in done]
    else:
        todo = [(t, s) for t in tasks for s in seeds if _key(t, s) not in done and (s is None or dynamic_moves(t, s))]
    if episodes is not None:
        todo = todo[: max(0, episodes)]
    labeller = Labeller(student, expert or Expert())
    student_name = labeller.name
    for n, (task, seed) in enumerate(todo, 1):
        start = time.perf_counter()
        env = make_env(task, seed)
        if replay is not None:
            replay.begin(_key(task, seed))
        labeller.begin_episode(task, env, "lookplangraph", cfg)
        result = run_episode(task, env, labeller, cfg)
        line = {"key": _key(task, seed), "split": task.split, "task_id": task.id, "seed": seed, "kind": task_kind(task),
                "round": round_, "student": student_name}
        if replay is not None and replay.diverged:  # not the recorded episode: nothing learnt from it
            counts.replays_diverged += 1
            counts.seconds += time.perf_counter() - start
            with open(eps, "a") as f:
                f.write(json.dumps({**line, "replay": "diverged", "examples": 0}) + "\n")
            _write_counts(out, counts)
            continue
        for lab in labeller.labels:
            lab["agreed"] = lab["student"] is not None and lab["student"] == lab["expert"]
            counts.states += 1
            counts.agreed += lab["agreed"]
        success = bool(result.success)
        meta = _provenance(labeller, task, seed, round_, success)
        if layout != "conversation":
            lines, kept = _decision_lines(labeller, meta, counts)
        else:
            take_over = None if branches == "answer" else \
                (lambda step: _take_over(task, seed, cfg, labeller, step))
            lines, kept = _conversation_lines(labeller, meta, counts, take_over)
        counts.episodes += 1
        counts.student_successes += success
        counts.examples += kept
        counts.seconds += time.perf_counter() - start
        with open(sft, "a") as f:  # the episode's examples, then its line: a rerun skips only what is whole
            f.writelines(lines)
        with open(eps, "a") as f:
            f.write(json.dumps({**line, "success": result.success, "termination": result.termination,
                                "actions": result.actions, "states": len(labeller.labels), "examples": kept,
                                "answers": [lab["text"] for lab in labeller.labels]}) + "\n")
        _write_counts(out, counts)
        data_counts["examples"] = data_counts.get("examples", 0) + kept
        data_counts.setdefault("by_source", {})["dagger"] = data_counts.get("by_source", {}).get("dagger", 0) + kept
        (out / "counts.json").write_text(json.dumps(data_counts, indent=1) + "\n")
        if progress:
            progress(n, len(todo), {"task_id": task.id, "success": result.success})
    return counts


def _usable(lab: dict[str, Any], counts: "DaggerCounts") -> bool:
    """Whether the expert's label of a state may be learnt (counted where not): not ``done()``
    while the goal does not hold, and naming only what the state's prompt (its user turns) shows."""
    if lab["gives_up"]:
        counts.left_out_done += 1
        return False
    if lab["expert"] is None or not _grounded(lab["expert"] + " " + lab["reason"], lab["messages"]):
        counts.left_out_ungrounded += 1
        return False
    return True


def _grounded(text: str, messages: list[dict[str, Any]]) -> bool:
    """Whether ``text`` names only what the prompt's user turns show."""
    return not ungrounded(text, "\n".join(m["content"] for m in messages if m["role"] == "user"))


def _take_over(task: Task, seed: int | None, cfg: PlannerConfig, labeller: Labeller, step: int):
    """The episode again with the student's first ``step - 1`` answers replayed and the expert's
    own from ``step`` on (:class:`Takeover`): ``(chat, decisions, trained, reached_goal)``, the
    chat's answers from ``step`` on trained where learnable (not a ``done()`` before the goal
    holds, naming only what their prompt shows); None where the replay did not reach the state
    the student was in."""
    env = make_env(task, seed)
    labeller.expert.begin_episode(task, env, "lookplangraph", cfg)
    lm = Takeover(labeller.name, [lab["text"] for lab in labeller.labels[:step - 1]], labeller.expert)
    result = run_episode(task, env, lm, cfg)
    if len(lm.calls) < step or lm.calls[step - 1]["messages"] != labeller.labels[step - 1]["messages"]:
        return None
    marks = []
    for n, call in enumerate(lm.calls, 1):
        action, reason, _ = parse_reply(call["text"])
        stops = action is not None and action.function_name == "done" and not result.success
        marks.append(n >= step and action is not None and not stops and
                     _grounded(str(action) + " " + (reason or ""), call["messages"]))
    chat = episode_conversation([(call["messages"], call["text"]) for call in lm.calls], marks)
    return chat, len(lm.calls), sum(marks), bool(result.success)


def _provenance(labeller: Labeller, task: Task, seed: int | None, round_: int, success: bool) -> dict[str, Any]:
    """The ``meta`` every example of the episode carries (module doc)."""
    return {"source": "dagger", "student": labeller.name, "round": round_, "split": task.split, "task_id": task.id,
            "seed": seed, "expert": labeller.expert.name, "student_success": success}


def _conversation_lines(labeller: Labeller, base: dict[str, Any], counts: "DaggerCounts",
                        take_over: Callable[[int], Any] | None = None) -> tuple[list[str], int]:
    """The conversation layout: the student's episode as one chat whose answers are trained where
    the expert agrees (the same action, its label usable), and a branch for every other state: the
    chat up to it (earlier answers untrained) with the expert's label as the one trained answer,
    or, with ``take_over`` (:func:`_take_over` of the step), the expert's continuation from it
    (a branch where the replay did not reach the state, counted)."""
    labels = labeller.labels
    usable = [(lab["agreed"], _usable(lab, counts)) for lab in labels]
    marks = [agreed and ok for agreed, ok in usable]
    chat = episode_conversation([(lab["messages"], lab["text"]) for lab in labels], marks)
    lines = [json.dumps({"messages": chat, "meta": {**base, "kind": "student", "decisions": len(labels),
                                                    "trained": sum(marks)}}) + "\n"] if any(marks) else []
    for step, (lab, (agreed, ok)) in enumerate(zip(labels, usable), 1):
        if agreed or not ok:
            continue
        went_on = take_over(step) if take_over is not None else None
        if take_over is not None:
            counts.continuations += went_on is not None
            counts.continuations_diverged += went_on is None
        if went_on is not None:
            continued, decisions, trained, reached = went_on
            lines.append(json.dumps({"messages": continued, "meta": {**base, "kind": "continuation", "step": step,
                                                                "student_action": lab["student"],
                                                                "decisions": decisions, "trained": trained,
                                                                "expert_success": reached}}) + "\n")
            continue
        before = [{**m, "train": False} if m["role"] == "assistant" else m for m in lab["messages"]]
        lines.append(json.dumps({"messages": [*before, {"role": "assistant", "content": lab["label"]}],
                                 "meta": {**base, "kind": "branch", "step": step, "student_action": lab["student"]}})
                     + "\n")
    return lines, len(lines)


def _decision_lines(labeller: Labeller, base: dict[str, Any], counts: "DaggerCounts") -> tuple[list[str], int]:
    """One example per labelled state: its prompt and the expert's label."""
    lines, kept = [], 0
    for step, lab in enumerate(labeller.labels, 1):
        if not _usable(lab, counts):
            continue
        meta = {**base, "step": step, "agreed": lab["student"] == lab["expert"], "student_action": lab["student"]}
        chat = [*lab["messages"], {"role": "assistant", "content": lab["label"]}]
        lines.append(json.dumps({"messages": chat, "meta": meta}) + "\n")
        kept += 1
    return lines, kept


#: the ``by_kind`` key of an episode whose line predates the kind's recording
UNRECORDED = "(unrecorded)"


def task_kind(task: Task) -> str:
    """The kind a task's provenance names (the generator's task kinds, an office's source kind),
    ``"(none)"`` where it names none."""
    return str(task.provenance.get("kind") or "(none)")


def success_by_kind(episodes: Path) -> dict[str, dict[str, dict[str, int]]]:
    """``{kind: {"static"|"dynamic": {"episodes": n, "successes": m}}}`` over a round directory's
    ``dagger_episodes.jsonl`` (kinds sorted; lines written before kinds were recorded count under
    :data:`UNRECORDED`)."""
    table: dict[str, dict[str, dict[str, int]]] = {}
    if episodes.exists():
        for line in episodes.read_text().splitlines():
            if not line.strip():
                continue
            ep = json.loads(line)
            if ep.get("replay") == "diverged":
                continue  # not an episode of the student's (run_round)
            mode = "static" if ep.get("seed") is None else "dynamic"
            cell = table.setdefault(ep.get("kind", UNRECORDED), {}).setdefault(mode, {"episodes": 0, "successes": 0})
            cell["episodes"] += 1
            cell["successes"] += bool(ep.get("success"))
    return dict(sorted(table.items()))


def _write_counts(out: Path, counts: DaggerCounts) -> None:
    (out / "dagger_counts.json").write_text(json.dumps(
        {**asdict(counts), "states_per_hour": counts.states_per_hour,
         "by_kind": success_by_kind(out / "dagger_episodes.jsonl")}, indent=1) + "\n")


def _read_counts(out: Path) -> DaggerCounts:
    path = out / "dagger_counts.json"
    if not path.exists():
        return DaggerCounts()
    data = json.loads(path.read_text())
    return DaggerCounts(**{k: data[k] for k in asdict(DaggerCounts()) if k in data})
