"""The training side of intent questions (:mod:`lookplangraph.cypher.intents`): the intents
training may ask (:data:`~lookplangraph.cypher.intents.TRAIN_INTENTS`, never a held-out one) on
the scenes training may use (:func:`~.data.allowed_scenes`: the planning train pool in the Cypher
benchmark's development part, and generated buildings not kept for development).

``cypher-data --intents-per-split N`` (:func:`intent_writer`) writes up to N a split, spread over
the intents (:func:`intent_sample`), as the agent's turns with the gold policy, source
``cypher-gold-intent``: the question as drawn, the intent's gold query, its rows, the answer read
off them. A question is skipped, and counted per reason, when the rows do not give the intent's
own answer, exceed the evaluation's result limits, or the agent does not take the gold turns.
``lookplangraph cypher-intents --split train`` writes the questions alone as JSON lines
(:mod:`.commands`). ``docs/guides/cypher.md`` (*Intent questions*).
"""

from __future__ import annotations

import random
from typing import Any, Callable

from grasif.task import Task

from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.benchmark import unique_scenes
from lookplangraph.cypher.gold import GoldError
from lookplangraph.cypher.intent_bench import IntentQuestion, intent_questions
from lookplangraph.cypher.intents import HELDOUT_INTENTS, TRAIN_INTENTS, check_intents, intent_gold
from lookplangraph.cypher.store import QueryError
from lookplangraph.distill.cypher.data import GoldPolicy, allowed_scenes, tasks_by_split, turns_by_scene, write_turns
from lookplangraph.distill.cypher.grounding_gold import EVAL_LIMITS

#: ``meta.source`` of the intent examples
SOURCE = "cypher-gold-intent"


def training_intent_questions(tasks: list[Task], *, seed: int = 0, per_scene: int = 1,
                              intents: tuple[str, ...] = TRAIN_INTENTS,
                              per_intent: int | None = None) -> list[IntentQuestion]:
    """Intent questions for training, split by split: ``intents`` (``ValueError`` for a held-out
    one) on the unique scenes of the allowed ``tasks`` (the others are passed over), up to
    ``per_scene`` per intent and scene and ``per_intent`` per intent and split."""
    held = [i for i in check_intents(intents) if i in HELDOUT_INTENTS]
    if held:
        raise ValueError(f"held-out intents never enter training data: {', '.join(held)}")
    out = []
    for split, ts in tasks_by_split(allowed_scenes(tasks)).items():
        scenes = [(t.id, t.graph) for t in unique_scenes(ts)]
        out += intent_questions(split, scenes, seed=seed, per_scene=per_scene, intents=intents, per_intent=per_intent)
    return out


def intent_sample(questions: list[IntentQuestion], n_per_split: int, seed: int = 0) -> list[IntentQuestion]:
    """Up to ``n_per_split`` of ``questions`` per split, spread over the intents: each intent's
    questions in an order shuffled with ``random.Random(f"{seed}:{split}:{intent}:intent-data")``,
    taken one per intent in turn until ``n_per_split`` or none are left; in the questions' own order."""
    if n_per_split < 0:
        raise ValueError("intent questions per split cannot be negative")
    keep: set[int] = set()
    splits = sorted({q.split for q in questions})
    for split in splits:
        pools: dict[str, list[int]] = {}
        for i, q in enumerate(questions):
            if q.split == split:
                pools.setdefault(q.template, []).append(i)
        for name, pool in pools.items():
            random.Random(f"{seed}:{split}:{name}:intent-data").shuffle(pool)
        taken, depth = 0, 0
        while taken < n_per_split and any(len(p) > depth for p in pools.values()):
            for name in sorted(pools):
                if taken < n_per_split and len(pools[name]) > depth:
                    keep.add(pools[name][depth])
                    taken += 1
            depth += 1
    return [q for i, q in enumerate(questions) if i in keep]


