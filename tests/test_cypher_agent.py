"""The Cypher agent loop, its baselines, batch evaluation and CLI glue.

The LM here is ``ScriptedBackend``: SCRIPTED replies (fixed texts, not a language model), so these
tests check the loop around the LM — tool calls, errors sent back, the call limit, the reply
schemas, token bookkeeping — against a real LadybugDB store."""

import argparse
import json

import pytest

from grasif import dataset
from lookplangraph.lm import ContextOverflow, ScriptedBackend
from lookplangraph.cypher import commands, open_store
from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.answers import answers_equal
from lookplangraph.cypher.benchmark import FORMATS, VERSION
from lookplangraph.cypher.evaluate import by_scene, evaluate, select
from lookplangraph.cypher.grounding import build_item
from lookplangraph.cypher.memory_view import MemoryView
from lookplangraph.cypher.qa import build_questions
from lookplangraph.agent.memory import MemoryGraph
from sgs.actions import parse_action
from sim_adapters.base import Observation, SeenObject

pytest.importorskip("ladybug")


def q(query, thought="look"):
    return json.dumps({"thought": thought, "tool": "run_cypher_query", "query": query})


def a(answer, thought="done"):
    return json.dumps({"thought": thought, "tool": "answer", "answer": answer})


@pytest.fixture
def store(kitchen_store):
    return kitchen_store


def _tools_offered(schema):
    variants = schema.get("anyOf", [schema])
    return {v["properties"]["tool"]["const"] for v in variants}


def test_an_error_goes_back_to_the_lm_which_fixes_its_query(store):
    lm = ScriptedBackend([q("MATCH (f:Fruit) RETURN count(f)"),  # scripted: unknown label first
                          q("MATCH (o:Object {class: 'apple'}) RETURN count(o)"), a(2)])
    res = CypherAgent(lm, store).answer_question("How many apples are there?", "number")
    assert res.answer == 2 and res.error is None
    assert [r.error_kind for r in res.queries] == ["unknown_name", None]
    second_prompt = lm.requests[1]["messages"][-1]["content"]
    assert "ERROR (unknown_name)" in second_prompt and "Fruit" in second_prompt
    assert "4 queries left" in second_prompt
    assert "COUNT" in lm.requests[2]["messages"][-1]["content"].upper() and "[2]" in lm.requests[2]["messages"][-1]["content"]
    assert res.calls == 3 and res.input_tokens > 0 and res.output_tokens > 0


def test_write_attempts_are_refused_and_the_store_is_unchanged(store):
    lm = ScriptedBackend([q("MATCH (n) DETACH DELETE n"), q("MATCH (n) RETURN count(n)"), a(13)])
    res = CypherAgent(lm, store).answer_question("How many nodes?", "number")
    assert res.queries[0].error_kind == "rejected"
    assert res.queries[1].shown.endswith("[13]")  # 2 rooms, 4 assets, 6 objects, the agent
    assert store.query("MATCH (n) RETURN count(n)").rows == [[13]]


def test_the_call_limit_forces_an_answer(store):
    cfg = AgentConfig(max_queries=3)
    lm = ScriptedBackend([q("MATCH (n) RETURN count(n)")] * 3 + [a("kitchen-1")])
    res = CypherAgent(lm, store, cfg).answer_question("Where is the fridge?", "string")
    assert len(res.queries) == 3 and res.answer == "kitchen-1"
    assert [_tools_offered(r["schema"]) for r in lm.requests] == [{"run_cypher_query", "answer"}] * 3 + [{"answer"}]
    assert "No queries left: answer now." in lm.requests[3]["messages"][-1]["content"]


def test_an_lm_that_never_answers_stops_after_the_call_budget(store):
    lm = ScriptedBackend([q("MATCH (n) RETURN count(n)")])  # scripted: repeats a query forever
    res = CypherAgent(lm, store, AgentConfig(max_queries=2)).answer_question("?", "number")
    assert res.answer is None and "no answer" in res.error
    assert res.calls == 4 and len(res.queries) == 2  # max_queries + 2 calls, no query past the limit


def test_an_unreadable_reply_is_explained_and_retried(store):
    lm = ScriptedBackend(["I think it is 2", a(["apple-1", "apple-2"])])
    res = CypherAgent(lm, store).answer_question("Which apples exist?", "set")
    assert res.answer == ["apple-1", "apple-2"] and res.calls == 2
    assert "not valid" in lm.requests[1]["messages"][-1]["content"]


