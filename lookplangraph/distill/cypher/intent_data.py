"""The training side of intent questions (:mod:`lookplangraph.cypher.intents`): the intents
training may ask (:data:`~lookplangraph.cypher.intents.TRAIN_INTENTS`, never a held-out one) on
the scenes training may use (:func:`~.data.allowed_scenes`: the planning train pool in the Cypher
benchmark's development part, and generated buildings not kept for development).

Not yet mixed into the training data; ``lookplangraph cypher-intents --split train`` writes them
as JSON lines (:mod:`.commands`). ``docs/guides/cypher.md`` (*Intent questions*).
"""

from __future__ import annotations

from grasif.task import Task

from lookplangraph.cypher.benchmark import _unique_scenes
from lookplangraph.cypher.intent_bench import IntentQuestion, intent_questions
from lookplangraph.cypher.intents import HELDOUT_INTENTS, TRAIN_INTENTS, check_intents
from lookplangraph.distill.cypher.data import _by_split, allowed_scenes


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
    for split, ts in _by_split(allowed_scenes(tasks)).items():
        scenes = [(t.id, t.graph) for t in _unique_scenes(ts)]
        out += intent_questions(split, scenes, seed=seed, per_scene=per_scene, intents=intents, per_intent=per_intent)
    return out
