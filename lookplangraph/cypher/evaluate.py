"""Batch evaluation of the agent and its baselines on the two Cypher benchmarks (resumable).

:func:`evaluate` runs one variant on one benchmark over the chosen splits: each item's scene is
loaded into the store as the planner's memory graph at the task's start
(:class:`~.memory_view.MemoryView`), the agent answers, the answer is judged (typed equality for
questions, semantic equivalence for goals), and one JSON line per item is appended to
``OUT/results.jsonl``. ``OUT/summary.json`` and the printed table give, per split and overall,
accuracy, tokens (cached among them), queries, failed queries and latencies.

Invariants: a rerun skips the items already in ``results.jsonl``; ``OUT/meta.json`` holds the
settings and a rerun with other settings into the same directory is refused, except ``limit``,
which may grow to add items. Sampling (:func:`select`): per split the first ``limit`` items of
an order shuffled with the seed, the same for every variant; the items run (and their rows are
written) grouped by scene, in the order of each scene's first item, so that consecutive prompts
share their scene's prefix in the backend's cache. ``phrasing = "reworded"`` (QA only)
asks each question in a phrasing training never uses, seeded by the item's id (rows get ``-rw``
and the question asked); the answers and the sample are the same. Docs: ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from statistics import mean
from typing import Any, Callable

from lookplangraph.lm import LMBackend
from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.answers import answers_equal
from lookplangraph.cypher.benchmark import load_benchmark
from lookplangraph.cypher.grounding import judge
from lookplangraph.cypher.memory_view import MemoryView
from lookplangraph.cypher.phrasings import rephrase
from lookplangraph.cypher.store import GraphStore
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.evaluation.runner import read_results

TASKS = ("qa", "grounding")
PHRASINGS = ("original", "reworded")


def reworded(item, scene):
    """``item`` as the reworded set asks it (module doc)."""
    return rephrase(item, scene.graph, random.Random(f"reworded:{item.id}"), reworded=True)


def select(items: list, splits: list[str] | None, limit: int | None, seed: int, part: str | None = None) -> list:
    """Items of ``splits`` (all when None) and of ``part`` (``dev`` or ``heldout``; both when
    None): per split, the items shuffled with ``random.Random(f"{seed}:{split}")`` and the first
    ``limit`` taken. A larger limit extends a smaller one (the same seed gives the same order), so
    an evaluation can grow by rounds."""
    out = []
    for split in dict.fromkeys(i.split for i in items):
        if splits and split not in splits:
            continue
        mine = [i for i in items if i.split == split and (part is None or getattr(i, "part", "dev") == part)]
        random.Random(f"{seed}:{split}").shuffle(mine)
        out += mine[:limit] if limit is not None else mine
    return out


def by_scene(items: list) -> list:
    """``items`` with the items of each scene together, scenes in the order of their first item,
    items of a scene in their own order (see the module doc)."""
    groups: dict[tuple, list] = {}
    for i in items:
        groups.setdefault((i.split, getattr(i, "scene", None) or i.task), []).append(i)
    return [i for group in groups.values() for i in group]


def run_item(task: str, item, scene, lm: LMBackend, store: GraphStore, config: AgentConfig) -> dict[str, Any]:
    """Answer and judge one item; the row written to ``results.jsonl``."""
    memory = MemoryGraph(scene.graph)
    view = MemoryView(store, memory)
    t0 = time.perf_counter()
    view.refresh()
    load_s = time.perf_counter() - t0
    agent = CypherAgent(lm, view, config, graph=memory.graph)
    t0 = time.perf_counter()
    if task == "qa":
        res = agent.answer_question(item.question, item.answer_type)
        correct = res.error is None and answers_equal(item.answer_type, item.answer, res.answer)
        expected, reason = item.answer, ""
    else:
        res = agent.ground(item.instruction)
        verdict = judge(item, scene.graph, res.answer) if res.error is None else None
        correct = bool(verdict and verdict.correct)
        expected, reason = item.goal, (verdict.reason if verdict else res.error)
    return {
        "id": item.id, "split": item.split, "part": getattr(item, "part", "dev"), "kind": getattr(item, "kind", "grounding"),
        "template": getattr(item, "template", ""), "question": getattr(item, "question", None),
        "variant": config.variant, "correct": correct,
        "questioned": res.questioned, "sent_back": res.sent_back,
        "answer": res.answer, "expected": expected, "reason": reason, "error": res.error, "calls": res.calls,
        "queries": [q.__dict__ for q in res.queries], "input_tokens": res.input_tokens,
        "output_tokens": res.output_tokens, "cached_tokens": res.cached_tokens, "lm_seconds": round(res.lm_seconds, 3),
        "load_seconds": round(load_s, 4), "seconds": round(time.perf_counter() - t0, 3),
        "transcript": res.transcript,
    }


def _groups(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows per split, per part (``part:dev``, ``part:heldout``) and per question kind
    (``kind:count`` ...) where the rows have them, and ``all``."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["split"], []).append(r)
    for key in ("part", "kind"):
        for r in rows:
            if r.get(key):
                groups.setdefault(f"{key}:{r[key]}", []).append(r)
    groups["all"] = rows
    return groups


def summarize(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per split, part, question kind and ``all``: see the module doc."""
    out = {}
    for label, mine in _groups(rows).items():
        if not mine:
            continue
        queries = [q for r in mine for q in r["queries"] if q["query"]]
        out[label] = {
            "items": len(mine),
            "accuracy": mean(r["correct"] for r in mine),
            "input_tokens": mean(r["input_tokens"] for r in mine),
            "cached_tokens": mean(r["cached_tokens"] or 0 for r in mine),
            "output_tokens": mean(r["output_tokens"] for r in mine),
            "queries_per_item": mean(len(r["queries"]) for r in mine),
            "failed_query_share": (sum(q["error_kind"] is not None for q in queries) / len(queries)) if queries else 0.0,
            "query_ms": 1000 * mean(q["seconds"] for q in queries) if queries else 0.0,
            "lm_seconds": mean(r["lm_seconds"] for r in mine),
            "errors": sum(r["error"] is not None for r in mine),
        }
    return out


