"""Intent questions (:mod:`.intents`, worded by :mod:`.intent_words`) over scenes, and a benchmark
file of them that ``lookplangraph cypher-eval --bench-dir DIR`` reads.

:func:`intent_questions` asks each intent up to ``per_scene`` times per scene, each time with a
generator seeded by seed, split, scene, intent and draw, so the same arguments give the same
questions; a draw that repeats the slots of an earlier one is dropped. Every question keeps its
slots, so its gold query is :func:`~.intents.gold_query` of them (:func:`~.intents.intent_gold`
checks it on a store).

:func:`write_heldout_intents` writes ``DIR/qa.v2.json`` in the QA benchmark's format
(:mod:`.benchmark`): the held-out intents (:data:`~.intents.HELDOUT_INTENTS`) on the GraSIF
scenes, each item in the part (``dev``/``heldout``) of its building, the task files pinned by
sha256. The training side (the other intents on training scenes only) is
:func:`lookplangraph.distill.cypher.intent_data.training_intent_questions`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Callable

from grasif import dataset
from sgs.graph import SceneGraph

from lookplangraph.cypher.benchmark import DEFAULT_DIR, FORMATS, PARTS, SPLITS, VERSION, building, parts, path_of, \
    unique_scenes
from lookplangraph.cypher.intent_words import phrase
from lookplangraph.cypher.intents import HELDOUT_INTENTS, INTENTS, check_intents, gold_query
from lookplangraph.cypher.qa import Question


class IntentQuestion(Question):
    """A benchmark :class:`~.qa.Question` asked for an intent (``template`` is the intent's
    name, ``kind`` its kind), with the slots its gold query is filled with."""

    slots: dict[str, str]

    @property
    def gold_query(self) -> str:
        return gold_query(self.template, self.slots)


def intent_questions(split: str, scenes: list[tuple[str, SceneGraph]], *, seed: int = 0, per_scene: int = 1,
                     intents: tuple[str, ...] | None = None, part: str = "dev",
                     per_intent: int | None = None) -> list[IntentQuestion]:
    """Questions of ``intents`` (default all) on ``scenes`` (task id, graph), in scene order and
    intent order (module doc); ``per_intent``: at most this many of each intent, drawn with
    ``random.Random(f"{seed}:{split}:{part}:{intent}")``. Ids are ``SPLIT-intent-NNNN``
    (``SPLIT-PART-intent-NNNN`` for a part other than ``dev``)."""
    chosen = check_intents(intents if intents is not None else INTENTS)
    out: list[IntentQuestion] = []
    for name in chosen:
        intent, mine = INTENTS[name], []
        for scene_id, graph in sorted(scenes, key=lambda s: s[0]):
            seen: set[tuple] = set()
            for k in range(per_scene):
                rng = random.Random(f"{seed}:{split}:{scene_id}:{name}:{k}")
                drawn = intent.draw(graph, rng)
                if drawn is None:
                    break
                slots, answer = drawn
                key = tuple(sorted(slots.items()))
                if key in seen:
                    continue
                seen.add(key)
                mine.append(IntentQuestion(id="", split=split, scene=scene_id, kind=intent.kind, template=name,
                                           question=phrase(name, slots, graph, rng), answer_type=intent.answer_type,
                                           answer=answer, part=part, slots=slots))
        if per_intent is not None and len(mine) > per_intent:
            keep = set(random.Random(f"{seed}:{split}:{part}:{name}").sample(range(len(mine)), per_intent))
            mine = [q for i, q in enumerate(mine) if i in keep]
        out += mine
    prefix = "intent" if part == "dev" else f"{part}-intent"
    for i, q in enumerate(out, start=1):
        q.id = f"{split}-{prefix}-{i:04d}"
    return out


def write_questions(questions: list[IntentQuestion], path: Path) -> Path:
    """One question a line (its slots and gold query with it), as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for q in questions:
            f.write(json.dumps(q.model_dump(mode="json") | {"gold_query": q.gold_query}) + "\n")
    return path


def write_heldout_intents(data_dir: Path, out_dir: Path, *, seed: int = 0, per_scene: int = 1,
                          per_intent: int | None = 40, intents: tuple[str, ...] = HELDOUT_INTENTS,
                          progress: Callable[[str], None] = print) -> Path:
    """Write ``out_dir/qa.v2.json`` (module doc): per split and part, the ``intents`` on the unique
    scenes of the GraSIF build in ``data_dir``, at most ``per_intent`` of each. ``ValueError``
    when ``out_dir`` is the shipped benchmarks' directory."""
    out_dir = Path(out_dir)
    if out_dir.resolve() == DEFAULT_DIR.resolve():
        raise ValueError(f"{out_dir}: the shipped benchmarks' directory; write intent questions elsewhere")
    check_intents(intents)
    index = dataset.read_index(dataset.ensure(data_dir, list(SPLITS)))
    every = {split: dataset.load_split(data_dir, split) for split in SPLITS}
    part_of = parts([t for ts in every.values() for t in ts], seed)
    items: list[IntentQuestion] = []
    used: dict[str, dict[str, str]] = {}
    for split in SPLITS:
        for part in PARTS:
            tasks = unique_scenes([t for t in every[split] if part_of[building(t)] == part])
            qs = intent_questions(split, [(t.id, t.graph) for t in tasks], seed=seed, per_scene=per_scene,
                                  intents=intents, part=part, per_intent=per_intent)
            items += qs
            used.setdefault(split, {}).update({q.scene: index["splits"][split][q.scene] for q in qs})
            if qs:
                progress(f"{split} {part}: {len(qs)} questions")
    doc = {"format": FORMATS["qa"], "version": VERSION, "seed": seed, "intents": list(intents),
           "parts": {p: sorted(b for b, q in part_of.items() if q == p) for p in PARTS},
           "scenes": {s: pins for s, pins in used.items() if pins},
           "items": [q.model_dump(mode="json") for q in items]}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = path_of("qa", out_dir)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
