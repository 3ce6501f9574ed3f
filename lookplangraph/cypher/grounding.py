"""Goal grounding built from GraSIF tasks, judged by semantic equivalence on a set of states.

The LM turns a task's instruction into a goal in the project's goal syntax
(:class:`grasif.goals.GoalSpec`). String equality would be wrong (``(and a b)`` = ``(and b a)``,
a node goal = the matching formula), so two goals are judged equivalent when they agree on every
state of a fixed set: the task's ground-truth final state, its initial state and near misses of
the final state (each change undone, moved to another asset or instance, state words flipped,
untouched nodes moved or flipped). A state is stored as its differences from the task's initial
graph (:class:`StateEdit`) with the reference verdict: the task goal's goal units on it
(``success_changed_only``; the "everything else unchanged" frame is not part of an
instruction's meaning).

A grounding is correct when it parses, names only nodes of the scene and gives the reference
verdict on every state. Docs: ``docs/guides/cypher.md`` (*Benchmarks*, Grounding).
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from grasif.formula import Formula, category_class
from grasif.goals import GoalSpec, changed_nodes, evaluate_goal
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.graph import OPPOSITE_STATE, Agent, GraphError, Layer, Relation, SceneGraph, node_class


#: near-miss states kept per item (a seeded sample when there are more)
MAX_NEAR_MISSES = 12


class StateEdit(BaseModel):
    """One node as it differs from the initial graph: ``parent``/``relation`` (``held``: in the
    agent's hand) and ``states``."""

    node: str
    parent: str | None = None
    relation: str | None = None
    states: list[str] | None = None


class JudgedState(BaseModel):
    label: str
    edits: list[StateEdit]
    agent_location: str | None = None
    expected: bool


class GroundingItem(BaseModel):
    """One instruction to ground. ``task`` is the GraSIF task id in ``split`` (its initial graph is
    the scene); ``goal`` the task's goal; ``states`` the judged states."""

    id: str
    split: str
    task: str
    instruction: str
    goal: dict[str, Any]
    states: list[JudgedState] = Field(default_factory=list)
    part: str = "dev"  # dev or heldout scenes (lookplangraph.cypher.benchmark)


class Verdict(BaseModel):
    correct: bool
    reason: str = ""
    disagreements: list[str] = Field(default_factory=list)


# -- states as edits ------------------------------------------------------------------------------
def edits_between(initial: SceneGraph, state: SceneGraph) -> list[StateEdit]:
    out = []
    for name, node in state.nodes.items():
        if node.layer is Layer.PLACE:
            continue
        before = initial.nodes[name]
        edge, old = state.parent.get(name), initial.parent.get(name)
        moved, restated = edge != old, set(node.states or ()) != set(before.states or ())
        if moved or restated:
            out.append(StateEdit(node=name, parent=edge[0] if moved else None,
                                 relation=edge[1].value if moved else None,
                                 states=list(node.states or ()) if restated else None))
    return out


def apply_edits(initial: SceneGraph, edits: list[StateEdit], agent_location: str | None) -> SceneGraph:
    """The state ``edits`` describe (checked; :class:`GraphError` if it breaks a structure rule)."""
    nodes, parent = dict(initial.nodes), dict(initial.parent)
    holding = initial.agent.holding
    for e in edits:
        if e.states is not None:
            nodes[e.node] = replace(nodes[e.node], states=tuple(e.states))
        if e.parent is not None:
            parent[e.node] = (e.parent, Relation(e.relation))
            if e.relation == "held":
                holding = e.node
            elif holding == e.node:
                holding = None
    agent = Agent(initial.agent.name, agent_location or initial.agent.location, holding)
    return initial.evolve(nodes=nodes, parent=parent, agent=agent).check()


# -- near misses ----------------------------------------------------------------------------------
def _move(g: SceneGraph, name: str, dest: str, rel: Relation) -> SceneGraph:
    parent = dict(g.parent)
    parent[name] = (dest, rel)
    agent = replace(g.agent, holding=None) if g.agent.holding == name else g.agent
    return g.evolve(parent=parent, agent=agent).check()


def _with_states(g: SceneGraph, name: str, states) -> SceneGraph:
    nodes = dict(g.nodes)
    nodes[name] = replace(nodes[name], states=tuple(states))
    return g.evolve(nodes=nodes)


def _flip(states: tuple[str, ...], word: str) -> tuple[str, ...]:
    other = OPPOSITE_STATE.get(word)
    return tuple(other if s == word else s for s in states) if other else tuple(s for s in states if s != word)


def _gain(states: tuple[str, ...], words: set[str]) -> tuple[str, ...]:
    """``states`` with ``words`` set (their opposites removed), order kept, new words sorted at the end."""
    gone = {OPPOSITE_STATE.get(w) for w in words}
    kept = tuple(s for s in states if s not in gone)
    return kept + tuple(sorted(w for w in words if w not in kept))


def near_misses(initial: SceneGraph, final: SceneGraph, rng: random.Random) -> list[tuple[str, SceneGraph]]:
    """Labelled near-miss states of ``final`` (see the module doc); structure-breaking ones are skipped."""
    out: list[tuple[str, SceneGraph]] = []
    changed = changed_nodes(initial, final)
    assets = sorted(initial.names(Layer.ASSET))
    by_class: dict[str, list[str]] = {}
    for name, node in final.nodes.items():
        if node.layer is not Layer.PLACE:
            by_class.setdefault(node_class(name), []).append(name)

    def add(label, make):
        try:
            out.append((label, make()))
        except (GraphError, KeyError):
            pass

    for n in changed:
        moved = initial.parent.get(n) != final.parent.get(n)
        restated = set(initial.nodes[n].states or ()) != set(final.nodes[n].states or ())
        if moved:
            old = initial.parent[n]
            if old[1] is not Relation.HELD:
                add(f"undo move of {n}", lambda n=n, old=old: _move(final, n, old[0], old[1]))
            others = [a for a in assets if a not in (old[0], final.parent[n][0])]
            if others:
                dest = rng.choice(others)
                add(f"{n} on {dest} instead", lambda n=n, dest=dest: _move(final, n, dest, Relation.ONTOP))
            dest, rel = final.parent[n]
            if rel is not Relation.HELD:
                twins = [t for t in by_class.get(node_class(dest), ()) if t != dest and not final.is_ancestor(n, t)]
                if twins:  # the same kind of destination, another instance: "the other desk"
                    twin = rng.choice(twins)
                    add(f"{n} {rel.value} {twin} instead", lambda n=n, twin=twin, rel=rel: _move(final, n, twin, rel))
        if restated:
            add(f"undo states of {n}", lambda n=n: _with_states(final, n, initial.nodes[n].states or ()))
            twins = [t for t in by_class.get(node_class(n), ()) if t not in changed]
            if twins:  # the change made to another instance of the same class instead
                twin = rng.choice(twins)
                gained = set(final.nodes[n].states or ()) - set(initial.nodes[n].states or ())
                add(f"state change on {twin} instead of {n}", lambda n=n, twin=twin, gained=gained: _with_states(
                    _with_states(final, n, initial.nodes[n].states or ()), twin,
                    _gain(final.nodes[twin].states or (), gained)))
            for word in sorted(set(final.nodes[n].states or ()) - set(initial.nodes[n].states or ())):
                add(f"flip {word} of {n}", lambda n=n, word=word: _with_states(final, n, _flip(final.nodes[n].states, word)))
    untouched = sorted(n for n in final.names(Layer.OBJECT) if n not in changed and final.parent[n][1] is not Relation.HELD
                       and not any(final.is_ancestor(n, c) for c in changed))
    for n in rng.sample(untouched, min(2, len(untouched))):
        dest = rng.choice([a for a in assets if a != final.parent[n][0]] or assets)
        add(f"unrelated {n} moved to {dest}", lambda n=n, dest=dest: _move(final, n, dest, Relation.ONTOP))
    flippable = sorted((n, s) for n, node in final.nodes.items() if n not in changed and node.layer is not Layer.PLACE
                       for s in node.states or () if s in OPPOSITE_STATE)
    for n, s in rng.sample(flippable, min(2, len(flippable))):
        add(f"unrelated flip {s} of {n}", lambda n=n, s=s: _with_states(final, n, _flip(final.nodes[n].states, s)))
    return out


def reference_verdict(goal: GoalSpec, state: SceneGraph) -> bool:
    """The goal units of ``goal`` on ``state``, without the unchanged-elsewhere frame."""
    return evaluate_goal(goal.model_copy(update={"unchanged_elsewhere": False}), state).success_changed_only


def build_item(task: Task, seed: int = 0) -> GroundingItem | None:
    """The grounding item of ``task``, or None when its goal is empty, already met at the start,
    or not reached by its ground-truth plan."""
    if task.goal.is_empty() or not task.ground_truth_plan:
        return None
    initial = task.graph
    report = validate_plan(initial, task.ground_truth_plan, task.goal)
    final = report.final_graph
    if not report.success_changed_only or reference_verdict(task.goal, initial):
        return None
    rng = random.Random(f"{seed}:{task.split}:{task.id}")
    misses = near_misses(initial, final, rng)
    if len(misses) > MAX_NEAR_MISSES:
        keep = sorted(rng.sample(range(len(misses)), MAX_NEAR_MISSES))
        misses = [misses[i] for i in keep]
    states = [("ground-truth final state", final), ("initial state", initial)] + misses
    judged, seen = [], set()
    for label, g in states:
        edits = edits_between(initial, g)
        key = (repr(edits), g.agent.location)
        if key in seen:
            continue
        seen.add(key)
        judged.append(JudgedState(label=label, edits=edits, agent_location=g.agent.location,
                                  expected=reference_verdict(task.goal, g)))
    return GroundingItem(id=f"{task.split}-goal-{task.id}", split=task.split, task=task.id,
                         instruction=task.instruction, goal=task.goal.model_dump(exclude_defaults=True), states=judged)


# -- judging --------------------------------------------------------------------------------------
#: :func:`parse_goal`'s reason for a goal that asks for nothing
EMPTY_GOAL = "the goal is empty"


def parse_goal(answer: Any) -> GoalSpec:
    """The LM's goal (a dict in GoalSpec form, or a formula string); ``ValueError`` if unreadable
    (a formula that does not parse included: :class:`grasif.formula.FormulaError`) or empty
    (:data:`EMPTY_GOAL`)."""
    if isinstance(answer, str):
        answer = {"formula": answer}
    if not isinstance(answer, dict):
        raise ValueError(f"a goal is a JSON object with node_goals, count_goals and/or formula, got {answer!r}")
    cleaned = {k: v for k, v in answer.items() if v not in (None, [], "")}
    try:
        spec = GoalSpec.model_validate(cleaned)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"goal: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if spec.is_empty():
        raise ValueError(EMPTY_GOAL)
    if spec.formula:
        Formula.parse(spec.formula)
    return spec.model_copy(update={"unchanged_elsewhere": False})


def referenced(goal: GoalSpec) -> tuple[set[str], set[str]]:
    """``(names, classes)`` a goal refers to: the nodes it names (node goals' nodes and
    destinations, count goals' destinations, the formula's constants) and the classes it ranges
    over without naming nodes (count goals' classes, the formula's quantifiers)."""
    names, classes = set(), set()
    for g in goal.node_goals:
        names.update(n for n in (g.node, g.destination) if n)
    for g in goal.count_goals:
        names.add(g.destination)
        classes.add(g.cls)
    if goal.formula:
        f = Formula.parse(goal.formula)
        names |= set(f.constants())
        classes |= {category_class(c) for c in f.classes()}
    return names, classes


def judge(item: GroundingItem, initial: SceneGraph, answer: Any) -> Verdict:
    """Whether ``answer`` (the LM's goal) agrees with the item's reference on every state."""
    try:
        spec = parse_goal(answer)
        problems = spec.check_names(initial)
    except ValueError as exc:  # FormulaError included
        return Verdict(correct=False, reason=str(exc)[:300])
    if problems:
        return Verdict(correct=False, reason="; ".join(problems)[:300])
    wrong = []
    for st in item.states:
        g = apply_edits(initial, st.edits, st.agent_location)
        try:
            got = evaluate_goal(spec, g).success_changed_only
        except ValueError as exc:
            return Verdict(correct=False, reason=f"cannot evaluate the goal: {exc}"[:300])
        if got != st.expected:
            wrong.append(f"{st.label}: expected {st.expected}, goal says {got}")
    return Verdict(correct=not wrong, reason="" if not wrong else f"disagrees on {len(wrong)} of {len(item.states)} states",
                   disagreements=wrong)
