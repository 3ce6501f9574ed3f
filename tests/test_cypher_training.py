"""Cypher training data (lookplangraph.distill.cypher.data): the real agent's turns with the gold
policy (a data tool, not an LM), questions reworded, instructions grounded with goals the judge
scores correct, held-out scenes and held-out grounding items refused."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from grasif import heldout
from grasif.generate import generate
from grasif.goals import GoalSpec
from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.benchmark import building, load_benchmark, parts
from lookplangraph.cypher.gold import PATTERNS
from lookplangraph.cypher.grounding import judge, referenced
from lookplangraph.cypher.phrasings import PHRASINGS, REWORDED, rephrase
from lookplangraph.cypher.qa import TEMPLATES, build_questions
from lookplangraph.distill.cypher.data import THOUGHT_ROWS, allowed_scenes, build_data, grounding_items, rows_thought

pytest.importorskip("ladybug")


@pytest.fixture(scope="module")
def tasks(split_tasks):
    return [t for s in ("virtualhome", "behavior", "office") for t in split_tasks(s)]


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
            # the answer's thought says what the rows show: their count and their first values
            result = [m["content"] for m in ex["messages"] if m["role"] == "user"
                      and m["content"].startswith("Result of run_cypher_query:")][-1]
            rows = [json.loads(r) for r in result.splitlines()[2:] if r.startswith("[")]
            assert last["thought"] == rows_thought(rows), (last["thought"], rows)
    thoughts = {json.loads(ex["messages"][-1]["content"])["thought"] for ex in lines if ex["meta"]["turn"] > 2}
    assert len(thoughts) > 10 and "the rows give the answer" not in thoughts
    assert not any(ex["meta"]["question"] in t for ex in lines for v in REWORDED.values() for t in v)


def test_an_answer_thought_names_how_many_rows_and_their_first_values():
    assert rows_thought([]) == "the query returned no rows"
    assert rows_thought([[3]]) == "one row: 3"
    assert rows_thought([["kitchen-1"], ["bedroom-1"]]) == "2 rows: kitchen-1; bedroom-1"
    assert rows_thought([["cup-1", True, None]]) == "one row: cup-1, true, null"
    many = rows_thought([[f"cup-{i}"] for i in range(THOUGHT_ROWS + 3)])
    assert many.startswith(f"{THOUGHT_ROWS + 3} rows: cup-0; ") and many.endswith("and 3 more")
    assert f"cup-{THOUGHT_ROWS}" not in many


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
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--intents-per-split", "-1"]) == 2
    assert "cannot be negative" in capsys.readouterr().err
    assert main(["cypher-data", "--out", str(tmp_path / "d"), "--classes-at", "middle"]) == 2
    assert "--classes-at: invalid choice" in capsys.readouterr().err
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


def _few(tasks, vh=16, bh=8):
    """A few allowed scenes of both GraSIF splits and four generated offices (small: fast)."""
    allowed = allowed_scenes(tasks)
    return ([t for t in allowed if t.split == "virtualhome"][:vh] + [t for t in allowed if t.split == "behavior"][:bh]
            + generate("office", 4, seed=5))


def test_intent_questions_are_spread_over_the_training_intents(tasks):
    from lookplangraph.distill.cypher.intent_data import intent_sample, training_intent_questions

    drawn = training_intent_questions(_few(tasks), seed=2)
    chosen = intent_sample(drawn, 20, seed=2)
    assert chosen == intent_sample(drawn, 20, seed=2) and chosen != intent_sample(drawn, 20, seed=3)
    assert [q for q in drawn if q in chosen] == chosen  # in the drawn order
    for split in {q.split for q in drawn}:
        pools = Counter(q.template for q in drawn if q.split == split)
        took = Counter(q.template for q in chosen if q.split == split)
        assert sum(took.values()) == min(20, sum(pools.values()))
        # one per intent in turn: an intent with fewer than another has none left to give
        assert all(took[a] >= took[b] - 1 or took[a] == pools[a] for a in pools for b in pools)
    assert intent_sample(drawn, 0) == []


def test_intent_examples_are_the_agents_turns_on_training_intents_and_allowed_scenes(tasks, store, tmp_path):
    from lookplangraph.cypher.answers import answers_equal
    from lookplangraph.cypher.intent_bench import intent_questions
    from lookplangraph.cypher.intents import HELDOUT_INTENTS, TRAIN_INTENTS
    from lookplangraph.distill.cypher.intent_data import intent_writer, training_intent_questions

    chosen = _few(tasks)
    counts = build_data(chosen, store, tmp_path, n_per_split=0, grounding_per_split=0, intents=intent_writer(12, seed=3))
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    c = counts["intents"]
    assert counts["examples"] == c["examples"] == len(lines) and counts["questions"] == 0
    assert c["questions"] == sum(c["by_split"].values()) == sum(c["by_intent"].values()) > 24
    assert set(c["by_split"]) == {"virtualhome", "behavior", "generated-office"} and max(c["by_split"].values()) <= 12
    assert len(c["by_intent"]) >= 10 and c["rejected"] == {}
    allowed = {(t.split, t.id) for t in allowed_scenes(chosen)}
    drawn = {q.id: q for q in training_intent_questions(chosen, seed=3)}
    held = {q.question for split in ("virtualhome", "behavior", "generated-office")
            for q in intent_questions(split, [(t.id, t.graph) for t in chosen if t.split == split], seed=3,
                                      intents=HELDOUT_INTENTS)}
    assert held  # the held-out intents have questions on these scenes; none of them is in the data
    for ex in lines:
        meta, msgs = ex["meta"], ex["messages"]
        q = drawn[meta["item"]]
        assert meta["source"] == "cypher-gold-intent" and meta["intent"] in TRAIN_INTENTS
        assert meta["intent"] not in HELDOUT_INTENTS and meta["question"] not in held
        assert (meta["split"], meta["scene"]) in allowed and (q.split, q.scene, q.template) == (
            meta["split"], meta["scene"], meta["intent"])
        assert msgs[1]["content"].startswith(f"Question: {q.question}\n")
        first, last = json.loads(msgs[2]["content"]), json.loads(msgs[-1]["content"])
        assert first["query"] == q.gold_query  # the intent's own gold query, then the answer its rows give
        if last["tool"] == "answer":
            assert answers_equal(q.answer_type, q.answer, last["answer"]), meta["item"]


def test_an_intent_question_whose_rows_do_not_give_its_answer_is_counted_and_skipped(tasks, store, tmp_path):
    from lookplangraph.distill.cypher.intent_data import training_intent_questions, write_intents

    chosen = _few(tasks, 4, 0)
    qs = [q for q in training_intent_questions(chosen, seed=1) if q.template == "count_scene"][:2]
    wrong = qs[0].model_copy(update={"answer": qs[0].answer + 7})
    scenes = {(t.split, t.id): t for t in chosen}
    with open(tmp_path / "sft.jsonl", "w") as f:
        counts = write_intents(f, [wrong, qs[1]], scenes, store)
    assert counts["rejected"] == {"rows_differ": 1} and counts["questions"] == 1
    assert counts["examples"] == len((tmp_path / "sft.jsonl").read_text().splitlines()) >= 2
    held = qs[1].model_copy(update={"template": "compare_rooms"})
    with pytest.raises(ValueError, match="held-out intents never enter training data"):
        write_intents(None, [held], scenes, store)
    with pytest.raises(ValueError, match="not allowed training scenes"):
        write_intents(None, [qs[1].model_copy(update={"scene": "elsewhere"})], scenes, store)


def test_the_end_layout_data_is_the_schema_data_with_the_classes_line_moved(tasks, store, tmp_path):
    """``cypher-data --classes-at end`` and ``distill mix --cypher-classes-at end`` give the same prompts."""
    from lookplangraph.cypher.agent import classes_at_end
    from lookplangraph.distill.cypher.intent_data import intent_writer

    chosen = _few(tasks, 6, 4)
    made = {}
    for at in ("schema", "end"):
        counts = build_data(chosen, store, tmp_path / at, n_per_split=3, grounding_per_split=2, classes_at=at,
                            intents=intent_writer(3))
        assert counts.get("classes_at") == (None if at == "schema" else "end")
        made[at] = [json.loads(x) for x in (tmp_path / at / "sft.jsonl").read_text().splitlines()]
    assert len(made["schema"]) == len(made["end"]) > 20
    assert {ex["meta"]["source"] for ex in made["end"]} == {"cypher-gold", "cypher-gold-grounding", "cypher-gold-intent"}
    for old, new in zip(made["schema"], made["end"]):
        assert old["meta"] == new["meta"] and old["messages"][1:] == new["messages"][1:]
        assert old["messages"][0] != new["messages"][0]
        assert classes_at_end(old["messages"][0]["content"]) == new["messages"][0]["content"]


def test_a_questions_turns_merge_into_one_conversation_that_trains_the_same_answers(tasks, store, tmp_path):
    from lookplangraph.distill.cypher.commands import _as_conversations
    from lookplangraph.distill.planning.conversations import decisions, trained

    build_data(allowed_scenes(tasks)[:4], store, tmp_path, n_per_split=10, grounding_per_split=3)
    turns = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    n = _as_conversations(tmp_path)
    chats = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert n == len(chats) < len(turns) and any(len(c["meta"]["turns"]) >= 2 for c in chats)
    # cut back into one-decision examples, the conversations are the turns as written, in order
    cut = [d for c in chats for d in decisions(c["messages"])]
    assert [[{"role": m["role"], "content": m["content"]} for m in d] for d in cut] == \
        [[{"role": m["role"], "content": m["content"]} for m in t["messages"]] for t in turns]
    assert sum(trained(m) for c in chats for m in c["messages"]) == len(turns)
    for c in chats:
        assert c["meta"]["turns"] == [i for i, m in enumerate(c["messages"]) if trained(m)] and "turn" not in c["meta"]