def summary_table(summary: dict[str, dict[str, float]], title: str = "") -> str:
    w = max([13, *(len(label) + 1 for label in summary)])
    head = (f"{'split':<{w}}{'items':>6}{'acc':>7}{'in tok':>9}{'cached':>8}{'out tok':>9}{'queries':>9}{'failed':>8}"
            f"{'query ms':>10}{'LM s':>8}")
    lines = ([title] if title else []) + [head, "-" * len(head)]
    for label, s in summary.items():
        lines.append(f"{label:<{w}}{s['items']:>6}{s['accuracy']:>7.2f}{s['input_tokens']:>9.0f}"
                     f"{s.get('cached_tokens', 0):>8.0f}{s['output_tokens']:>9.0f}"
                     f"{s['queries_per_item']:>9.2f}{s['failed_query_share']:>8.2f}{s['query_ms']:>10.1f}{s['lm_seconds']:>8.1f}")
    return "\n".join(lines)


def evaluate(task: str, lm_factory: Callable[[], LMBackend], store: GraphStore, config: AgentConfig, out: Path, *,
             splits: list[str] | None = None, limit: int | None = None, seed: int = 0, part: str | None = None,
             phrasing: str = "original", data_dir: Path | None = None,
             bench_dir: Path | None = None, meta: dict | None = None,
             progress: Callable[[int, int, dict | None], None] | None = None) -> dict:
    """Run (or resume) one evaluation into ``out``; return the summary (also in ``summary.json``).
    The LM is built only when an item is left to run."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; one of {', '.join(TASKS)}")
    if phrasing not in PHRASINGS:
        raise ValueError(f"unknown phrasing {phrasing!r}; one of {', '.join(PHRASINGS)}")
    if phrasing != "original" and task != "qa":
        raise ValueError("the reworded set is of questions (qa): grounding instructions have no templates to reword")
    items, scenes = load_benchmark(task, bench_dir, data_dir)
    chosen = select(items, splits, limit, seed, part)
    if phrasing == "reworded":
        chosen = [reworded(i, scenes[(i.split, i.scene)]) for i in chosen]  # questions always name their scene
    out.mkdir(parents=True, exist_ok=True)
    settings = {"task": task, "variant": config.variant, "max_queries": config.max_queries, "splits": splits,
                "seed": seed, "engine": store.engine} | ({"part": part} if part else {}) | \
        ({"phrasing": phrasing} if phrasing != "original" else {}) | (meta or {})
    meta_path = out / "meta.json"
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        if old != json.loads(json.dumps(settings)):
            diff = {k: (old.get(k), v) for k, v in json.loads(json.dumps(settings)).items() if old.get(k) != v}
            raise ValueError(f"{out} holds an evaluation with other settings {diff}; use another --out")
    else:
        meta_path.write_text(json.dumps(settings, indent=1) + "\n")
    results = out / "results.jsonl"
    done = {r["id"] for r in read_results(results)}
    todo = by_scene([i for i in chosen if i.id not in done])
    lm = lm_factory() if todo else None
    if progress:
        progress(len(chosen) - len(todo), len(chosen), None)
    with results.open("a") as f:
        for k, item in enumerate(todo, start=len(chosen) - len(todo) + 1):
            scene = scenes[(item.split, getattr(item, "scene", None) or item.task)]
            row = run_item(task, item, scene, lm, store, config)
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            if progress:
                progress(k, len(chosen), row)
    rows = [r for r in read_results(results) if r["id"] in {i.id for i in chosen}]
    summary = summarize(rows)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