def test_a_reply_of_the_wrong_answer_type_is_not_accepted(store):
    lm = ScriptedBackend([a("two"), a(2)])
    res = CypherAgent(lm, store).answer_question("How many apples?", "number")
    assert res.answer == 2 and res.calls == 2


def test_one_query_variant_asks_exactly_one_query_then_the_answer(store):
    lm = ScriptedBackend([q("MATCH (o:Object)-[:INSIDE]->(:Object {name: 'box-1'}) RETURN o.name"), a("apple-1")])
    res = CypherAgent(lm, store, AgentConfig(variant="one-query")).answer_question("What is in box-1?", "string")
    assert res.answer == "apple-1" and len(res.queries) == 1
    assert [_tools_offered(r["schema"]) for r in lm.requests] == [{"run_cypher_query"}, {"answer"}]
    assert "at most 1 times" in lm.requests[0]["messages"][0]["content"]


def test_whole_graph_baseline_has_the_graph_in_the_prompt_and_no_tool(store, kitchen):
    lm = ScriptedBackend([a("fridge-1")])
    res = CypherAgent(lm, store, AgentConfig(variant="whole-graph"), graph=kitchen).answer_question(
        "What holds box-1?", "string")
    assert res.answer == "fridge-1" and res.queries == []
    system = lm.requests[0]["messages"][0]["content"]
    assert "- apple-1 inside box-1" in system and "- fridge-1 in kitchen-1 (states: closed)" in system
    assert "run_cypher_query" not in system and "Node labels" not in system
    assert _tools_offered(lm.requests[0]["schema"]) == {"answer"}
    with pytest.raises(ValueError):
        CypherAgent(lm, store, AgentConfig(variant="whole-graph"))


def test_the_prompt_carries_the_catalog_schema_and_the_classes(store):
    lm = ScriptedBackend([a(1)])
    CypherAgent(lm, store).answer_question("?", "number")
    system = lm.requests[0]["messages"][0]["content"]
    assert "(:Object)-[:ON_TOP_OF]->(:Asset)" in system and "1-based" in system
    assert "Object: apple, book, box, cup, tray" in system


def test_relabel_tool_is_offered_only_when_enabled_on_a_writable_store(kitchen):
    relabel = json.dumps({"thought": "the user says so", "tool": "relabel_object", "node": "book-1", "new_class": "notebook"})
    with open_store("ladybug", allow_writes=True) as rw:
        rw.load(kitchen)
        lm = ScriptedBackend([relabel, q("MATCH (o:Object {name: 'book-1'}) RETURN o.class"), a("notebook")])
        res = CypherAgent(lm, rw, AgentConfig(allow_relabel=True)).answer_question("book-1 is a notebook; its class?", "string")
        assert res.answer == "notebook"
        assert "relabel_object" in _tools_offered(lm.requests[0]["schema"])
        assert "book-1 now has class notebook." in lm.requests[1]["messages"][-1]["content"]
        assert rw.query("MATCH (o:Object {name: 'book-1'}) RETURN o.class").rows == [["notebook"]]
        lm2 = ScriptedBackend([a(1)])
        CypherAgent(lm2, rw).answer_question("?", "number")  # not enabled in the config
        assert "relabel_object" not in _tools_offered(lm2.requests[0]["schema"])
    with open_store("ladybug") as ro:  # enabled in the config, but the store is read-only
        ro.load(kitchen)
        lm3 = ScriptedBackend([a(1)])
        CypherAgent(lm3, ro, AgentConfig(allow_relabel=True)).answer_question("?", "number")
        assert "relabel_object" not in _tools_offered(lm3.requests[0]["schema"])


