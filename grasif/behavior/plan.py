"""Ground-truth plans (:func:`ground_truth_plan`) and the steps that reach a final state (:func:`emit_plan`).

Candidates: the final state :class:`~grasif.behavior.search.GoalSearch` finds for the goal formula
(:func:`search_plan`) and each of bddl's ground goal options (:func:`ground_options`, up to 20)
whose literals give each object one parent and move no asset (:func:`plan_from_literals`). A
candidate becomes ``rearrange`` steps for the unmet parents, each preceded by ``open`` of the
closed containers on the way (after a ``go_to`` when needed), then ``open``/``turn_on``/
``turn_off``/``close``, the agent's room first and closing last; an object that must leave its
parent goes onto its room's floor. Steps whose removal keeps the plan successful (with and
without corrections) are dropped, and the shortest plan is kept. A returned plan succeeds with
and without the SGS's corrections; ``None`` when no candidate reaches the goal.
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

from grasif.behavior.convert import Converted
from grasif.behavior.search import GoalSearch
from grasif.behavior.source import Activity, quiet_stdout, require_bddl
from grasif.formula import Formula
from grasif.goals import GoalSpec
from grasif.validate import validate_plan
from sgs.actions import make, parse_action
from sgs.graph import Layer, Relation, SceneGraph, affords, node_class
from sgs.simulator import check, run_plan

def ground_options(act: Activity) -> list[list]:
    """bddl's ground goal options (lists of literals over bddl instances); empty when bddl has none."""
    bddl = require_bddl()
    from bddl.trivial_backend import TrivialBackend

    backend = TrivialBackend()
    scope = bddl.activity.get_object_scope(act.conds)
    try:
        with quiet_stdout():
            goal = bddl.activity.get_goal_conditions(act.conds, backend, scope)
            options = bddl.activity.get_ground_goal_state_options(act.conds, backend, scope, goal)
    except AssertionError:
        return []
    return [[head.body for head in option] for option in options]


class _Infeasible(Exception):
    pass


_STATE_ACTION = {"open": "open", "closed": "close", "on": "turn_on", "off": "turn_off"}


def plan_from_literals(graph: SceneGraph, literals: list, conv: Converted) -> list[str] | None:
    """A plan that makes every ground literal (over bddl instances) true, or ``None`` when the
    literals need two parents for an object, move an asset or cannot be carried out."""
    names = {**conv.names, **conv.rooms}
    moves: dict[str, tuple[str, str]] = {}
    keep_out: dict[str, set[tuple[str, str]]] = {}
    want: dict[str, str] = {}
    for lit in literals:
        negative = lit[0] == "not"
        pred, *args = lit[1] if negative else lit
        args = [names.get(a) for a in args]
        if None in args:
            return None
        if pred in ("ontop", "inside"):
            a, b = args
            if negative:
                keep_out.setdefault(a, set()).add((pred, b))
            elif moves.setdefault(a, (pred, b)) != (pred, b):
                return None
        elif pred in ("open", "toggled_on"):
            word = {("open", False): "open", ("open", True): "closed", ("toggled_on", False): "on", ("toggled_on", True): "off"}[pred, negative]
            if want.setdefault(args[0], word) != word:
                return None
        elif pred == "inroom":
            if (graph.place_of(args[0]) == args[1]) == negative:
                return None
        else:
            return None
    return emit_plan(graph, moves, keep_out, want)


