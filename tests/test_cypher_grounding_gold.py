"""The grounding expert (lookplangraph.distill.cypher.grounding_gold): for the shipped grounding benchmark's
items, queries whose rows show the nodes the goal uses and a goal the benchmark's own judge scores
correct; goals the reply schema cannot carry, or that the judge scores wrong, are rejected."""

from __future__ import annotations

import pytest

from grasif.goals import GoalSpec, evaluate_goal
from sgs.graph import node_class
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.distill.cypher import grounding_gold as gg
from lookplangraph.cypher.benchmark import load_benchmark
from lookplangraph.cypher.grounding import apply_edits, judge, parse_goal, referenced
from lookplangraph.distill.cypher.grounding_gold import GroundingGoldError, answer_of, grounding_gold
from lookplangraph.cypher.memory_view import MemoryView

pytest.importorskip("ladybug")


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("grounding")


@pytest.fixture
def store():
    s = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=500, max_chars=20000))
    yield s
    s.close()


def _view(store, scene):
    view = MemoryView(store, MemoryGraph(scene.graph))  # as cypher-eval shows the scene
    view.refresh()
    return view


def _strings(rows):
    return {x for r in rows for v in r for x in (v if isinstance(v, list) else [v]) if isinstance(x, str)}


def test_every_shipped_item_gets_a_gold_the_judge_scores_correct_or_a_schema_rejection(bench, store):
    items, scenes = bench
    made, rejected = 0, []
    for item in items:
        scene = scenes[(item.split, item.task)]
        try:
            g = grounding_gold(item, scene.graph, _view(store, scene))
        except GroundingGoldError as exc:
            rejected.append((item, exc))
            continue
        made += 1
        assert judge(item, scene.graph, g.answer).correct, item.id  # scored again here, not only inside
        names, classes = referenced(GoalSpec.model_validate(item.goal))
        cells = _strings(r for q in g.queries for r in q.rows)
        assert names <= cells and classes <= {node_class(c) for c in cells}, item.id
        for q in g.queries:
            assert q.query.startswith("MATCH") and q.rows and " ORDER BY " in q.query
            assert len(q.rows) <= gg.EVAL_LIMITS.max_rows
        assert set(g.answer) == {"node_goals", "count_goals", "formula"}
    # the only items without gold are the two whose formula is longer than the reply schema allows
    # (600 characters): no agent can answer them in this schema
    assert made == len(items) - 2
    assert sorted(exc.kind for _, exc in rejected) == ["schema", "schema"]
    assert all(len(i.goal["formula"]) > 600 for i, _ in rejected)
    assert {i.split for i in items} == {"virtualhome", "behavior", "office"}


def test_a_goal_that_disagrees_with_the_judged_states_is_rejected_not_written(bench, store):
    items, scenes = bench
    item = next(i for i in items if i.id == "office-goal-office-01")  # the red stapler onto Tom's desk (desk-5)
    scene = scenes[(item.split, item.task)]
    wrong = item.model_copy(update={"goal": {"node_goals": [{"node": "stapler-1", "relation": "ontop",
                                                                 "destination": "desk-5"}]}})  # the blue one
    with pytest.raises(GroundingGoldError, match="judge scores the gold goal wrong") as err:
        grounding_gold(wrong, scene.graph, _view(store, scene))
    assert err.value.kind == "judge"
    g = grounding_gold(item, scene.graph, _view(store, scene))
    assert g.answer["node_goals"] == [{"node": "stapler-2", "relation": "ontop", "destination": "desk-5", "states": []}]
    # the rows show both staplers with their colours and the desks with their rooms: what picks the answer
    rows = [r for q in g.queries for r in q.rows]
    assert ["stapler-2", "cardboard_box-1", "storage_room-1", [], ["red"]] in rows
    assert ["desk-5", "toms_office-1", [], []] in rows


def test_a_result_over_the_evaluation_limits_is_rejected(bench, store, monkeypatch):
    items, scenes = bench
    item = next(i for i in items if i.id == "office-goal-office-01")
    scene = scenes[(item.split, item.task)]
    monkeypatch.setattr(gg, "EVAL_LIMITS", QueryLimits(max_rows=50, max_chars=200))
    with pytest.raises(GroundingGoldError, match="exceeds the evaluation's limits") as err:
        grounding_gold(item, scene.graph, _view(store, scene))
    assert err.value.kind == "too_large"


def test_absent_states_become_negated_formula_conjuncts_with_the_same_verdicts(bench):
    items, scenes = bench
    item = next(i for i in items if i.id == "virtualhome-goal-file383_1")  # turn on the dishwasher, plates on it
    scene = scenes[(item.split, item.task)]
    goal = GoalSpec.model_validate({"node_goals": [
        {"node": "plate-1", "relation": "ontop", "destination": "dishwasher-1"},
        {"node": "dishwasher-1", "absent_states": ["on"]},
        {"node": "plate-2", "absent_states": ["dirty"]}]})
    answer = answer_of(goal)
    assert answer["formula"] == "(and (not (toggled_on dishwasher-1)) (not (dirty plate-2)))"
    assert [g["node"] for g in answer["node_goals"]] == ["plate-1"]
    spec = parse_goal(answer)
    for st in item.states:
        g = apply_edits(scene.graph, st.edits, st.agent_location)
        assert evaluate_goal(spec, g).success_changed_only == evaluate_goal(goal, g).success_changed_only, st.label


def test_a_class_the_scene_lacks_is_a_goal_error(bench, store):
    items, scenes = bench
    item = next(i for i in items if i.id == "office-goal-office-01")
    scene = scenes[(item.split, item.task)]
    bad = item.model_copy(update={"goal": {"formula": "(forall (?u - unicorn) (ontop ?u desk-5))"}})
    with pytest.raises(GroundingGoldError, match="class 'unicorn'") as err:
        grounding_gold(bad, scene.graph, _view(store, scene))
    assert err.value.kind == "goal"
