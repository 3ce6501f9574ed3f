"""Training data for the Cypher agent, in its own turns: question → query → rows → answer.

The gold policy (:class:`GoldPolicy`, a **data tool**, not a language model) answers the real
agent's prompts (:class:`~lookplangraph.cypher.agent.CypherAgent`, agentic variant) with the query
expert's gold query (:mod:`lookplangraph.cypher.gold`), then with the answer the rows give, so every
call is what a model would see and each assistant turn becomes one example.
:class:`ScriptedPolicy` (fixed replies in order) serves the grounding and recovery examples.

Four kinds, in one ``sft.jsonl`` (``distill data``'s format) and counted apart in ``counts.json``
(``meta.source``): ``cypher-gold`` (questions of :mod:`lookplangraph.cypher.qa`'s templates,
reworded with the training phrasings of :mod:`lookplangraph.cypher.phrasings`),
``cypher-gold-grounding`` (the scenes' task instructions, grounded by :mod:`.grounding_gold`; an
item it rejects is counted per reason), ``cypher-gold-intent`` (intent questions of the training
intents: :mod:`.intent_data`) and ``cypher-recovery`` (:mod:`.recovery`). Every prompt is the
agent's with ``AgentConfig(classes_at=...)`` of the caller's choice.

Scenes are the planning train pool's scenes in the Cypher benchmark's development part, and
generated buildings; never a held-out Cypher building or a planning evaluation task
(:func:`allowed_scenes`; ``tests/test_cypher_training.py``). See ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

from grasif.generate import is_generated
from grasif.heldout import in_train_pool, is_dev_generated
from grasif.task import Task

from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.benchmark import building, dev_buildings
from lookplangraph.cypher.gold import Gold, gold
from lookplangraph.cypher.grounding import GroundingItem, build_item
from lookplangraph.distill.cypher.grounding_gold import GroundingGoldError, grounding_gold
from lookplangraph.cypher.memory_view import MemoryView
from lookplangraph.cypher.phrasings import rephrase
from lookplangraph.cypher.qa import Question, build_questions
from lookplangraph.lm.base import Completion, Usage, checked_completion


#: one training question in this many is asked in its template's own words (:func:`training_questions`)
ORIGINAL_EVERY = 6


class ScriptedPolicy:
    """Answers the agent's calls with fixed replies in order, the last one again when the agent
    asks once more (an answer it questioned). A **data tool**, not a model: it sees nothing of the
    prompts. A reply is a dict (sent as JSON) or a text sent as it is (a model's real reply)."""

    name = "cypher scripted policy (data tool)"
    constraints = frozenset()

    def __init__(self, replies: list[dict[str, Any] | str]):
        if not replies:
            raise ValueError("a scripted policy needs at least one reply")
        self.replies, self.turn = list(replies), 0

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        reply = self.replies[min(self.turn, len(self.replies) - 1)]
        self.turn += 1
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return checked_completion(text, request.get("schema"), Usage(0, 0, None), 0.0)


def query_reply(query: str, thought: str = "query the store for what the question asks") -> dict[str, str]:
    return {"thought": thought, "tool": "run_cypher_query", "query": query}


#: at most this many rows are named in an answer's thought (:func:`rows_thought`)
THOUGHT_ROWS = 6


def _cell(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def rows_thought(rows: list[list[Any]]) -> str:
    """The thought of an answer turn: what the last query's rows show — how many and their values
    (the first :data:`THOUGHT_ROWS`, a row's cells joined by ``, ``) — so the answer is read off
    rows the agent has, never one sentence shared by every answer."""
    if not rows:
        return "the query returned no rows"
    shown = "; ".join(", ".join(_cell(v) for v in r) for r in rows[:THOUGHT_ROWS])
    more = f" and {len(rows) - THOUGHT_ROWS} more" if len(rows) > THOUGHT_ROWS else ""
    return f"one row: {shown}" if len(rows) == 1 else f"{len(rows)} rows: {shown}{more}"


def answer_reply(answer: Any, thought: str) -> dict[str, Any]:
    return {"thought": thought, "tool": "answer", "answer": answer}


class GoldPolicy(ScriptedPolicy):
    """Answers the agent with one gold query, then with the gold answer and a thought saying what
    the rows show (:func:`rows_thought`; module doc). Not a model."""

    name = "cypher gold policy (data tool)"

    def __init__(self, g: Gold):
        super().__init__([query_reply(g.query), answer_reply(g.answer, rows_thought(g.rows))])
        self.gold = g


def allowed_scenes(tasks: list[Task]) -> list[Task]:
    """The tasks whose scenes may become Cypher training data (module doc): the planning train pool
    in the shipped Cypher benchmark's development part, and generated tasks (not those of a
    building kind kept for development: :func:`grasif.heldout.is_dev_generated`)."""
    dev = dev_buildings()
    return [t for t in tasks if (is_generated(t) and not is_dev_generated(t))
            or (in_train_pool(t.split, t.id) and building(t) in dev)]


def check_allowed(tasks: list[Task]) -> None:
    """``ValueError`` naming the tasks that are not allowed (:func:`allowed_scenes`)."""
    allowed = {(t.split, t.id) for t in allowed_scenes(tasks)}
    refused = [f"{t.split}/{t.id}" for t in tasks if (t.split, t.id) not in allowed]
    if refused:
        raise ValueError(f"not allowed as Cypher training scenes (held out): {', '.join(refused[:8])}")


def tasks_by_split(tasks: list[Task]) -> dict[str, list[Task]]:
    """The tasks grouped by split, the splits in name order."""
    by_split: dict[str, list[Task]] = {}
    for t in tasks:
        by_split.setdefault(t.split, []).append(t)
    return dict(sorted(by_split.items()))


def training_questions(tasks: list[Task], n_per_split: int = 200, seed: int = 0,
                       templates: tuple[str, ...] | None = None) -> list[tuple[Question, Question]]:
    """``(question, asked)`` pairs of the training data, split by split in the questions' order:
    :func:`~lookplangraph.cypher.qa.build_questions` on the tasks' scenes (only ``templates``, when given), each asked
    in the template's own words one time in :data:`ORIGINAL_EVERY` and else reworded
    (:func:`~lookplangraph.cypher.phrasings.rephrase`), both drawn with ``random.Random(f"{seed}:{question id}")``.
    The template's own words are the benchmark's, so a trained agent has seen how the
    benchmark asks (never a held-out question: the scenes are training scenes)."""
    out = []
    for split, ts in tasks_by_split(tasks).items():
        scenes = {t.id: t.graph for t in ts}
        for q in build_questions(split, list(scenes.items()), n_per_split, seed=seed, templates=templates):
            rng = random.Random(f"{seed}:{q.id}")
            asked = rephrase(q, scenes[q.scene], rng)
            out.append((q, q if rng.randrange(ORIGINAL_EVERY) == 0 else asked))
    return out


def grounding_items(tasks: list[Task], n_per_split: int = 200, seed: int = 0) -> list[tuple[Task, GroundingItem]]:
    """Per split, up to ``n_per_split`` grounding items (:func:`~lookplangraph.cypher.grounding.build_item`: the task's
    instruction, goal and judged states) of the tasks, in an order shuffled with
    ``random.Random(f"{seed}:{split}:grounding-data")``; tasks without an item are passed over."""
    out = []
    for split, ts in tasks_by_split(tasks).items():
        order = sorted(ts, key=lambda t: t.id)
        random.Random(f"{seed}:{split}:grounding-data").shuffle(order)
        made = 0
        for t in order:
            if made == n_per_split:
                break
            item = build_item(t, seed)
            if item is not None:
                out.append((t, item))
                made += 1
    return out


def write_turns(f, chat: list[dict[str, str]], meta: dict[str, Any], first: int = 0) -> int:
    """One example per assistant turn of ``chat`` from message ``first`` on; returns how many."""
    n = 0
    for k, m in enumerate(chat):
        if m["role"] == "assistant" and k >= first:
            f.write(json.dumps({"messages": chat[: k + 1], "meta": {**meta, "turn": k}}) + "\n")
            n += 1
    return n


def build_data(tasks: list[Task], store, out: Path, *, n_per_split: int = 200, grounding_per_split: int = 200,
               recovery: Callable[..., dict] | None = None, seed: int = 0,
               templates: tuple[str, ...] | None = None, intents: Callable[..., dict] | None = None,
               classes_at: str = "schema") -> dict:
    """Write ``out/sft.jsonl`` and ``out/counts.json`` (module doc); returns the counts. Tasks not
    allowed (:func:`allowed_scenes`) are refused with ``ValueError`` before anything is written.

    Kinds of examples, counted apart in ``counts``: questions (``questions``, ``qa_examples``,
    ``by_template``, ``by_split``), grounding items (``grounding``: items, examples, per split, and
    the items the grounding expert rejected, per reason: :mod:`.grounding_gold`), intent questions
    written by ``intents(file, scenes, store, config) -> counts`` (``intents``:
    :func:`~.intent_data.intent_writer`) and recovery turns written by ``recovery(file, scenes,
    store, config) -> counts`` (``recovery``: :func:`~.recovery.recovery_writer` bound to the
    recorded mistakes). ``examples`` is every line of ``sft.jsonl``. ``templates``: the question
    templates asked (default all; counted in ``counts["templates"]`` when given). ``classes_at``:
    the agent's :attr:`~lookplangraph.cypher.agent.AgentConfig.classes_at` (counted when not the default)."""
    check_allowed(tasks)
    config = AgentConfig(classes_at=classes_at)
    if n_per_split < 0 or grounding_per_split < 0:
        raise ValueError("questions and grounding items per split cannot be negative")
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, Any] = {"kind": "cypher", "questions": 0, "examples": 0, "qa_examples": 0, "by_template": {}, "by_split": {},
                              "grounding": {"items": 0, "examples": 0, "by_split": {}, "rejected": {}}}
    if templates is not None:
        counts["templates"] = list(templates)
    if classes_at != "schema":
        counts["classes_at"] = classes_at
    scenes = {(t.split, t.id): t for t in tasks}
    tmp = out / "sft.jsonl.part"
    with open(tmp, "w") as f:
        if n_per_split:
            _write_qa(f, tasks, store, n_per_split, seed, counts, templates, config)
        if grounding_per_split:
            _write_grounding(f, tasks, store, grounding_per_split, seed, counts, config)
        if intents is not None:
            counts["intents"] = intents(f, scenes, store, config)
            counts["examples"] += counts["intents"]["examples"]
        if recovery is not None:
            counts["recovery"] = recovery(f, scenes, store, config)
            counts["examples"] += counts["recovery"]["examples"]
    tmp.replace(out / "sft.jsonl")
    (out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    return counts


def _write_qa(f, tasks: list[Task], store, n_per_split: int, seed: int, counts: dict[str, Any],
              templates: tuple[str, ...] | None = None, config: AgentConfig | None = None) -> None:
    pairs = training_questions(tasks, n_per_split, seed, templates)
    graphs = {(t.split, t.id): t.graph for t in tasks}
    turns = turns_by_scene([q for q, _ in pairs], store, graphs,
                           lambda i: _gold_turns(pairs[i][0], pairs[i][1], store, config))
    for i, (q, asked) in enumerate(pairs):  # written in the questions' own order
        meta = {"source": "cypher-gold", "split": q.split, "scene": q.scene, "template": q.template,
                "question": asked.question}
        n = write_turns(f, turns[i], meta)
        counts["examples"] += n
        counts["qa_examples"] += n
        counts["questions"] += 1
        counts["by_template"][q.template] = counts["by_template"].get(q.template, 0) + 1
        counts["by_split"][q.split] = counts["by_split"].get(q.split, 0) + 1


def turns_by_scene(questions: list, store, graphs: dict[tuple[str, str], Any],
                   turns: Callable[[int], Any]) -> dict[int, Any]:
    """``turns(i)`` for each index of ``questions``, worked out scene by scene with each scene
    (``graphs[(split, scene)]``) loaded into ``store`` once; by index, so the caller writes them in
    the questions' own order."""
    out, loaded = {}, None
    for i in sorted(range(len(questions)), key=lambda i: (questions[i].split, questions[i].scene)):
        scene = (questions[i].split, questions[i].scene)
        if scene != loaded:
            store.load(graphs[scene])
            loaded = scene
        out[i] = turns(i)
    return out


def _gold_turns(q: Question, asked: Question, store, config: AgentConfig | None = None) -> list[dict[str, str]]:
    """The agent's transcript for ``asked`` with the gold policy of ``q`` on ``store`` (the scene loaded)."""
    answer = gold(q, store)
    result = CypherAgent(GoldPolicy(answer), store, config or AgentConfig()).answer_question(asked.question,
                                                                                             asked.answer_type)
    if result.error or result.answer != answer.answer:
        raise ValueError(f"{q.id}: the agent's loop did not take the gold turns ({result.error})")
    return result.transcript


def grounding_turns(task: Task, item: GroundingItem, store, config: AgentConfig | None = None) -> list[dict[str, str]]:
    """The agent's transcript grounding ``item`` on ``store`` showing ``task``'s scene as the
    planner's memory graph at its start (as ``cypher-eval`` shows it), with the grounding expert's
    queries and goal (:func:`~.grounding_gold.grounding_gold`; its :class:`GroundingGoldError`
    passes through)."""
    view = MemoryView.at_start(store, task.graph)
    g = grounding_gold(item, task.graph, view)
    policy = ScriptedPolicy([query_reply(q.query, q.thought) for q in g.queries] + [answer_reply(g.answer, g.thought)])
    result = CypherAgent(policy, view, config or AgentConfig()).ground(item.instruction)
    if result.error or result.answer != g.answer or [q.query for q in result.queries] != [q.query for q in g.queries]:
        raise ValueError(f"{item.id}: the agent's loop did not take the grounding expert's turns ({result.error})")
    return result.transcript


def _write_grounding(f, tasks: list[Task], store, n_per_split: int, seed: int, counts: dict[str, Any],
                     config: AgentConfig | None = None) -> None:
    c = counts["grounding"]
    for task, item in grounding_items(tasks, n_per_split, seed):
        try:
            chat = grounding_turns(task, item, store, config)
        except GroundingGoldError as exc:
            c["rejected"][exc.kind] = c["rejected"].get(exc.kind, 0) + 1
            continue
        meta = {"source": "cypher-gold-grounding", "split": item.split, "scene": item.task, "item": item.id,
                "instruction": item.instruction}
        n = write_turns(f, chat, meta)
        c["examples"] += n
        counts["examples"] += n
        c["items"] += 1
        c["by_split"][item.split] = c["by_split"].get(item.split, 0) + 1
