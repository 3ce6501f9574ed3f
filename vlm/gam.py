"""The graph augmentation module (paper section IV-D, appendix G): what ``discover_objects(node)``
adds to the memory graph.

Two stages, because a VLM asked for a picture and a strict output format at once tends to claim
it cannot see the picture (appendix G):

* the **describer** gets the image, the observed node, the names of known objects and the
  priors remembered there, and answers in free text what is on and inside the node and in what
  state (:meth:`Describer.describe`, template ``prompts/describer.txt``);
* the **parser** gets that text (no image) and the possible names and answers JSON constrained
  by :func:`parser_schema` (:meth:`Parser.parse`, templates ``prompts/parser_system.txt`` and
  ``prompts/parser.txt``); :func:`vlm.binding.to_observation` turns its entries into an
  :class:`~sim_adapters.base.Observation`.

:class:`GraphAugmentation` puts them together in one of three modes:

* ``ground_truth`` — the environment's own observation passes through unchanged (the graph
  environment's, and the paper's GraSIF setting);
* ``vlm`` — describer then parser, from an image;
* ``parser`` — the environment (or a person) gives a text description; the parser alone.

Token usage of augmentation calls is returned apart (:attr:`Augmentation.usage`), so the
planner's tokens per action can leave it out as the paper does. Concepts: ``docs/guides/augmentation.md``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Sequence

import lookplangraph.lm
from lookplangraph.lm import Completion, LMBackend, Usage, read_json
from sim_adapters.base import Observation, SeenObject
from vlm.binding import DEFAULT_STATES, to_observation

MODES = ("ground_truth", "vlm", "parser")


@lru_cache(maxsize=None)
def template(name: str) -> str:
    """The text of ``vlm/prompts/<name>.txt``."""
    return resources.files("vlm").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def _name_list(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "(none known)"


def _prior_text(p: SeenObject | str) -> str:
    return f"{p.name} ({p.relation} {p.parent})" if isinstance(p, SeenObject) else str(p)


def parser_schema(states: Sequence[str] = DEFAULT_STATES, max_objects: int | None = 40) -> dict[str, Any]:
    """JSON schema of the parser's reply: ``{"objects": [{"name", "relation", "related_to",
    "states"}]}``. An object at the root and every property required, so OpenAI's strict mode
    takes it too; ``maxItems`` (``max_objects``; None leaves it out) stops a small model that
    loops on one entry."""
    entry = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "relation": {"type": "string", "enum": ["ontop", "inside"]},
            "related_to": {"type": "string"},
            "states": {"type": "array", "items": {"type": "string", "enum": list(states)}},
        },
        "required": ["name", "relation", "related_to", "states"],
        "additionalProperties": False,
    }
    objects: dict[str, Any] = {"type": "array", "items": entry}
    if max_objects is not None:
        objects["maxItems"] = int(max_objects)
    return {"type": "object", "properties": {"objects": objects}, "required": ["objects"], "additionalProperties": False}


def _add(a: Usage, b: Usage) -> Usage:
    cached = None if a.cached_tokens is None and b.cached_tokens is None else (a.cached_tokens or 0) + (b.cached_tokens or 0)
    return Usage(a.prompt_tokens + b.prompt_tokens, a.completion_tokens + b.completion_tokens, cached)


class Describer:
    """Image → free text, through any backend whose model sees images (a VLM server, or llama.cpp
    with a projector)."""

    def __init__(self, lm: LMBackend, max_tokens: int = 512):
        self.lm, self.max_tokens = lm, max_tokens

    def prompt(self, node: str, names: Sequence[str], priors: Sequence[SeenObject | str]) -> str:
        prior_text = (template("describer_priors").strip().format(node=node, priors=", ".join(map(_prior_text, priors)))
                      if priors else "")
        return template("describer").format(node=node, names=_name_list(names), priors=prior_text).replace("\n\n", "\n")

    def describe(self, node: str, image: str | os.PathLike, names: Sequence[str] = (),
                 priors: Sequence[SeenObject | str] = ()) -> Completion:
        messages = [{"role": "user", "content": self.prompt(node, names, priors)}]
        return self.lm.complete(messages, images=[image], max_tokens=self.max_tokens)


class Parser:
    """Description → JSON entries (constrained by :func:`parser_schema`, validated client-side)."""

    def __init__(self, lm: LMBackend, states: Sequence[str] = DEFAULT_STATES, max_tokens: int = 1024,
                 max_objects: int | None = 40):
        self.lm, self.states, self.max_tokens = lm, tuple(states), max_tokens
        self.schema = parser_schema(self.states, max_objects)

    def messages(self, node: str, description: str, names: Sequence[str]) -> list[dict[str, str]]:
        system = template("parser_system").format(states=", ".join(self.states))
        user = template("parser").format(node=node, names=_name_list(names), description=description.strip())
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def parse(self, node: str, description: str, names: Sequence[str] = ()) -> Completion:
        return self.lm.complete(self.messages(node, description, names), schema=self.schema, max_tokens=self.max_tokens)


@dataclass
class Augmentation:
    """The result of one augmentation: the observation for the memory graph, one note per dropped
    entry (and per failed stage), the description (``vlm``: the describer's text; ``parser``: the
    given one), the parser's raw reply, token usage per stage and in total, and seconds."""

    observation: Observation
    notes: list[str] = field(default_factory=list)
    description: str | None = None
    parser_text: str | None = None
    stages: dict[str, Usage] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def usage(self) -> Usage:
        total = Usage(0, 0, None)
        for u in self.stages.values():
            total = _add(total, u)
        return total


