"""Intent questions (lookplangraph.cypher.intents, intent_words, intent_bench; the training side
lookplangraph.distill.cypher.intent_data): every gold query gives the computed answer on the real
store, the wording varies, a seed gives the same questions, held-out intents never reach training."""

from __future__ import annotations

import json
import random
import pytest

from grasif import dataset
from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.benchmark import DEFAULT_DIR, load_benchmark, unique_scenes
from lookplangraph.cypher.intent_bench import intent_questions, write_heldout_intents
from lookplangraph.cypher.intent_words import descriptions, phrase, plural
from lookplangraph.cypher.intents import HELDOUT_INTENTS, INTENTS, TRAIN_INTENTS, cypher_string, intent_gold
from lookplangraph.distill.cypher.intent_data import training_intent_questions

pytest.importorskip("ladybug")


@pytest.fixture(scope="module")
def scenes(split_tasks):
    out = {}
    for split, stride in (("virtualhome", 40), ("behavior", 20), ("office", 7)):
        out[split] = [(t.id, t.graph) for t in unique_scenes(split_tasks(split))[::stride]]
    return out


@pytest.fixture(scope="module")
def questions(scenes):
    return [(q, dict(scenes[split])[q.scene]) for split in scenes
            for q in intent_questions(split, scenes[split], seed=1, per_scene=2)]


def test_every_gold_query_gives_the_computed_answer_on_the_store(questions):
    by_scene: dict[tuple[str, str], tuple] = {}
    for q, graph in questions:
        by_scene.setdefault((q.split, q.scene), (graph, []))[1].append(q)
    store = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=200, max_chars=20000))
    try:
        for graph, mine in by_scene.values():
            store.load(graph)
            queries = [intent_gold(q, store).query for q in mine]
            assert all(x.startswith("MATCH") and " DELETE " not in x.upper() for x in queries)
    finally:
        store.close()
    assert {q.template for q, _ in questions} == set(INTENTS)  # every intent was exercised


def test_questions_are_sentences_with_every_part_filled_in(questions):
    for q, _ in questions:
        assert q.question[-1] in "?." and q.question[0].isupper(), q.question
        assert not any(c in q.question for c in "{}[]|"), q.question
        assert "  " not in q.question, q.question


def test_each_intent_has_many_surface_forms(questions):
    by_intent = {}
    for q, graph in questions:
        by_intent.setdefault(q.template, (q, graph))
    for name, (q, graph) in by_intent.items():
        texts = {phrase(name, q.slots, graph, random.Random(f"forms:{k}")) for k in range(40)}
        assert len(texts) >= 5, (name, texts)


def test_a_seed_gives_the_same_questions_and_another_seed_others(scenes):
    once = intent_questions("office", scenes["office"], seed=4, per_scene=2)
    again = intent_questions("office", scenes["office"], seed=4, per_scene=2)
    other = intent_questions("office", scenes["office"], seed=5, per_scene=2)
    assert [q.model_dump() for q in once] == [q.model_dump() for q in again]
    assert [q.question for q in once] != [q.question for q in other]
    assert len({q.id for q in once}) == len(once)


def test_a_node_is_described_only_where_the_description_names_it_alone(kitchen):
    assert descriptions(kitchen, "apple-2") == ["apple-2", "the apple on table-1", "the apple on the table"]
    assert descriptions(kitchen, "apple-2", avoid=("holder",)) == ["apple-2"]  # apple-1 is in kitchen-1 too
    assert descriptions(kitchen, "cup-1") == ["cup-1", "the cup"]
    assert plural("bottle__of__gin") == "bottles of gin" and plural("shelf") == "shelves"
    assert cypher_string("Tom's") == '"Tom\'s"' and cypher_string("red") == "'red'"


def test_held_out_intents_never_reach_training(grasif_build):
    assert set(HELDOUT_INTENTS) <= set(INTENTS) and not set(HELDOUT_INTENTS) & set(TRAIN_INTENTS)
    tasks = [t for s in ("virtualhome", "behavior", "office") for t in dataset.load_split(grasif_build, s)]
    qs = training_intent_questions(tasks, seed=0)
    assert qs and {q.template for q in qs} == set(TRAIN_INTENTS) - {"list_property"}  # no properties in the pool
    assert not {q.template for q in qs} & set(HELDOUT_INTENTS)
    assert {q.split for q in qs} <= {"virtualhome", "behavior"}  # the office evaluates: never training
    with pytest.raises(ValueError, match="held-out intents never enter training data: compare_rooms"):
        training_intent_questions(tasks, intents=("count_scene", "compare_rooms"))


def test_the_held_out_intent_benchmark_is_what_cypher_eval_reads(grasif_build, tmp_path, capsys):
    from lookplangraph.cli import main

    assert main(["cypher-intents", "--split", "heldout_intents", "--out", str(tmp_path / "b"), "--per-intent", "5"]) == 0
    assert "qa.v2.json" in capsys.readouterr().out
    items, scenes = load_benchmark("qa", tmp_path / "b", grasif_build)
    assert items and {i.template for i in items} == set(HELDOUT_INTENTS)
    assert {i.part for i in items} == {"dev", "heldout"} and all((i.split, i.scene) in scenes for i in items)
    doc = json.loads((tmp_path / "b" / "qa.v2.json").read_text())
    assert all(set(i["slots"]) for i in doc["items"])
    with pytest.raises(ValueError, match="shipped benchmarks"):
        write_heldout_intents(grasif_build, DEFAULT_DIR)
