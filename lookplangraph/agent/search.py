"""Where to look for an object that was not where the map remembered it: the belief search.

:func:`ranked_holders` orders the holders of a map (assets that take things on or inside) by how
likely each holds an object of a class, per action it costs. Half of the belief stays on the
object's remembered room (:data:`STAY`), half goes to the rest of the building; within each part
it is spread in proportion to the object prior ``P(holder class, relation | object class)``
(:mod:`grasif.priors`, counted on the train pool), :data:`HINT_WEIGHT` times more on an asset, or
an asset of a room, that the instruction names (:func:`instruction_hints`). An asset in the agent's
room costs one action, elsewhere two (``go_to`` first). It reads only what a planner may know: the
map, the instruction and what was inspected.

Two users, one order: the loop's ``search_hint`` setting (:func:`search_entries`, a line of the
view after ``discover_objects`` did not find a remembered object) and the privileged expert's
``belief`` and ``view`` searches (:mod:`lookplangraph.distill.teacher.expert`), so a student is shown
the order its teacher follows. Concept: ``docs/concepts/loop.md#search-after-a-move``.
"""

from __future__ import annotations

import re
from typing import Iterable

from grasif.priors import Priors, normalise, shipped
from sgs.graph import Layer, SceneGraph, affords, node_class

__all__ = ["HINT_WEIGHT", "STAY", "hinted", "holders", "instruction_hints", "ranked_holders", "search_entries",
           "weight"]

#: the belief that an object not found where remembered is still in its remembered room
STAY = 0.5
#: how much more likely an asset (or an asset of a room) the instruction names is
HINT_WEIGHT = 4.0
#: how many places :func:`search_entries` names per missing object
SHOWN = 3

#: a person's room (``peters_office``): the person's name, as an instruction writes it ("Peter's" -> "peter s")
PERSONS_ROOM = re.compile(r"([a-z]+)s_(?:office|room|desk)")


def instruction_hints(instruction: str, graph: SceneGraph) -> tuple[set[str], set[str]]:
    """The rooms and the asset classes an instruction names ("the shelf in the printing room"; a
    person's room by the person's name: "Peter's watch" names ``peters_office-1``)."""
    text = " " + re.sub(r"[^a-z0-9]+", " ", instruction.lower()) + " "
    rooms = {p for p in graph.places if f" {node_class(p).replace('_', ' ')} " in text
             or (m := PERSONS_ROOM.fullmatch(node_class(p))) is not None and f" {m.group(1)} " in text}
    classes = {normalise(node_class(n)) for n in graph.names(Layer.ASSET)
               if f" {node_class(n).replace('_', ' ')} " in text}
    return rooms, classes


def holders(graph: SceneGraph) -> list[str]:
    """The assets of ``graph`` that can hold an object (on or inside), in the graph's order."""
    return [n for n in graph.names(Layer.ASSET)
            if affords(graph.nodes[n], "put_on") or affords(graph.nodes[n], "put_inside")]


def hinted(graph: SceneGraph, asset: str, hints: tuple[set[str], set[str]]) -> tuple[bool, bool]:
    """Whether the instruction names ``asset``'s room, and its class (``hints``:
    :func:`instruction_hints`)."""
    rooms_named, classes_named = hints
    return graph.place_of(asset) in rooms_named, normalise(node_class(asset)) in classes_named


def weight(graph: SceneGraph, cls: str, asset: str, hints: tuple[set[str], set[str]],
           priors: Priors | None = None) -> float:
    """How likely ``asset`` holds an object of class ``cls``: the prior of each relation it
    affords, times :data:`HINT_WEIGHT` for its room and again for its class where the instruction
    names them (:func:`hinted`)."""
    priors = priors or shipped()
    node = graph.nodes[asset]
    w = sum(priors.probability(cls, node_class(asset), rel)
            for rel, verb in (("ontop", "put_on"), ("inside", "put_inside")) if affords(node, verb))
    return w * HINT_WEIGHT ** sum(hinted(graph, asset, hints))


def ranked_holders(graph: SceneGraph, cls: str, room: str, candidates: Iterable[str],
                   hints: tuple[set[str], set[str]], priors: Priors | None = None,
                   here: str | None = None) -> list[str]:
    """``candidates`` (holders of ``graph``) most likely per action first, for an object of class
    ``cls`` remembered in ``room``, the agent in ``here`` (default: where ``graph`` puts it)
    (module doc); ties by name."""
    assets = list(candidates)
    here = graph.agent.location if here is None else here
    weights = {n: weight(graph, cls, n, hints, priors) for n in assets}
    near = sum(w for n, w in weights.items() if graph.place_of(n) == room) or 1.0
    far = sum(w for n, w in weights.items() if graph.place_of(n) != room) or 1.0
    belief = {n: w * (STAY / near if graph.place_of(n) == room else (1 - STAY) / far) for n, w in weights.items()}
    cost = {n: 1.0 if graph.place_of(n) == here else 2.0 for n in assets}
    return sorted(assets, key=lambda n: (-belief[n] / cost[n], n))


def search_entries(graph: SceneGraph, missing: dict[str, tuple[str, str, str]], instruction: str,
                   priors: Priors | None = None, shown: int = SHOWN) -> list[dict]:
    """The view's ``search`` entries (setting ``search_hint``): for each object ``discover_objects``
    did not find where it was remembered and nobody has seen since (``missing``: name ->
    relation, holder, room, as :attr:`lookplangraph.agent.memory.MemoryGraph.missing` keeps
    them), the ``shown`` holders not inspected yet that are likeliest to hold it now, each with
    its room. Empty when nothing is missing."""
    if not missing:
        return []
    hints = instruction_hints(instruction, graph)
    open_ = [n for n in holders(graph) if n not in graph.inspected]
    out = []
    for name, (relation, holder, room) in missing.items():
        ranked = ranked_holders(graph, node_class(name), room, open_, hints, priors)[:shown]
        out.append({"name": name, "relation": relation, "parent": holder, "room": room,
                    "candidates": [{"name": n, "room": graph.place_of(n)} for n in ranked]})
    return out
