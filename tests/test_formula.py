"""Quantified goal formulas (grasif.formula): BDDL semantics of every operator, parsing, errors."""
from pathlib import Path

import pytest

from grasif.formula import And, Atom, ForPairs, Formula, FormulaError, Not, category_class, parse
from sgs.actions import parse_plan
from sgs.graph import Agent, Layer, Node, Relation, SceneGraph
from sgs.io import load_graph
from sgs.simulator import run_plan

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

ON, IN = Relation.ONTOP, Relation.INSIDE


def build(objects, assets=(("table-1", "kitchen-1"), ("shelf-1", "kitchen-1")), places=("kitchen-1", "hall-1"),
          states=None, holding=None, location="kitchen-1"):
    """Graph from ``objects`` = [(name, relation, parent)]; ``states`` maps name → state words."""
    states = states or {}
    nodes, parent = {}, {}
    for p in places:
        nodes[p] = Node(p, Layer.PLACE)
    for name, room in assets:
        nodes[name] = Node(name, Layer.ASSET, tuple(states.get(name, ())))
        parent[name] = (room, Relation.IN_ROOM)
    for name, rel, par in objects:
        nodes[name] = Node(name, Layer.OBJECT, tuple(states[name]) if name in states else None)
        parent[name] = (par, rel)
    if holding:
        nodes[holding] = Node(holding, Layer.OBJECT)
        parent[holding] = ("agent-1", Relation.HELD)
    return SceneGraph(nodes, parent, Agent("agent-1", location, holding)).check()


def ev(text, graph):
    return parse(text).evaluate(graph)


@pytest.fixture
def g():
    return build(
        [("apple-1", ON, "table-1"), ("apple-2", ON, "table-1"), ("apple-3", ON, "shelf-1"),
         ("box-1", ON, "table-1"), ("pear-1", IN, "box-1")],
        states={"box-1": ["closed"], "table-1": ["dirty"]},
    )


# -- connectives --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("(ontop apple-1 table-1)", True),
    ("(ontop apple-3 table-1)", False),
    ("(and (ontop apple-1 table-1) (ontop apple-3 shelf-1))", True),
    ("(and (ontop apple-1 table-1) (ontop apple-3 table-1))", False),
    ("(and)", True),
    ("(or (ontop apple-3 table-1) (ontop apple-3 shelf-1))", True),
    ("(or (ontop apple-3 table-1) (ontop apple-2 shelf-1))", False),
    ("(or)", False),
    ("(not (ontop apple-3 table-1))", True),
    ("(not (ontop apple-1 table-1))", False),
    ("(imply (ontop apple-3 table-1) (ontop apple-2 shelf-1))", True),   # false antecedent
    ("(imply (ontop apple-1 table-1) (ontop apple-2 table-1))", True),
    ("(imply (ontop apple-1 table-1) (ontop apple-2 shelf-1))", False),
])
def test_connectives(g, text, expected):
    assert ev(text, g) is expected


# -- atoms --------------------------------------------------------------------------------------
def test_inside_is_direct_parent_only_not_transitive():
    g = build([("box-1", IN, "table-1"), ("apple-1", IN, "box-1"), ("cup-1", ON, "box-1")])
    assert ev("(inside apple-1 box-1)", g)
    assert ev("(inside box-1 table-1)", g)
    assert not ev("(inside apple-1 table-1)", g)  # box-1 is inside table-1, apple-1 is inside box-1
    assert not ev("(ontop apple-1 box-1)", g)    # relation matters
    assert ev("(ontop cup-1 box-1)", g) and not ev("(inside cup-1 box-1)", g)


def test_inroom_follows_the_parent_chain_and_the_agent():
    g = build([("box-1", IN, "table-1"), ("apple-1", IN, "box-1")],
              assets=(("table-1", "kitchen-1"), ("bed-1", "hall-1")), holding="cup-1", location="hall-1")
    assert ev("(inroom apple-1 kitchen-1)", g)
    assert not ev("(inroom apple-1 hall-1)", g)
    assert ev("(inroom bed-1 hall-1)", g)
    assert ev("(inroom cup-1 hall-1)", g)  # held: where the agent stands
    assert not ev("(ontop cup-1 table-1)", g)


