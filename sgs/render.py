"""Human-readable text views of a scene graph (for the CLI and traces)."""

from __future__ import annotations

from sgs.graph import Layer, Relation, SceneGraph


def _label(graph: SceneGraph, name: str) -> str:
    node = graph.nodes[name]
    parts = [name]
    edge = graph.parent.get(name)
    if edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
        parts.append(f"({edge[1].value})")
    if node.states:
        parts.append("[" + ", ".join(node.states) + "]")
    if name in graph.inspected:
        parts.append("*inspected*")
    return " ".join(parts)


def render_tree(graph: SceneGraph) -> str:
    """The graph as an indented tree: places, their assets, the objects on/inside them, the agent."""
    lines: list[str] = []

    def walk(name: str, prefix: str, last: bool) -> None:
        lines.append(f"{prefix}{'└── ' if last else '├── '}{_label(graph, name)}")
        kids = graph.children(name)
        for i, kid in enumerate(kids):
            walk(kid, prefix + ("    " if last else "│   "), i == len(kids) - 1)

    for place in graph.names(Layer.PLACE):
        here = " (agent here)" if graph.agent.location == place else ""
        lines.append(f"{place}{here}")
        kids = graph.children(place)
        for i, kid in enumerate(kids):
            walk(kid, "", i == len(kids) - 1)
    agent = graph.agent
    lines.append(f"{agent.name}: in {agent.location or 'no place'}, holding {agent.holding or 'nothing'}")
    held = graph.children(agent.name)
    for i, kid in enumerate(held):
        walk(kid, "", i == len(held) - 1)
    counts = {layer: len(graph.names(layer)) for layer in Layer}
    lines.append(f"{counts[Layer.PLACE]} places, {counts[Layer.ASSET]} assets, {counts[Layer.OBJECT]} objects")
    return "\n".join(lines)
