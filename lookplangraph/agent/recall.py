"""Which remembered objects the view recalls from other rooms (the planner's ``recall`` setting).

The paper's view shows unseen priors only in the agent's own room, so a planner asked to "find
the red stapler" cannot know that the map remembers a stapler in the storage room until it walks
in there: in a 37-room office that is a blind walk. ``recall = "named"`` also lists, wherever the
agent is, the unseen priors of the classes the instruction names, with their remembered place and
room ("stapler-2 inside cardboard_box-1 in storage_room-1"). They may have moved, as every prior
may; discovering their holder confirms or removes them.

* ``here`` (default): the paper's view.
* ``named``: the paper's view and the recalled priors (:func:`named_classes`).
* ``named-assets``: ``named``, and the assets (furniture, appliances) of the classes the
  instruction names in other rooms, with their room ("couch-1 in living_room-1"): the map holds
  them, and without them "put two cords on the couch" leaves the couch's room to be guessed.

The modes are :data:`lookplangraph.planners.config.RECALL_MODES` (the planner's setting).

A class is named when its words, last one in the singular, stand in the instruction with its
words in the singular too: "the red stapler" names ``stapler``, "two glasses" ``glasses``, "the
cup of yogurt" ``cup_of_yogurt``. Words that only describe ("something to drink") name nothing,
and the planner searches by the prior as before.
"""

from __future__ import annotations

import re

from grasif.priors import normalise, singular
from sgs.graph import Layer, SceneGraph, node_class


def spoken(text: str) -> str:
    """``text`` as words are matched in an instruction: lower case, letters and digits only, each
    word in the singular, single spaces and one at either end (``"Tom's red mugs"`` ->
    ``" tom s red mug "``), so ``spoken(phrase) in spoken(instruction)`` asks whether the
    instruction says the phrase."""
    return " " + " ".join(singular(w) for w in re.findall(r"[a-z0-9]+", text.lower())) + " "


def named_classes(instruction: str, graph: SceneGraph, layer: Layer = Layer.OBJECT) -> frozenset[str]:
    """The classes (:func:`grasif.priors.normalise`) of ``graph``'s objects (or nodes of another
    ``layer``: ``Layer.ASSET``) that ``instruction`` names (module doc)."""
    text = spoken(instruction)
    out = set()
    for name in graph.names(layer):
        cls = normalise(node_class(name))
        if spoken(cls.replace("_", " ")) in text:
            out.add(cls)
    return frozenset(out)


def recall_classes(recall: str, instruction: str, graph: SceneGraph) -> frozenset[str]:
    """The object classes the view recalls under the setting ``recall``: :func:`named_classes` for
    ``named`` and ``named-assets``, none for ``here`` (and for ``auto`` not yet settled: the
    paper's view)."""
    return named_classes(instruction, graph) if recall in ("named", "named-assets") else frozenset()


def recall_asset_classes(recall: str, instruction: str, graph: SceneGraph) -> frozenset[str]:
    """The asset classes whose assets in other rooms the view lists under the setting ``recall``:
    the named ones for ``named-assets``, none otherwise."""
    return named_classes(instruction, graph, Layer.ASSET) if recall == "named-assets" else frozenset()


def recalled(name: str, classes: frozenset[str]) -> bool:
    """Whether a node ``name`` is of a class in ``classes`` (of :func:`named_classes`)."""
    return bool(classes) and normalise(node_class(name)) in classes
