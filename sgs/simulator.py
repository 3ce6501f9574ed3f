"""The Scene Graph Simulator (SGS): a pure function of (graph, action).

* :func:`apply` executes one *primitive* action (``go_to``, ``pick_up``, ``put_on``, ``put_inside``,
  ``open``, ``close``, ``turn_on``, ``turn_off``, ``discover_objects``, ``done``) whose
  preconditions hold, and raises :class:`Infeasible` otherwise. Preconditions and effects follow
  the paper's PDDL domain: one hand; pick up only what is reachable (nothing on the way up its
  parent chain is a closed container it is inside); put inside only into an open container;
  acting on a node needs the agent in the node's place; toggles and open/close need the
  affordance and the opposite state.
* :func:`check` takes any action the LM may write (``rearrange`` included) and returns an
  :class:`Outcome`: either the list of primitive actions that carry it out, with the rule-based
  corrections inserted, and the graph after them; or feedback for the LM and the graph unchanged.

Corrections (``correct=True``): ``rearrange`` expands into ``[go_to] [open…] pick_up [go_to]
[open…] put``; ``go_to`` is inserted when the agent must change places, ``open`` for each closed
container that hides the node or is the destination of ``put_inside``; a unique near-match of a
name (case, spaces, a bare class with one instance) is resolved; a put naming an object not in
the (empty) hand is read as ``rearrange``. With ``correct=False`` none of these are applied
(``rearrange`` still expands into its own steps) and the first unmet precondition is the feedback.
Everything that cannot be inferred is feedback. The rules in full: ``docs/concepts/sgs.md``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from sgs.actions import FUNCTIONS, RELATIONS, Action, make
from sgs.graph import Layer, Relation, SceneGraph, affords, class_index, node_class


class Infeasible(Exception):
    """A primitive action whose preconditions do not hold; ``str(exc)`` is feedback for the LM."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """Result of :func:`check`.

    ``ok`` — the action can be carried out; then ``actions`` are the primitive steps (corrections
    included), ``graph`` the graph after them and ``corrections`` one note per inserted or changed
    step. Otherwise ``feedback`` says why and ``graph`` is the input graph, unchanged.
    """

    ok: bool
    actions: tuple[Action, ...]
    graph: SceneGraph
    feedback: str | None = None
    corrections: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# primitive actions
# ---------------------------------------------------------------------------------------------
def apply(graph: SceneGraph, action: Action) -> SceneGraph:
    """Execute one primitive action; raise :class:`Infeasible` if a precondition fails.

    Never mutates ``graph``; returns a new graph (or ``graph`` itself for ``done``).
    """
    fn = action.function_name
    handler = _APPLY.get(fn)
    if handler is None:
        if fn == "rearrange":
            raise Infeasible("rearrange is not a primitive action; use check() to expand it")
        raise Infeasible(_unknown_function(fn))
    return handler(graph, action)


def _need_node(graph: SceneGraph, name: str | None, fn: str, role: str = "node"):
    if not name:
        raise Infeasible(f"{fn} needs a {role} name")
    node = graph.nodes.get(name)
    if node is None:
        raise Infeasible(unknown_node_feedback(graph, name))
    return node


def _need_here(graph: SceneGraph, name: str, fn: str) -> None:
    place = graph.place_of(name)
    if graph.agent.location != place:
        where = graph.agent.location or "no place yet"
        raise Infeasible(f"{name} is in {place} but you are in {where}; go_to({place}) first")


def _need_reachable(graph: SceneGraph, name: str, fn: str) -> None:
    blockers = graph.enclosing_closed(name)
    if blockers:
        raise Infeasible(f"{name} is inside {blockers[-1]}, which is closed; open({blockers[0]}) first")


def _go_to(graph: SceneGraph, a: Action) -> SceneGraph:
    node = _need_node(graph, a.node, "go_to", "room")
    if node.layer is not Layer.PLACE:
        raise Infeasible(f"go_to takes a room; {a.node} is {_a(node.layer.value)} in {graph.place_of(a.node)}, so use go_to({graph.place_of(a.node)})")
    if graph.agent.location == a.node:
        return graph
    return graph.evolve(agent=replace(graph.agent, location=a.node))


def _pick_up(graph: SceneGraph, a: Action) -> SceneGraph:
    node = _need_node(graph, a.node, "pick_up", "object")
    name = a.node
    if node.layer is not Layer.OBJECT:
        raise Infeasible(f"{name} is {_a(node.layer.value)} and cannot be picked up; only objects can")
    if not affords(node, "pick_up"):
        raise Infeasible(f"{name} cannot be picked up (its affordances: {', '.join(node.affordances or ()) or 'none'})")
    holding = graph.agent.holding
    if holding == name:
        raise Infeasible(f"you already hold {name}")
    if holding is not None:
        raise Infeasible(f"you hold {holding} and have one hand; put {holding} somewhere before picking up {name}")
    _need_here(graph, name, "pick_up")
    _need_reachable(graph, name, "pick_up")
    parent = dict(graph.parent)
    parent[name] = (graph.agent.name, Relation.HELD)
    return graph.evolve(parent=parent, agent=replace(graph.agent, holding=name))


def _put(graph: SceneGraph, a: Action) -> SceneGraph:
    fn = a.function_name
    relation = Relation.ONTOP if fn == "put_on" else Relation.INSIDE
    dest_name = a.destination if a.destination is not None else a.node
    holding = graph.agent.holding
    if holding is None:
        raise Infeasible(f"{fn} puts down the object you hold, but you hold nothing; pick_up an object first")
    if a.node is not None and a.destination is not None and a.node != holding:
        raise Infeasible(f"you hold {holding}, not {a.node}")
    dest = _need_node(graph, dest_name, fn, "destination")
    if dest.layer is Layer.PLACE:
        raise Infeasible(f"{dest_name} is a room; put things on or inside an asset or object in it")
    if dest_name == holding or graph.is_ancestor(holding, dest_name):
        raise Infeasible(f"cannot put {holding} {relation.value} {dest_name}: {dest_name} is {holding} or is carried with it")
    if not affords(dest, fn):
        raise Infeasible(_relation_feedback(dest, relation.value))
    _need_here(graph, dest_name, fn)
    _need_reachable(graph, dest_name, fn)
    if relation is Relation.INSIDE and dest.has("closed"):
        raise Infeasible(f"{dest_name} is closed; open({dest_name}) before putting {holding} inside")
    parent = dict(graph.parent)
    parent[holding] = (dest_name, relation)
    return graph.evolve(parent=parent, agent=replace(graph.agent, holding=None))


#: The state each state-changing function brings about.
TARGET_STATE = {"open": "open", "close": "closed", "turn_on": "on", "turn_off": "off"}


def _set_state(graph: SceneGraph, a: Action) -> SceneGraph:
    fn = a.function_name
    node = _need_node(graph, a.node, fn)
    name = a.node
    if node.layer is Layer.PLACE:
        raise Infeasible(f"{name} is a room; {fn} acts on an asset or object")
    if not affords(node, fn):
        raise Infeasible(f"{name} cannot {fn.replace('_', ' ')} (its affordances: {', '.join(node.affordances or ()) or 'none'})")
    target = TARGET_STATE[fn]
    if node.has(target):
        raise Infeasible(f"{name} is already {target}")
    _need_here(graph, name, fn)
    _need_reachable(graph, name, fn)
    nodes = dict(graph.nodes)
    nodes[name] = node.with_state(target)
    return graph.evolve(nodes=nodes)


def _discover(graph: SceneGraph, a: Action) -> SceneGraph:
    node = _need_node(graph, a.node, "discover_objects")
    name = a.node
    if node.layer is Layer.PLACE:
        raise Infeasible(f"{name} is a room; discover_objects looks on and inside one asset or object, e.g. one of the assets in {name}")
    if name in graph.inspected:
        raise Infeasible(f"{name} was already inspected; what is on and inside it is already in the graph")
    _need_here(graph, name, "discover_objects")
    _need_reachable(graph, name, "discover_objects")
    return graph.evolve(inspected=graph.inspected | {name})


def _done(graph: SceneGraph, a: Action) -> SceneGraph:
    return graph


_APPLY = {
    "go_to": _go_to,
    "pick_up": _pick_up,
    "put_on": _put,
    "put_inside": _put,
    "open": _set_state,
    "close": _set_state,
    "turn_on": _set_state,
    "turn_off": _set_state,
    "discover_objects": _discover,
    "done": _done,
}


# ---------------------------------------------------------------------------------------------
# check: validation, correction, feedback
# ---------------------------------------------------------------------------------------------
def check(graph: SceneGraph, action: Action, *, correct: bool = True) -> Outcome:
    """Validate ``action`` against ``graph``; correct it by rule when ``correct`` (see module doc)."""
    notes: list[str] = []
    try:
        action = _resolve_names(graph, action, correct, notes)
        steps, g, done = _expand(graph, action, correct, notes)
        for step in steps[done:]:
            g = apply(g, step)
    except Infeasible as exc:
        return Outcome(False, (), graph, f"{_describe(action)}: {exc}")
    return Outcome(True, tuple(steps), g, None, tuple(notes))


def hallucination(graph: SceneGraph, action: Action) -> str | None:
    """Feedback when ``action`` cannot even be tried in ``graph``: an unknown function, a missing
    or malformed argument, or a name that is no node (the paper's *hallucinations*, re-prompted
    even without correction); ``None`` when it names real things in a well-formed call."""
    fn = action.function_name
    if fn not in FUNCTIONS:
        return f"{_describe(action)}: {_unknown_function(fn)}"
    wanted = FUNCTIONS[fn]
    if fn in ("put_on", "put_inside"):
        wanted = ("destination",) if action.destination is not None or action.node is None else ("node",)
    for slot in wanted:
        value = getattr(action, slot)
        if value is None:
            return f"{_describe(action)}: {fn} needs its {slot}"
        if slot == "relation":
            if value not in RELATIONS:
                return f"{_describe(action)}: relation must be 'ontop' or 'inside', got {value!r}"
        elif value not in graph.nodes:
            return f"{_describe(action)}: {unknown_node_feedback(graph, value)}"
    if fn in ("put_on", "put_inside") and action.node is not None and action.node not in graph.nodes:
        return f"{_describe(action)}: {unknown_node_feedback(graph, action.node)}"
    return None


def expand_unchecked(graph: SceneGraph, action: Action) -> list[Action]:
    """The primitive steps ``action`` stands for as written, with no precondition checked and
    nothing corrected (for executing an action as it is, the paper's No-Correction ablation):
    ``rearrange(o, r, d)`` → ``[go_to] pick_up(o) [go_to] put_r(d)`` (the pick-up skipped when
    ``o`` is held); ``put_on(d)`` written with ``node`` → ``put_on`` with ``destination``; any
    other action unchanged. Names must exist (see :func:`hallucination`)."""
    fn = action.function_name
    if fn in ("put_on", "put_inside") and action.destination is None:
        return [make(fn, None, None, action.node)]
    if fn != "rearrange":
        return [action]
    here, steps = graph.agent.location, []
    if graph.agent.holding != action.node:
        place = graph.place_of(action.node)
        if place != here:
            steps.append(make("go_to", place))
            here = place
        steps.append(make("pick_up", action.node))
    place = graph.place_of(action.destination)
    if place != here:
        steps.append(make("go_to", place))
    steps.append(make("put_on" if action.relation == "ontop" else "put_inside", None, None, action.destination))
    return steps


def run_plan(graph: SceneGraph, plan, *, correct: bool = True) -> tuple[SceneGraph, list[Outcome]]:
    """Check and apply each action of ``plan`` in turn; infeasible actions leave the graph as it was."""
    outcomes = []
    for action in plan:
        out = check(graph, action, correct=correct)
        outcomes.append(out)
        graph = out.graph
    return graph, outcomes


def _describe(action: Action) -> str:
    return str(action)


def _unknown_function(fn: str) -> str:
    close = difflib.get_close_matches(fn, list(FUNCTIONS), n=2, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"unknown function {fn!r}{hint} Available: {', '.join(FUNCTIONS)}"


def unknown_node_feedback(graph: SceneGraph, name: str) -> str:
    """Feedback for a name that is not in the graph, with the closest existing names."""
    candidates = suggest_names(graph, name)
    if candidates:
        return f"there is no node {name!r}; did you mean {', '.join(candidates)}?"
    return f"there is no node {name!r} in the graph"


def suggest_names(graph: SceneGraph, name: str, limit: int = 5) -> list[str]:
    """Existing node names closest to ``name``: its class's nodes (``apple`` → ``apple-1``,
    ``apple-2``), else the nodes of the classes spelled most like it (``aple-3`` → ``apple-1``...)."""
    key = _normal(name)
    index = class_index(graph.nodes)
    cls = node_class(key)
    same_class = list(index.get(key, ())) + (list(index.get(cls, ())) if cls != key else [])
    if same_class:
        return same_class[:limit]
    # spelling neighbours among the classes (tens), not the nodes (hundreds): fast enough per step
    close = difflib.get_close_matches(cls, list(index), n=2, cutoff=0.6)
    return [n for c in close for n in index[c]][:limit]


def _normal(name: str) -> str:
    return "_".join(name.strip().lower().replace("-", " - ").split()).replace("_-_", "-")


def _resolve(graph: SceneGraph, name: str | None, correct: bool, notes: list[str]) -> str | None:
    if name is None or name in graph.nodes or not correct:
        return name
    key = _normal(name)
    if key in graph.nodes:
        notes.append(f"read {name!r} as {key}")
        return key
    same_class = class_index(graph.nodes).get(key, ())
    if len(same_class) == 1:
        notes.append(f"read {name!r} as {same_class[0]}, the only {key}")
        return same_class[0]
    return name


def _resolve_names(graph: SceneGraph, action: Action, correct: bool, notes: list[str]) -> Action:
    fn = action.function_name
    if fn not in FUNCTIONS:
        raise Infeasible(_unknown_function(fn))
    node = _resolve(graph, action.node, correct, notes)
    dest = _resolve(graph, action.destination, correct, notes)
    if node is action.node and dest is action.destination:
        return action
    return make(fn, node, action.relation, dest)


def _expand(graph: SceneGraph, action: Action, correct: bool, notes: list[str]) -> tuple[list, SceneGraph, int]:
    """The primitive steps for ``action``, plus the graph after the first ``done`` of them (steps
    the expansion already had to apply to plan the rest; the caller applies the others)."""
    fn = action.function_name
    if fn == "rearrange":
        return _expand_rearrange(graph, action, correct, notes)
    if fn in ("go_to", "done") or not correct:
        if fn in ("put_on", "put_inside") and action.destination is None:
            return [make(fn, None, None, action.node)], graph, 0
        return [action], graph, 0
    if fn in ("put_on", "put_inside"):
        dest = action.destination or action.node
        if action.node is not None and action.destination is not None and action.node != graph.agent.holding:
            if graph.agent.holding is None and action.node in graph.nodes:  # rule 5
                notes.append(f"read {action} as rearrange: {action.node} is not in hand")
                relation = "ontop" if fn == "put_on" else "inside"
                return _expand_rearrange(graph, make("rearrange", action.node, relation, action.destination), correct, notes)
            raise Infeasible(f"you hold {graph.agent.holding or 'nothing'}, not {action.node}")
        _need_node(graph, dest, fn, "destination")
        steps = _approach(graph, dest, notes, open_target=(fn == "put_inside"))
        return steps + [make(fn, None, None, dest)], graph, 0
    name = action.node
    _need_node(graph, name, fn)
    if graph.nodes[name].layer is Layer.PLACE:
        return [action], graph, 0  # apply() gives the feedback
    if fn == "pick_up" and graph.agent.holding is not None:
        return [action], graph, 0  # one hand: feedback, never a silent drop
    steps = _approach(graph, name, notes, open_target=False)
    return steps + [action], graph, 0


def _approach(graph: SceneGraph, name: str, notes: list[str], open_target: bool) -> list:
    """Steps that bring the agent to ``name``'s place and open what hides it (rules 2 and 3)."""
    steps = []
    place = graph.place_of(name)
    here = graph.agent.location
    if place != here and graph.nodes[name].layer is not Layer.PLACE:
        steps.append(make("go_to", place))
        notes.append(f"inserted go_to({place})")
    blockers = graph.enclosing_closed(name)
    if open_target and graph.nodes[name].has("closed"):
        blockers = blockers + [name]
    for c in blockers:
        steps.append(make("open", c))
        notes.append(f"inserted open({c})")
    return steps


