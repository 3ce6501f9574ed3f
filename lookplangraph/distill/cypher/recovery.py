"""Recovery turns: the base model's real first-query mistakes, followed by the expert's correction.

A recovery example is the agent's own transcript where the **first** query is one the base model
really wrote and got wrong, the store's real answer to it (an error, an empty result, or rows that
do not answer), then the gold query (:mod:`lookplangraph.cypher.gold`, :mod:`.grounding_gold`),
its rows and the answer. Only the turns after the mistake are examples. Two steps, so that the slow
one runs once:

* :func:`collect` runs a real LM through the agent on training questions and grounding items
  (:func:`~.data.training_questions`, :func:`~.data.grounding_items`: allowed scenes only) and
  records its first reply (:class:`FirstQuery`, ``first_queries.jsonl``) and the outcome of its
  query (:func:`classify`, one of :data:`OUTCOMES`); the mistakes (:data:`MISTAKES`) also go to
  ``mistakes.jsonl``. Resumable.
* :func:`write_recovery` (``cypher-data --recovery-from FILE``) replays each mistake with a
  :class:`~.data.ScriptedPolicy` and writes the turns after it; a mistake whose scene is not
  allowed, whose outcome the store no longer reproduces, or that has no gold, is counted, not
  written.

What ``wrong_rows`` means for a question and for an instruction: ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ValidationError

from grasif.goals import GoalSpec
from grasif.task import Task
from sgs.graph import node_class

from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.answers import answers_equal
from lookplangraph.cypher.gold import GoldError, answer_from_rows, gold
from lookplangraph.cypher.grounding import GroundingItem, build_item, referenced
from lookplangraph.distill.cypher.grounding_gold import GroundingGoldError, grounding_gold
from lookplangraph.lm import LMError
from lookplangraph.cypher.hints import is_empty
from lookplangraph.cypher.memory_view import MemoryView
from lookplangraph.cypher.qa import Question
from lookplangraph.cypher.store import QueryError
from lookplangraph.distill.cypher.data import (ScriptedPolicy, answer_reply, check_allowed, grounding_items, query_reply,
                                           rows_thought, training_questions, write_turns)
from lookplangraph.lm.base import Completion

#: outcomes of a first reply; the first three are mistakes
MISTAKES = ("error", "empty", "wrong_rows")
OUTCOMES = MISTAKES + ("right_rows", "no_query", "unreadable", "lm_error")
#: the thought of the corrected query, per mistake
RETRY_THOUGHTS = {
    "error": "That query failed; query again with the labels, properties and relationships the schema has.",
    "empty": "That query found nothing; query again with the labels, names and relationships the store has.",
    "wrong_rows": "Those rows do not give what is asked; query exactly what is asked.",
}


class FirstQuery(BaseModel):
    """A model's first reply to one item and what it got. ``kind``: ``qa`` (``question`` is the
    benchmark-form question the gold query reads, ``text`` the reworded one the model was asked)
    or ``grounding`` (``text`` is the instruction; ``item`` the grounding item's id).
    ``reply``: the reply text as the model wrote it; ``query``: its query (empty when it wrote
    none); ``shown``: what the agent showed the model next."""

    kind: Literal["qa", "grounding"]
    id: str
    split: str
    scene: str
    text: str
    answer_type: str | None = None
    question: dict[str, Any] | None = None
    item: str | None = None
    reply: str
    query: str = ""
    outcome: str
    error_kind: str | None = None
    rows: int = 0
    shown: str = ""
    lm: str = ""
    seconds: float = 0.0


#: a recorded mistake (a :class:`FirstQuery` whose outcome is in :data:`MISTAKES`)
Mistake = FirstQuery


# -- outcomes -------------------------------------------------------------------------------------
def _cells(rows: list[list[Any]]) -> set[str]:
    out: set[str] = set()
    for row in rows:
        for v in row:
            for x in (v if isinstance(v, list) else [v]):
                if isinstance(x, str):
                    out.add(x)
    return out


def classify(store, query: str, *, question: Question | None = None, gold_answer: Any = None,
             needed: tuple[set[str], set[str]] | None = None) -> tuple[str, str | None, int]:
    """``(outcome, error kind, rows)`` of ``query`` on ``store`` (module doc): ``error``,
    ``empty`` (:func:`~.hints.is_empty`), ``wrong_rows`` or ``right_rows``. For a question, give
    ``question`` and ``gold_answer``; for a grounding item, ``needed`` = the names and classes the
    gold goal uses (:func:`~lookplangraph.cypher.grounding.referenced`)."""
    try:
        rows = store.query(query).rows
    except QueryError as exc:
        return "error", exc.kind, 0
    if is_empty(rows):
        return "empty", None, len(rows)
    if question is not None:
        t = question.answer_type
        ok = answers_equal(t, gold_answer, answer_from_rows(t, rows)) or \
            (len(rows) == 1 and len(rows[0]) == 1 and answers_equal(t, gold_answer, rows[0][0]))
    else:
        names, classes = needed or (set(), set())
        cells = _cells(rows)
        ok = names <= cells and classes <= {node_class(c) for c in cells}
    return ("right_rows" if ok else "wrong_rows"), None, len(rows)


# -- collecting -----------------------------------------------------------------------------------
class _Stop(Exception):
    """Raised into the agent at its second LM call: the first reply and its result are recorded."""


class FirstReply:
    """Wraps an LM for one agent run: the first call goes to ``lm`` and its completion is kept;
    the second call records what the agent showed (``shown``) and stops the run (:class:`_Stop`)."""

    def __init__(self, lm):
        self.lm, self.completion, self.shown = lm, None, ""
        self.name = getattr(lm, "name", "lm")
        self.constraints = getattr(lm, "constraints", frozenset())

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        if self.completion is not None:
            self.shown = messages[-1]["content"]
            raise _Stop
        self.completion = self.lm.complete(messages, **request)
        return self.completion


def _first_reply(lm, run: Callable[[CypherAgent], Any], store) -> tuple[Completion | None, str, str | None]:
    """The LM's first reply under the agent, what the agent showed next, and an LM error if any."""
    wrapped = FirstReply(lm)
    try:
        run(CypherAgent(wrapped, store, AgentConfig()))
    except _Stop:
        pass
    except LMError as exc:
        return wrapped.completion, wrapped.shown, str(exc)[:300]
    return wrapped.completion, wrapped.shown, None


def plan_items(tasks: list[Task], n_questions: int, n_grounding: int, seed: int = 0,
               templates: tuple[str, ...] | None = None) -> list[tuple[str, Any]]:
    """The items :func:`collect` asks about: ``("qa", (question, asked))`` and
    ``("grounding", (task, item))``, drawn from the training data's own items (module doc; the
    questions of ``templates`` only, when given) round robin over the splits, in an order
    shuffled with the seed."""
    def draw(pairs: list, split_of: Callable[[Any], str], n: int, salt: str) -> list:
        by_split: dict[str, list] = {}
        for p in pairs:
            by_split.setdefault(split_of(p), []).append(p)
        for split, ps in by_split.items():
            random.Random(f"{seed}:{split}:{salt}").shuffle(ps)
        out, k = [], 0
        while len(out) < n and any(k < len(ps) for ps in by_split.values()):
            out += [ps[k] for _, ps in sorted(by_split.items()) if k < len(ps)]
            k += 1
        return out[:n]

    qa = draw(training_questions(tasks, seed=seed, templates=templates), lambda p: p[0].split, n_questions,
              "mistakes") if n_questions else []
    gr = draw(grounding_items(tasks, seed=seed), lambda p: p[1].split, n_grounding, "mistakes") if n_grounding else []
    return [("qa", p) for p in qa] + [("grounding", p) for p in gr]


def collect(lm, lm_spec: str, tasks: list[Task], store, out: Path, *, n_questions: int = 40, n_grounding: int = 0,
            seed: int = 0, progress: Callable[[int, int, FirstQuery | None], None] | None = None,
            templates: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Record ``lm``'s first reply on ``n_questions`` training questions (of ``templates`` only,
    when given) and ``n_grounding`` grounding items (module doc) into ``out/first_queries.jsonl``
    and the mistakes into ``out/mistakes.jsonl``; returns the counts (also ``out/summary.json``).
    Tasks not allowed are refused with ``ValueError``, and so is a directory recorded with another
    LM spec, seed or templates (``out/meta.json``); ``lm`` may be a factory (called only when an
    item is left)."""
    check_allowed(tasks)
    if n_questions < 0 or n_grounding < 0:
        raise ValueError("the numbers of questions and grounding items cannot be negative")
    out.mkdir(parents=True, exist_ok=True)
    settings = {"lm": lm_spec, "seed": seed, "engine": getattr(store, "engine", "?")}
    if templates is not None:
        settings["templates"] = list(templates)
    meta = out / "meta.json"
    if meta.exists() and json.loads(meta.read_text()) != settings:
        raise ValueError(f"{out} holds first queries recorded with other settings ({meta.read_text().strip()}); "
                         "use another output directory")
    meta.write_text(json.dumps(settings) + "\n")
    path = out / "first_queries.jsonl"
    done = {r.id for r in read_records(path)} if path.exists() else set()
    plan = plan_items(tasks, n_questions, n_grounding, seed, templates)
    todo = [(kind, p) for kind, p in plan if _id(kind, p) not in done]
    graphs = {(t.split, t.id): t for t in tasks}
    if todo and callable(lm) and not hasattr(lm, "complete"):
        lm = lm()
    if progress:
        progress(len(plan) - len(todo), len(plan), None)
    with path.open("a") as f:
        for k, (kind, p) in enumerate(todo, start=len(plan) - len(todo) + 1):
            rec = _ask_qa(lm, lm_spec, p, graphs, store) if kind == "qa" else _ask_grounding(lm, lm_spec, p, store)
            f.write(rec.model_dump_json() + "\n")
            f.flush()
            if progress:
                progress(k, len(plan), rec)
    ids = {_id(kind, p) for kind, p in plan}
    records = [r for r in read_records(path) if r.id in ids]
    with (out / "mistakes.jsonl").open("w") as f:
        for r in records:
            if r.outcome in MISTAKES:
                f.write(r.model_dump_json() + "\n")
    summary = summarize(records)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _id(kind: str, pair) -> str:
    """The record id of a planned item: the question's id, or the grounding item's."""
    return pair[0].id if kind == "qa" else pair[1].id


def _record(kind, lm_spec, completion, shown, lm_error, seconds, **fields) -> FirstQuery:
    parsed = completion.parsed if completion is not None else None
    reply = completion.text if completion is not None else ""
    base = dict(kind=kind, reply=reply, shown=shown[:2000], lm=lm_spec, seconds=round(seconds, 2), **fields)
    if lm_error is not None or completion is None:
        return FirstQuery(outcome="lm_error", **(base | {"shown": lm_error or "the agent made no LM call"}))
    if parsed is None:
        return FirstQuery(outcome="unreadable", **base)
    if parsed.get("tool") != "run_cypher_query":
        return FirstQuery(outcome="no_query", **base)
    return FirstQuery(outcome="pending", query=parsed.get("query", ""), **base)


def _ask_qa(lm, lm_spec, pair, graphs, store) -> FirstQuery:
    q, asked = pair
    store.load(graphs[(q.split, q.scene)].graph)  # as the training data shows it (training._write_qa)
    t0 = time.perf_counter()
    completion, shown, err = _first_reply(lm, lambda a: a.answer_question(asked.question, asked.answer_type), store)
    rec = _record("qa", lm_spec, completion, shown, err, time.perf_counter() - t0, id=q.id, split=q.split,
                  scene=q.scene, text=asked.question, answer_type=q.answer_type, question=q.model_dump(mode="json"))
    if rec.outcome != "pending":
        return rec
    outcome, kind, n = classify(store, rec.query, question=q, gold_answer=gold(q, store).answer)
    return rec.model_copy(update={"outcome": outcome, "error_kind": kind, "rows": n})


def _ask_grounding(lm, lm_spec, pair, store) -> FirstQuery:
    task, item = pair
    view = MemoryView.at_start(store, task.graph)  # as the training data and cypher-eval show it
    t0 = time.perf_counter()
    completion, shown, err = _first_reply(lm, lambda a: a.ground(item.instruction), view)
    rec = _record("grounding", lm_spec, completion, shown, err, time.perf_counter() - t0, id=item.id,
                  split=item.split, scene=item.task, text=item.instruction, item=item.id)
    if rec.outcome != "pending":
        return rec
    outcome, kind, n = _grounding_outcome(view, rec.query, item)
    return rec.model_copy(update={"outcome": outcome, "error_kind": kind, "rows": n})


def _grounding_outcome(view, query: str, item: GroundingItem) -> tuple[str, str | None, int]:
    """:func:`classify` for a grounding item: the rows must name what its gold goal uses."""
    return classify(view, query, needed=referenced(GoalSpec.model_validate(item.goal)))


def summarize(records: list[FirstQuery]) -> dict[str, Any]:
    """Per kind (``qa``, ``grounding``) and ``all``: items, outcomes, error kinds of the errors,
    and the mistakes per question template (QA)."""
    out: dict[str, Any] = {}
    for label in ("qa", "grounding", "all"):
        mine = [r for r in records if label == "all" or r.kind == label]
        if not mine:
            continue
        s = {"items": len(mine), "mistakes": sum(r.outcome in MISTAKES for r in mine), "outcomes": {}, "error_kinds": {}}
        for r in mine:
            s["outcomes"][r.outcome] = s["outcomes"].get(r.outcome, 0) + 1
            if r.outcome == "error":
                s["error_kinds"][r.error_kind] = s["error_kinds"].get(r.error_kind, 0) + 1
        if label == "qa":
            s["mistakes_by_template"] = {}
            for r in mine:
                if r.outcome in MISTAKES:
                    t = (r.question or {}).get("template", "?")
                    s["mistakes_by_template"][t] = s["mistakes_by_template"].get(t, 0) + 1
        s["seconds_per_item"] = round(sum(r.seconds for r in mine) / len(mine), 2)
        out[label] = s
    return out


def read_records(path: Path) -> list[FirstQuery]:
    """The records of a ``first_queries.jsonl`` or ``mistakes.jsonl``; ``ValueError`` naming the
    line of one that is not a record."""
    out = []
    with Path(path).open() as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(FirstQuery.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                raise ValueError(f"{path}:{n}: not a first-query record ({'.'.join(map(str, first['loc']))}: "
                                 f"{first['msg']})") from None
    return out


# -- assembling recovery examples -----------------------------------------------------------------
class RecoveryRejected(ValueError):
    """A mistake that gives no recovery example; ``kind`` says why (counted by :func:`write_recovery`)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def recovery_turns(m: Mistake, task: Task, store, *, seed: int = 0,
                   config: AgentConfig | None = None) -> tuple[list[dict[str, str]], int]:
    """The agent's transcript for mistake ``m`` on ``task``'s scene: the model's reply as it was,
    the store's real answer to it, then the gold turns; and the index of the first message that is
    an example target (the corrected query). :class:`RecoveryRejected` (module doc) otherwise."""
    if m.outcome not in MISTAKES:
        raise RecoveryRejected("not_a_mistake", f"{m.id}: outcome {m.outcome!r} is not a mistake")
    if not m.query:
        raise RecoveryRejected("no_query", f"{m.id}: the record has no query")
    if m.kind == "qa":
        if not m.question:
            raise RecoveryRejected("bad_record", f"{m.id}: a question record without its question")
        q = Question.model_validate(m.question)
        store.load(task.graph)
        view = store
        try:
            g = gold(q, store)
        except GoldError as exc:
            raise RecoveryRejected("no_gold", str(exc)) from None
        outcome = classify(store, m.query, question=q, gold_answer=g.answer)
        replies = [m.reply, query_reply(g.query, RETRY_THOUGHTS[m.outcome]),
                   answer_reply(g.answer, rows_thought(g.rows))]
        expected_queries, expected_answer = [m.query, g.query], g.answer
        run = lambda agent: agent.answer_question(m.text, q.answer_type)  # noqa: E731
    else:
        item: GroundingItem | None = build_item(task, seed)
        if item is None or item.id != m.item or item.instruction != m.text:
            raise RecoveryRejected("bad_record", f"{m.id}: the task no longer gives this grounding item")
        view = MemoryView.at_start(store, task.graph)
        try:
            g = grounding_gold(item, task.graph, view)
        except GroundingGoldError as exc:
            raise RecoveryRejected("no_gold", str(exc)) from None
        outcome = _grounding_outcome(view, m.query, item)
        replies = [m.reply] + [query_reply(x.query, RETRY_THOUGHTS[m.outcome] if i == 0 else x.thought)
                               for i, x in enumerate(g.queries)] + [answer_reply(g.answer, g.thought)]
        expected_queries, expected_answer = [m.query] + [x.query for x in g.queries], g.answer
        run = lambda agent: agent.ground(m.text)  # noqa: E731
    if outcome[:2] != (m.outcome, m.error_kind):
        raise RecoveryRejected("not_reproduced", f"{m.id}: the query now gives {outcome[0]} ({outcome[1]}), "
                                                 f"the record says {m.outcome} ({m.error_kind})")
    result = run(CypherAgent(ScriptedPolicy(replies), view, config or AgentConfig()))
    if result.error or result.answer != expected_answer or [x.query for x in result.queries] != expected_queries:
        raise RecoveryRejected("loop", f"{m.id}: the agent's loop did not take the recorded and gold turns "
                                       f"({result.error or 'other turns'})")
    chat = result.transcript
    first = [k for k, msg in enumerate(chat) if msg["role"] == "assistant"][1]
    return chat, first


def recovery_writer(mistakes: list[Mistake]) -> Callable[..., dict]:
    """:func:`write_recovery` of ``mistakes``, as :func:`~.data.build_data` takes it."""
    return lambda f, scenes, store, config=None: write_recovery(f, mistakes, scenes, store, config=config)


def write_recovery(f, mistakes: list[Mistake], scenes: dict[tuple[str, str], Task], store,
                   seed: int = 0, config: AgentConfig | None = None) -> dict[str, Any]:
    """Write the recovery examples of ``mistakes`` to the open file ``f`` (one per assistant turn
    after the mistake); ``scenes`` are the allowed tasks by ``(split, id)``: a mistake on any other
    scene is refused with ``ValueError`` (held out, or a generated building not given). Returns
    the counts: mistakes used, examples, per mistake kind and item kind, rejected per reason."""
    outside = sorted({f"{m.split}/{m.scene}" for m in mistakes if (m.split, m.scene) not in scenes})
    if outside:
        raise ValueError(f"mistakes on scenes that are not allowed training scenes (held out, or generated buildings "
                         f"not given with --generated): {', '.join(outside[:8])}")
    counts: dict[str, Any] = {"mistakes": 0, "examples": 0, "by_mistake": {}, "by_kind": {}, "rejected": {}}
    for m in mistakes:
        try:
            chat, first = recovery_turns(m, scenes[(m.split, m.scene)], store, seed=seed, config=config)
        except RecoveryRejected as exc:
            counts["rejected"][exc.kind] = counts["rejected"].get(exc.kind, 0) + 1
            continue
        meta = {"source": "cypher-recovery", "kind": m.kind, "split": m.split, "scene": m.scene, "id": m.id,
                "mistake": m.outcome, "error_kind": m.error_kind, "text": m.text, "lm": m.lm}
        counts["examples"] += write_turns(f, chat, meta, first)
        counts["mistakes"] += 1
        counts["by_mistake"][m.outcome] = counts["by_mistake"].get(m.outcome, 0) + 1
        counts["by_kind"][m.kind] = counts["by_kind"].get(m.kind, 0) + 1
    return counts
