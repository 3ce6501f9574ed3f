"""Scene graph data model: scene → places → assets → objects, plus the agent.

A :class:`SceneGraph` is an immutable value. Every change (see :mod:`sgs.simulator`) returns a
new graph that shares the unchanged nodes with the old one, so keeping the history of an episode
is cheap and a rejected action can never leave a half-changed graph behind.

Structure rules (checked by :meth:`SceneGraph.check`):

* every asset has exactly one parent, a place (relation ``in_room``);
* every object has exactly one parent: an asset or another object (``ontop`` / ``inside``), or the
  agent while it is held (``held``);
* there are no cycles, the agent stands in a place and holds at most one object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Iterator, Mapping


class Layer(str, Enum):
    PLACE = "place"
    ASSET = "asset"
    OBJECT = "object"


class Relation(str, Enum):
    IN_ROOM = "in_room"  # asset -> place
    ONTOP = "ontop"
    INSIDE = "inside"
    HELD = "held"  # object -> agent


#: State words that exclude each other; setting one removes the other.
OPPOSITE_STATE = {"open": "closed", "closed": "open", "on": "off", "off": "on", "clean": "dirty", "dirty": "clean"}

_CLASS_RE = re.compile(r"^(.*?)(?:[-_]?\d+)?$")


def node_class(name: str) -> str:
    """Class of a node name: ``apple-1`` → ``apple``; also ``water_glass1`` → ``water_glass``."""
    return _CLASS_RE.match(name).group(1) or name


_CLASS_OF: dict[str, str] = {}  # memo of node_class by name
_INDEX_CACHE: dict[int, tuple[dict, dict[str, tuple[str, ...]]]] = {}
_INDEX_CACHE_SIZE = 32


def class_index(nodes: dict) -> dict[str, tuple[str, ...]]:
    """class → node names in graph order, cached by the identity of the (never mutated) nodes
    dict of a :class:`SceneGraph` (graphs derived with ``evolve`` share it until nodes change)."""
    hit = _INDEX_CACHE.get(id(nodes))
    if hit is not None and hit[0] is nodes:
        return hit[1]
    memo = _CLASS_OF
    if len(memo) > 200_000:
        memo.clear()
    index: dict[str, list[str]] = {}
    for name in nodes:
        cls = memo.get(name)
        if cls is None:
            cls = memo[name] = node_class(name)
        index.setdefault(cls, []).append(name)
    frozen = {k: tuple(v) for k, v in index.items()}
    if len(_INDEX_CACHE) >= _INDEX_CACHE_SIZE:
        _INDEX_CACHE.pop(next(iter(_INDEX_CACHE)))
    _INDEX_CACHE[id(nodes)] = (nodes, frozen)  # holds ``nodes`` so its id cannot be reused
    return frozen


class GraphError(ValueError):
    """A scene graph breaks a structure rule. ``problems`` lists one sentence per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        head = f"invalid scene graph ({len(problems)} problem{'s' if len(problems) != 1 else ''}): "
        super().__init__(head + "; ".join(problems))


@dataclass(frozen=True, slots=True, eq=True)
class Node:
    """One place, asset or object.

    ``states`` holds state words (``open``, ``closed``, ``on``, ``off``, ``clean``, ``dirty`` or
    any word a dataset brings). ``affordances``/``properties`` are ``None`` when the source did not
    give them; then :func:`affords` falls back on defaults by layer and state. ``extra`` keeps keys
    this model does not interpret so that saving writes them back unchanged.
    """

    name: str
    layer: Layer
    states: tuple[str, ...] | None = None
    affordances: tuple[str, ...] | None = None
    properties: tuple[str, ...] | None = None
    extra: Mapping[str, object] = field(default_factory=dict, compare=False, hash=False)

    def has(self, state: str) -> bool:
        return self.states is not None and state in self.states

    def with_state(self, state: str) -> "Node":
        """Copy with ``state`` set and its opposite (if any) removed."""
        old = self.states or ()
        opposite = OPPOSITE_STATE.get(state)
        if opposite in old:
            new = tuple(state if s == opposite else s for s in old if s != state)
        elif state in old:
            return self
        else:
            new = old + (state,)
        return replace(self, states=new)


