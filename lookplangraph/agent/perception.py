"""Perception: from what ``discover_objects(node)`` returned to what the memory graph takes in.

The environment answers ``discover_objects`` with an :class:`~sim_adapters.base.Observation`:
its ground truth, and an image when it renders one. :class:`Perception` applies the run's
graph augmentation mode (:class:`vlm.gam.GraphAugmentation`) to it:

* ``ground_truth`` — the environment's objects, unchanged (GraSIF's setting);
* ``parser`` — the environment writes what is there as text (its ``describe(node)``), the parser
  LM turns the text into objects;
* ``vlm`` — the describer VLM describes the observation's image, the parser turns that into objects;
  an environment whose observer may type a description instead of a photo (a human operator:
  ``typed_descriptions = True``) gets the parser alone for such an observation.

The LMs see the memory's object names in the node's room and the priors remembered under the
node, so a confirmed prior keeps its name. Every object the augmentation reports is told to the
environment (``note_seen(name, parent)``, where it has one), which binds made-up names to its own
nodes (:mod:`sim_adapters.binding`). What each augmentation cost (tokens per stage, seconds) and
what it dropped goes into the step's trace apart from the planner's own tokens: the paper leaves
augmentation out of tokens per action.
"""

from __future__ import annotations

from dataclasses import dataclass

from sgs.graph import Layer
from sim_adapters.base import Observation, SeenObject

from lookplangraph.agent.memory import MemoryGraph


class PerceptionError(ValueError):
    """An observation the augmentation mode cannot use (no image for ``vlm``, no way to describe
    the node for ``parser``); ``str(exc)`` is the planner's feedback."""


@dataclass
class Perceived:
    """What one augmentation made of an observation, and its cost (a trace entry)."""

    node: str
    mode: str
    objects: list[str]
    notes: list[str]
    description: str | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    image: str | None = None


class Perception:
    """Applies ``augmentation`` (a :class:`vlm.gam.GraphAugmentation`; ``None`` means
    ``ground_truth``) to observations (module doc)."""

    def __init__(self, augmentation=None):
        self.augmentation = augmentation

    @property
    def mode(self) -> str:
        return "ground_truth" if self.augmentation is None else self.augmentation.mode

    def __call__(self, observation: Observation, memory: MemoryGraph, env) -> tuple[Observation, Perceived | None]:
        """The observation for the memory graph and, unless ``ground_truth``, its trace entry.
        Raises :class:`PerceptionError` for an observation the mode cannot use and
        :class:`~lookplangraph.lm.LMError` for an unusable LM."""
        if self.mode == "ground_truth":
            return observation, None
        node = observation.node
        description = None
        if self.mode == "parser" or (not observation.image and getattr(env, "typed_descriptions", False)):
            describe = getattr(env, "describe", None)
            if describe is None:
                raise PerceptionError(f"{type(env).__name__} cannot describe {node} in text; parser augmentation needs it")
            try:
                description = describe(node)
            except ValueError as exc:
                raise PerceptionError(f"{node} cannot be described: {exc}") from None
        elif not observation.image:
            raise PerceptionError(f"discover_objects({node}) brought no image; vlm augmentation needs one")
        g = memory.graph
        room = g.place_of(node) if node in g.nodes else None
        names = [o for o in g.names(Layer.OBJECT) if room is None or g.place_of(o) == room]
        priors = [SeenObject(o, g.parent[o][1].value, g.parent[o][0]) for o in g.descendants(node) if o in memory.unseen]
        aug = self.augmentation.augment(node, image=observation.image, description=description, names=names,
                                        priors=priors, truth=observation)
        note = getattr(env, "note_seen", None)
        if note is not None:
            for o in aug.observation.objects:
                note(o.name, o.parent)
        usage = aug.usage
        mode = "parser" if description is not None else self.mode
        entry = Perceived(node, mode, [f"{o.name} {o.relation} {o.parent}" for o in aug.observation.objects],
                          aug.notes, aug.description, usage.prompt_tokens, usage.completion_tokens,
                          round(aug.seconds, 3), observation.image)
        return Observation(node, aug.observation.objects, observation.image), entry