def test_the_agent_reads_the_memory_graph(kitchen):
    memory = MemoryGraph(kitchen)
    with open_store("ladybug") as s:
        view = MemoryView(s, memory)
        lm = ScriptedBackend([q("MATCH (o:Object)-[:ON_TOP_OF]->(:Asset {name: 'table-1'}) RETURN collect(o.name)"), a([])])
        CypherAgent(lm, view).answer_question("What is on table-1?", "set")
        assert "tray-1" in lm.requests[1]["messages"][-1]["content"]
        memory.apply(parse_action("go_to(kitchen-1)"))
        memory.discover(Observation("table-1", (SeenObject("pear-1", "ontop", "table-1"),)))
        lm = ScriptedBackend([q("MATCH (o:Object)-[:ON_TOP_OF]->(:Asset {name: 'table-1'}) RETURN collect(o.name)"), a([])])
        CypherAgent(lm, view).answer_question("What is on table-1?", "set")
        shown = lm.requests[1]["messages"][-1]["content"]
        assert "pear-1" in shown and "tray-1" not in shown


def test_grounding_reply_is_a_goal(store):
    goal = {"node_goals": [{"node": "apple-2", "relation": "inside", "destination": "fridge-1", "states": []}],
            "count_goals": [], "formula": None}
    lm = ScriptedBackend([a(goal)])
    res = CypherAgent(lm, store).ground("Put the apple from the table in the fridge.")
    assert res.answer == goal
    assert "node_goals" in lm.requests[0]["messages"][0]["content"]


def test_an_empty_goal_is_sent_back_once_in_every_variant(store, kitchen):
    from lookplangraph.cypher.agent import SENT_BACK

    empty = {"node_goals": [], "count_goals": [], "formula": None}
    goal = {"node_goals": [{"node": "apple-2", "relation": "inside", "destination": "fridge-1", "states": []}],
            "count_goals": [], "formula": None}
    for variant in ("agentic", "whole-graph"):
        lm = ScriptedBackend([a(empty), a(goal)])  # scripted: the empty goal the 1.5B gave, then a goal
        res = CypherAgent(lm, store, AgentConfig(variant=variant), graph=kitchen).ground("Put the apple in the fridge.")
        assert res.answer == goal and res.calls == 2 and res.sent_back.startswith("the goal is empty")
        assert lm.requests[1]["messages"][-1]["content"] == SENT_BACK.format(problem=res.sent_back)
    lm = ScriptedBackend([a(empty), a(empty)])
    res = CypherAgent(lm, store).ground("Put the apple in the fridge.")
    assert res.answer == empty and res.calls == 2  # sent back once only: the second stands (and is judged wrong)
    lm = ScriptedBackend([a(goal)])
    assert CypherAgent(lm, store).ground("Put the apple in the fridge.").sent_back is None
    unclosed, closed = ({**empty, "formula": f} for f in ("(and (inside apple-2 fridge-1)", "(inside apple-2 fridge-1)"))
    lm = ScriptedBackend([a(unclosed), a(closed)])  # scripted: a formula missing a parenthesis, then mended
    res = CypherAgent(lm, store).ground("Put the apple in the fridge.")
    assert "unbalanced parentheses" in res.sent_back and res.answer == closed


class _Overflowing(ScriptedBackend):
    """SCRIPTED: a backend whose prompt never fits its context."""

    def complete(self, *args, **kwargs):
        raise ContextOverflow("prompt too long (scripted)")


def test_a_context_overflow_is_the_item_failure(store, kitchen):
    res = CypherAgent(_Overflowing(["x"]), store, AgentConfig(variant="whole-graph"), graph=kitchen).answer_question("?")
    assert res.answer is None and "context overflow" in res.error


# -- batch evaluation on a small benchmark built from the office split -----------------------------
@pytest.fixture(scope="module")
def office_bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("cy")
    data = dataset.build(root / "grasif", splits=["office"], progress=lambda m: None)
    index = dataset.read_index(data)
    tasks = dataset.load_split(data, "office")
    qs = build_questions("office", [(t.id, t.graph) for t in tasks[:3]], 6)
    items = [i for i in (build_item(t) for t in tasks[:4]) if i]
    bench = root / "bench"
    bench.mkdir()
    for name, rows, key in (("qa", qs, "scene"), ("grounding", items, "task")):
        pins = {"office": {getattr(r, key): index["splits"]["office"][getattr(r, key)] for r in rows}}
        (bench / f"{name}.v{VERSION}.json").write_text(json.dumps(
            {"format": FORMATS[name], "version": VERSION, "seed": 0, "scenes": pins,
             "items": [r.model_dump(mode="json") for r in rows]}))
    return data, bench, qs, items