def affords(node: Node, action: str) -> bool:
    """Whether ``node`` offers ``action`` (``pick_up``, ``put_on``, ``put_inside``, ``open``...).

    Uses the node's affordance list when the source gave one; otherwise defaults: objects can be
    picked up, assets and objects take ``put_on``/``put_inside``, nodes with an open/closed state
    open and close, nodes with an on/off state toggle.
    """
    if node.affordances is not None:
        if action in node.affordances:
            return True
        # Lists often name one half of a pair ("turn_on" only): accept its partner.
        partner = _AFFORDANCE_PARTNER.get(action)
        return partner is not None and partner in node.affordances
    if node.layer is Layer.PLACE:
        return False
    if action == "pick_up":
        return node.layer is Layer.OBJECT
    if action in ("put_on", "put_inside"):
        return True
    if action in ("open", "close"):
        return node.has("open") or node.has("closed")
    if action in ("turn_on", "turn_off"):
        return node.has("on") or node.has("off")
    return False


_AFFORDANCE_PARTNER = {"open": "close", "close": "open", "turn_on": "turn_off", "turn_off": "turn_on"}


@dataclass(frozen=True, slots=True)
class Agent:
    """The robot: where it stands (a place name or ``None`` before it is placed) and what it holds."""

    name: str = "agent-1"
    location: str | None = None
    holding: str | None = None


