"""Dynamic mode: the environment changed after it was mapped. Before an episode, task-relevant
objects are moved in the true graph; the planner's memory graph still has them where the map
put them, so it has to search.

:func:`perturb` takes a graph, a goal, a seed, a mode (:data:`DYNAMIC_MODES`) and the task's key
(``split/id``) and returns the moved graph and one note per move. Two modes:

* ``paper`` (the default; the paper's Table II protocol): a seeded half of the tasks (a hash of
  the seed and the key below :attr:`DynamicMode.fraction`, so every planner and every subset of a
  split gets the same draw) has one relevant object (:func:`relevant_objects`, not a held one)
  moved to an asset drawn in proportion to the object prior (:mod:`grasif.priors`), in the
  object's own room with probability :attr:`DynamicMode.same_room`, else in another room;
* ``anywhere``: every task, every relevant object, to a holder drawn uniformly from the building
  (``inside`` when it takes things inside).

In both a holder affords ``put_on``/``put_inside`` and is not the object's current parent, a goal
destination or inside the object; a held object stays held; a move that would already satisfy a
goal part is drawn again. Deterministic for a seed and a key. The wrapper that applies it is
:class:`sim_adapters.wrappers.DynamicPerturbation`. Concepts: ``docs/benchmark/dynamic.md``.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from grasif.goals import GoalSpec, evaluate_goal
from grasif.priors import shipped
from sgs.graph import Layer, Relation, SceneGraph, affords, node_class

__all__ = ["DEFAULT_MODE", "DYNAMIC_MODES", "DynamicMode", "dynamic_mode", "is_perturbed", "perturb",
           "relevant_objects"]


@dataclass(frozen=True)
class DynamicMode:
    """A dynamic mode's parameters (module doc): ``fraction`` of tasks perturbed, holders drawn
    from the object prior (``prior``) or uniformly, and the probability ``same_room`` that a moved
    object stays in its room (prior draws only); ``moved``: how many of a perturbed task's
    relevant objects move (None: all of them)."""

    name: str
    fraction: float
    prior: bool
    same_room: float
    moved: int | None
    about: str


#: the named modes (module doc)
DYNAMIC_MODES: dict[str, DynamicMode] = {
    "paper": DynamicMode("paper", fraction=0.5, prior=True, same_room=0.5, moved=1,
                         about="a seeded half of the tasks, one object each, moved to an asset drawn from the object "
                               "prior, in the same room with probability 0.5"),
    "anywhere": DynamicMode("anywhere", fraction=1.0, prior=False, same_room=0.0, moved=None,
                            about="every task, every relevant object, moved to a holder drawn uniformly from the "
                                  "whole building"),
}
DEFAULT_MODE = "paper"


def dynamic_mode(name: str | DynamicMode) -> DynamicMode:
    """The mode called ``name``; ``ValueError`` naming the modes for any other."""
    if isinstance(name, DynamicMode):
        return name
    if name not in DYNAMIC_MODES:
        raise ValueError(f"unknown dynamic mode {name!r}: the modes are "
                         + "; ".join(f"{m.name} ({m.about})" for m in DYNAMIC_MODES.values()))
    return DYNAMIC_MODES[name]


def is_perturbed(key: str, seed: int, fraction: float) -> bool:
    """Whether the task ``key`` (``split/id``) is among the ``fraction`` perturbed with ``seed``:
    a hash, so the answer depends on nothing else (not on which other tasks run)."""
    if fraction >= 1.0:
        return True
    digest = hashlib.sha256(f"dynamic:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < fraction


def relevant_objects(graph: SceneGraph, goal: GoalSpec) -> list[str]:
    """Objects a goal is about: named by a node goal, of a count goal's class, or named (by name
    or class) in a formula goal. In graph order."""
    names = {g.node for g in goal.node_goals}
    classes = {g.cls for g in goal.count_goals}
    if goal.formula:
        for token in re.findall(r"[A-Za-z_][\w.\-]*", goal.formula):
            names.add(token)
            classes.add(token.split(".")[0])
    return [n for n, node in graph.nodes.items()
            if node.layer is Layer.OBJECT and (n in names or node_class(n) in classes)]


def _destinations(goal: GoalSpec) -> set[str]:
    return {g.destination for g in goal.node_goals if g.destination} | {g.destination for g in goal.count_goals}


def _holders(graph: SceneGraph, current: SceneGraph, obj: str, avoid: set[str]) -> list[str]:
    old = current.parent[obj][0]
    return [n for n, node in graph.nodes.items()
            if node.layer is not Layer.PLACE and n != obj and n != old and n not in avoid
            and (affords(node, "put_on") or affords(node, "put_inside"))
            and not current.is_ancestor(obj, n)]


def perturb(graph: SceneGraph, goal: GoalSpec, seed: int, mode: str | DynamicMode = DEFAULT_MODE,
            key: str | None = None, priors=None) -> tuple[SceneGraph, list[str]]:
    """The dynamic-mode graph of a task (module doc) and one note per move
    (``apple-1: ontop table-1 -> inside fridge-1``); no notes when the task is not perturbed.
    ``key`` (``split/id``) is required by a mode that perturbs a fraction of tasks; ``priors``
    (:class:`grasif.priors.Priors`) defaults to the shipped ones."""
    mode = dynamic_mode(mode)
    if mode.fraction < 1.0:
        if key is None:
            raise ValueError(f"dynamic mode {mode.name!r} perturbs a seeded {mode.fraction:.0%} of tasks, chosen by "
                             "each task's key: pass key='split/id'")
        if not is_perturbed(key, seed, mode.fraction):
            return graph, []
    if not mode.prior:
        return _perturb_anywhere(graph, goal, seed)
    if priors is None:
        priors = shipped()
    rng = random.Random(f"{seed}:{key}")
    avoid = _destinations(goal)
    current, notes = graph, []
    before = evaluate_goal(goal, graph, graph).correct
    movable = [o for o in relevant_objects(graph, goal) if graph.parent[o][1] is not Relation.HELD]
    if mode.moved is not None:
        rng.shuffle(movable)  # a seeded choice: the first that can move
    for obj in movable:
        if mode.moved is not None and len(notes) >= mode.moved:
            break
        old = current.parent[obj]
        room = graph.place_of(obj)
        options = [(h, rel) for h in _holders(graph, current, obj, avoid) if graph.nodes[h].layer is Layer.ASSET
                   for rel, verb in ((Relation.ONTOP, "put_on"), (Relation.INSIDE, "put_inside"))
                   if affords(graph.nodes[h], verb)]
        near = [o for o in options if graph.place_of(o[0]) == room]
        far = [o for o in options if graph.place_of(o[0]) != room]
        pools = [near, far] if near and (not far or rng.random() < mode.same_room) else [far, near]
        moved = _draw_move(rng, priors, goal, graph, current, obj, pools, before)
        if moved is not None:
            current, (holder, rel) = moved
            notes.append(_note(obj, old, holder, rel))
    return current.check(), notes


def _note(obj: str, old: tuple[str, Relation], holder: str, rel: Relation) -> str:
    """A move as ``moves`` lists it: ``apple-1: ontop table-1 -> inside fridge-1``."""
    return f"{obj}: {old[1].value} {old[0]} -> {rel.value} {holder}"


def _draw_move(rng, priors, goal, graph, current, obj, pools, before):
    """The first prior-weighted draw (without replacement) from the first pool, then the next,
    that leaves every goal part as unmet as it was: ``(graph, (holder, relation))`` or None."""
    for pool in pools:
        pool = list(pool)
        weights = [priors.probability(obj, node_class(h), rel) for h, rel in pool]
        while pool:
            i = rng.choices(range(len(pool)), weights=weights)[0]
            holder, rel = pool.pop(i)
            weights.pop(i)
            trial = current.evolve(parent={**current.parent, obj: (holder, rel)})
            if evaluate_goal(goal, trial, graph).correct <= before:
                return trial, (holder, rel)
    return None


def _perturb_anywhere(graph: SceneGraph, goal: GoalSpec, seed: int) -> tuple[SceneGraph, list[str]]:
    """The ``anywhere`` mode's draw, exactly as ``perturb`` drew before the paper mode existed."""
    rng = random.Random(seed)
    avoid = _destinations(goal)
    current = graph
    notes = []
    before = evaluate_goal(goal, graph, graph).correct
    for obj in relevant_objects(graph, goal):
        old = current.parent[obj]
        if old[1] is Relation.HELD:
            continue
        holders = _holders(graph, current, obj, avoid)
        rng.shuffle(holders)
        for holder in holders:
            node = graph.nodes[holder]
            rel = Relation.INSIDE if affords(node, "put_inside") and (not affords(node, "put_on") or rng.random() < 0.5) else Relation.ONTOP
            trial = current.evolve(parent={**current.parent, obj: (holder, rel)})
            if evaluate_goal(goal, trial, graph).correct <= before:
                current = trial
                notes.append(_note(obj, old, holder, rel))
                break
    return current.check(), notes
