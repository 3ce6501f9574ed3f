"""Whether an action names the node the instruction picks out by a property or a place (the
planner's ``grounding_check``).

An instruction may pick one node of a class out by what the map records about it: "the *red*
stapler" when the map has a red and a blue one, "the *kitchen* fridge" beside the kitchenette's,
"*Tom's* desk" among the office's desks. A small model reads "stapler" and takes the first
stapler it sees. The check turns such an action into feedback before anything is executed:
"stapler-1 is not the red stapler the instruction names (blue, in printing_room-1); the red
stapler: stapler-2 (red, in storage_room-1)". It looks at every node the action names (what it
moves, opens or toggles, and where it puts it), objects and assets alike; looking
(``discover_objects``) is never refused.

A node's *descriptors* (:func:`descriptors`) are its properties and, for an asset, its place's
class words and properties ("kitchen" for a fridge in ``kitchen-1``) and, in a person's room
(``toms_office-1``), the owner ("Tom's"). A descriptor is *attached* to a class when the
instruction says its words right before the class's words ("red stapler", "kitchen fridge",
"Tom's desk"), matched as recall matches classes (:func:`lookplangraph.agent.recall.spoken`),
and at least one node of that class in the memory graph has it. The check reads only the
instruction and the memory graph (the map's properties and what was discovered), never the
task's goal. A node is a mismatch when its class has attached descriptors and it lacks one of
them while another node of its class has them all; a class none of whose nodes has them all is
not checked (the instruction's words were not a descriptor after all). Properties do not change
and assets do not move, so a mismatch holds in every state of the episode.
"""

from __future__ import annotations

import re

from sgs.actions import Action
from sgs.graph import Layer, SceneGraph, node_class

from grasif.priors import normalise
from lookplangraph.agent.recall import spoken


#: A person's room (``toms_office-1``): its nodes are described as that person's ("Tom's desk").
_OWNED = re.compile(r"^([a-z]+)s_office$")


def descriptors(graph: SceneGraph, name: str) -> list[str]:
    """What may stand before a node's class in an instruction to pick it out: its properties and,
    for an asset (assets do not move), its place's class words and properties ("kitchen" for
    ``fridge-1`` in ``kitchen-1``, "main kitchen") and in a person's room (``toms_office-1``) the
    owner ("Tom's")."""
    out = list(graph.nodes[name].properties or ())
    place = graph.place_of(name)
    if graph.nodes[name].layer is Layer.ASSET and place is not None:
        cls = node_class(place)
        out.append(cls.replace("_", " "))
        out += list(graph.nodes[place].properties or ())
        owner = _OWNED.match(cls)
        if owner:
            out.append(f"{owner.group(1)}'s")
    return out


def attached(instruction: str, graph: SceneGraph) -> dict[str, frozenset[str]]:
    """Class (:func:`grasif.priors.normalise`) of an object or asset -> the descriptors
    (:func:`descriptors`) ``instruction`` attaches to it (module doc); classes without any are
    left out."""
    text = spoken(instruction)
    out: dict[str, set[str]] = {}
    for name in (*graph.names(Layer.OBJECT), *graph.names(Layer.ASSET)):
        cls = normalise(node_class(name))
        words = cls.replace("_", " ")
        for desc in descriptors(graph, name):
            if spoken(f"{desc} {words}") in text:
                out.setdefault(cls, set()).add(desc)
    return {cls: frozenset(props) for cls, props in out.items()}


#: Actions that only look or walk: discovering another desk while searching is not taking it for
#: the instruction's (and ``go_to`` names a place).
LOOKING = ("discover_objects", "go_to", "done")


def named_nodes(action: Action, graph: SceneGraph) -> list[str]:
    """The nodes ``action`` acts on or puts something on or in: its ``node`` (not the held object
    that ``put_on``/``put_inside`` may repeat) and its ``destination``; none for :data:`LOOKING`."""
    if action.function_name in LOOKING:
        return []
    out = [action.node] if action.node is not None else []
    if action.function_name in ("put_on", "put_inside") and action.node == graph.agent.holding:
        out = []
    if action.destination is not None:
        out.append(action.destination)
    return out


def mismatch(action: Action, graph: SceneGraph, wanted: dict[str, frozenset[str]]) -> str | None:
    """Feedback when ``action`` names (:func:`named_nodes`) an object or asset of a class the
    instruction describes (``wanted``, from :func:`attached`) without all of those descriptors
    while another node of the class has them all; ``None`` otherwise (also for names that are no
    node: the simulator's checks answer those)."""
    if not wanted:
        return None
    for node in named_nodes(action, graph):
        if node not in graph.nodes or graph.nodes[node].layer not in (Layer.OBJECT, Layer.ASSET):
            continue
        cls = normalise(node_class(node))
        props = wanted.get(cls)
        if not props or props <= set(descriptors(graph, node)):
            continue
        layer = graph.nodes[node].layer
        fitting = [n for n in graph.names(layer)
                   if normalise(node_class(n)) == cls and props <= set(descriptors(graph, n))]
        if not fitting:
            continue
        asked = " ".join(sorted(props)) + " " + cls.replace("_", " ")
        return (f"{action}: {node} is not the {asked} the instruction names ({_described(graph, node)}); "
                f"the {asked}: {', '.join(f'{n} ({_described(graph, n)})' for n in fitting)}")
    return None


def _described(graph: SceneGraph, name: str) -> str:
    """``blue, in printing_room-1``: a node's properties and its place, for feedback."""
    return ", ".join([*(graph.nodes[name].properties or ()), f"in {graph.place_of(name)}"])