class SceneGraph:
    """Immutable scene graph. Build with the constructor, then :meth:`check`, or load with
    :func:`sgs.io.graph_from_dict`. Derive changed graphs with :meth:`evolve`."""

    __slots__ = ("nodes", "parent", "agent", "inspected", "meta", "_children")

    def __init__(
        self,
        nodes: dict[str, Node],
        parent: dict[str, tuple[str, Relation]],
        agent: Agent,
        inspected: frozenset[str] = frozenset(),
        meta: Mapping[str, object] | None = None,
    ):
        self.nodes = nodes
        self.parent = parent
        self.agent = agent
        self.inspected = inspected
        self.meta = meta if meta is not None else {}
        self._children: dict[str, list[str]] | None = None

    # -- derived views -------------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SceneGraph)
            and self.nodes == other.nodes
            and self.parent == other.parent
            and self.agent == other.agent
            and self.inspected == other.inspected
        )

    def __hash__(self) -> int:  # mutable-looking containers, but never mutated: hash by identity
        return id(self)

    def names(self, layer: Layer) -> list[str]:
        return [n for n, node in self.nodes.items() if node.layer is layer]

    @property
    def places(self) -> list[str]:
        return self.names(Layer.PLACE)

    def children(self, name: str) -> list[str]:
        """Direct children (assets of a place, objects on/inside a node, the held object of the agent)."""
        if self._children is None:
            index: dict[str, list[str]] = {}
            for child, (par, _) in self.parent.items():
                index.setdefault(par, []).append(child)
            self._children = index
        return self._children.get(name, [])

    def descendants(self, name: str) -> Iterator[str]:
        stack = list(reversed(self.children(name)))
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(self.children(n)))

    def place_of(self, name: str) -> str | None:
        """The place a node is in: itself for a place, the agent's location for what it holds."""
        node = self.nodes[name]
        if node.layer is Layer.PLACE:
            return name
        seen = 0
        while True:
            par, rel = self.parent[name]
            if rel is Relation.HELD:
                return self.agent.location
            if rel is Relation.IN_ROOM:
                return par
            name = par
            seen += 1
            if seen > len(self.nodes):  # only reachable on an unchecked, cyclic graph
                raise GraphError([f"{node.name}: parent chain has a cycle"])

    def is_held(self, name: str) -> bool:
        return self.agent.holding == name

    def enclosing_closed(self, name: str) -> list[str]:
        """Closed containers that hide ``name`` (it is, directly or through its parents, inside
        them), outermost first. Empty when ``name`` can be reached."""
        blockers: list[str] = []
        nodes, parent = self.nodes, self.parent
        while True:
            edge = parent.get(name)
            if edge is None:
                break
            par, rel = edge
            if rel is Relation.INSIDE and nodes[par].has("closed"):
                blockers.append(par)
            if rel is not Relation.INSIDE and rel is not Relation.ONTOP:
                break
            name = par
        blockers.reverse()
        return blockers

    def is_ancestor(self, ancestor: str, name: str) -> bool:
        """Whether ``ancestor`` lies on the parent chain of ``name`` (a node is not its own ancestor)."""
        parent = self.parent
        edge = parent.get(name)
        while edge is not None:
            par, rel = edge
            if par == ancestor:
                return True
            if rel is Relation.IN_ROOM or rel is Relation.HELD:
                return False
            edge = parent.get(par)
        return False

    # -- change --------------------------------------------------------------------------------
    def evolve(
        self,
        *,
        nodes: dict[str, Node] | None = None,
        parent: dict[str, tuple[str, Relation]] | None = None,
        agent: Agent | None = None,
        inspected: frozenset[str] | None = None,
    ) -> "SceneGraph":
        """New graph with the given parts replaced; unchanged parts are shared, not copied."""
        return SceneGraph(
            nodes if nodes is not None else self.nodes,
            parent if parent is not None else self.parent,
            agent if agent is not None else self.agent,
            inspected if inspected is not None else self.inspected,
            self.meta,
        )

    # -- structure check -----------------------------------------------------------------------
    def check(self) -> "SceneGraph":
        """Raise :class:`GraphError` listing every structure problem; return ``self`` if none."""
        problems: list[str] = []
        nodes, parent, agent = self.nodes, self.parent, self.agent
        for name, node in nodes.items():
            edge = parent.get(name)
            if node.layer is Layer.PLACE:
                if edge is not None:
                    problems.append(f"place {name}: a place has no parent, found {edge[0]}")
                continue
            if edge is None:
                problems.append(f"{node.layer.value} {name}: has no parent")
                continue
            par, rel = edge
            if rel is Relation.HELD:
                if node.layer is not Layer.OBJECT or agent.holding != name or par != agent.name:
                    problems.append(f"{node.layer.value} {name}: marked as held but the agent holds {agent.holding!r}")
                continue
            if par not in nodes:
                problems.append(f"{node.layer.value} {name}: unknown parent {par!r}")
                continue
            par_layer = nodes[par].layer
            if node.layer is Layer.ASSET:
                if rel is not Relation.IN_ROOM or par_layer is not Layer.PLACE:
                    problems.append(f"asset {name}: must be in a place, found {rel.value} {par}")
            elif rel is Relation.IN_ROOM or par_layer is Layer.PLACE:
                problems.append(f"object {name}: directly in place {par} without an asset; put it on or inside an asset")
            elif rel not in (Relation.ONTOP, Relation.INSIDE):
                problems.append(f"object {name}: unknown relation {rel!r}")
        for name in parent:
            if name not in nodes:
                problems.append(f"{name}: has a parent edge but is not a node")
        if not problems:
            problems.extend(self._cycles())
        if agent.location is not None and (agent.location not in nodes or nodes[agent.location].layer is not Layer.PLACE):
            problems.append(f"agent {agent.name}: location {agent.location!r} is not a place of the graph")
        if agent.holding is not None:
            if agent.holding not in nodes or nodes[agent.holding].layer is not Layer.OBJECT:
                problems.append(f"agent {agent.name}: holds {agent.holding!r}, which is not an object of the graph")
            elif parent.get(agent.holding) != (agent.name, Relation.HELD):
                problems.append(f"object {agent.holding}: held by the agent but also has parent {parent.get(agent.holding)}")
        for name in self.inspected:
            if name not in nodes:
                problems.append(f"inspected node {name!r} is not a node of the graph")
        if problems:
            raise GraphError(problems)
        return self

    def _cycles(self) -> list[str]:
        state: dict[str, int] = {}  # 1: on the chain being walked, 2: known to end in a place or the agent
        problems = []
        for start in self.parent:
            chain: list[str] = []
            name: str | None = start
            while name is not None and name in self.parent and name not in state:
                state[name] = 1
                chain.append(name)
                par, rel = self.parent[name]
                name = None if rel is Relation.HELD else par
            if name is not None and state.get(name) == 1:
                loop = chain[chain.index(name):] + [name]
                problems.append(f"object {name}: cycle {' -> '.join(loop)}")
            for n in chain:
                state[n] = 2
        return problems
