"""Cypher training data (lookplangraph.distill.cypher.data): the real agent's turns with the gold
policy (a data tool, not an LM), questions reworded, instructions grounded with goals the judge
scores correct, held-out scenes and held-out grounding items refused."""

from __future__ import annotations

import json
import random

import pytest

from grasif import dataset, heldout
from grasif.generate import generate
from grasif.goals import GoalSpec
from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.benchmark import building, load_benchmark, parts
from lookplangraph.cypher.gold import PATTERNS
from lookplangraph.cypher.grounding import judge, referenced
from lookplangraph.cypher.phrasings import PHRASINGS, REWORDED, rephrase
from lookplangraph.cypher.qa import TEMPLATES, build_questions
from lookplangraph.distill.cypher.data import allowed_scenes, build_data, grounding_items

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
    lines = [ex for ex in lines if ex["meta"]["source"] == "cypher-gold"]
    # two turns a question (query, answer); three where the rows look empty (a false, a zero) and the
    # agent asks once more before it takes the answer, as it does with a model
    assert counts["qa_examples"] == len(lines) and 2 * counts["questions"] <= len(lines) <= 3 * counts["questions"]
    assert counts["examples"] == counts["qa_examples"] + counts["grounding"]["examples"]
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


def test_templates_restrict_the_questions_and_some_are_asked_in_the_benchmarks_own_words(tasks, store, tmp_path):
    from lookplangraph.distill.cypher.data import training_questions

    deep = ("contain_deep_set", "contain_base_asset", "contain_count_deep")
    chosen = allowed_scenes(tasks)[:40] + generate("office", 30, seed=5)
    counts = build_data(chosen, store, tmp_path, n_per_split=60, grounding_per_split=0, templates=deep)
    assert counts["templates"] == list(deep) and set(counts["by_template"]) == set(deep)
    assert counts["questions"] >= 30
    pairs = training_questions(chosen, 60, templates=deep)
    own = [asked for q, asked in pairs if PATTERNS[q.template].match(asked.question)]
    assert 0 < len(own) < len(pairs) / 2  # one in ORIGINAL_EVERY, the rest reworded
    assert all(q.question == asked.question for q, asked in pairs if asked in own)
    with pytest.raises(ValueError, match="unknown question templates nope"):
        training_questions(chosen, 5, templates=("nope",))


def test_grounding_examples_are_the_agents_turns_with_goals_the_judge_scores_correct(tasks, store, tmp_path):
    chosen = allowed_scenes(tasks) + generate("office", 6, seed=5)
    counts = build_data(chosen, store, tmp_path, n_per_split=0, grounding_per_split=12)
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert counts["questions"] == counts["qa_examples"] == 0 and counts["examples"] == len(lines)
    g = counts["grounding"]
    assert g["examples"] == len(lines) and g["items"] == sum(g["by_split"].values()) >= 20
    assert set(g["by_split"]) == {"virtualhome", "behavior", "generated-office"}
    by_id = {(t.split, t.id): t for t in chosen}
    items = {item.id: (t, item) for t, item in grounding_items(chosen, 12)}
    answers = 0
    for ex in lines:
        meta, msgs = ex["meta"], ex["messages"]
        assert meta["source"] == "cypher-gold-grounding" and (meta["split"], meta["scene"]) in by_id
        assert msgs[1]["content"] == f"Instruction: {meta['instruction']}"
        last = json.loads(msgs[-1]["content"])
        if last["tool"] == "answer":  # judged again here, on the item's own states, from the written data
            task, item = items[meta["item"]]
            assert judge(item, task.graph, last["answer"]).correct, meta["item"]
            shown = " ".join(m["content"] for m in msgs if m["role"] == "user" and m["content"].startswith("Result"))
            for name in referenced(GoalSpec.model_validate(last["answer"]))[0]:
                assert f'"{name}"' in shown, (meta["item"], name)  # the rows the agent read name every node used
            answers += 1
        else:
            assert last["tool"] == "run_cypher_query" and last["query"].startswith("MATCH (")
    assert answers == g["items"]


def test_no_held_out_grounding_item_or_building_enters_the_data(tasks, store, tmp_path):
    items, _ = load_benchmark("grounding")
    held = [i for i in items if i.part == "heldout"]
    assert held  # the shipped benchmark has a held-out part
    counts = build_data(allowed_scenes(tasks), store, tmp_path, n_per_split=0, grounding_per_split=500)
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    part = parts(tasks)
    task_of = {(t.split, t.id): t for t in tasks}
    seen = {(ex["meta"]["split"], ex["meta"]["scene"]) for ex in lines}
    assert len(seen) == counts["grounding"]["items"] > 100
    for key in seen:
        t = task_of[key]
        assert part[building(t)] == "dev" and heldout.in_train_pool(*key) and not heldout.is_eval(t)
    assert not seen & {(i.split, i.task) for i in held}
    assert not {ex["meta"]["instruction"] for ex in lines} & {i.instruction for i in held}
    heldout_task = next(t for t in tasks if (t.split, t.id) == (held[0].split, held[0].task))
    with pytest.raises(ValueError, match="held out"):
        build_data([heldout_task], store, tmp_path / "never", n_per_split=0)
    office = next(t for t in tasks if t.split == "office")  # a planning evaluation task: refused too
    with pytest.raises(ValueError, match="held out"):
        build_data([office], store, tmp_path / "never", n_per_split=0)
    assert not (tmp_path / "never" / "sft.jsonl").exists()


def test_the_command_refuses_bad_input_with_exit_2(tmp_path, capsys):
    from lookplangraph.cli import main

    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--qa-per-split", "-1"]) == 2
    assert "cannot be negative" in capsys.readouterr().err
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--qa-per-split", "0", "--grounding-per-split", "0"]) == 2
    assert "nothing to write" in capsys.readouterr().err
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--generated", str(tmp_path / "nothing")]) == 2
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--recovery-from", str(tmp_path / "none.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text('{"kind": "qa"}\n')
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--recovery-from", str(tmp_path / "bad.jsonl")]) == 2
    assert "bad.jsonl:1: not a first-query record" in capsys.readouterr().err
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--templates", "contain_deep_set,nope"]) == 2
    assert "--templates: unknown nope" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
