"""The Scene Graph Simulator: preconditions, effects, corrections and feedback, one case each."""
import pytest

from sgs.actions import Action, ActionSyntaxError, parse_action, parse_plan
from sgs.graph import Relation
from sgs.simulator import Infeasible, apply, check, run_plan


def steps(outcome):
    return [str(a) for a in outcome.actions]


def do(graph, text, **kw):
    return check(graph, parse_action(text), **kw)


# -- parsing ------------------------------------------------------------------------------------
def test_call_and_structured_forms_parse_to_one_model():
    a = parse_action("rearrange(cup-1, inside, coffee_machine-1)")
    b = parse_action({"function_name": "rearrange", "node": "cup-1", "relation": "inside", "destination": "coffee_machine-1"})
    c = parse_action('{"reason": "x", "action": {"function_name": "rearrange", "node": "cup-1", "relation": "inside_of", "destination": "coffee_machine-1"}}')
    assert a == b == c
    assert str(a) == "rearrange(cup-1, inside, coffee_machine-1)"
    assert parse_action("pick_up(water_glass1)") == Action(function_name="pick_up", node="water_glass1")
    assert parse_action("put_in(recycling_bin1)") == Action(function_name="put_inside", destination="recycling_bin1")
    assert parse_action(" Pick Up ( 'apple-1' ) ") == Action(function_name="pick_up", node="apple-1")
    assert parse_action("done()") == Action(function_name="done")


@pytest.mark.parametrize("text, message", [
    ("pick up the apple", "cannot read"),
    ("rearrange(cup-1, inside)", "takes 3 arguments"),
    ("pick_up(a, , b)", "empty argument"),
    ('{"function_name": "go_to", "node": ', "not valid JSON"),
    ('{"node": "x"}', "no function_name"),
])
def test_malformed_actions_raise_readable_errors(text, message):
    with pytest.raises(ActionSyntaxError, match=message):
        parse_action(text)


def test_plan_parse_names_the_step():
    with pytest.raises(ActionSyntaxError, match="step 2"):
        parse_plan(["go_to(kitchen-1)", "???"])


# -- effects --------------------------------------------------------------------------------------
def test_pick_and_put_move_the_object_and_what_it_carries(kitchen):
    out = do(kitchen, "rearrange(tray-1, ontop, bed-1)")
    assert out.ok
    assert steps(out) == ["go_to(kitchen-1)", "pick_up(tray-1)", "go_to(bedroom-1)", "put_on(bed-1)"]
    g = out.graph
    assert g.parent["tray-1"] == ("bed-1", Relation.ONTOP)
    assert g.parent["cup-1"] == ("tray-1", Relation.ONTOP)  # carried along
    assert g.place_of("cup-1") == "bedroom-1"
    assert g.agent.holding is None and g.agent.location == "bedroom-1"
    assert kitchen.parent["tray-1"] == ("table-1", Relation.ONTOP)  # input untouched


def test_toggle_and_open_set_states(kitchen):
    g = do(kitchen, "turn_on(lamp-1)").graph
    assert g["lamp-1"].states == ("on",)
    g = do(g, "open(fridge-1)").graph
    assert g["fridge-1"].has("open") and not g["fridge-1"].has("closed")
    assert g.agent.location == "kitchen-1"


# -- correction rules -------------------------------------------------------------------------
def test_open_is_inserted_for_every_closed_container_outermost_first(kitchen):
    out = do(kitchen, "pick_up(apple-1)")
    assert out.ok
    assert steps(out) == ["go_to(kitchen-1)", "open(fridge-1)", "open(box-1)", "pick_up(apple-1)"]
    assert "inserted open(fridge-1)" in out.corrections


def test_rearrange_into_closed_container_opens_it(kitchen):
    out = do(kitchen, "rearrange(book-1, inside, fridge-1)")
    assert steps(out) == ["pick_up(book-1)", "go_to(kitchen-1)", "open(fridge-1)", "put_inside(fridge-1)"]
    assert out.graph.parent["book-1"] == ("fridge-1", Relation.INSIDE)


def test_go_to_is_inserted_for_toggles_and_open(kitchen):
    out = do(kitchen, "open(fridge-1)")
    assert steps(out) == ["go_to(kitchen-1)", "open(fridge-1)"]


def test_rearrange_of_held_object_skips_pick_up(kitchen):
    g = do(kitchen, "pick_up(book-1)").graph
    out = do(g, "rearrange(book-1, ontop, table-1)")
    assert steps(out) == ["go_to(kitchen-1)", "put_on(table-1)"]