def test_unary_predicates_test_state_words():
    g = build([("lamp-1", ON, "table-1"), ("fridge-1", ON, "table-1"), ("cup-1", ON, "table-1")],
              states={"lamp-1": ["on"], "fridge-1": ["open", "dirty"]})  # cup-1 has states None
    assert ev("(toggled_on lamp-1)", g) and ev("(on lamp-1)", g)
    assert not ev("(toggled_on fridge-1)", g)
    assert ev("(open fridge-1)", g) and not ev("(closed fridge-1)", g)
    assert ev("(dirty fridge-1)", g)
    assert not ev("(open cup-1)", g) and not ev("(closed cup-1)", g)
    assert ev("(not (open cup-1))", g)


# -- quantifiers --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("(forall (?a - apple) (ontop ?a table-1))", False),
    ("(forall (?a - apple) (or (ontop ?a table-1) (ontop ?a shelf-1)))", True),
    ("(exists (?a - apple) (ontop ?a shelf-1))", True),
    ("(exists (?a - apple) (inside ?a box-1))", False),
    ("(forall (?x - banana) (ontop ?x table-1))", True),    # empty domain
    ("(exists (?x - banana) (ontop ?x table-1))", False),   # empty domain
    ("(forall (?x - banana) (not (ontop ?x table-1)))", True),
    ("(exists (?b - box) (forall (?p - pear) (inside ?p ?b)))", True),
    ("(forall (?p - pear) (exists (?b - box) (closed ?b)))", True),
])
def test_forall_exists(g, text, expected):
    assert ev(text, g) is expected


@pytest.mark.parametrize("text, expected", [
    ("(forn (2) (?a - apple) (ontop ?a table-1))", True),
    ("(forn (1) (?a - apple) (ontop ?a table-1))", False),  # 2 true, N=1: exactly, not at least
    ("(forn (3) (?a - apple) (ontop ?a table-1))", False),
    ("(forn (1) (?a - apple) (ontop ?a shelf-1))", True),
    ("(forn (0) (?a - apple) (inside ?a box-1))", True),
    ("(forn (0) (?x - banana) (ontop ?x table-1))", True),   # empty domain
    ("(forn (1) (?x - banana) (ontop ?x table-1))", False),
    ("(forn 2 (?a - apple) (ontop ?a table-1))", True),      # bare count accepted
])
def test_forn_counts_exactly(g, text, expected):
    assert ev(text, g) is expected


def shelves_graph(placement):
    """2 bottles, 3 shelves (assets); ``placement`` maps bottle → shelf."""
    assets = (("shelf-1", "kitchen-1"), ("shelf-2", "kitchen-1"), ("shelf-3", "kitchen-1"), ("floor-1", "kitchen-1"))
    objs = [(b, ON, placement.get(b, "floor-1")) for b in ("bottle-1", "bottle-2")]
    return build(objs, assets=assets)


BOTTLES_ON_SHELVES = "(forpairs (?b - bottle) (?s - shelf) (ontop ?b ?s))"
SHELVES_UNDER_BOTTLES = "(forpairs (?s - shelf) (?b - bottle) (ontop ?b ?s))"


@pytest.mark.parametrize("placement, expected", [
    ({"bottle-1": "shelf-1", "bottle-2": "shelf-3"}, True),   # L = min(2, 3) = 2: shelf-2 may stay empty
    ({"bottle-1": "shelf-2", "bottle-2": "shelf-1"}, True),
    ({"bottle-1": "shelf-1", "bottle-2": "shelf-1"}, False),  # only one column holds a true entry
    ({"bottle-1": "shelf-1"}, False),                          # only one row holds a true entry
    ({}, False),
])
def test_forpairs_uses_the_smaller_count(placement, expected):
    g = shelves_graph(placement)
    assert ev(BOTTLES_ON_SHELVES, g) is expected
    assert ev(SHELVES_UNDER_BOTTLES, g) is expected  # transposed matrix, same verdict


