"""Recovery turns (lookplangraph.distill.cypher.recovery): a model's first-query mistakes recorded through the
real agent and store, then replayed with the gold turns after them; only the turns after the
mistake become examples; held-out scenes and outcomes the store no longer gives are refused.

The LM here is a TEST DOUBLE (:class:`MistakeDouble`): a fixed list of first queries, so that the
code around the LM (recording, classifying, assembling) is tested without a model. The real
collection runs the real base model (``lookplangraph cypher-mistakes``)."""

from __future__ import annotations

import json

import pytest

from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.gold import gold
from lookplangraph.cypher.qa import Question
from lookplangraph.distill.cypher.recovery import (MISTAKES, FirstQuery, RecoveryRejected, classify, collect, plan_items,
                                           read_records, recovery_turns, recovery_writer, write_recovery)
from lookplangraph.distill.cypher.data import allowed_scenes, build_data, training_questions
from lookplangraph.lm.base import Usage, checked_completion

pytest.importorskip("ladybug")

#: the double's first queries, in turn: an unknown label, a class the store lacks, a query that
#: lists rooms whatever was asked, a syntax error
QUERIES = ["MATCH (o:Thing) RETURN o.name", "MATCH (o:Object {class: 'unicorn'}) RETURN o.name",
           "MATCH (r:Room) RETURN r.name", "MATCH (o:Object RETURN o.name"]


class MistakeDouble:
    """TEST DOUBLE, not a language model: answers the agent's first call of each item with the next
    of :data:`QUERIES` (a reply the agent parses as a model's), and counts its calls."""

    name = "test double"
    constraints = frozenset()

    def __init__(self):
        self.calls = 0

    def complete(self, messages, **request):
        query = QUERIES[self.calls % len(QUERIES)]
        self.calls += 1
        text = json.dumps({"thought": "find it", "tool": "run_cypher_query", "query": query})
        return checked_completion(text, request.get("schema"), Usage(10, 5, None), 0.01)


@pytest.fixture(scope="module")
def tasks(split_tasks):
    return allowed_scenes([t for s in ("virtualhome", "behavior") for t in split_tasks(s)])


@pytest.fixture
def store():
    s = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=50, max_chars=2000))
    yield s
    s.close()


def test_classify_tells_errors_empty_wrong_and_right_rows_apart(tasks, store):
    q, _ = next(p for p in training_questions(tasks) if p[0].template == "location_room")
    store.load(next(t for t in tasks if (t.split, t.id) == (q.split, q.scene)).graph)
    g = gold(q, store)
    kw = {"question": q, "gold_answer": g.answer}
    assert classify(store, g.query, **kw) == ("right_rows", None, 1)
    assert classify(store, QUERIES[0], **kw)[:2] == ("error", "unknown_name")
    assert classify(store, QUERIES[1], **kw) == ("empty", None, 0)
    assert classify(store, QUERIES[3], **kw)[:2] == ("error", "syntax")
    outcome, _, n = classify(store, f"MATCH (r:Room) WHERE r.name <> '{g.answer}' RETURN r.name ORDER BY r.name", **kw)
    assert outcome == "wrong_rows" and n >= 1  # another room
    # a single cell holding the whole answer is the answer too (collect() of the names of a set)
    obj = q.question.split("is ", 1)[1].rstrip("?")
    assert classify(store, f"MATCH (o:Object {{name: '{obj}'}})-[:ON_TOP_OF|INSIDE*1..12]->(:Asset)-[:IN_ROOM]->"
                           "(r:Room) RETURN collect(r.name)[1]", **kw)[0] == "right_rows"


def test_collect_records_first_replies_and_mistakes_and_resumes(tasks, store, tmp_path):
    lm = MistakeDouble()
    summary = collect(lm, "double", tasks, store, tmp_path, n_questions=6, n_grounding=2)
    records = read_records(tmp_path / "first_queries.jsonl")
    assert lm.calls == 8 == len(records)  # one LM call an item: the agent is stopped after the first result
    assert [r.query for r in records] == [QUERIES[i % 4] for i in range(8)]
    assert [r.kind for r in records] == ["qa"] * 6 + ["grounding"] * 2
    assert {r.split for r in records} == {"virtualhome", "behavior"}  # round robin over the splits
    for r in records:
        assert r.shown.startswith("Result of run_cypher_query:\n")  # what the agent showed the model next
        assert r.outcome in MISTAKES  # none of the double's queries answers anything
        if r.outcome == "error":
            assert "ERROR (" in r.shown and r.error_kind in ("unknown_name", "syntax")
    mistakes = read_records(tmp_path / "mistakes.jsonl")
    assert [m.id for m in mistakes] == [r.id for r in records]
    assert summary["all"]["mistakes"] == 8 and summary["qa"]["items"] == 6
    assert sum(summary["all"]["outcomes"].values()) == 8
    collect(lm, "double", tasks, store, tmp_path, n_questions=6, n_grounding=2)  # nothing left: no LM call
    assert lm.calls == 8 and len(read_records(tmp_path / "first_queries.jsonl")) == 8
    with pytest.raises(ValueError, match="other settings"):  # another model's replies never mix in
        collect(lm, "another double", tasks, store, tmp_path, n_questions=6)
    with pytest.raises(ValueError, match="other settings"):  # nor questions of other templates
        collect(lm, "double", tasks, store, tmp_path, n_questions=6, templates=("contain_base_asset",))