def test_evaluation_judges_resumes_and_refuses_other_settings(office_bench, tmp_path):
    data, bench, qs, _ = office_bench
    first = qs[0]
    calls = []

    def factory():
        calls.append(1)
        return ScriptedBackend([a(first.answer)])  # scripted: always the first question's answer

    with open_store("ladybug") as s:
        summary = evaluate("qa", factory, s, AgentConfig(variant="whole-graph"), tmp_path / "ev", limit=3,
                           data_dir=data, bench_dir=bench)
        rows = [json.loads(l) for l in (tmp_path / "ev" / "results.jsonl").read_text().splitlines()]
        assert len(rows) == 3 and summary["all"]["items"] == 3 and calls == [1]
        chosen = select(qs, None, 3, 0)
        for row, item in zip(rows, chosen):
            assert row["id"] == item.id
            assert row["correct"] == answers_equal(item.answer_type, item.answer, first.answer)
        assert summary["all"]["input_tokens"] > 0
        again = evaluate("qa", lambda: pytest.fail("nothing is left to run"), s, AgentConfig(variant="whole-graph"),
                         tmp_path / "ev", limit=3, data_dir=data, bench_dir=bench)
        assert again == summary
        assert select(qs, None, 4, 0)[:3] == chosen  # a larger limit extends the sample
        grown = evaluate("qa", factory, s, AgentConfig(variant="whole-graph"), tmp_path / "ev", limit=4,
                         data_dir=data, bench_dir=bench)
        assert grown["all"]["items"] == 4 and calls == [1, 1]
        with pytest.raises(ValueError, match="other settings"):
            evaluate("qa", factory, s, AgentConfig(variant="agentic"), tmp_path / "ev", limit=3,
                     data_dir=data, bench_dir=bench)


def test_the_reworded_set_asks_other_words_with_the_same_answers_and_sample(office_bench, tmp_path):
    from lookplangraph.cypher.phrasings import REWORDED

    data, bench, qs, _ = office_bench
    replies = []

    def factory():
        lm = ScriptedBackend([a(q.answer) for q in by_scene(select(qs, None, 4, 0))])  # scripted: each gold answer
        replies.append(lm)
        return lm

    with open_store("ladybug") as s:
        summary = evaluate("qa", factory, s, AgentConfig(variant="whole-graph"), tmp_path / "rw", limit=4,
                           phrasing="reworded", data_dir=data, bench_dir=bench)
        with pytest.raises(ValueError, match="other settings"):  # the original words are another evaluation
            evaluate("qa", factory, s, AgentConfig(variant="whole-graph"), tmp_path / "rw", limit=4,
                     data_dir=data, bench_dir=bench)
        with pytest.raises(ValueError, match="grounding instructions have no templates"):
            evaluate("grounding", factory, s, AgentConfig(variant="whole-graph"), tmp_path / "g", phrasing="reworded",
                     data_dir=data, bench_dir=bench)
    rows = [json.loads(l) for l in (tmp_path / "rw" / "results.jsonl").read_text().splitlines()]
    chosen = by_scene(select(qs, None, 4, 0))  # the items run scene by scene
    assert [r["id"] for r in rows] == [q.id + "-rw" for q in chosen] and summary["all"]["accuracy"] == 1.0
    asked = [req["messages"][-1]["content"] for req in replies[0].requests]
    for row, item, prompt in zip(rows, chosen, asked):
        assert row["question"] != item.question and row["question"] in prompt and item.question not in prompt
        assert any(row["question"].lower().startswith(t.split("{")[0].lower()) or t.startswith("{")
                   for t in REWORDED[item.template])
    assert json.loads((tmp_path / "rw" / "meta.json").read_text())["phrasing"] == "reworded"


def test_grounding_evaluation_judges_by_meaning(office_bench, tmp_path):
    from grasif.goals import GoalSpec

    data, bench, _, items = office_bench
    item = next(i for i in items if not GoalSpec.model_validate(i.goal).count_goals)
    spec = GoalSpec.model_validate(item.goal)
    goal = {"node_goals": [{"node": g.node, "relation": g.relation, "destination": g.destination, "states": g.states}
                           for g in spec.node_goals], "count_goals": [], "formula": spec.formula}
    with open_store("ladybug") as s:
        evaluate("grounding", lambda: ScriptedBackend([a(goal)]), s, AgentConfig(variant="one-query"),
                 tmp_path / "g", data_dir=data, bench_dir=bench)
    rows = {json.loads(l)["id"]: json.loads(l) for l in (tmp_path / "g" / "results.jsonl").read_text().splitlines()}
    assert rows[item.id]["correct"] is True
    # the one-query variant's scripted first reply is an answer, not a query: recorded as unreadable
    assert rows[item.id]["queries"][0]["error_kind"] == "unreadable"


