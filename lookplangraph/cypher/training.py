"""Training data for the Cypher agent, in its own turn format: question → query → rows → answer.

The gold policy (:class:`GoldPolicy`, a **data tool**, not a language model) answers the real
agent's prompts (:class:`~lookplangraph.cypher.agent.CypherAgent`, agentic variant) with the
query expert's gold query (:mod:`.gold`), then with the answer the rows give. Every call the agent
makes is therefore exactly what a model would see, and each assistant turn becomes one example:
``(system, question) → query`` and ``(system, question, query, rows) → answer``.

Questions come from :mod:`.qa`'s templates and are reworded (:mod:`.phrasings`: the training
paraphrases and the nodes' surface forms; the reworded evaluation set is never used). **Scenes**:
the planning train pool's scenes that the Cypher benchmark keeps in its development part, and
generated buildings (:mod:`grasif.generate`). Never a held-out Cypher building, never an
evaluation task of the planning protocol (:func:`allowed_scenes`; ``tests/test_cypher_training.py``
checks it).

``sft.jsonl`` has the format of ``lookplangraph distill data`` (one example per line,
``{"messages": [...], "meta": {...}}``), so ``distill train`` reads it.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from grasif.generate import is_generated
from grasif.heldout import in_train_pool
from grasif.task import Task

from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.benchmark import building, path_of
from lookplangraph.cypher.gold import Gold, gold
from lookplangraph.cypher.phrasings import rephrase
from lookplangraph.cypher.qa import build_questions
from lookplangraph.lm.base import Completion, Usage, checked_completion


class GoldPolicy:
    """Answers the agent with one gold query, then with the gold answer (module doc). Not a model."""

    name = "cypher gold policy (data tool)"
    constraints = frozenset()

    def __init__(self, g: Gold):
        self.gold, self.turn = g, 0

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        if self.turn == 0:
            reply = {"thought": "query the store for what the question asks", "tool": "run_cypher_query",
                     "query": self.gold.query}
        else:
            reply = {"thought": "the rows give the answer", "tool": "answer", "answer": self.gold.answer}
        self.turn += 1
        return checked_completion(json.dumps(reply), request.get("schema"), Usage(0, 0, None), 0.0)


def dev_buildings() -> set[str]:
    """The buildings of the shipped Cypher benchmark's development part (its ``parts``)."""
    return set(json.loads(path_of("qa").read_text())["parts"]["dev"])


def allowed_scenes(tasks: list[Task]) -> list[Task]:
    """The tasks whose scenes may become Cypher training data (module doc): the planning train pool
    in the shipped Cypher benchmark's development part, and generated tasks."""
    dev = dev_buildings()
    return [t for t in tasks if is_generated(t)
            or (in_train_pool(t.split, t.id) and building(t) in dev)]


def build_data(tasks: list[Task], store, out: Path, *, n_per_split: int = 200, seed: int = 0) -> dict:
    """Write ``out/sft.jsonl`` and ``out/counts.json`` (module doc); returns the counts. Tasks not
    allowed (:func:`allowed_scenes`) are refused with ``ValueError`` before anything is written."""
    allowed = {(t.split, t.id) for t in allowed_scenes(tasks)}
    refused = [f"{t.split}/{t.id}" for t in tasks if (t.split, t.id) not in allowed]
    if refused:
        raise ValueError(f"not allowed as Cypher training scenes (held out): {', '.join(refused[:8])}")
    by_split: dict[str, list[Task]] = {}
    for t in tasks:
        by_split.setdefault(t.split, []).append(t)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, Any] = {"questions": 0, "examples": 0, "by_template": {}, "by_split": {}}
    tmp = out / "sft.jsonl.part"
    with open(tmp, "w") as f:
        for split, ts in sorted(by_split.items()):
            scenes = {t.id: t.graph for t in ts}
            questions = build_questions(split, list(scenes.items()), n_per_split, seed=seed)
            turns, loaded = {}, None
            for i in sorted(range(len(questions)), key=lambda i: questions[i].scene):  # one store load per scene
                q = questions[i]
                if q.scene != loaded:
                    store.load(scenes[q.scene])
                    loaded = q.scene
                turns[i] = _gold_turns(q, scenes[q.scene], store, seed)
            for i, q in enumerate(questions):  # written in the questions' own order
                asked, chat = turns[i]
                meta = {"source": "cypher-gold", "split": split, "scene": q.scene, "template": q.template,
                        "question": asked}
                for k, m in enumerate(chat):
                    if m["role"] == "assistant":
                        f.write(json.dumps({"messages": chat[: k + 1], "meta": {**meta, "turn": k}}) + "\n")
                        counts["examples"] += 1
                counts["questions"] += 1
                counts["by_template"][q.template] = counts["by_template"].get(q.template, 0) + 1
                counts["by_split"][split] = counts["by_split"].get(split, 0) + 1
    tmp.replace(out / "sft.jsonl")
    (out / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    return counts


def _gold_turns(q, g, store, seed: int) -> tuple[str, list[dict[str, str]]]:
    """``q`` reworded, and the agent's transcript with the gold policy on ``store`` (``g`` loaded)."""
    answer = gold(q, store)
    asked = rephrase(q, g, random.Random(f"{seed}:{q.id}"))
    result = CypherAgent(GoldPolicy(answer), store, AgentConfig()).answer_question(asked.question, asked.answer_type)
    if result.error or result.answer != answer.answer:
        raise ValueError(f"{q.id}: the agent's loop did not take the gold turns ({result.error})")
    return asked.question, result.transcript