def test_forpairs_is_weaker_than_a_perfect_matching():
    # Baskets x bows matrix [[1,0,0,0],[1,0,0,0],[1,0,0,0],[0,1,1,1]] for the symmetric body
    # "bow inside basket or basket inside bow": baskets 1-3 are inside bow-1, bows 2-4 inside basket-4.
    # Every row and every column holds a true entry, so bddl's forpairs is true, although
    # baskets 1-3 can only be paired with bow-1 and no one-to-one pairing exists.
    objs = [("bow-1", ON, "table-1"), ("wicker_basket-4", ON, "table-1")]
    objs += [(f"wicker_basket-{i}", IN, "bow-1") for i in (1, 2, 3)]
    objs += [(f"bow-{i}", IN, "wicker_basket-4") for i in (2, 3, 4)]
    g = build(objs)
    body = "(or (inside ?w ?b) (inside ?b ?w))"
    assert ev(f"(forpairs (?b - wicker_basket) (?w - bow) {body})", g)
    assert ev(f"(forpairs (?w - bow) (?b - wicker_basket) {body})", g)
    matrix = [[int(ev(f"(or (inside bow-{w} wicker_basket-{b}) (inside wicker_basket-{b} bow-{w}))", g))
               for w in range(1, 5)] for b in range(1, 5)]
    assert matrix == [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 1]]  # no perfect matching
    assert not ev("(fornpairs (4) (?b - wicker_basket) (?w - bow) (inside ?w ?b))", g)  # one-way body: 1 row


def test_forpairs_and_fornpairs_with_empty_categories(g):
    # first category empty: bddl raises IndexError; here L = 0, so forpairs holds
    assert ev("(forpairs (?x - banana) (?a - apple) (ontop ?x ?a))", g)
    # second category empty: every row is empty, L = 0 (bddl agrees)
    assert ev("(forpairs (?a - apple) (?x - banana) (ontop ?x ?a))", g)
    assert ev("(fornpairs (0) (?x - banana) (?a - apple) (ontop ?x ?a))", g)
    assert not ev("(fornpairs (1) (?x - banana) (?a - apple) (ontop ?x ?a))", g)
    assert not ev("(fornpairs (1) (?a - apple) (?x - banana) (ontop ?x ?a))", g)


def test_fornpairs_means_at_least_n():
    g = shelves_graph({"bottle-1": "shelf-1", "bottle-2": "shelf-3"})
    assert ev("(fornpairs (1) (?b - bottle) (?s - shelf) (ontop ?b ?s))", g)
    assert ev("(fornpairs (2) (?b - bottle) (?s - shelf) (ontop ?b ?s))", g)
    assert not ev("(fornpairs (3) (?b - bottle) (?s - shelf) (ontop ?b ?s))", g)
    same = shelves_graph({"bottle-1": "shelf-1", "bottle-2": "shelf-1"})
    assert ev("(fornpairs (1) (?b - bottle) (?s - shelf) (ontop ?b ?s))", same)
    assert not ev("(fornpairs (2) (?b - bottle) (?s - shelf) (ontop ?b ?s))", same)


def test_forpairs_over_one_category_skips_a_node_paired_with_itself():
    # (ontop ?x ?y) over apples: apple-2 on apple-1. With x == y skipped, the matrix is 2 x 1,
    # L = 1: one row and one column hold a true entry.
    g = build([("apple-1", ON, "table-1"), ("apple-2", ON, "apple-1")])
    assert ev("(forpairs (?x - apple) (?y - apple) (ontop ?x ?y))", g)
    assert not ev("(forpairs (?x - apple) (?y - apple) (inside ?x ?y))", g)


# -- names and variables ------------------------------------------------------------------------
def test_bddl_spellings_synset_categories_and_question_mark_constants(g):
    assert category_class("wicker_basket.n.01") == "wicker_basket"
    assert category_class("apple") == "apple"
    assert ev("(forall (?apple.n.01 - apple.n.01) (inroom ?apple.n.01 ?kitchen-1))", g)
    assert ev("(exists (?a - apple.n.01) (ontop ?a ?shelf-1))", g)
    f = parse("(ontop ?apple-1 ?table-1)")
    assert f.constants() == {"apple-1", "table-1"} and f.evaluate(g)


