"""SG-RwR's trusted prelude (not imported by the host: its source runs first in the sandboxed
child, with ``DATA`` bound to :func:`lookplangraph.planners.sgrwr.graphdata.graph_data`'s output).

It builds ``G``, the networkx DiGraph of ``prompts/sgrwr_schema.txt``, and the Reasoner's tools
(``prompts/sgrwr_tools.txt``). The tools read the graph through a closure, so that deleting ``G``
from the namespace (the Reasoner's prelude does) leaves them working.
"""
# DATA is bound by the sandbox before this source runs.
import networkx as nx


def _build(data):
    graph = nx.DiGraph()
    for entry in data["nodes"]:
        graph.add_node(entry["name"], **entry)
    agent = data["agent"]
    graph.add_node(agent["name"], name=agent["name"], layer="agent", states=[], affordances=[], properties=[],
                   holding=agent["holding"], **{"class": "agent"})
    for child, holder, relation in data["edges"]:
        graph.add_edge(child, holder, relation=relation)
    if agent["location"] is not None:
        graph.add_edge(agent["name"], agent["location"], relation="in_room")
    return graph


G = _build(DATA)  # noqa: F821


def _tools(graph):
    def _holder(node):
        for parent in graph.successors(node):
            return parent, graph.edges[node, parent]["relation"]
        return None, None

    def _need(node):
        if node not in graph:
            raise ValueError(f"no node named {node!r} in the graph")

    def room_of(node):
        """The room ``node`` is in (the agent's room for what it holds); None if it has none."""
        _need(node)
        seen = set()
        while node not in seen:
            seen.add(node)
            if graph.nodes[node]["layer"] == "room":
                return node
            parent, relation = _holder(node)
            if parent is None:
                return None
            node = parent
        return None

    def closed_around(node):
        """Closed containers holding ``node`` (directly or through its holders), outermost first."""
        _need(node)
        closed = []
        while True:
            parent, relation = _holder(node)
            if parent is None or relation not in ("ontop", "inside"):
                break
            if relation == "inside" and "closed" in graph.nodes[parent]["states"]:
                closed.append(parent)
            node = parent
        return closed[::-1]

    def fetch_steps(obj):
        """Actions that walk to ``obj``'s room, open what hides it and pick it up."""
        room = room_of(obj)
        return [f"go_to({room})"] + [f"open({c})" for c in closed_around(obj)] + [f"pick_up({obj})"]

    def place_steps(relation, destination):
        """Actions that walk to ``destination``'s room, open what it needs and put the held object
        ``relation`` ("ontop" or "inside") it."""
        if relation not in ("ontop", "inside"):
            raise ValueError('relation is "ontop" or "inside"')
        room = room_of(destination)
        steps = [f"go_to({room})"] + [f"open({c})" for c in closed_around(destination)]
        if relation == "inside":
            if "closed" in graph.nodes[destination]["states"]:
                steps.append(f"open({destination})")
            steps.append(f"put_inside({destination})")
        else:
            steps.append(f"put_on({destination})")
        return steps

    return room_of, closed_around, fetch_steps, place_steps


room_of, closed_around, fetch_steps, place_steps = _tools(G)
del _build, _tools, DATA  # noqa: F821
