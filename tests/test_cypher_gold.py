"""The query expert (lookplangraph.cypher.gold): every question template has a read-only query
whose rows give the benchmark's answer, on GraSIF scenes of all three splits."""

from __future__ import annotations

from collections import Counter

import pytest

from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.gold import QUERIES, GoldError, gold, gold_query
from lookplangraph.cypher.qa import TEMPLATES, Question, build_questions

pytest.importorskip("ladybug")


@pytest.fixture(scope="module")
def questions(split_tasks):
    out = []
    for split, stride in (("virtualhome", 40), ("behavior", 30), ("office", 7)):
        scenes = [(t.id, t.graph) for t in split_tasks(split)[::stride]]
        out += [(q, dict(scenes)[q.scene]) for q in build_questions(split, scenes, 60, seed=3)]
    return out


def test_every_template_has_a_gold_query():
    assert set(QUERIES) == set(TEMPLATES)


def test_every_gold_query_gives_the_benchmarks_answer(questions):
    store = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=200, max_chars=20000))
    seen = Counter()
    try:
        loaded = None
        for q, graph in questions:
            if loaded != (q.split, q.scene):
                store.load(graph)
                loaded = (q.split, q.scene)
            g = gold(q, store)
            assert g.query.startswith("MATCH") and " DELETE " not in g.query.upper()
            seen[q.template] += 1
    finally:
        store.close()
    assert set(seen) == set(TEMPLATES), set(TEMPLATES) - set(seen)  # every template was exercised


def test_a_question_not_in_its_templates_words_or_a_wrong_answer_is_an_error(questions, kitchen):
    q, _ = questions[0]
    with pytest.raises(GoldError, match="not in template"):
        gold_query(q.model_copy(update={"question": "Something else entirely?"}))
    store = open_store("ladybug", QueryLimits(timeout_s=5, max_rows=50, max_chars=5000))
    try:
        store.load(kitchen)
        wrong = Question(id="k-1", split="examples", scene="k", kind="count", template="count_class_scene",
                         question="How many objects of class apple are there in the whole scene?",
                         answer_type="number", answer=3)
        with pytest.raises(GoldError, match="gives 2, the benchmark says 3"):
            gold(wrong, store)
    finally:
        store.close()
