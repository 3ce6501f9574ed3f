"""The agent's situation, said after a refused action (the planner's ``refusal_situation``).

A small model that had an action refused tends to repeat it with its slots shuffled: the
destination written as the object, an object it does not hold, a room or the held object itself as
the destination. :func:`situation` is what the feedback on a refusal adds so that the next answer
can be a valid one: where the agent is, what it holds and, while it holds something, the nodes of
its room that take it on top or inside (each with the form of the call). It reads the memory
graph only: the names are the view's, nothing the robot has not remembered. :func:`held_put` is
the correction for the commonest of those shuffles (the ``held_slot`` setting). See
``docs/concepts/loop.md`` ("The situation after a refusal").
"""

from __future__ import annotations

from sgs.actions import Action, make
from sgs.graph import Layer, SceneGraph, affords

#: At most this many destinations of each kind are named.
MAX_NAMED = 5


def destinations(graph: SceneGraph, unseen=frozenset()) -> dict[str, list[str]]:
    """``put_on``/``put_inside`` -> the nodes of the agent's room that take what it holds that
    way (its assets, and objects not only remembered as priors), at most :data:`MAX_NAMED`
    each; empty lists when it holds nothing."""
    out: dict[str, list[str]] = {"put_on": [], "put_inside": []}
    held, room = graph.agent.holding, graph.agent.location
    if held is None or room is None:
        return out
    for name in graph.descendants(room):  # what the agent holds hangs from the agent, not from the room
        node = graph.nodes[name]
        if name in unseen or graph.enclosing_closed(name):
            continue
        for fn in out:
            if affords(node, fn) and len(out[fn]) < MAX_NAMED:
                out[fn].append(name)
    return out


def situation(graph: SceneGraph, unseen=frozenset()) -> str:
    """``you are in kitchen-1 holding cup-1; here it can go put_on(table-1) or
    put_inside(fridge-1, sink-1)``, or ``you are in kitchen-1 and hold nothing`` (module doc)."""
    room = graph.agent.location or "no room yet"
    held = graph.agent.holding
    if held is None:
        return f"you are in {room} and hold nothing"
    where = destinations(graph, unseen)
    ways = [f"{fn}({', '.join(names)})" for fn, names in where.items() if names]
    text = f"you are in {room} holding {held}"
    if ways:
        text += f"; here it can go {' or '.join(ways)}"
    return text


def held_put(action: Action, graph: SceneGraph) -> Action | None:
    """``put_on``/``put_inside`` with its two slots shuffled, read as putting the held object:
    the held object's slot filled by something that cannot be held (a room, an asset) or by the
    destination itself (``put_inside(staff_room-1, fridge-2)`` while holding ``lunch_box-1`` ->
    ``put_inside(lunch_box-1, fridge-2)``), or the two slots swapped (``put_inside(fridge-2,
    lunch_box-1)`` -> the same). ``None`` when the action is not such a put, the agent holds
    nothing, or the object slot names another object (which it might mean to move)."""
    held = graph.agent.holding
    if (action.function_name not in ("put_on", "put_inside") or held is None or action.node is None
            or action.destination is None or action.node == held):
        return None
    node = graph.nodes.get(action.node)
    if action.destination == held:  # swapped: the destination is in the object slot
        return make(action.function_name, held, None, action.node) if node is not None else None
    if action.node != action.destination and (node is None or node.layer is Layer.OBJECT):
        return None
    return make(action.function_name, held, None, action.destination)
