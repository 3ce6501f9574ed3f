"""A task's instruction (:func:`instruction`) and readable words for class names (:func:`label`).

``"<title>: <clauses>."``, one clause per group of goal nodes of one class with the same goal, each
group named with as few words as pick out exactly its nodes: class, then room, then support ("the
food that is on the floor in the dining room"), "every ..." when the group is all such nodes, the
node name only when nothing else does ("Turn on light: turn on the top light in the home
office."). A task with an empty goal gives ``"<title>: <description>"``.
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from grasif.goals import GoalSpec
from grasif.virtualhome.source import Program
from sgs.graph import Relation, SceneGraph

#: Readable words for class names that are not plain English.
_LABELS = {
    "food_food": "food", "coffe_maker": "coffee maker", "cpuscreen": "computer screen", "tvstand": "TV stand",
    "ceilinglamp": "ceiling lamp", "walllamp": "wall lamp", "tablelamp": "table lamp", "light": "top light",
    "closetdrawer": "closet drawer", "wallshelf": "wall shelf", "stovefan": "stove fan",
    "powersocket": "power socket", "doorjamb": "door jamb", "dishrack": "dish rack", "television": "TV",
}
_VERBS = {"on": "turn on", "off": "turn off", "open": "open", "closed": "close"}


def _cls(name: str) -> str:
    return name.rsplit("-", 1)[0]


def _label(name: str) -> str:
    cls = _cls(name)
    return _LABELS.get(cls, cls.replace("_", " "))


def label(name: str) -> str:
    """Readable words for a node's class (``food_food-1`` → ``food``, ``tvstand-1`` → ``TV stand``)."""
    return _label(name)


def _same_class(graph: SceneGraph, name: str) -> list[str]:
    cls = _cls(name)
    return [n for n in graph.nodes if _cls(n) == cls]


def _support(graph: SceneGraph, name: str) -> str:
    """``on the table`` / ``inside the fridge`` for an object; the parent by name if its class
    repeats in the room."""
    par, rel = graph.parent[name]
    room = graph.place_of(name)
    twins = [n for n in _same_class(graph, par) if graph.place_of(n) == room]
    what = f"the {_label(par)}" if len(twins) == 1 else par
    return f"{'on' if rel is Relation.ONTOP else 'inside'} {what}"


def _describe_group(graph: SceneGraph, names: list[str]) -> list[str]:
    """Noun phrases for ``names`` (nodes of one class that share a goal): as few words as pick out
    exactly these nodes — class, then room, then support — else each node by name."""
    names = list(names)
    phrases = []
    while names:
        name = names[0]
        label = _label(name)
        room = graph.place_of(name)
        in_room = f"in the {_label(room)}"
        edge = graph.parent.get(name)
        levels = [(_same_class(graph, name), f"the {label}", f"every {label}")]
        levels.append(([n for n in levels[0][0] if graph.place_of(n) == room], f"the {label} {in_room}", f"every {label} {in_room}"))
        if edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
            support = _support(graph, name)
            levels.append(([n for n in levels[1][0] if graph.parent.get(n) == edge],
                           f"the {label} that is {support} {in_room}", f"every {label} that is {support} {in_room}"))
        for matching, one, every in levels:
            if set(matching) <= set(names):
                phrases.append(one if len(matching) == 1 else every)
                names = [n for n in names if n not in matching]
                break
        else:
            where = f"{_support(graph, name)} {in_room}" if edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE) else in_room
            phrases.append(f"{name} (the {label} {where})")
            names = names[1:]
    return phrases


def instruction(program: Program, initial: SceneGraph, goal: GoalSpec) -> str:
    """``"<title>: <clauses>."``, one clause per group of goal nodes of one class with the same goal
    (see :func:`_describe_group`); no-change tasks give the RobotHow description instead."""
    title = program.title[:1].upper() + program.title[1:]
    if goal.is_empty():
        desc = program.description.strip()
        desc = desc[:1].upper() + desc[1:]
        return f"{title}: {desc}" + ("" if desc.endswith((".", "!", "?")) else ".")
    groups: dict[tuple, list[str]] = {}
    for g in goal.node_goals:
        key = (_cls(g.node), g.relation, g.destination, tuple(g.states), tuple(g.absent_states))
        groups.setdefault(key, []).append(g.node)
    clauses = []
    for (_, relation, destination, states, _), nodes in groups.items():
        for what in _describe_group(initial, nodes):
            parts = []
            if relation == "held":
                parts.append(f"pick up {what} and keep holding it")
            elif relation is not None:
                dest = _describe_group(initial, [destination])[0]
                parts.append(f"put {what} {'on' if relation == 'ontop' else 'inside'} {dest}")
            for state in states:
                parts.append(f"{_VERBS.get(state, 'make ' + state)} {'it' if parts else what}")
            clauses.append(" and ".join(parts))
    body = "; ".join(clauses) if len(clauses) > 2 else " and ".join(clauses)
    return f"{title}: {body}."
