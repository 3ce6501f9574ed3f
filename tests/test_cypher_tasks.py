"""The Cypher benchmarks: typed answers, questions checked against real Cypher queries, grounding
judged on near-miss states, deterministic versioned files."""

import json
import re
import shutil

import pytest

from grasif import dataset
from grasif.goals import GoalSpec
from lookplangraph.cypher import benchmark
from lookplangraph.cypher.answers import AnswerError, answers_equal, normalize
from lookplangraph.cypher.grounding import apply_edits, build_item, judge, reference_verdict


@pytest.fixture(scope="module")
def grasif_dir(grasif_copy):
    """A GraSIF build of every split, fresh for the session: a copy of the session's (the bytes a
    ``dataset.build`` writes, without its 25 s)."""
    return grasif_copy()


# -- answers --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, expected, given, equal", [
    ("number", 3, 3.0, True), ("number", 3, "3", True), ("number", 2.5, 2.509, True), ("number", 2.5, 2.52, False),
    ("number", 3, True, False), ("number", 3, [3], False),
    ("string", "kitchen-1", " kitchen-1 ", True), ("string", "kitchen-1", "Kitchen-1", False),
    ("string", "kitchen-1", ["kitchen-1"], False),
    ("boolean", True, True, True), ("boolean", True, "yes", True), ("boolean", False, "true", False),
    ("boolean", True, 1, False),
    ("set", ["a-1", "b-1"], ["b-1", "a-1", "a-1"], True), ("set", ["a-1", "b-1"], ["a-1"], False),
    ("set", ["a-1"], "a-1", True), ("set", [], [], True),
    ("list", ["a-1", "b-1"], ["a-1", "b-1"], True), ("list", ["a-1", "b-1"], ["b-1", "a-1"], False),
])
def test_typed_answer_equality(kind, expected, given, equal):
    assert answers_equal(kind, expected, given) is equal


def test_normalize_rejects_wrong_types():
    with pytest.raises(AnswerError):
        normalize("number", "three")
    with pytest.raises(AnswerError):
        normalize("set", [["nested"]])
    assert normalize("number", 4) == 4.0


# -- the files ------------------------------------------------------------------------------------
def test_committed_benchmarks_are_what_a_fresh_build_gives(grasif_dir, tmp_path):
    qa, grounding = benchmark.build(grasif_dir, tmp_path, progress=lambda m: None)
    assert qa.read_bytes() == benchmark.path_of("qa").read_bytes()
    assert grounding.read_bytes() == benchmark.path_of("grounding").read_bytes()
    items, scenes = benchmark.load_benchmark("qa", tmp_path, grasif_dir)
    assert len(items) >= 150
    assert {i.split for i in items} == {"virtualhome", "behavior", "office"}
    for split in ("virtualhome", "behavior", "office"):
        kinds = {i.kind for i in items if i.split == split}
        assert {"count", "location", "state", "containment", "collection"} <= kinds, split
        templates = {i.template for i in items if i.split == split}
        assert len(templates) >= 10
    assert len({i.id for i in items}) == len(items)


def test_held_out_scenes_are_other_buildings_and_no_prompt_example_comes_from_them(grasif_dir):
    """The held-out part: other buildings than the development part, at least 300 questions over
    16 templates, grounding items too; and no node a prompt names as an example is one that only
    held-out scenes have (an example taken from a held-out scene would leak it)."""
    from lookplangraph.agent.prompts import template

    doc = json.loads(benchmark.path_of("qa").read_text())
    dev, held = set(doc["parts"]["dev"]), set(doc["parts"]["heldout"])
    assert dev and held and not dev & held
    items, scenes = benchmark.load_benchmark("qa", data_dir=grasif_dir)
    for item in items:
        assert (benchmark.building(scenes[(item.split, item.scene)]) in held) == (item.part == "heldout"), item.id
    heldout = [i for i in items if i.part == "heldout"]
    assert len(heldout) >= 300 and len({i.template for i in heldout}) >= 16
    assert {i.kind for i in heldout} == {"count", "location", "state", "containment", "argmax", "collection"}
    goals, goal_scenes = benchmark.load_benchmark("grounding", data_dir=grasif_dir)
    assert sum(g.part == "heldout" for g in goals) >= 20
    assert all((benchmark.building(goal_scenes[(g.split, g.task)]) in held) == (g.part == "heldout") for g in goals)
    every = {split: dataset.load_split(grasif_dir, split) for split in benchmark.SPLITS}
    names = {part: {n for ts in every.values() for t in ts if benchmark.building(t) in buildings for n in t.graph.nodes}
             for part, buildings in (("dev", dev), ("heldout", held))}
    prompts = " ".join(template(name) for name in ("cypher_system", "cypher_qa", "cypher_goal", "cypher_whole_graph"))
    examples = set(_names(prompts))
    assert len(examples & names["dev"]) >= 3  # the examples' names are the development scenes' (desk-3 ...)
    assert not examples & names["heldout"] - names["dev"], "a prompt example names a node only held-out scenes have"


