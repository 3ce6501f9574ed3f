"""The leak check of generated tasks: no generated scene or instruction may be equal to, or a
renaming of, a held-out task (:mod:`grasif.heldout`: the 47-task sample and the whole office split).

* A **scene** is compared by its shape with the names taken away (:func:`scene_key`): for each room
  its class and its assets' classes, and each object's class with its relation and holder's class.
  A held-out scene whose nodes were renamed, or whose people's offices were given other
  occupants, has the same key.
* An **instruction** is compared in a normal form (:func:`instruction_key`): lower case, words
  only, the numbers and the names of every occupant on either side taken out.
"""

from __future__ import annotations

import re

from grasif.heldout import DEV_BUILDING_KINDS, is_dev_generated
from grasif.task import Task
from sgs.graph import Layer, SceneGraph, node_class


class GeneratedLeak(ValueError):
    """Generated tasks that equal or rename a held-out task; the message names each pair."""


def _room_class(name: str) -> str:
    cls = node_class(name)
    return "office" if cls.endswith("s_office") else cls


def scene_key(g: SceneGraph) -> tuple:
    """The scene without its names (module doc)."""
    rooms = []
    for room in g.places:
        assets = sorted(node_class(a) for a in g.children(room) if g.nodes[a].layer is Layer.ASSET)
        rooms.append((_room_class(room), tuple(assets)))
    objects = sorted((node_class(o), g.parent[o][1].value, node_class(g.parent[o][0]))
                     for o in g.names(Layer.OBJECT) if o in g.parent)
    return tuple(sorted(rooms)), tuple(objects)


def instruction_key(text: str, names: set[str] = frozenset()) -> str:
    """The instruction without case, punctuation, numbers or the given people's names."""
    words = re.findall(r"[a-z]+", text.lower())
    return " ".join(w for w in words if w not in names and w != "s")


def _people(g: SceneGraph) -> set[str]:
    return {node_class(p)[: -len("s_office")] for p in g.places if node_class(p).endswith("s_office")}


def leaks(generated: list[Task], heldout: list[Task]) -> list[str]:
    """Each generated task whose scene or instruction equals a held-out task's (module doc)."""
    names = set().union(*(_people(t.graph) for t in [*heldout, *generated]))  # the same for both sides
    scenes, texts = {}, {}
    for t in heldout:
        scenes.setdefault(scene_key(t.graph), f"{t.split}/{t.id}")
        texts.setdefault(instruction_key(t.instruction, names), f"{t.split}/{t.id}")
    out = []
    for t in generated:
        hit = scenes.get(scene_key(t.graph))
        if hit:
            out.append(f"{t.id}: its scene is {hit}'s, renamed")
        hit = texts.get(instruction_key(t.instruction, names))
        if hit:
            out.append(f"{t.id}: its instruction is {hit}'s")
    return out


def check_leaks(generated: list[Task], heldout: list[Task]) -> None:
    """:class:`GeneratedLeak` naming every leak; nothing when there is none."""
    found = leaks(generated, heldout)
    if found:
        raise GeneratedLeak(f"{len(found)} generated task(s) leak held-out tasks: " + "; ".join(found[:10]))


def check_training(generated: list[Task], heldout: list[Task]) -> None:
    """What training material checks its generated tasks with: :class:`GeneratedLeak` for a task
    of a building kind kept for development (:data:`grasif.heldout.DEV_BUILDING_KINDS`), then
    :func:`check_leaks`."""
    dev = [t.id for t in generated if is_dev_generated(t)]
    if dev:
        raise GeneratedLeak(f"{len(dev)} generated task(s) are dev material (building kinds "
                            f"{', '.join(DEV_BUILDING_KINDS)} are kept for development), not training: "
                            + ", ".join(dev[:5]))
    check_leaks(generated, heldout)