class GraphAugmentation:
    """What the planner side calls on ``discover_objects(node)`` (module doc for the modes).

    ``describer`` and ``parser`` are LM backends (the same one may serve both, as in the paper's
    remark that one VLM can also plan); ``ground_truth`` needs neither."""

    def __init__(self, mode: str = "ground_truth", *, describer: LMBackend | None = None,
                 parser: LMBackend | None = None, states: Sequence[str] = DEFAULT_STATES,
                 describer_max_tokens: int = 512, parser_max_tokens: int = 1024, max_objects: int | None = 40):
        if mode not in MODES:
            raise ValueError(f"augmentation mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "vlm" and describer is None:
            raise ValueError("augmentation mode vlm needs a describer backend (a model that sees images)")
        if mode in ("vlm", "parser") and parser is None and describer is None:
            raise ValueError(f"augmentation mode {mode} needs a parser backend")
        self.mode, self.states = mode, tuple(states)
        self.describer = Describer(describer, describer_max_tokens) if describer is not None else None
        parser_lm = parser if parser is not None else describer  # a backend may be falsy (an empty reply cache)
        self.parser = Parser(parser_lm, self.states, parser_max_tokens, max_objects) if parser_lm is not None else None

    def augment(self, node: str, *, image: str | os.PathLike | None = None, description: str | None = None,
                names: Sequence[str] = (), priors: Sequence[SeenObject | str] = (),
                truth: Observation | None = None) -> Augmentation:
        """The observation of ``node``: in ``ground_truth`` mode ``truth`` itself; in ``vlm`` mode
        from ``image``; in ``parser`` mode from ``description`` (in ``vlm`` mode too when a
        description comes without an image: a person typed what they see). ``names``: the object names the
        memory knows (the LM should reuse them); ``priors``: objects remembered under ``node``.
        Raises only for a missing input or an unusable backend (:class:`LMError`); a bad reply
        gives an empty or partial observation with notes."""
        t0 = time.perf_counter()
        if self.mode == "ground_truth":
            if truth is None:
                raise ValueError("ground_truth augmentation needs the environment's observation (truth=...)")
            return Augmentation(truth, seconds=time.perf_counter() - t0)
        stages: dict[str, Usage] = {}
        notes: list[str] = []
        if self.mode == "vlm" and image is None and description is not None:
            pass  # a typed description instead of a photo (a human operator): the parser alone
        elif self.mode == "vlm":
            if image is None:
                raise ValueError(f"vlm augmentation of {node} needs an image (or a description)")
            described = self.describer.describe(node, image, names, priors)  # type: ignore[union-attr]
            stages["describer"] = described.usage
            description = described.text
            if not description.strip():
                notes.append("the describer gave no text")
                return Augmentation(Observation(node, image=str(image)), notes, description, None, stages,
                                    time.perf_counter() - t0)
        elif description is None:
            raise ValueError(f"parser augmentation of {node} needs a description")
        parsed = self.parser.parse(node, description, names)  # type: ignore[union-attr]
        stages["parser"] = parsed.usage
        if parsed.parsed is not None:
            entries = parsed.parsed
        else:
            notes.append(f"the parser's reply does not fit the schema ({parsed.error}); reading what it can")
            entries = read_json(parsed.text)
            entries = [] if entries is None else entries
        observation, dropped = to_observation(node, entries, names, priors, self.states)
        if image is not None:
            observation = Observation(observation.node, observation.objects, str(image))
        return Augmentation(observation, notes + dropped, description, parsed.text, stages, time.perf_counter() - t0)


class AugmentationFactory:
    """Makes one :class:`GraphAugmentation` per evaluation worker, given that worker's planner
    LM: the describer is ``vlm`` (a backend spec, made with ``vlm_options``), the parser
    ``parser_lm`` if given, else the describer (``vlm`` mode), else the planner's LM (``parser``
    mode). Picklable, so worker processes can make their own. Raises what
    :func:`lookplangraph.lm.make_backend` raises (:class:`LMError`) and ``ValueError`` for a mode
    that lacks its backend."""

    def __init__(self, mode: str, vlm: str | None = None, vlm_options: dict | None = None,
                 parser_lm: str | None = None):
        self.mode, self.vlm, self.vlm_options, self.parser_lm = mode, vlm, dict(vlm_options or {}), parser_lm

    def __call__(self, lm: LMBackend) -> GraphAugmentation:
        make_backend = lookplangraph.lm.make_backend  # looked up per call: tests replace it
        describer = make_backend(self.vlm, **self.vlm_options) if self.vlm else None
        parser = make_backend(self.parser_lm) if self.parser_lm else (describer if describer is not None else lm)
        return GraphAugmentation(self.mode, describer=describer, parser=parser)

