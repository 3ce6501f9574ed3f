"""Goal specifications and their check on a final scene graph.

A :class:`GoalSpec` combines three kinds of goal; a task may use any of them:

* **node goals** — one named node must end with a given parent/relation and/or states
  (usually derived with :func:`goal_from_graphs` from an initial and a goal graph: the changed nodes);
* **count goals** — at least ``count`` nodes of a class must end in a relation to a destination
  ("any 3 bottles on table-1"), checked by class, not by id, as the paper's validator does;
* a **formula** — a quantified logical goal in BDDL syntax (:mod:`grasif.formula`).

:func:`evaluate_goal` returns one :class:`GoalItem` per checkable unit with its weight in the
paper's plan precision M^C/M: a node goal counts 1, a count goal counts ``count`` (satisfied up to
the number found), a formula counts 1 per top-level conjunct.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sgs.graph import OPPOSITE_STATE, Layer, Relation, SceneGraph, node_class

GoalRelation = Literal["ontop", "inside", "held"]


class NodeGoal(BaseModel):
    """``node`` must end ``relation`` ``destination`` (``held``: in the agent's hand) and have every
    state in ``states`` and none in ``absent_states``. Unset parts are not checked."""

    model_config = ConfigDict(extra="forbid")
    node: str
    relation: GoalRelation | None = None
    destination: str | None = None
    states: list[str] = Field(default_factory=list)
    absent_states: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _relation_with_destination(self):
        if self.relation in ("ontop", "inside") and not self.destination:
            raise ValueError(f"node goal {self.node}: relation {self.relation} needs a destination")
        if self.destination and self.relation is None:
            raise ValueError(f"node goal {self.node}: destination {self.destination} needs a relation")
        return self


class CountGoal(BaseModel):
    """At least ``count`` nodes of class ``cls`` end ``relation`` ``destination`` with ``states``."""

    model_config = ConfigDict(extra="forbid")
    cls: str
    relation: Literal["ontop", "inside"]
    destination: str
    count: int = Field(ge=1)
    states: list[str] = Field(default_factory=list)


class GoalSpec(BaseModel):
    """What a task's final graph must satisfy. Empty spec = the task changes nothing."""

    model_config = ConfigDict(extra="forbid")
    node_goals: list[NodeGoal] = Field(default_factory=list)
    count_goals: list[CountGoal] = Field(default_factory=list)
    formula: str | None = None

    def is_empty(self) -> bool:
        return not self.node_goals and not self.count_goals and not self.formula

    def check_names(self, graph: SceneGraph) -> list[str]:
        """Problems with names that the goal refers to but ``graph`` lacks (empty if none)."""
        problems = []
        for g in self.node_goals:
            for name in (g.node, g.destination):
                if name is not None and name not in graph.nodes:
                    problems.append(f"node goal refers to unknown node {name!r}")
        for g in self.count_goals:
            if g.destination not in graph.nodes:
                problems.append(f"count goal refers to unknown node {g.destination!r}")
        if self.formula:
            from grasif.formula import Formula

            problems += Formula.parse(self.formula).check_names(graph)
        return problems


class GoalItem(BaseModel):
    """One checked unit of a goal: ``correct`` of ``weight`` counted toward plan precision."""

    label: str
    ok: bool
    expected: str
    actual: str
    weight: int = 1
    correct: int = 0


class GoalResult(BaseModel):
    items: list[GoalItem]

    @property
    def success(self) -> bool:
        return all(i.ok for i in self.items)

    @property
    def total(self) -> int:
        return sum(i.weight for i in self.items)

    @property
    def correct(self) -> int:
        return sum(i.correct for i in self.items)

    @property
    def precision(self) -> float:
        """M^C / M; 1.0 for a goal with nothing to change."""
        return self.correct / self.total if self.total else 1.0


def _where(graph: SceneGraph, name: str) -> str:
    edge = graph.parent.get(name)
    if edge is None:
        return "nowhere"
    par, rel = edge
    return "held by the agent" if rel is Relation.HELD else f"{rel.value} {par}"


def evaluate_goal(spec: GoalSpec, graph: SceneGraph) -> GoalResult:
    """Check every part of ``spec`` on ``graph`` (a final graph)."""
    items: list[GoalItem] = []
    for g in spec.node_goals:
        items.append(_node_item(g, graph))
    for g in spec.count_goals:
        found = [
            n for n, (par, rel) in graph.parent.items()
            if par == g.destination and rel.value == g.relation and node_class(n) == g.cls
            and all(graph.nodes[n].has(s) for s in g.states)
        ]
        k = min(len(found), g.count)
        items.append(GoalItem(
            label=f"{g.count} {g.cls} {g.relation} {g.destination}",
            ok=len(found) >= g.count, expected=f">= {g.count}", actual=f"{len(found)} ({', '.join(found) or 'none'})",
            weight=g.count, correct=k,
        ))
    if spec.formula:
        from grasif.formula import Formula

        formula = Formula.parse(spec.formula)
        for conjunct, ok in zip(formula.conjuncts(), formula.evaluate_conjuncts(graph)):
            items.append(GoalItem(label=str(conjunct), ok=ok, expected="true", actual=str(ok).lower(), correct=int(ok)))
    return GoalResult(items=items)


def _node_item(g: NodeGoal, graph: SceneGraph) -> GoalItem:
    want, have = [], []
    ok = True
    node = graph.nodes.get(g.node)
    if node is None:
        return GoalItem(label=g.node, ok=False, expected="node exists", actual="missing")
    if g.relation is not None:
        edge = graph.parent.get(g.node)
        if g.relation == "held":
            good = graph.agent.holding == g.node
            want.append("held by the agent")
        else:
            good = edge is not None and edge[0] == g.destination and edge[1].value == g.relation
            want.append(f"{g.relation} {g.destination}")
        have.append(_where(graph, g.node))
        ok &= good
    if g.states or g.absent_states:
        ok &= all(node.has(s) for s in g.states) and not any(node.has(s) for s in g.absent_states)
        want.append(", ".join([*g.states, *(f"not {s}" for s in g.absent_states)]))
        have.append(", ".join(node.states or ()) or "no states")
    return GoalItem(label=g.node, ok=ok, expected="; ".join(want), actual="; ".join(have), correct=int(ok))


def changed_nodes(initial: SceneGraph, goal: SceneGraph) -> list[str]:
    """Names of nodes whose parent/relation or states differ between the two graphs."""
    out = []
    for name, node in goal.nodes.items():
        if node.layer is Layer.PLACE:
            continue
        before = initial.nodes.get(name)
        if before is None or initial.parent.get(name) != goal.parent.get(name) or set(before.states or ()) != set(node.states or ()):
            out.append(name)
    return out


def goal_from_graphs(initial: SceneGraph, goal: SceneGraph, *, by_class: bool = False) -> GoalSpec:
    """Node goals for the nodes that change from ``initial`` to ``goal``.

    With ``by_class``, moved objects become count goals instead: for each (class, relation,
    destination) that receives an object, the goal graph's number of that class there.
    Raises ``ValueError`` if ``goal`` lacks a node of ``initial`` (goals never delete nodes).
    """
    missing = [n for n in initial.nodes if n not in goal.nodes]
    if missing:
        raise ValueError(f"goal graph lacks nodes of the initial graph: {', '.join(missing[:5])}")
    node_goals: list[NodeGoal] = []
    counted: dict[tuple[str, str, str], int] = {}
    for name in changed_nodes(initial, goal):
        node, before = goal.nodes[name], initial.nodes.get(name)
        edge = goal.parent.get(name)
        moved = before is None or initial.parent.get(name) != edge
        old_states = set(before.states or ()) if before else set()
        new_states = set(node.states or ())
        states_changed = old_states != new_states
        if moved and by_class and edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
            counted[(node_class(name), edge[1].value, edge[0])] = 0
            moved = False
        if not moved and not states_changed:
            continue
        relation = destination = None
        if moved and edge is not None:
            relation = "held" if edge[1] is Relation.HELD else edge[1].value
            destination = None if edge[1] is Relation.HELD else edge[0]
        node_goals.append(NodeGoal(
            node=name, relation=relation, destination=destination,
            states=sorted(new_states - old_states) if states_changed else [],
            # a state replaced by its opposite ("off" -> "on") is implied by the required state
            absent_states=sorted(s for s in old_states - new_states if OPPOSITE_STATE.get(s) not in new_states)
            if states_changed else [],
        ))
    count_goals = []
    for (cls, rel, dest) in counted:
        n = sum(1 for c, (par, r) in goal.parent.items() if par == dest and r.value == rel and node_class(c) == cls)
        count_goals.append(CountGoal(cls=cls, relation=rel, destination=dest, count=n))
    return GoalSpec(node_goals=node_goals, count_goals=count_goals)