def test_unique_class_name_is_resolved_ambiguous_is_feedback(kitchen):
    out = do(kitchen, "open(fridge)")
    assert out.ok and steps(out)[-1] == "open(fridge-1)"
    assert any("only fridge" in c for c in out.corrections)
    out = do(kitchen, "pick_up(apple)")
    assert not out.ok
    assert "apple-1, apple-2" in out.feedback


# -- feedback ----------------------------------------------------------------------------------
@pytest.mark.parametrize("action, words", [
    ("fly(apple-1)", ["unknown function 'fly'"]),
    ("pick_up(pear-1)", ["no node 'pear-1'"]),
    ("pick_up(aple-2)", ["no node 'aple-2'", "apple-2"]),
    ("discover_objects(kitchen-1)", ["kitchen-1 is a room"]),
    ("rearrange(book-1, inside, table-1)", ["table-1 does not take things inside", "ontop"]),
    ("rearrange(book-1, under, table-1)", ["relation must be 'ontop' or 'inside'"]),
    ("turn_off(lamp-1)", ["lamp-1 is already off"]),
    ("close(fridge-1)", ["fridge-1 is already closed"]),
    ("turn_on(table-1)", ["table-1 cannot turn on"]),
    ("pick_up(table-1)", ["table-1 is an asset and cannot be picked up"]),
    ("go_to(table-1)", ["go_to takes a room", "go_to(kitchen-1)"]),
    ("put_on(bed-1)", ["you hold nothing"]),
    ("rearrange(tray-1, inside, cup-1)", ["cup-1 is tray-1 or is on/inside it"]),
    ("rearrange(book-1, ontop, bed-1)", ["book-1 is already ontop bed-1"]),
])
def test_feedback_for_what_cannot_be_inferred(kitchen, action, words):
    out = do(kitchen, action)
    assert not out.ok
    assert out.graph is kitchen and out.actions == ()
    for w in words:
        assert w in out.feedback


def test_discover_twice_is_feedback(kitchen):
    g = do(kitchen, "discover_objects(bed-1)").graph
    assert "bed-1" in g.inspected
    out = do(g, "discover_objects(bed-1)")
    assert not out.ok and "already inspected" in out.feedback


def test_pick_up_while_holding_is_an_error_not_a_silent_drop(kitchen):
    g = do(kitchen, "pick_up(book-1)").graph
    for text in ("pick_up(apple-2)", "rearrange(apple-2, ontop, bed-1)"):
        out = do(g, text)
        assert not out.ok and "you hold book-1" in out.feedback
        assert out.graph.agent.holding == "book-1"


# -- no-correction ablation ---------------------------------------------------------------------
def test_without_correction_infeasible_actions_fail(kitchen):
    out = do(kitchen, "pick_up(apple-2)", correct=False)
    assert not out.ok and "go_to(kitchen-1) first" in out.feedback
    g = do(kitchen, "go_to(kitchen-1)", correct=False).graph
    out = do(g, "pick_up(apple-1)", correct=False)
    assert not out.ok and "fridge-1, which is closed" not in out.feedback  # innermost named, outermost to open
    assert "box-1, which is closed; open(fridge-1) first" in out.feedback
    out = do(g, "open(fridge)", correct=False)
    assert not out.ok and "no node 'fridge'" in out.feedback
    # rearrange keeps its own go_to steps but never opens anything
    out = do(kitchen, "rearrange(book-1, inside, fridge-1)", correct=False)
    assert not out.ok and "open(fridge-1)" in out.feedback


def test_apply_rejects_composite_and_unmet_preconditions(kitchen):
    with pytest.raises(Infeasible, match="not a primitive"):
        apply(kitchen, parse_action("rearrange(book-1, ontop, table-1)"))
    with pytest.raises(Infeasible, match="closed"):
        apply(kitchen.evolve(agent=kitchen.agent.__class__("agent-1", "kitchen-1", None)), parse_action("pick_up(apple-1)"))


def test_run_plan_keeps_going_after_infeasible_steps(kitchen):
    final, outs = run_plan(kitchen, parse_plan(["pick_up(book-1)", "pick_up(apple-2)", "put_on(table-1)"]))
    assert [o.ok for o in outs] == [True, False, True]
    assert final.parent["book-1"] == ("table-1", Relation.ONTOP)


def test_put_naming_an_object_not_in_hand_is_read_as_rearrange(kitchen):
    out = check(kitchen, parse_action("put_on(book-1, table-1)"))
    assert out.ok and steps(out) == ["pick_up(book-1)", "go_to(kitchen-1)", "put_on(table-1)"]
    assert any("read put_on(book-1, table-1) as rearrange" in c for c in out.corrections)
    off = check(kitchen, parse_action("put_on(book-1, table-1)"), correct=False)
    assert not off.ok and "you hold nothing" in off.feedback
