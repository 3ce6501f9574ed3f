"""The graph augmentation (vlm/) scored on GraSIF (paper Table III): the GAM against true subgraphs.

GraSIF has graphs, not images, so on it only the **parser stage** is scored: each sampled
observation's true subgraph is written as text by the deterministic
:func:`vlm.descriptions.write_description` (with distractor mentions), the GAM in ``parser`` mode
turns the text back into an observation, and :mod:`vlm.metrics` scores it; ``ground_truth``
mode checks the pipeline itself (every score 1). :func:`sample_cases` draws ``n`` observations
(assets with objects on or inside them, identical ones kept once) with a seeded RNG, evenly over
the splits; the parser gets the objects of the node's room as possible names.
:func:`bank_cases` takes the observations of an OmniGibson image bank instead, each with its
picture (``vlm`` mode: describer, then parser), recorded description and true subgraph.

Results: ``OUT/results.jsonl`` (one line per observation, appended as they finish, so a rerun
resumes), ``OUT/summary.json`` and ``OUT/summary.csv`` (per split and ``all``: means over
observations and micro totals). Docs: ``docs/guides/augmentation.md`` (parser stage) and
``docs/guides/environments.md`` (image banks).
"""

from __future__ import annotations

import csv
import json
import random
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Callable, Iterable, Sequence

from grasif import dataset
from grasif.task import load_task
from sgs.graph import Layer, node_class
from sim_adapters.base import Observation, SeenObject, observe
from sim_adapters.omnigibson import BankError, ImageBank
from vlm.binding import DEFAULT_STATES
from vlm.descriptions import write_description
from vlm.gam import GraphAugmentation
from vlm.metrics import Score, score, summarize


@dataclass(frozen=True)
class Case:
    """One observation to augment: the true subgraph and what the GAM is given (a description,
    an image, or both)."""

    split: str
    task_id: str
    node: str
    truth: Observation
    names: tuple[str, ...]
    description: str | None
    image: str | None = None

    @property
    def key(self) -> str:
        return f"{self.split}/{self.task_id}/{self.node}"


def _signature(obs: Observation) -> tuple:
    return (obs.node, tuple((o.name, o.relation, o.parent, o.states) for o in obs.objects))


def candidates(data_dir: Path, split: str) -> list[tuple[str, object, Observation]]:
    """(task id, graph, true observation) of every asset with objects, identical ones once."""
    out, seen = [], set()
    for task in dataset.load_split(data_dir, split):
        for asset in task.graph.names(Layer.ASSET):
            obs = observe(task.graph, asset)
            if not obs.objects or _signature(obs) in seen:
                continue
            seen.add(_signature(obs))
            out.append((task.id, task.graph, obs))
    return out


def sample_cases(data_dir: Path, splits: Sequence[str], n: int, seed: int = 0,
                 states: Sequence[str] = DEFAULT_STATES) -> list[Case]:
    """``n`` observations (module doc), the same for the same build, ``n`` and ``seed``."""
    cases: list[Case] = []
    for k, split in enumerate(splits):
        want = n // len(splits) + (1 if k < n % len(splits) else 0)
        pool = candidates(data_dir, split)
        rng = random.Random(f"{seed}|{split}")
        for task_id, graph, truth in rng.sample(pool, min(want, len(pool))):
            room = graph.place_of(truth.node)
            names = tuple(o for o in graph.names(Layer.OBJECT) if graph.place_of(o) == room)
            present = {node_class(o.name) for o in truth.objects}
            distractors = sorted({node_class(o) for o in names} - present)
            node_states = [s for s in graph.nodes[truth.node].states or () if s in states]
            text = write_description(truth, f"{seed}|{split}|{task_id}", distractors=distractors,
                                     node_states=node_states, states=states)
            cases.append(Case(split, task_id, truth.node, truth, names, text))
    return cases


def bank_cases(bank, data_dir: Path) -> list[Case]:
    """One case per entry of ``bank`` (an :class:`sim_adapters.omnigibson.ImageBank` or its
    path), in manifest order: the entry's picture, description and recorded truth; the names of
    the node's room in the task's graph from the GraSIF build at ``data_dir``. Raises
    :class:`sim_adapters.omnigibson.BankError` for a task or node the build does not have."""
    bank = bank if isinstance(bank, ImageBank) else ImageBank.load(bank)
    where = {t: s for s, t in dataset.task_ids(Path(data_dir))}
    cases, tasks = [], {}
    for entry in bank.entries():
        if entry.task not in where:
            raise BankError(f"task {entry.task} of the image bank is not in the GraSIF build at {data_dir}")
        if entry.task not in tasks:
            tasks[entry.task] = load_task(Path(data_dir) / where[entry.task] / f"{entry.task}.json")
        task = tasks[entry.task]
        graph = task.graph
        if entry.node not in graph.nodes:
            raise BankError(f"the image bank pictures {entry.node}, which is not a node of task {task.id}")
        room = graph.place_of(entry.node)
        names = tuple(o for o in graph.names(Layer.OBJECT) if graph.place_of(o) == room)
        cases.append(Case(task.split or where[entry.task], task.id, entry.node, entry.truth, names,
                          entry.description, str(entry.image)))
    return cases