def emit_plan(graph: SceneGraph, moves: dict[str, tuple[str, str]], keep_out: dict[str, set[tuple[str, str]]],
              want: dict[str, str]) -> list[str] | None:
    """Plan steps for final parents ``moves`` (object → (relation, destination)), parents each
    object must not end with (``keep_out``) and final states ``want`` (node → open/closed/on/off).

    Rearranges first (with ``open`` for closed containers on the way, after a ``go_to`` when the
    agent is elsewhere), then state changes, those in the agent's room first, closing last. An
    object whose initial parent is kept out and that is not moved goes onto its room's floor.
    ``None`` when something cannot be carried out (an asset to move, a step the SGS rejects
    without corrections).
    """
    moves = {a: m for a, m in moves.items() if graph.parent.get(a) != (m[1], Relation(m[0]))}
    if any(graph.nodes[a].layer is not Layer.OBJECT for a in moves):
        return None
    for a, banned in keep_out.items():
        if a in moves or graph.nodes[a].layer is not Layer.OBJECT:
            if a in moves and moves[a] in banned:
                return None
            continue
        par, rel = graph.parent[a]
        if (rel.value, par) in banned:
            room = graph.place_of(a)
            spots = [n for n in graph.names(Layer.ASSET) if graph.place_of(n) == room
                     and affords(graph.nodes[n], "put_on") and ("ontop", n) not in banned]
            spots.sort(key=lambda n: node_class(n) != "floor")
            if not spots:
                return None
            moves[a] = ("ontop", spots[0])
    plan: list[str] = []
    state = {"g": graph}

    def emit(action) -> None:
        out = check(state["g"], action, correct=False)
        if not out.ok:
            raise _Infeasible(out.feedback)
        state["g"] = out.graph
        plan.append(str(action))

    def go(place: str) -> None:
        if state["g"].agent.location != place:
            emit(make("go_to", place))

    def reach(node: str, open_self: bool) -> None:
        g = state["g"]
        for c in g.enclosing_closed(node) + ([node] if open_self and g.nodes[node].has("closed") else []):
            go(state["g"].place_of(c))
            emit(make("open", c))

    try:
        for a, (rel, b) in moves.items():
            reach(a, False)
            reach(b, rel == "inside")
            emit(make("rearrange", a, rel, b))
        for last in (False, True):  # closing comes last: it may hide what other steps need
            todo = [n for n, w in want.items() if (w == "closed") == last and not state["g"].nodes[n].has(w)]
            while todo:  # the agent's room first, then room by room
                here = [n for n in todo if state["g"].place_of(n) == state["g"].agent.location]
                node = (here or todo)[0]
                todo.remove(node)
                reach(node, False)
                go(state["g"].place_of(node))
                emit(make(_STATE_ACTION[want[node]], node))
    except _Infeasible:
        return None
    return plan


def search_plan(graph: SceneGraph, goal: GoalSpec, limit: int = 3000) -> list[str] | None:
    """A plan for the cheapest final state :class:`GoalSearch` finds for ``goal.formula``, or ``None``."""
    found = GoalSearch(graph, limit).solve(Formula.parse(goal.formula))
    if found is None:
        return None
    parents, forbid, states = found
    moves = {a: (rel.value, dest) for a, (dest, rel) in parents.items()}
    keep_out = {a: {(rel.value, dest) for dest, rel in banned} for a, banned in forbid.items()}
    want = {a: (w if v else {"open": "closed", "on": "off"}[w]) for (a, w), v in states.items()}
    return emit_plan(graph, moves, keep_out, want)


def plan_succeeds(graph: SceneGraph, plan: list[str], goal: GoalSpec) -> bool:
    """Whether ``plan`` reaches ``goal`` with every step feasible, with and without corrections."""
    return all(validate_plan(graph, plan, goal, correct=c).success for c in (False, True))


def _reaches(graph: SceneGraph, actions: list, formula, correct: bool) -> bool:
    """:func:`plan_succeeds` for one correction mode, on parsed actions and a parsed formula."""
    final, outcomes = run_plan(graph, actions, correct=correct)
    return all(o.ok for o in outcomes) and formula.evaluate(final)


def _minimize(graph: SceneGraph, plan: list[str], formula) -> list[str]:
    """Drop steps, last first, while the plan still succeeds in both correction modes."""
    actions = [parse_action(step) for step in plan]
    changed = True
    while changed:
        changed = False
        for i in range(len(actions) - 1, -1, -1):
            trial = actions[:i] + actions[i + 1:]
            if _reaches(graph, trial, formula, False) and _reaches(graph, trial, formula, True):
                actions, changed = trial, True
    return [str(a) for a in actions]


def ground_truth_plan(act: Activity, conv: Converted, graph: SceneGraph, goal: GoalSpec) -> list[str] | None:
    """The shortest plan over the candidates (module doc) that succeeds with and without the SGS's
    corrections, after dropping needless steps; ``[]`` when the goal holds already; ``None`` if
    no candidate reaches the goal."""
    formula = Formula.parse(goal.formula)
    if formula.evaluate(graph):
        return []
    candidates = [search_plan(graph, goal)] + [plan_from_literals(graph, lits, conv) for lits in ground_options(act)]
    unique = sorted({tuple(p) for p in candidates if p is not None}, key=lambda p: (len(p), candidates.index(list(p))))
    best: list[str] | None = None
    for plan in unique:
        if best is not None and len(plan) > len(best) + 4:
            break
        actions = [parse_action(step) for step in plan]
        if not _reaches(graph, actions, formula, False):
            continue
        plan = _minimize(graph, list(plan), formula)
        if best is None or len(plan) < len(best):
            best = plan
    if best is not None and not plan_succeeds(graph, best, goal):
        return None
    return best
