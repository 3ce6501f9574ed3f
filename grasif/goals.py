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

**Side effects** (the paper's success: "all objects are in the correct positions, assets are in
the desired states"). With ``unchanged_elsewhere`` a spec also says that everything it does not
name must end as in the initial graph; :func:`evaluate_goal` then needs that graph and lists every
departure from it in ``GoalResult.side_effects`` (see :func:`side_effects` for the rules: what
counts, the by-class exemptions). ``GoalResult.success`` is strict (goal units met and no side
effect); ``success_changed_only`` is the lenient verdict over the goal units alone. Precision
M^C/M is over the goal units only. Goals derived from a goal graph (:func:`goal_from_graphs`)
set it; BEHAVIOR's formula goals do not (bddl judges only its goal conditions).
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
    """What a task's final graph must satisfy. Empty spec = the task changes nothing.

    ``unchanged_elsewhere``: everything the goal does not name must end as in the initial graph
    (states of every asset and object, the parent of every object; the agent's place aside).
    Checking it needs the initial graph (:func:`evaluate_goal`)."""

    model_config = ConfigDict(extra="forbid")
    node_goals: list[NodeGoal] = Field(default_factory=list)
    count_goals: list[CountGoal] = Field(default_factory=list)
    formula: str | None = None
    unchanged_elsewhere: bool = False

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
            # here, not at the top: it adds ~0.015 s to every command's start (lookplangraph --help)
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
    """``items``: the goal units; ``side_effects``: departures from the initial graph outside the
    goal (only when the spec has ``unchanged_elsewhere``; then ``frame_checked`` is true)."""

    items: list[GoalItem]
    side_effects: list[GoalItem] = Field(default_factory=list)
    frame_checked: bool = False

    @property
    def success(self) -> bool:
        """Strict (the paper's): every goal unit met and nothing else changed."""
        return self.success_changed_only and not self.side_effects

    @property
    def success_changed_only(self) -> bool:
        """Lenient: every goal unit met, whatever else changed."""
        return all(i.ok for i in self.items)

    def not_met(self) -> list[str]:
        """One readable line per unmet goal unit, then per side effect."""
        lines = [f"{i.label}: expected {i.expected}; found {i.actual}" for i in self.items if not i.ok]
        return lines + [f"side effect: {i.label}: expected {i.expected}; found {i.actual}" for i in self.side_effects]

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


def evaluate_goal(spec: GoalSpec, graph: SceneGraph, initial: SceneGraph | None = None) -> GoalResult:
    """Check every part of ``spec`` on ``graph`` (a final graph). When ``spec.unchanged_elsewhere``,
    ``initial`` (the graph the plan started from) is required and the side effects are listed;
    a missing ``initial`` raises ``ValueError`` rather than passing the frame unchecked."""
    if spec.unchanged_elsewhere and initial is None:
        raise ValueError("this goal requires everything else unchanged: evaluate_goal needs the initial graph")
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
        # here, not at the top: it adds ~0.015 s to every command's start (lookplangraph --help)
        from grasif.formula import Formula

        formula = Formula.parse(spec.formula)
        for conjunct, ok in zip(formula.conjuncts(), formula.evaluate_conjuncts(graph)):
            items.append(GoalItem(label=str(conjunct), ok=ok, expected="true", actual=str(ok).lower(), correct=int(ok)))
    if not spec.unchanged_elsewhere:
        return GoalResult(items=items)
    return GoalResult(items=items, side_effects=side_effects(spec, graph, initial), frame_checked=True)


def already_met(spec: GoalSpec, graph: SceneGraph) -> list[str]:
    """Labels of the goal units that hold in ``graph`` already (a task's goal units must each be a
    change: the office split and generated tasks refuse one that is not)."""
    return [item.label for item in evaluate_goal(spec, graph, graph).items if item.ok]


def _expected_states(before: set[str], required: list[str], absent: list[str]) -> set[str]:
    """``before`` after a goal's state change: minus ``absent``, minus the opposites of the
    required states, plus the required states (what the goal graph says)."""
    gone = set(absent) | {OPPOSITE_STATE[s] for s in required if s in OPPOSITE_STATE}
    return (before - gone) | set(required)


def _state_words(want: set[str], have: set[str]) -> tuple[str, str]:
    """Readable (expected, found) for two state sets that differ: only the differing words;
    a word missing without its opposite in its place reads ``not <word>``."""
    extra, missing = sorted(have - want), sorted(want - have)
    expected = missing + [f"not {s}" for s in extra if OPPOSITE_STATE.get(s) not in missing]
    found = extra + [f"not {s}" for s in missing if OPPOSITE_STATE.get(s) not in extra]
    return ", ".join(expected), ", ".join(found)


def side_effects(spec: GoalSpec, graph: SceneGraph, initial: SceneGraph) -> list[GoalItem]:
    """Departures of ``graph`` from ``initial`` that ``spec`` does not ask for, one
    :class:`GoalItem` per node (label: the node; ``expected``/``actual`` readable, so that a line
    reads ``fridge-1: expected closed; found open``). Weight 0: not part of precision.

    Rules, for every node except places (the agent's place is not looked at):

    * **states** must equal the initial states, or for a node goal with states, the initial
      states minus ``absent_states`` minus the opposites of the required states plus the required
      states (the goal graph's states); the words the node goal itself names (its states, their
      opposites, its absent states) are left to its goal item, so an unmet goal is not also a
      side effect;
    * every object's **parent**/relation must be the initial one unless a node goal sets its
      relation; an object left in the agent's hand that was not held initially and that no goal
      asks to be held is a side effect (``found held by the agent``);
    * **count goals** judge by class: an instance of a count goal's class may end at its initial
      parent or at any count-goal destination of its class (with that relation), and with the
      initial states or those adjusted by such a count goal's states;
    * **formula** goals judge their own quantified classes and named nodes: instances of a class a
      quantifier ranges over (``?m - mug``) and nodes the formula names are exempt from the frame
      (the held rule still applies to them).
    """
    by_node: dict[str, list[NodeGoal]] = {}
    for g in spec.node_goals:
        by_node.setdefault(g.node, []).append(g)
    counts: dict[str, list[CountGoal]] = {}
    for g in spec.count_goals:
        counts.setdefault(g.cls, []).append(g)
    exempt_names: frozenset[str] = frozenset()
    exempt_classes: frozenset[str] = frozenset()
    if spec.formula:
        # here, not at the top: it adds ~0.015 s to every command's start (lookplangraph --help)
        from grasif.formula import Formula

        formula = Formula.parse(spec.formula)
        exempt_names, exempt_classes = formula.constants(), formula.classes()
    out: list[GoalItem] = []
    for name, before in initial.nodes.items():
        if before.layer is Layer.PLACE:
            continue
        node = graph.nodes.get(name)
        if node is None:
            out.append(GoalItem(label=name, ok=False, expected="present", actual="missing", weight=0))
            continue
        goals = by_node.get(name, [])
        cls = node_class(name)
        exempt = name in exempt_names or cls in exempt_classes
        problems: list[tuple[str, str]] = []
        # parent / relation
        old_edge, new_edge = initial.parent.get(name), graph.parent.get(name)
        if old_edge != new_edge and not any(g.relation is not None for g in goals):
            held_now = new_edge is not None and new_edge[1] is Relation.HELD
            allowed = {(g.destination, Relation(g.relation)) for g in counts.get(cls, [])}
            if held_now or not (exempt or new_edge in allowed):
                problems.append((_where(initial, name), _where(graph, name)))
        # states (the words a node goal names are judged by its goal item, not reported twice)
        if not exempt:
            want = set(before.states or ())
            covered: set[str] = set()
            for g in goals:
                want = _expected_states(want, g.states, g.absent_states)
                covered |= {*g.states, *g.absent_states, *(OPPOSITE_STATE[s] for s in g.states if s in OPPOSITE_STATE)}
            have = set(node.states or ()) - covered
            want -= covered
            options = [want] + [_expected_states(want, g.states, []) - covered for g in counts.get(cls, []) if g.states]
            if have not in options:
                problems.append(_state_words(want, have))
        if problems:
            out.append(GoalItem(label=name, ok=False, expected="; ".join(p[0] for p in problems),
                                actual="; ".join(p[1] for p in problems), weight=0))
    return out


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
    A goal graph describes the whole final scene, so the spec has ``unchanged_elsewhere``: what
    the goal graph keeps as in ``initial`` must stay so. Raises ``ValueError`` if ``goal`` lacks a
    node of ``initial`` (goals never delete nodes).
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
    return GoalSpec(node_goals=node_goals, count_goals=count_goals, unchanged_elsewhere=True)