def test_variables_are_lexically_scoped_and_shadow(g):
    # inner ?x ranges over pears; after it, ?x is the apple again
    text = "(forall (?x - apple) (and (exists (?x - pear) (inside ?x box-1)) (inroom ?x kitchen-1)))"
    assert ev(text, g)
    # a bare name equal to a bound variable means the variable, as in bddl
    assert ev("(exists (?a - apple) (ontop a shelf-1))", g)
    assert parse("(forall (?x - apple) (ontop ?x table-1))").constants() == {"table-1"}


def test_unknown_names_raise_on_evaluate_and_are_listed(g):
    f = parse("(and (ontop apple-9 table-1) (forall (?x - apple) (inside ?x ?y)) (open fridge-1))")
    problems = f.check_names(g)
    assert len(problems) == 3
    assert any("'apple-9'" in p and "apple-1" in p for p in problems)  # hint names same-class nodes
    assert any("'y'" in p for p in problems) and any("'fridge-1'" in p for p in problems)
    with pytest.raises(FormulaError, match="apple-9") as info:
        f.evaluate(g)
    assert len(info.value.problems) == 3
    with pytest.raises(FormulaError):
        f.evaluate_conjuncts(g)
    assert parse("(ontop apple-1 table-1)").check_names(g) == []


# -- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("(and (ontop a b)", r"'\(' is never closed at line 1, column 1"),
    ("(ontop a b))", r"'\)' without a matching '\(' at line 1, column 12"),
    ("", "empty goal formula"),
    ("  ; only a comment", "empty goal formula"),
    ("(ontop a b) (open c)", r"after the end of the formula at line 1, column 13"),
    ("ontop", "expected a parenthesized formula"),
    ("(and ())", r"empty expression '\(\)' at line 1, column 6"),
    ("(andd (ontop a b) (open c))", "unknown operator 'andd'"),
    ("(nextto a b)", "unknown predicate 'nextto' with 2 arguments"),
    ("(and (touching a b c))", "unknown predicate 'touching' with 3 arguments.* at line 1, column 6"),
    ("(ontop a)", "'ontop' takes 2 arguments"),
    ("(open a b)", "unknown predicate 'open' with 2 arguments"),
    ("(open)", "'open' needs an argument"),
    ("(not (open a) (open b))", "wrong number of arguments for 'not': expected 1, got 2"),
    ("(imply (open a))", "wrong number of arguments for 'imply'"),
    ("(forall (?x - apple))", "wrong number of arguments for 'forall'"),
    ("(forpairs (?x - a) (open ?x))", "wrong number of arguments for 'forpairs'"),
    ("(forall (?x apple) (open ?x))", "malformed quantifier 'forall'.*variable spec"),
    ("(forall ?x (open ?x))", "malformed quantifier 'forall'"),
    ("(exists (x - apple) (open x))", "variable 'x' must start with '\\?'"),
    ("(forn (two) (?x - apple) (open ?x))", "count must be a non-negative integer"),
    ("(fornpairs (1 2) (?x - a) (?y - b) (open ?x))", "expected a count like"),
    ("(not open)", "expected a parenthesized formula, got 'open' at line 1, column 6"),
])
def test_parse_errors_name_the_problem_and_position(text, message):
    with pytest.raises(FormulaError, match=message) as info:
        parse(text)
    assert isinstance(info.value, ValueError)


def test_error_position_counts_lines():
    with pytest.raises(FormulaError, match="nextto.* at line 2, column 3; two-argument predicates") as info:
        parse("(and (open a)\n  (nextto a b))")
    assert info.value.position == 16


def test_canonical_string_round_trips():
    text = """
      (AND ; gift baskets
        (forpairs (?b - wicker_basket.n.01)   (?c - candle) (inside ?c ?b))
        (Not (open ?fridge-1))
        (forn (2) (?x - apple) (ontop ?x table-1))
        (fornpairs 1 (?x - a) (?y - b) (imply (open ?x) (or (closed ?y))))
        (exists (?z - cup) (toggled_on ?z)))"""
    f = parse(text)
    canon = ("(and (forpairs (?b - wicker_basket.n.01) (?c - candle) (inside ?c ?b)) (not (open fridge-1)) "
             "(forn (2) (?x - apple) (ontop ?x table-1)) (fornpairs (1) (?x - a) (?y - b) "
             "(imply (open ?x) (or (closed ?y)))) (exists (?z - cup) (toggled_on ?z)))")
    assert str(f) == canon
    assert parse(canon) == f
    assert Formula.parse(canon) == f
    assert f.classes() == {"wicker_basket", "candle", "apple", "a", "b", "cup"}
    assert f.constants() == {"fridge-1", "table-1"}