def _expand_rearrange(graph: SceneGraph, a: Action, correct: bool, notes: list[str]) -> tuple[list, SceneGraph, int]:
    obj_name, rel, dest_name = a.node, a.relation, a.destination
    obj = _need_node(graph, obj_name, "rearrange", "object")
    if rel not in RELATIONS:
        raise Infeasible(f"relation must be 'ontop' or 'inside', got {rel!r}")
    dest = _need_node(graph, dest_name, "rearrange", "destination")
    if obj.layer is not Layer.OBJECT:
        raise Infeasible(f"{obj_name} is {_a(obj.layer.value)} and cannot be moved; only objects can")
    if dest.layer is Layer.PLACE:
        raise Infeasible(f"{dest_name} is a room; rearrange puts an object on or inside an asset or object")
    put = "put_on" if rel == "ontop" else "put_inside"
    if not affords(dest, put):
        raise Infeasible(_relation_feedback(dest, rel))
    if graph.parent.get(obj_name) == (dest_name, Relation(rel)):
        raise Infeasible(f"{obj_name} is already {rel} {dest_name}")
    if obj_name == dest_name or graph.is_ancestor(obj_name, dest_name):
        raise Infeasible(f"cannot put {obj_name} {rel} {dest_name}: {dest_name} is {obj_name} or is on/inside it")
    holding = graph.agent.holding
    steps: list = []
    if holding != obj_name:
        if holding is not None:
            raise Infeasible(f"you hold {holding} and have one hand; put {holding} somewhere before moving {obj_name}")
        if correct:
            steps += _approach(graph, obj_name, notes, open_target=False)
        elif graph.place_of(obj_name) != graph.agent.location:
            steps.append(make("go_to", graph.place_of(obj_name)))
        steps.append(make("pick_up", obj_name))
    # Plan the put from the graph after the pick-up half: a container opened on the way to the
    # object is open by then, and the agent is in the object's place.
    mid = graph
    for step in steps:
        mid = apply(mid, step)
    done = len(steps)
    here = mid.agent.location
    dest_place = mid.place_of(dest_name)
    if correct:
        steps += _approach(mid, dest_name, notes, open_target=(put == "put_inside"))
    elif dest_place != here:
        steps.append(make("go_to", dest_place))
    steps.append(make(put, None, None, dest_name))
    notes.append(f"{EXPANDED} {len(steps)} steps")
    return steps, mid, done


#: the note of a ``rearrange``'s expansion into its own steps: not a correction, nothing was added to it
EXPANDED = "expanded rearrange into"


def corrected(notes) -> bool:
    """Whether an outcome's ``corrections`` notes say a correction changed the action (a step
    inserted, a name read as another), not only that a ``rearrange`` was expanded into its steps."""
    return any(not note.startswith(EXPANDED) for note in notes)


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _relation_feedback(dest, rel: str) -> str:
    offered = [r for r, act in (("ontop", "put_on"), ("inside", "put_inside")) if affords(dest, act)]
    if offered:
        return f"{dest.name} does not take things {rel} it; use relation {' or '.join(offered)}"
    return f"nothing can be put on or inside {dest.name}"