def _objects(obs: Observation) -> list[list]:
    return [[o.name, o.relation, o.parent, list(o.states)] for o in obs.objects]


def _observation(node: str, rows: Iterable[Sequence]) -> Observation:
    return Observation(node, tuple(SeenObject(n, r, p, tuple(s)) for n, r, p, s in rows))


def evaluate(cases: Sequence[Case], gam: GraphAugmentation, out: Path,
             progress: Callable[[int, int, dict | None], None] | None = None, meta: dict | None = None) -> dict:
    """Augment and score every case (resuming from ``out/results.jsonl``); write and return the
    summary (module doc). ``meta`` (mode, LM, n, seed...) is kept in ``out/config.json``; resuming
    with other settings raises ``ValueError`` rather than mixing two evaluations."""
    out.mkdir(parents=True, exist_ok=True)
    if meta is not None:
        config = out / "config.json"
        if config.exists() and json.loads(config.read_text()) != json.loads(json.dumps(meta)):
            raise ValueError(f"{out} holds an evaluation with other settings ({json.dumps(json.loads(config.read_text()))}); "
                             f"use another --out")
        config.write_text(json.dumps(meta, indent=1))
    path = out / "results.jsonl"
    done: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                done[row["key"]] = row
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
    if progress:
        progress(sum(c.key in done for c in cases), len(cases), None)
    with open(path, "a", encoding="utf-8") as f:
        for case in cases:
            if case.key in done:
                continue
            aug = gam.augment(case.node, image=case.image, description=case.description, names=case.names,
                              truth=case.truth)
            s = score(aug.observation, case.truth, gam.states)
            usage = aug.usage
            row = {"key": case.key, "split": case.split, "task_id": case.task_id, "node": case.node,
                   "description": aug.description if aug.description is not None else case.description,
                   **({"image": case.image} if case.image is not None else {}), "parser_text": aug.parser_text,
                   "predicted": _objects(aug.observation), "truth": _objects(case.truth), "notes": aug.notes,
                   **s.to_dict(), "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                   "seconds": aug.seconds}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            done[case.key] = row
            if progress:
                progress(sum(c.key in done for c in cases), len(cases), row)
    rows = [done[c.key] for c in cases]
    summary = summary_of(rows)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    write_csv(summary, out / "summary.csv")
    return summary


def summary_of(rows: Sequence[dict]) -> dict[str, dict]:
    """Per split and ``all``: :func:`vlm.metrics.summarize` plus the parser's failures (replies
    that did not fit the schema), notes, tokens and seconds per observation."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["split"], []).append(row)
    if len(groups) != 1:
        groups["all"] = list(rows)
    fields = list(Score.__dataclass_fields__)
    out = {}
    for label, group in groups.items():
        summary = summarize([Score(*(r[f] for f in fields)) for r in group])
        summary["schema_failures"] = sum(any(n.startswith("the parser's reply does not fit") for n in r["notes"])
                                         for r in group)
        summary["dropped_entries"] = sum(len(r["notes"]) for r in group) - summary["schema_failures"]
        summary["tokens_per_observation"] = mean(r["prompt_tokens"] + r["completion_tokens"] for r in group)
        summary["seconds_per_observation"] = mean(r["seconds"] for r in group)
        out[label] = summary
    return out


_COLUMNS = ["n", "node_f1", "edge_f1", "success", "state_accuracy", "node_f1_micro", "edge_f1_micro",
            "state_accuracy_micro", "states_judged", "schema_failures", "dropped_entries",
            "tokens_per_observation", "seconds_per_observation"]


def write_csv(summary: dict[str, dict], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["split", *_COLUMNS])
        for label, row in summary.items():
            w.writerow([label, *(row.get(c) for c in _COLUMNS)])


def table(summary: dict[str, dict]) -> str:
    """The summary as a text table: means, then micro totals."""
    def f(v) -> str:
        return "-" if v is None else f"{v:.3f}"

    lines = [f"{'split':<12} {'n':>4}  {'F1_N':>6} {'F1_E':>6} {'success':>7} {'states':>6}  |"
             f" {'F1_N µ':>6} {'F1_E µ':>6} {'states µ':>8}  | {'schema fail':>11} {'s/obs':>6}"]
    for label, r in summary.items():
        lines.append(f"{label:<12} {r['n']:>4}  {f(r['node_f1']):>6} {f(r['edge_f1']):>6} {f(r['success']):>7} "
                     f"{f(r['state_accuracy']):>6}  | {f(r['node_f1_micro']):>6} {f(r['edge_f1_micro']):>6} "
                     f"{f(r['state_accuracy_micro']):>8}  | {r['schema_failures']:>11} {r['seconds_per_observation']:>6.1f}")
    return "\n".join(lines)