def test_a_benchmark_refuses_other_scenes(grasif_dir, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(grasif_dir, data)
    index = json.loads((data / "index.json").read_text())
    items, _ = benchmark.load_benchmark("qa", data_dir=data)
    split, scene = items[0].split, items[0].scene
    index["splits"][split][scene] = "0" * 64
    (data / "index.json").write_text(json.dumps(index))
    with pytest.raises(benchmark.BenchmarkError, match="rebuild"):
        benchmark.load_benchmark("qa", data_dir=data)


# -- questions against the real store -------------------------------------------------------------
def _names(text):
    return re.findall(r"[a-z_][a-z_\-]*-\d+", text)


#: hand-written Cypher per template: an answer computed by the database, independent of qa.py
CYPHER = {
    "count_class_scene": lambda q: ("MATCH (o:Object {class: $c}) WHERE NOT EXISTS { MATCH (:Agent)-[:HOLDS]->(o) } "
                                    "RETURN count(o)", {"c": re.search(r"class (\S+) are", q).group(1)}),
    "count_on_asset": lambda q: ("MATCH (o:Object)-[:ON_TOP_OF|INSIDE]->(:Asset {name: $a}) RETURN count(o)",
                                 {"a": _names(q)[0]}),
    "location_room": lambda q: ("MATCH (:Object {name: $o})-[:ON_TOP_OF|INSIDE*1..10]->(:Asset)-[:IN_ROOM]->(r:Room) "
                                "RETURN r.name", {"o": _names(q)[0]}),
    "location_parent": lambda q: ("MATCH (:Object {name: $o})-[:ON_TOP_OF|INSIDE]->(p) RETURN p.name", {"o": _names(q)[0]}),
    "contain_base_asset": lambda q: ("MATCH (:Object {name: $o})-[:ON_TOP_OF|INSIDE*1..10]->(a:Asset) RETURN a.name",
                                     {"o": _names(q)[0]}),
    "contain_count_deep": lambda q: ("MATCH (o:Object)-[:ON_TOP_OF|INSIDE*1..10]->(:Asset {name: $a}) "
                                     "RETURN count(DISTINCT o)", {"a": _names(q)[0]}),
    "contain_deep_set": lambda q: ("MATCH (o:Object)-[:ON_TOP_OF|INSIDE*1..10]->(n {name: $n}) "
                                   "RETURN collect(DISTINCT o.name)", {"n": _names(q)[0]}),
    "list_on_asset_sorted": lambda q: ("MATCH (o:Object)-[:ON_TOP_OF|INSIDE]->(:Asset {name: $a}) "
                                       "RETURN list_sort(collect(o.name))", {"a": _names(q)[0]}),
    "argmax_room_assets": lambda q: ("MATCH (a:Asset)-[:IN_ROOM]->(r:Room) RETURN r.name, count(a) AS n "
                                     "ORDER BY n DESC LIMIT 1", {}),
}


def test_question_answers_agree_with_the_database(grasif_dir):
    from lookplangraph.cypher import open_store
    from lookplangraph.cypher.store import QueryLimits

    items, scenes = benchmark.load_benchmark("qa", data_dir=grasif_dir)
    checked = 0
    with open_store("ladybug", QueryLimits(max_rows=1000, max_chars=100_000)) as store:
        loaded = None
        for item in items:
            if item.template not in CYPHER:
                continue
            task = scenes[(item.split, item.scene)]
            if loaded is not task:
                store.load(task.graph)
                loaded = task
            cypher, params = CYPHER[item.template](item.question)
            rows = store.query(cypher, params).rows
            assert rows, (item.id, item.question, cypher, params)
            value = rows[0][0]
            assert answers_equal(item.answer_type, item.answer, value), (item.id, item.question, item.answer, value)
            checked += 1
    assert checked >= 60


# -- grounding ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def office_task(grasif_dir):
    return next(t for t in dataset.load_split(grasif_dir, "office") if t.id == "office-01")


def test_grounding_item_has_the_final_state_and_near_misses(office_task):
    item = build_item(office_task)
    labels = [s.label for s in item.states]
    assert labels[:2] == ["ground-truth final state", "initial state"]
    assert [s.expected for s in item.states[:2]] == [True, False]
    assert any(l.startswith("undo move of stapler-2") for l in labels)
    assert any(l.startswith("unrelated") for l in labels)
    assert any(not s.expected for s in item.states[2:]) and any(s.expected for s in item.states[2:])
    for s in item.states:  # the stored verdicts are the goal's on the rebuilt states
        g = apply_edits(office_task.graph, s.edits, s.agent_location)
        assert reference_verdict(office_task.goal, g) == s.expected


@pytest.mark.parametrize("answer, correct", [
    ({"node_goals": [{"node": "stapler-2", "relation": "ontop", "destination": "desk-5"}]}, True),
    ({"formula": "(ontop stapler-2 desk-5)"}, True),  # another form, the same meaning
    ("(and (ontop stapler-2 desk-5))", True),
    ({"node_goals": [{"node": "stapler-2", "relation": "ontop", "destination": "desk-6"}]}, False),  # wrong desk
    ({"node_goals": [{"node": "stapler-1", "relation": "ontop", "destination": "desk-5"}]}, False),  # wrong stapler
    ({"node_goals": [{"node": "stapler-2", "relation": "held"}]}, False),
    ({"formula": "(ontop stapler-9 desk-5)"}, False),  # unknown node
    ({"formula": "(ontop stapler-2"}, False),  # unreadable
    ({}, False),
])
def test_grounding_is_judged_by_meaning(office_task, answer, correct):
    item = build_item(office_task)
    verdict = judge(item, office_task.graph, answer)
    assert verdict.correct is correct, verdict
    if not correct:
        assert verdict.reason


def test_a_too_weak_goal_fails_on_the_other_instance_near_miss(office_task):
    """"On desk-5 or on the other desk" agrees on the final state, not on the stapler on the other desk."""
    item = build_item(office_task)
    twin_state = next(s for s in item.states if s.label.startswith("stapler-2 ontop desk-") and "instead" in s.label)
    twin = twin_state.label.split()[2]
    verdict = judge(item, office_task.graph, f"(or (ontop stapler-2 desk-5) (ontop stapler-2 {twin}))")
    assert not verdict.correct and any(twin_state.label in d for d in verdict.disagreements)


def test_an_overspecified_goal_fails_on_a_near_miss(office_task):
    """Asking also that an untouched object stays put agrees on the final state but not on the
    near miss that moves that object."""
    item = build_item(office_task)
    moved = next(s for s in item.states if s.label.startswith("unrelated") and "moved" in s.label)
    other = moved.label.split()[1]
    parent = office_task.graph.parent[other]
    extra = {"node_goals": [{"node": "stapler-2", "relation": "ontop", "destination": "desk-5"},
                            {"node": other, "relation": parent[1].value, "destination": parent[0]}]}
    verdict = judge(item, office_task.graph, extra)
    assert not verdict.correct and any(moved.label in d for d in verdict.disagreements)


def test_every_committed_reference_goal_judges_itself_correct(grasif_dir):
    items, scenes = benchmark.load_benchmark("grounding", data_dir=grasif_dir)
    assert len(items) >= 45
    for item in items:
        task = scenes[(item.split, item.task)]
        assert judge(item, task.graph, GoalSpec.model_validate(item.goal).model_dump()).correct, item.id