# -- CLI glue --------------------------------------------------------------------------------------
def _parse(argv):
    p = argparse.ArgumentParser(prog="lookplangraph")
    commands.add_parser(p.add_subparsers(dest="command", required=True))
    return p.parse_args(argv)


def test_ask_command(capsys, tmp_path):
    from sgs.io import save_graph
    from tests.conftest import kitchen_dict
    from sgs.io import graph_from_dict

    path = tmp_path / "g.json"
    save_graph(graph_from_dict(kitchen_dict()), path)
    args = _parse(["ask", "--graph", str(path), "How many apples?", "--answer-type", "number", "--lm",
                   "scripted:" + q("MATCH (o:Object {class: 'apple'}) RETURN count(o)") + "||" + a(2)])
    assert args.func(args) == 0
    out = capsys.readouterr()
    assert out.out.strip() == "2" and "1 rows" in out.err
    args = _parse(["ask", "--graph", str(tmp_path / "missing.json"), "?", "--lm", "scripted:" + a(1)])
    assert args.func(args) == 2
    assert "no such file" in capsys.readouterr().err


def test_ask_answers_several_questions_with_one_model_one_json_line_each(capsys, tmp_path, monkeypatch):
    import io
    from sgs.io import graph_from_dict, save_graph
    from tests.conftest import kitchen_dict

    path = tmp_path / "g.json"
    save_graph(graph_from_dict(kitchen_dict()), path)
    count = q("MATCH (o:Object {class: 'apple'}) RETURN count(o)")
    # scripted LM (a test double): question 1 queries and answers 2; question 2 replies garbage until
    # the call limit, so it has no answer and its line is null; question 3 answers 5
    replies = [count, a(2)] + ["not json"] * 7 + [a(5)]
    args = _parse(["ask", "--graph", str(path), "How many apples?", "Where is it?", "How many?",
                   "--answer-type", "number", "--max-queries", "5", "--lm", "scripted:" + "||".join(replies)])
    assert args.func(args) == 1  # one question unanswered
    out = capsys.readouterr()
    assert out.out.splitlines() == ["2", "null", "5"]
    assert "[2/3] Where is it?" in out.err and "no answer" in out.err
    # no text: the questions come from standard input, one per line; blanks and comments skipped
    monkeypatch.setattr("sys.stdin", io.StringIO("How many apples?\n\n# a comment\nAnd now?\n"))
    args = _parse(["ask", "--graph", str(path), "--answer-type", "number", "--lm", "scripted:" + "||".join([a(1), a(3)])])
    assert args.func(args) == 0
    assert capsys.readouterr().out.splitlines() == ["1", "3"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n# nothing\n"))
    args = _parse(["ask", "--graph", str(path), "--lm", "scripted:" + a(1)])
    assert args.func(args) == 2
    assert "no question given" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# A query that finds nothing: what the store has, and an answer read off it questioned once
# ---------------------------------------------------------------------------------------------

def test_an_empty_result_says_what_the_store_has_and_the_answer_after_it_is_questioned(store):
    from lookplangraph.cypher.agent import QUESTIONED, UNFOUNDED
    from lookplangraph.cypher.hints import LINKS

    wrong = "MATCH (o:Object {class: 'fridge'})-[:ON_TOP_OF|INSIDE*1..5]->(:Asset)-[:IN_ROOM]->(r:Room) RETURN r.name"
    lm = ScriptedBackend([q(wrong), a("no room"),  # scripted: the mistake, then an answer off it
                          q("MATCH (:Asset {name: 'fridge-1'})-[:IN_ROOM]->(r:Room) RETURN r.name"), a("kitchen-1")])
    res = CypherAgent(lm, store).answer_question("Which room is the fridge in?", "string")
    assert res.answer == "kitchen-1" and res.unfounded and res.calls == 4
    shown = lm.requests[1]["messages"][-1]["content"]
    assert "(no rows)" in shown and "class 'fridge' is held by 1 Asset node(s) (fridge-1) - not by Object" in shown
    assert LINKS["Asset"] in shown
    # a name given while no query has found anything is sent back saying so (not QUESTIONED's "give
    # your answer again if you are sure"); a count of zero after an empty result is QUESTIONED
    assert lm.requests[2]["messages"][-1]["content"] == UNFOUNDED.format(
        problem="no query has returned rows yet", found="Your last query found no rows.")
    assert "kitchen-1" in lm.requests[3]["messages"][-1]["content"]
    lm = ScriptedBackend([q("MATCH (o:Object {class: 'fridge'}) RETURN count(o)"), a(0), a(0)])
    res = CypherAgent(lm, store).answer_question("How many fridges are objects?", "number")
    assert lm.requests[2]["messages"][-1]["content"] == QUESTIONED and res.questioned and not res.unfounded


# ---------------------------------------------------------------------------------------------
# An answer that no rows gave: sent back once, the same again returned unanswered
# ---------------------------------------------------------------------------------------------

def test_a_name_no_query_found_is_sent_back_and_the_same_again_is_unanswered(store):
    wrong = "MATCH (o:Object {class: 'fridge'})-[:IN_ROOM]->(r:Room) RETURN r.name"  # a fridge is an Asset
    lm = ScriptedBackend([q(wrong), a("kitchen-1"), a("kitchen-1")])  # scripted replies
    res = CypherAgent(lm, store).answer_question("Which room is the fridge in?", "string")
    assert res.answer is None and "the same answer again" in res.error and res.calls == 3
    assert "Your last query found no rows." in lm.requests[2]["messages"][-1]["content"]
    # querying again after the send-back, with rows this time, is answered as usual
    lm = ScriptedBackend([q(wrong), a("kitchen-1"),
                          q("MATCH (:Asset {name: 'fridge-1'})-[:IN_ROOM]->(r:Room) RETURN r.name"), a("kitchen-1")])
    res = CypherAgent(lm, store).answer_question("Which room is the fridge in?", "string")
    assert res.answer == "kitchen-1" and res.error is None and res.unfounded
    # an empty answer is what no rows mean: it passes (after QUESTIONED, once)
    lm = ScriptedBackend([q("MATCH (o:Object {class: 'fridge'}) RETURN o.name"), a([]), a([])])
    res = CypherAgent(lm, store).answer_question("Name every fridge object.", "set")
    assert res.answer == [] and not res.unfounded
    # a failed query counts as no rows, and the send-back says it failed
    lm = ScriptedBackend([q("MATCH (o:Object RETURN o"), a("apple-1"), a("apple-1")])
    res = CypherAgent(lm, store).answer_question("Name an apple.", "string")
    assert res.answer is None and "Your last query failed" in lm.requests[2]["messages"][-1]["content"]


def test_an_answer_that_repeats_its_thought_is_sent_back_even_after_rows(store):
    names = "MATCH (r:Room) RETURN r.name"
    echo = a("the rows give the answer", thought="the rows give the answer")  # scripted: the reply seen in use
    lm = ScriptedBackend([q(names), echo, echo])
    res = CypherAgent(lm, store).answer_question("Which rooms are there?", "string")
    assert res.answer is None and res.unfounded == "it repeats your thought instead of giving a value"
    assert "repeats your thought" in lm.requests[2]["messages"][-1]["content"]
    lm = ScriptedBackend([q(names), echo, a("kitchen-1", thought="one row: kitchen-1")])
    res = CypherAgent(lm, store).answer_question("Which rooms are there?", "string")
    assert res.answer == "kitchen-1" and res.calls == 3


def test_ask_prints_null_and_exits_1_for_an_answer_no_rows_gave(capsys, tmp_path):
    from sgs.io import graph_from_dict, save_graph
    from tests.conftest import kitchen_dict

    path = tmp_path / "g.json"
    save_graph(graph_from_dict(kitchen_dict()), path)
    wrong = q("MATCH (o:Object {class: 'fridge'})-[:IN_ROOM]->(r:Room) RETURN r.name")
    args = _parse(["ask", "--graph", str(path), "Which room is the fridge in?", "--lm",
                   "scripted:" + "||".join([wrong, a("kitchen-1"), a("kitchen-1")])])  # scripted replies
    assert args.func(args) == 1
    out = capsys.readouterr()
    assert out.out.strip() == "null" and "no answer: the same answer again" in out.err


def test_the_note_names_near_classes_and_reads_the_query():
    from lookplangraph.cypher.hints import is_empty, looked_for

    assert looked_for("MATCH (o:Object {class: 'mug', name: 'mug-1'})-[:ON_TOP_OF]->(a:Asset) "
                      "WHERE a.name = 'desk-2' RETURN o") == [
        ("class", "mug", "Object"), ("name", "mug-1", "Object"), ("name", "desk-2", "Asset")]
    assert looked_for("MATCH (n) RETURN count(n)") == []
    assert all(is_empty(rows) for rows in ([], [[0]], [[None]], [[[]]], [[""], [0]]))
    assert not is_empty([[1]]) and not is_empty([["kitchen-1"]]) and not is_empty([[0, "x"]])


def test_a_misspelt_class_gets_the_nearest_ones(store):
    from lookplangraph.cypher.hints import empty_result_note

    note = empty_result_note(store, "MATCH (o:Object {class: 'aple'}) RETURN count(o)")
    assert "no node has class 'aple'" in note and "apple" in note
    assert empty_result_note(store, "MATCH (n:Object) RETURN count(n)") is None  # nothing to look up


def test_items_are_chosen_and_summarized_by_part_and_kind():
    from types import SimpleNamespace

    from lookplangraph.cypher.evaluate import summarize

    items = [SimpleNamespace(id=f"b{i}", split="behavior", part="heldout" if i % 2 else "dev") for i in range(6)]
    assert {i.id for i in select(items, None, None, 0, "heldout")} == {"b1", "b3", "b5"}
    assert len(select(items, None, 2, 0, "dev")) == 2 and len(select(items, None, None, 0)) == 6
    # items run scene by scene: scenes in the order of their first item, each scene's items in order
    mixed = [SimpleNamespace(id=i, split=sp, scene=sc) for i, sp, sc in
             [(1, "behavior", "x"), (2, "office", "x"), (3, "behavior", "y"), (4, "behavior", "x"), (5, "office", "x")]]
    assert [i.id for i in by_scene(mixed)] == [1, 4, 2, 5, 3]
    row = {"split": "behavior", "correct": True, "input_tokens": 1, "cached_tokens": None, "output_tokens": 1,
           "queries": [], "lm_seconds": 1.0, "error": None}
    rows = [row | {"id": "1", "part": "heldout", "kind": "count"}, row | {"id": "2", "part": "dev", "kind": "count",
                                                                             "correct": False}]
    summary = summarize(rows)
    assert summary["part:heldout"]["accuracy"] == 1.0 and summary["part:dev"]["accuracy"] == 0.0
    assert summary["kind:count"]["items"] == 2 and summary["all"]["accuracy"] == 0.5


def test_a_room_question_answered_with_furniture_is_sent_back_once(store):
    """SCRIPTED replies: the furniture's own name first (what the 1.5B did), then the room."""
    lm = ScriptedBackend([a("fridge-1"), a("kitchen-1")])
    res = CypherAgent(lm, store).answer_question("In which room is the fridge?", "string")
    assert res.answer == "kitchen-1" and res.calls == 2
    assert res.sent_back.startswith("fridge-1 is an Asset node, not a room")
    assert "not a room" in lm.requests[1]["messages"][-1]["content"]
    right = ScriptedBackend([a("kitchen-1")])
    assert CypherAgent(right, store).answer_question("Which room has the most assets?", "string").calls == 1
    other = ScriptedBackend([a("apple-1")])  # not a room question: an object's name is a fine answer
    assert CypherAgent(other, store).answer_question("What is inside box-1?", "string").sent_back is None


def test_a_goal_naming_a_node_the_scene_lacks_is_sent_back_with_the_nodes_of_its_class(store, kitchen):
    """SCRIPTED replies: a goal with a made-up node (the 1.5B wrote desk-6 on a held-out scene),
    then one with the scene's names."""
    from lookplangraph.cypher.agent import goal_names_problem

    made_up = {"node_goals": [{"node": "apple-7", "relation": "inside", "destination": "fridge-1", "states": []}],
               "count_goals": [], "formula": "(not (ontop book-1 desk-6))"}
    goal = {"node_goals": [{"node": "apple-2", "relation": "inside", "destination": "fridge-1", "states": []}],
            "count_goals": [], "formula": None}
    for variant in ("agentic", "whole-graph"):
        lm = ScriptedBackend([a(made_up), a(goal)])
        res = CypherAgent(lm, store, AgentConfig(variant=variant), graph=kitchen).ground("Put the apple in the fridge.")
        assert res.answer == goal and res.calls == 2
        assert res.sent_back == ("apple-7 is no node of the scene (its apple nodes: apple-1, apple-2); desk-6 is no "
                                 "node of the scene (it has no desk). A goal names only nodes of the scene: query for "
                                 "the ones the instruction means")
        assert res.sent_back in lm.requests[1]["messages"][-1]["content"]
    check = goal_names_problem(store)
    assert check(goal) is None and check("(inside apple-1 fridge-1)") is None  # names of the scene pass
    assert check({"node_goals": [], "count_goals": [], "formula": None}).startswith("the goal is empty")
    assert check({**goal, "formula": "(forall (?a - apple) (inside ?a fridge-1))"}) is None  # a class, no name
    assert check("(inroom lamp-1 bedroom-1)") is None  # a room is a node too


def test_classes_at_end_moves_only_the_classes_line_behind_the_fixed_text(store):
    lm = ScriptedBackend([a(2), a(2)])  # scripted: the answer at once; only the prompts matter here
    CypherAgent(lm, store, AgentConfig(worked_examples=1)).answer_question("How many apples?", "number")
    CypherAgent(lm, store, AgentConfig(worked_examples=1, classes_at="end")).answer_question("How many apples?", "number")
    schema, end = (r["messages"][0]["content"] for r in lm.requests)
    line = next(ln for ln in schema.splitlines() if ln.startswith("Classes present: "))
    assert "apple" in line and sorted(filter(None, schema.splitlines())) == sorted(filter(None, end.splitlines()))
    # the fixed text comes first: in the end layout nothing of the scene precedes the line, which
    # stands between the reply rules and the worked examples
    fixed, rest = end.split(line)
    assert "apple" not in fixed and fixed.rstrip().endswith("before answering.")
    assert rest.lstrip().startswith("Questions about other buildings")
    assert schema.index(line) < schema.index("Useful patterns:")
    with pytest.raises(ValueError, match="classes_at"):
        AgentConfig(classes_at="middle")


def test_classes_at_end_rewrites_a_schema_prompt_as_the_agent_writes_an_end_one(store):
    """The training data's rewrite (``distill mix --cypher-classes-at end``) and the agent agree
    byte for byte: questions with 0 to 2 worked examples, instructions with and without them."""
    from lookplangraph.agent.prompts import compact_prompt
    from lookplangraph.cypher.agent import classes_at_end

    goal = json.dumps({"thought": "t", "tool": "answer", "answer": {"node_goals": [], "count_goals": [],
                                                                  "formula": "(ontop apple-2 bed-1)"}})

    def system(config: AgentConfig, instruction: bool = False) -> str:
        lm = ScriptedBackend([goal if instruction else a(2)])  # scripted: only the first prompt matters here
        agent = CypherAgent(lm, store, config)
        agent.ground("Put apple-2 on the bed.") if instruction else agent.answer_question("How many apples?", "number")
        return lm.requests[0]["messages"][0]["content"]

    pairs = [tuple(system(AgentConfig(worked_examples=k, classes_at=at)) for at in ("schema", "end")) for k in (0, 1, 2)]
    pairs += [tuple(system(AgentConfig(worked_goals=k, classes_at=at), True) for at in ("schema", "end")) for k in (0, 1)]
    assert len(pairs) == 5 and all(s != e for s, e in pairs)
    assert sum("Questions about other buildings" in e for _, e in pairs) == 2
    assert sum("Instructions in other buildings" in e for _, e in pairs) == 1
    for schema, end in pairs:
        assert classes_at_end(schema) == end
        assert classes_at_end(end) == end  # already there: unchanged
    planning = compact_prompt()
    assert classes_at_end(planning) == planning
    with pytest.raises(ValueError, match="not a Cypher system prompt of this version"):
        classes_at_end("Meaning: ...\nClasses present: Room: kitchen\n\nReply with one JSON object.")
