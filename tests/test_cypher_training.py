"""Cypher training data (lookplangraph.cypher.training): the real agent's turns with the gold
policy (a data tool, not an LM), questions reworded, held-out scenes refused."""

from __future__ import annotations

import json
import random

import pytest

from grasif import dataset, heldout
from grasif.generate import generate
from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.benchmark import building, parts
from lookplangraph.cypher.gold import PATTERNS
from lookplangraph.cypher.phrasings import PHRASINGS, REWORDED, rephrase
from lookplangraph.cypher.qa import TEMPLATES, build_questions
from lookplangraph.cypher.training import allowed_scenes, build_data

pytest.importorskip("ladybug")


@pytest.fixture(scope="module")
def tasks():
    return [t for s in ("virtualhome", "behavior", "office") for t in dataset.split_module(s).build_tasks()]


@pytest.fixture
def store():
    s = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=200, max_chars=20000))
    yield s
    s.close()


def test_every_template_has_five_training_phrasings_and_two_reworded_ones_apart():
    assert set(PHRASINGS) == set(REWORDED) == set(TEMPLATES)
    for name in TEMPLATES:
        assert len(set(PHRASINGS[name])) >= 5 and len(set(REWORDED[name])) >= 2
        assert not set(PHRASINGS[name]) & set(REWORDED[name])
        fields = set(PATTERNS[name].groupindex)
        for text in PHRASINGS[name] + REWORDED[name]:
            assert set(__import__("re").findall(r"\{(\w+)\}", text)) == fields, (name, text)


def test_a_rephrased_question_keeps_its_answer_and_names_nodes_in_several_forms(tasks):
    office = next(t for t in tasks if t.split == "office")
    qs = build_questions("office", [(office.id, office.graph)], 40, seed=1)
    forms = set()
    for q in qs:
        for seed in range(6):
            r = rephrase(q, office.graph, random.Random(seed))
            assert r.answer == q.answer and r.template == q.template and r.question != q.question
            forms.add(r.question)
    assert len(forms) > len(qs) * 2


def test_held_out_scenes_are_never_training_scenes(tasks):
    allowed = allowed_scenes(tasks)
    part = parts(tasks)  # the benchmark's own partition, recomputed from all the scenes
    assert allowed and all(heldout.in_train_pool(t.split, t.id) and part[building(t)] == "dev" for t in allowed)
    assert allowed_scenes(allowed[:3]) == allowed[:3]  # a subset keeps its scenes: the partition is the shipped one
    assert not any(heldout.is_eval(t) or t.split == "office" for t in allowed)
    bad = next(t for t in tasks if part[building(t)] == "heldout")
    with pytest.raises(ValueError, match="held out"):
        build_data([bad], None, __import__("pathlib").Path("/tmp/never-written"))


def test_the_data_is_the_agents_own_turns_with_the_gold_query_and_answer(tasks, store, tmp_path):
    chosen = allowed_scenes(tasks)[:6] + generate("office", 4, seed=5)
    counts = build_data(chosen, store, tmp_path, n_per_split=20)
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    # two turns a question (query, answer); three where the rows look empty (a false, a zero) and the
    # agent asks once more before it takes the answer, as it does with a model
    assert counts["examples"] == len(lines) and 2 * counts["questions"] <= len(lines) <= 3 * counts["questions"]
    assert counts["questions"] > 20
    assert set(counts["by_split"]) >= {"generated-office"}
    for ex in lines:
        roles = [m["role"] for m in ex["messages"]]
        last = json.loads(ex["messages"][-1]["content"])
        if ex["meta"]["turn"] == 2:
            assert roles == ["system", "user", "assistant"] and last["tool"] == "run_cypher_query"
            assert ex["messages"][1]["content"].startswith(f"Question: {ex['meta']['question']}")
        else:
            assert roles[-2:] == ["user", "assistant"] and last["tool"] == "answer"
            assert ex["messages"][-2]["content"].startswith(("Result of run_cypher_query:", "Your last query found nothing"))
    assert not any(ex["meta"]["question"] in t for ex in lines for v in REWORDED.values() for t in v)


def test_the_command_refuses_bad_input_with_exit_2(tmp_path, capsys):
    from lookplangraph.cli import main

    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--qa-per-split", "0"]) == 2
    assert "--qa-per-split must be at least 1" in capsys.readouterr().err
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--generated", str(tmp_path / "nothing")]) == 2
