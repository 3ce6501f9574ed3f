"""Property-based tests of the Scene Graph Simulator (:mod:`sgs.simulator`).

Random valid scene graphs (1-4 places, 1-4 assets per place with random affordances and
open/closed/on/off states, 0-12 objects nested on/inside assets and other objects up to depth 3,
the agent in a random place and sometimes holding an object) are driven through random action
sequences: valid and invalid actions, known, aliased and unknown function names, exact, bare-class,
misspelled and nonexistent node names, every relation, ``rearrange``, with ``correct=True`` and
``correct=False``. Every step checks the structure and simulator invariants listed on each test.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgs.actions import Action, make
from sgs.graph import Agent, Layer, Node, Relation, SceneGraph, node_class
from sgs.io import graph_from_dict, graph_to_dict
from sgs.simulator import Infeasible, Outcome, apply, check

ROOM_CLASSES = ("kitchen", "bedroom", "bathroom", "living_room", "office")
ASSET_CLASSES = ("fridge", "table", "cabinet", "tv", "oven", "shelf", "coffee_machine", "lamp")
OBJECT_CLASSES = ("apple", "cup", "box", "plate", "book", "jar", "water_glass")
ASSET_AFFORDANCES = ("put_on", "put_inside", "open", "close", "turn_on", "turn_off")
OBJECT_AFFORDANCES = ("pick_up", "put_on", "put_inside", "open", "close", "turn_on")
NONEXISTENT = ("ghost-1", "unicorn", "apple-99", "fridge-0", "kitchen_9", "agent-1", "nothing", "x")

FUNCTIONS_DRAWN = (
    ("rearrange",) * 8
    + ("pick_up",) * 3
    + ("put_on", "put_inside") * 2
    + ("go_to",) * 2
    + ("open", "close", "turn_on", "turn_off", "discover_objects", "done")
    + ("grab", "Put In", "switch-on", "goto", "Pick Up")  # aliases of known functions
    + ("fly", "teleport", "rearange", "pickup_all", "")  # unknown functions
)
RELATIONS_DRAWN = ("ontop", "inside") * 3 + ("on", "in", "into", "on_top_of", "under", "beside", None)
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------
_states = st.tuples(
    st.sampled_from([None, "open", "closed", "closed"]),
    st.sampled_from([None, None, "on", "off"]),
    st.sampled_from([None, None, None, "clean", "dirty"]),
    st.booleans(),
).map(lambda t: None if t[3] and not any(t[:3]) else tuple(s for s in t[:3] if s))


def _affordances(pool):
    return st.one_of(st.none(), st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)).map(tuple))


@st.composite
def scene_graphs(draw) -> SceneGraph:
    """A random valid scene graph built with the sgs.graph constructors and ``.check()``ed."""
    counters: dict[str, int] = {}

    def fresh(cls: str) -> str:
        counters[cls] = counters.get(cls, 0) + 1
        sep = draw(st.sampled_from(["-", "-", "-", "_", ""]))
        return f"{cls}{sep}{counters[cls]}"

    nodes: dict[str, Node] = {}
    parent: dict[str, tuple[str, Relation]] = {}
    places = []
    for _ in range(draw(st.integers(1, 4))):
        name = fresh(draw(st.sampled_from(ROOM_CLASSES)))
        nodes[name] = Node(name, Layer.PLACE)
        places.append(name)
    assets = []
    for place in places:
        for _ in range(draw(st.integers(1, 4))):
            name = fresh(draw(st.sampled_from(ASSET_CLASSES)))
            nodes[name] = Node(name, Layer.ASSET, draw(_states), draw(_affordances(ASSET_AFFORDANCES)))
            parent[name] = (place, Relation.IN_ROOM)
            assets.append(name)
    objects: list[str] = []
    depth: dict[str, int] = {}
    for _ in range(draw(st.integers(0, 12))):
        name = fresh(draw(st.sampled_from(OBJECT_CLASSES)))
        support = draw(st.sampled_from(assets + [o for o in objects if depth[o] < 3]))
        depth[name] = 1 if support in assets else depth[support] + 1
        rel = draw(st.sampled_from([Relation.ONTOP, Relation.INSIDE, Relation.INSIDE]))
        nodes[name] = Node(name, Layer.OBJECT, draw(_states), draw(_affordances(OBJECT_AFFORDANCES)))
        parent[name] = (support, rel)
        objects.append(name)
    agent_name = draw(st.sampled_from(["agent-1", "agent-1", "robot-1"]))
    holding = None
    if objects and draw(st.booleans()):
        holding = draw(st.sampled_from(objects))
        parent[holding] = (agent_name, Relation.HELD)
    inspected = frozenset(draw(st.lists(st.sampled_from(assets + objects), unique=True, max_size=3)))
    agent = Agent(agent_name, draw(st.sampled_from(places)), holding)
    return SceneGraph(nodes, parent, agent, inspected).check()


def _name_strategy(graph: SceneGraph, pool: list[str]):
    """Mostly exact names from ``pool`` (or any node), sometimes bare classes, other spellings,
    nonexistent names or nothing."""
    every = list(graph.nodes)
    exact = st.sampled_from(pool) if pool else st.sampled_from(every)
    classes = st.sampled_from(sorted({node_class(n) for n in every}))
    variant = st.tuples(st.sampled_from(every), st.sampled_from(["upper", "space", "pad", "title"])).map(
        lambda t: {"upper": t[0].upper(), "space": t[0].replace("-", " ").replace("_", " "),
                   "pad": f"  {t[0]} ", "title": t[0].title()}[t[1]]
    )
    kind = st.sampled_from(["exact"] * 10 + ["any"] * 2 + ["class"] * 2 + ["variant", "missing", "none"])
    return kind.flatmap(lambda k: {
        "exact": exact, "any": st.sampled_from(every), "class": classes, "variant": variant,
        "missing": st.sampled_from(NONEXISTENT), "none": st.none(),
    }[k])


def actions(graph: SceneGraph):
    """A random action for ``graph``, biased towards names of the layer the function acts on."""
    places = graph.places
    assets = graph.names(Layer.ASSET)
    objects = graph.names(Layer.OBJECT)
    stateful = [n for n, node in graph.nodes.items() if node.states]
    supports = assets + objects

    @st.composite
    def build(draw) -> Action:
        fn = draw(st.sampled_from(FUNCTIONS_DRAWN))
        canon = Action(function_name=fn).function_name
        node = relation = destination = None
        if canon == "go_to":
            node = draw(_name_strategy(graph, places))
        elif canon in ("pick_up", "discover_objects"):
            node = draw(_name_strategy(graph, objects if canon == "pick_up" else supports))
        elif canon in ("open", "close", "turn_on", "turn_off"):
            node = draw(_name_strategy(graph, stateful))
        elif canon in ("put_on", "put_inside"):
            form = draw(st.sampled_from(["dest", "dest", "node+dest", "node"]))
            if form == "node+dest":
                held = [graph.agent.holding] if graph.agent.holding else objects
                node = draw(_name_strategy(graph, held))
            if form in ("dest", "node+dest"):
                destination = draw(_name_strategy(graph, supports))
            else:
                node = draw(_name_strategy(graph, supports))
        elif canon == "done":
            node = draw(st.none() | _name_strategy(graph, []))
        else:  # rearrange and unknown functions; with a full hand, mostly move what is held
            held = graph.agent.holding
            node = draw(_name_strategy(graph, [held] if held and draw(st.integers(0, 3)) else objects))
            relation = draw(st.sampled_from(RELATIONS_DRAWN))
            destination = draw(_name_strategy(graph, supports))
        return Action(function_name=fn, node=node, relation=relation, destination=destination)

    return build()


# ---------------------------------------------------------------------------------------------
# invariants
# ---------------------------------------------------------------------------------------------
def snapshot(graph: SceneGraph):
    return (dict(graph.nodes), dict(graph.parent), graph.agent, graph.inspected)


def assert_graph_invariants(graph: SceneGraph, initial: SceneGraph) -> None:
    graph.check()  # one parent per node, no cycles, agent in a place
    held = [n for n, (par, rel) in graph.parent.items() if rel is Relation.HELD]
    holding = graph.agent.holding
    assert len(held) <= 1, f"several held objects: {held}"
    if holding is None:
        assert held == [], f"agent holds nothing but {held} are marked held"
    else:
        assert held == [holding]
        assert graph.parent[holding] == (graph.agent.name, Relation.HELD)
        assert graph.nodes[holding].layer is Layer.OBJECT
        assert [p for p in graph.nodes if holding in graph.children(p)] == [], "held object also has a node parent"
    # No node appears or disappears, layers and assets' rooms never change.
    assert {n: node.layer for n, node in graph.nodes.items()} == {n: node.layer for n, node in initial.nodes.items()}
    for name in initial.names(Layer.ASSET):
        assert graph.parent[name] == initial.parent[name]
    assert graph.agent.name == initial.agent.name


def _target(a: Action) -> str | None:
    if a.function_name in ("put_on", "put_inside"):
        return a.destination if a.destination is not None else a.node
    return a.node


def replay(graph: SceneGraph, steps) -> SceneGraph:
    """Apply primitive ``steps`` one by one; before each pick_up the object must be reachable."""
    g = graph
    for step in steps:
        if step.function_name == "pick_up":
            assert g.enclosing_closed(step.node) == [], f"{step.node} picked up from inside closed {g.enclosing_closed(step.node)}"
        g = apply(g, step)
        if step.function_name == "pick_up":
            assert g.agent.holding == step.node
    return g


def expected_uncorrected(graph: SceneGraph, action: Action) -> list[tuple[str, str | None]]:
    """The steps ``check(..., correct=False)`` may take for ``action``: its own expansion, with no
    name resolution and no inserted opens."""
    fn = action.function_name
    if fn != "rearrange":
        return [(fn, _target(action))]
    obj, dest = action.node, action.destination
    put = "put_on" if action.relation == "ontop" else "put_inside"
    steps = []
    here = graph.agent.location
    if graph.agent.holding != obj:
        if graph.place_of(obj) != here:
            steps.append(("go_to", graph.place_of(obj)))
        steps.append(("pick_up", obj))
        here = graph.place_of(obj)
    if graph.place_of(dest) != here:
        steps.append(("go_to", graph.place_of(dest)))
    steps.append((put, dest))
    return steps


def assert_outcome(graph: SceneGraph, action: Action, out: Outcome, correct: bool) -> None:
    assert isinstance(out, Outcome)
    if not out.ok:
        assert out.graph is graph, "a rejected action must return the identical input graph"
        assert out.feedback, "a rejected action needs feedback"
        assert out.actions == ()
        return
    assert out.actions, "an accepted action has at least one primitive step"
    assert all(a.function_name != "rearrange" for a in out.actions)
    assert replay(graph, out.actions) == out.graph, "outcome.graph differs from replaying outcome.actions"
    if not correct:
        got = [(a.function_name, _target(a)) for a in out.actions]
        assert got == expected_uncorrected(graph, action), f"correct=False changed {action} into {got}"
        if action.function_name != "open":
            assert all(a.function_name != "open" for a in out.actions), "correct=False inserted an open"
    else:
        fn = action.function_name
        last = out.actions[-1].function_name
        if fn == "rearrange":
            assert last == ("put_on" if action.relation == "ontop" else "put_inside")
            assert {a.function_name for a in out.actions} <= {"go_to", "open", "pick_up", "put_on", "put_inside"}
        elif fn in ("put_on", "put_inside") and any(a.function_name == "pick_up" for a in out.actions):
            # rule 5: put_on/put_inside(o, d) with o not in the empty hand is read as rearrange
            assert graph.agent.holding is None and last == fn
            assert {a.function_name for a in out.actions} <= {"go_to", "open", "pick_up", fn}
        else:
            assert last == fn
            assert {a.function_name for a in out.actions[:-1]} <= {"go_to", "open"}


# ---------------------------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------------------------
@settings(max_examples=300, **SETTINGS)
@given(graph=scene_graphs(), data=st.data())
def test_random_action_sequences_keep_invariants(graph: SceneGraph, data) -> None:
    """300 sequences x up to 30 steps; each step checks the drawn action with BOTH correct=True and
    correct=False on the current graph and continues with the outcome of a randomly drawn mode.

    After every step: graph.check() passes; the agent holds at most one object, whose parent is
    (agent, HELD) and which has no other parent; nodes, layers and asset rooms never change; each
    primitive pick_up in outcome.actions (replayed with apply) takes a reachable object
    (enclosing_closed == []); a rejected action returns the identical input graph with non-empty
    feedback; an accepted action's graph equals replaying its actions with apply; the input graph
    (and every earlier graph of the episode) is never mutated; with correct=False the actions are
    the action's own expansion (no name resolution, no inserted open); and whatever correct=False
    accepts, correct=True accepts with the same resulting graph.
    """
    initial = graph
    history = []
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        action = data.draw(actions(graph), label="action")
        snap = snapshot(graph)
        raw = check(graph, action, correct=False)
        fixed = check(graph, action, correct=True)
        assert snapshot(graph) == snap, "check() mutated its input graph"
        assert_outcome(graph, action, raw, correct=False)
        assert_outcome(graph, action, fixed, correct=True)
        if raw.ok:
            assert fixed.ok, f"correct=True rejects {action} that correct=False accepts: {fixed.feedback}"
            assert fixed.graph == raw.graph
        for out in (raw, fixed):
            assert_graph_invariants(out.graph, initial)
        history.append((graph, snap))
        graph = fixed.graph if data.draw(st.booleans(), label="correct") else raw.graph
    for g, snap in history:
        assert snapshot(g) == snap, "a graph of the episode was mutated later"


@settings(max_examples=200, **SETTINGS)
@given(graph=scene_graphs(), data=st.data())
def test_apply_is_pure_and_rejects_cleanly(graph: SceneGraph, data) -> None:
    """200 sequences x up to 30 steps of random single primitive actions (including rearrange and
    unknown functions) fed straight to apply(): it either raises Infeasible with a message and
    leaves the graph untouched, or returns a graph that passes every structure invariant; a
    pick_up only succeeds on a reachable object."""
    initial = graph
    for _ in range(data.draw(st.integers(1, 30), label="steps")):
        action = data.draw(actions(graph), label="action")
        step = action  # rearrange and unknown functions go in as they are: apply() must refuse them
        if action.function_name in ("put_on", "put_inside") and action.destination is None:
            step = make(action.function_name, None, None, action.node)
        snap = snapshot(graph)
        try:
            before_hidden = step.function_name == "pick_up" and step.node in graph.nodes and graph.enclosing_closed(step.node)
            new = apply(graph, step)
        except Infeasible as exc:
            assert str(exc), "Infeasible without feedback"
            assert snapshot(graph) == snap
            continue
        assert snapshot(graph) == snap, "apply() mutated its input graph"
        assert not before_hidden, f"picked up {step.node} from inside closed {before_hidden}"
        assert_graph_invariants(new, initial)
        graph = new


@settings(max_examples=300, **SETTINGS)
@given(graph=scene_graphs(), data=st.data())
def test_corrected_rearrange_matches_step_by_step_oracle(graph: SceneGraph, data) -> None:
    """300 graphs x up to 10 rearranges with exact names and correct=True. The module doc's rules
    (go_to the object's place, open what hides it outermost first, pick_up, go_to the destination's
    place, open what hides it and, for inside, the destination itself, put) are replayed one step at
    a time with apply(), reading enclosing_closed() on the graph *as it is at that step*. check()
    must accept exactly when this oracle succeeds (and the object is not already there), and
    produce the same graph."""
    objects = graph.names(Layer.OBJECT)
    supports = graph.names(Layer.ASSET) + objects
    if not objects:
        return
    for _ in range(data.draw(st.integers(1, 10), label="steps")):
        held = graph.agent.holding
        hidden = [o for o in objects if graph.enclosing_closed(o)]
        pool = [held] if held and data.draw(st.booleans()) else hidden if hidden and data.draw(st.booleans()) else objects
        obj = data.draw(st.sampled_from(pool), label="obj")
        # Half the time the destination shares a closed container with the object (or is one).
        hiding = set(graph.enclosing_closed(obj))
        near = [n for n in supports if n != obj and (n in hiding or hiding & set(graph.enclosing_closed(n)))]
        dest = data.draw(st.sampled_from(near if near and data.draw(st.booleans()) else supports), label="dest")
        rel = data.draw(st.sampled_from(["ontop", "inside"]), label="rel")
        out = check(graph, Action(function_name="rearrange", node=obj, relation=rel, destination=dest), correct=True)
        expected = _oracle_rearrange(graph, obj, rel, dest)
        if expected is None:
            assert not out.ok, f"rearrange({obj}, {rel}, {dest}) accepted, oracle says infeasible: {[str(a) for a in out.actions]}"
        else:
            assert out.ok, f"rearrange({obj}, {rel}, {dest}) rejected although feasible: {out.feedback}"
            assert out.graph == expected
        graph = out.graph


def _oracle_rearrange(graph: SceneGraph, obj: str, rel: str, dest: str) -> SceneGraph | None:
    if graph.parent.get(obj) == (dest, Relation(rel)):
        return None  # already there: feedback, not a no-op pick-and-put
    put = "put_on" if rel == "ontop" else "put_inside"
    g = graph
    try:
        if g.agent.holding != obj:
            if g.place_of(obj) != g.agent.location:
                g = apply(g, make("go_to", g.place_of(obj)))
            for c in g.enclosing_closed(obj):
                g = apply(g, make("open", c))
            g = apply(g, make("pick_up", obj))
        if g.place_of(dest) != g.agent.location:
            g = apply(g, make("go_to", g.place_of(dest)))
        for c in g.enclosing_closed(dest):
            g = apply(g, make("open", c))
        if put == "put_inside" and g.nodes[dest].has("closed"):
            g = apply(g, make("open", dest))
        return apply(g, make(put, None, None, dest))
    except Infeasible:
        return None


def test_rearrange_out_of_and_back_into_the_same_closed_container() -> None:
    """Deterministic reproducer: the apple lies on a plate inside the closed fridge. Moving it
    inside the fridge (or onto another object in the fridge) needs one open(fridge-1); check()
    must not insert a second open for a container its own expansion already opened."""
    nodes = {
        "kitchen-1": Node("kitchen-1", Layer.PLACE),
        "fridge-1": Node("fridge-1", Layer.ASSET, states=("closed",)),
        "plate-1": Node("plate-1", Layer.OBJECT),
        "apple-1": Node("apple-1", Layer.OBJECT),
        "banana-1": Node("banana-1", Layer.OBJECT),
    }
    parent = {
        "fridge-1": ("kitchen-1", Relation.IN_ROOM),
        "plate-1": ("fridge-1", Relation.INSIDE),
        "apple-1": ("plate-1", Relation.ONTOP),
        "banana-1": ("fridge-1", Relation.INSIDE),
    }
    graph = SceneGraph(nodes, parent, Agent(location="kitchen-1")).check()
    for rel, dest in (("inside", "fridge-1"), ("ontop", "banana-1")):
        out = check(graph, Action(function_name="rearrange", node="apple-1", relation=rel, destination=dest))
        assert out.ok, out.feedback
        assert [str(a) for a in out.actions] == ["open(fridge-1)", "pick_up(apple-1)", f"{'put_inside' if rel == 'inside' else 'put_on'}({dest})"]
        assert out.graph.parent["apple-1"] == (dest, Relation(rel))


@settings(max_examples=150, **SETTINGS)
@given(graph=scene_graphs())
def test_random_graphs_round_trip_through_json(graph: SceneGraph) -> None:
    """150 random graphs: graph_from_dict(graph_to_dict(g)) == g (the benchmark loads graphs this way)."""
    assert graph_from_dict(graph_to_dict(graph)) == graph