def test_conjuncts():
    f = parse("(and (open a-1) (not (open b-1)))")
    assert f.conjuncts() == [Atom("open", (("a-1", False),)), Not(Atom("open", (("b-1", False),)))]
    single = parse("(forpairs (?b - x) (?c - y) (inside ?c ?b))")
    assert isinstance(single, ForPairs) and single.conjuncts() == [single]
    assert isinstance(f, And) and parse("(and)").conjuncts() == []


# -- the gift basket example --------------------------------------------------------------------
ITEMS = ("candle", "swiss_cheese", "butter_cookie", "bow")
GIFT_GOAL = "(and " + " ".join(
    f"(forpairs (?b - wicker_basket) (?c - {item}) (inside ?c ?b))" for item in ITEMS) + ")"


def test_gift_basket_goal_before_and_after_the_plan():
    initial = load_graph(EXAMPLES / "gift_basket" / "initial.json")
    goal = parse(GIFT_GOAL)
    assert goal.check_names(initial) == []
    assert goal.evaluate(initial) is False
    assert goal.evaluate_conjuncts(initial) == [False] * 4

    plan = [f"rearrange({item}-{i}, inside, wicker_basket-{i})" for i in range(1, 5) for item in ITEMS]
    assert len(plan) == 16
    final, outcomes = run_plan(initial, parse_plan(plan))
    assert all(o.ok for o in outcomes)
    assert goal.evaluate(final) is True
    assert goal.evaluate_conjuncts(final) == [True] * 4

    # all four candles in basket 1, everything else one per basket: only the candle goal fails
    crowded = [f"rearrange(candle-{i}, inside, wicker_basket-1)" for i in range(1, 5)]
    crowded += [s for s in plan if not s.startswith("rearrange(candle")]
    g2, _ = run_plan(initial, parse_plan(crowded))
    assert all(g2.parent[f"candle-{i}"] == ("wicker_basket-1", Relation.INSIDE) for i in range(1, 5))
    assert goal.evaluate(g2) is False
    assert goal.evaluate_conjuncts(g2) == [False, True, True, True]


# -- evaluation machinery -----------------------------------------------------------------------
def test_pair_fast_path_agrees_with_the_general_matrix():
    # (inside ?c ?b) directly under forpairs is read off parent edges; wrapping it in (and ...)
    # forces the general pair-matrix loop. Both must agree on many random placements.
    import random
    rng = random.Random(7)
    for _ in range(300):
        boxes = [f"box-{i}" for i in range(1, rng.randint(0, 4) + 1)]
        cups = [f"cup-{i}" for i in range(1, rng.randint(0, 4) + 1)]
        objs = [(b, ON, "table-1") for b in boxes]
        objs += [(c, rng.choice([ON, IN]), rng.choice(boxes + ["table-1", "shelf-1"])) for c in cups]
        g = build(objs)
        for body in ("(inside ?c ?b)", "(ontop ?c ?b)", "(inside ?b ?c)"):
            for head in ("forpairs", "fornpairs (1)", "fornpairs (2)"):
                for specs in ("(?b - box) (?c - cup)", "(?c - cup) (?b - box)"):
                    fast = f"({head} {specs} {body})"
                    slow = f"({head} {specs} (and {body}))"
                    assert ev(fast, g) == ev(slow, g), (fast, objs)


def test_category_index_follows_the_graph_it_is_given():
    g1 = build([("apple-1", ON, "table-1")])
    g2 = build([("apple-1", ON, "table-1"), ("apple-2", ON, "shelf-1")])
    f = parse("(forall (?a - apple) (ontop ?a table-1))")
    assert f.evaluate(g1) and not f.evaluate(g2) and f.evaluate(g1)
    moved = g2.evolve(parent={**g2.parent, "apple-2": ("table-1", ON)})  # same nodes dict, new edges
    assert moved.nodes is g2.nodes and f.evaluate(moved)