def test_collect_asks_only_the_templates_given(tasks, store, tmp_path):
    lm = MistakeDouble()
    deep = ("contain_deep_set", "contain_base_asset", "contain_count_deep")
    collect(lm, "double", tasks, store, tmp_path, n_questions=4, templates=deep)
    records = read_records(tmp_path / "first_queries.jsonl")
    assert len(records) == 4 and lm.calls == 4
    plan = plan_items(tasks, 4, 0, templates=deep)
    assert [q.template for _, (q, _) in plan] and {q.template for _, (q, _) in plan} <= set(deep)
    assert [r.id for r in records] == [q.id for _, (q, _) in plan]


def test_recovery_examples_are_the_mistake_then_the_gold_turns_and_only_the_latter_are_targets(tasks, store, tmp_path):
    collect(MistakeDouble(), "double", tasks, store, tmp_path / "m", n_questions=4, n_grounding=4)
    mistakes = read_records(tmp_path / "m" / "mistakes.jsonl")
    big = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=500, max_chars=20000))
    try:
        counts = build_data(tasks, big, tmp_path / "d", n_per_split=0, grounding_per_split=0,
                            recovery=recovery_writer(mistakes))
    finally:
        big.close()
    r = counts["recovery"]
    assert r["mistakes"] == len(mistakes) == 8 and not r["rejected"] and r["by_kind"] == {"qa": 4, "grounding": 4}
    lines = [json.loads(x) for x in (tmp_path / "d" / "sft.jsonl").read_text().splitlines()]
    assert len(lines) == r["examples"] == counts["examples"]
    by_id = {m.id: m for m in mistakes}
    for ex in lines:
        m, msgs = by_id[ex["meta"]["id"]], ex["messages"]
        assert ex["meta"]["source"] == "cypher-recovery" and ex["meta"]["mistake"] == m.outcome
        assert msgs[2] == {"role": "assistant", "content": m.reply}  # the model's reply as it was
        assert msgs[3]["content"].startswith("Result of run_cypher_query:\n")
        if m.outcome == "error":
            assert msgs[3]["content"].startswith("Result of run_cypher_query:\nERROR (")
        assert len(msgs) >= 5 and msgs[-1]["role"] == "assistant"  # never the mistaken turn as the target
        corrected = json.loads(msgs[4]["content"])
        assert corrected["tool"] == "run_cypher_query" and corrected["query"] != m.query
        if len(msgs) == 5:
            assert corrected["thought"].startswith(("That query failed", "That query found nothing", "Those rows"))
    answers = [json.loads(ex["messages"][-1]["content"]) for ex in lines]
    assert sum(a["tool"] == "answer" for a in answers) == 8
    qa = [(ex, a) for ex, a in zip(lines, answers) if a["tool"] == "answer" and ex["meta"]["kind"] == "qa"]
    for ex, a in qa:  # the answer is the gold answer of the recorded question
        m = by_id[ex["meta"]["id"]]
        task = next(t for t in tasks if (t.split, t.id) == (m.split, m.scene))
        store.load(task.graph)
        assert a["answer"] == gold(Question.model_validate(m.question), store).answer


def test_mistakes_on_held_out_scenes_and_outcomes_not_reproduced_are_refused(tasks, store, tmp_path):
    collect(MistakeDouble(), "double", tasks, store, tmp_path, n_questions=2)
    m = read_records(tmp_path / "mistakes.jsonl")[1]  # an empty result on a class the store lacks
    assert m.outcome == "empty"
    scenes = {(t.split, t.id): t for t in tasks}
    held = m.model_copy(update={"split": "behavior", "scene": "buy_a_belt"})  # a planning evaluation task
    with open(tmp_path / "x.jsonl", "w") as f, pytest.raises(ValueError, match="not allowed training scenes"):
        write_recovery(f, [held], scenes, store)
    claimed = m.model_copy(update={"outcome": "error", "error_kind": "syntax"})
    with pytest.raises(RecoveryRejected) as err:
        recovery_turns(claimed, scenes[(m.split, m.scene)], store)
    assert err.value.kind == "not_reproduced"
    right = m.model_copy(update={"outcome": "right_rows"})
    with pytest.raises(RecoveryRejected):
        recovery_turns(right, scenes[(m.split, m.scene)], store)
    with open(tmp_path / "y.jsonl", "w") as f:
        counts = write_recovery(f, [claimed, right, m], scenes, store)
    assert counts["mistakes"] == 1 and counts["rejected"] == {"not_reproduced": 1, "not_a_mistake": 1}


def test_a_record_file_with_a_bad_line_names_the_line(tmp_path):
    good = FirstQuery(kind="qa", id="a", split="virtualhome", scene="s", text="q?", reply="{}", outcome="empty")
    (tmp_path / "f.jsonl").write_text(good.model_dump_json() + "\n\n" + '{"kind": "qa", "id": 3}\n')
    with pytest.raises(ValueError, match=r"f.jsonl:3: not a first-query record"):
        read_records(tmp_path / "f.jsonl")


def test_the_mistakes_command_refuses_bad_input_with_exit_2(tmp_path, capsys):
    from lookplangraph.cli import main

    assert main(["cypher-mistakes", "--out", str(tmp_path), "--questions", "0"]) == 2
    assert "one must be at least 1" in capsys.readouterr().err
    assert main(["cypher-mistakes", "--out", str(tmp_path), "--questions", "-3"]) == 2
    assert main(["cypher-mistakes", "--out", str(tmp_path), "--lm", "nonsense-spec"]) == 2
    assert main(["cypher-mistakes", "--out", str(tmp_path), "--templates", "nope"]) == 2
    assert "--templates: unknown nope" in capsys.readouterr().err