class IntentRejected(ValueError):
    """An intent question that gives no example; ``kind`` says why (counted by :func:`write_intents`)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def intent_turns(q: IntentQuestion, store, config: AgentConfig | None = None) -> list[dict[str, str]]:
    """The agent's transcript for ``q`` on ``store`` (its scene loaded) with the gold policy of
    the intent's gold query; :class:`IntentRejected` when the rows do not give ``q``'s answer
    (``rows_differ``), the query fails (``query_error``), the rows exceed the evaluation's limits
    (``over_limits``), the agent sends the answer back (``sent_back``) or takes other turns
    (``loop``)."""
    try:
        g = intent_gold(q, store)
        shown = store.query(g.query).to_text()
    except GoldError as exc:
        raise IntentRejected("rows_differ", str(exc)) from None
    except QueryError as exc:
        raise IntentRejected("query_error", f"{q.id}: {exc}") from None
    if len(g.rows) > EVAL_LIMITS.max_rows or len(shown) > EVAL_LIMITS.max_chars:
        raise IntentRejected("over_limits", f"{q.id}: {len(g.rows)} rows, {len(shown)} characters")
    result = CypherAgent(GoldPolicy(g), store, config or AgentConfig()).answer_question(q.question, q.answer_type)
    if result.sent_back is not None:
        raise IntentRejected("sent_back", f"{q.id}: the agent sent the answer back ({result.sent_back})")
    if result.error or result.answer != g.answer or [x.query for x in result.queries] != [g.query]:
        raise IntentRejected("loop", f"{q.id}: the agent's loop did not take the gold turns ({result.error})")
    return result.transcript


def write_intents(f, questions: list[IntentQuestion], scenes: dict[tuple[str, str], Task], store,
                  config: AgentConfig | None = None) -> dict[str, Any]:
    """Write the examples of ``questions`` (one per assistant turn, in the questions' order) to the
    open file ``f``; ``scenes``: the allowed tasks by ``(split, id)``, one of them each question's
    scene (``ValueError`` otherwise, and for a held-out intent). Returns the counts: questions
    used, examples, per split and intent, rejected per reason (:func:`intent_turns`)."""
    held = sorted({q.template for q in questions} & set(HELDOUT_INTENTS))
    if held:
        raise ValueError(f"held-out intents never enter training data: {', '.join(held)}")
    outside = sorted({f"{q.split}/{q.scene}" for q in questions if (q.split, q.scene) not in scenes})
    if outside:
        raise ValueError(f"intent questions on scenes that are not allowed training scenes: {', '.join(outside[:8])}")
    def turns_or_why(i: int) -> list | IntentRejected:
        try:
            return intent_turns(questions[i], store, config)
        except IntentRejected as exc:
            return exc

    turns = turns_by_scene(questions, store, {key: t.graph for key, t in scenes.items()}, turns_or_why)
    counts: dict[str, Any] = {"questions": 0, "examples": 0, "by_split": {}, "by_intent": {}, "rejected": {}}
    for i, q in enumerate(questions):
        if isinstance(turns[i], IntentRejected):
            counts["rejected"][turns[i].kind] = counts["rejected"].get(turns[i].kind, 0) + 1
            continue
        meta = {"source": SOURCE, "split": q.split, "scene": q.scene, "intent": q.template, "kind": q.kind,
                "item": q.id, "question": q.question}
        counts["examples"] += write_turns(f, turns[i], meta)
        counts["questions"] += 1
        counts["by_split"][q.split] = counts["by_split"].get(q.split, 0) + 1
        counts["by_intent"][q.template] = counts["by_intent"].get(q.template, 0) + 1
    return counts


def intent_writer(n_per_split: int, *, seed: int = 0, per_scene: int = 1) -> Callable[..., dict]:
    """The intent examples as :func:`~.data.build_data` takes them (``intents``): on its scenes,
    :func:`training_intent_questions`, then :func:`intent_sample` of ``n_per_split``, written by
    :func:`write_intents`; the counts gain ``per_split`` and ``drawn`` (questions before the sample)."""
    if n_per_split < 1:
        raise ValueError("intent questions per split must be at least 1")

    def write(f, scenes: dict[tuple[str, str], Task], store, config: AgentConfig | None = None) -> dict[str, Any]:
        drawn = training_intent_questions(list(scenes.values()), seed=seed, per_scene=per_scene)
        counts = write_intents(f, intent_sample(drawn, n_per_split, seed), scenes, store, config)
        return {"per_split": n_per_split, "drawn": len(drawn), **counts}
    return write
