"""Answers read from the rows (lookplangraph.cypher.row_answers, AgentConfig.answer_from_rows).

The LM in the agent tests is ``ScriptedBackend``: SCRIPTED replies (fixed texts, not a language
model), so these tests check the schemas and send-backs around the LM against a real LadybugDB
store."""

import json

import pytest

from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.answers import answer_schema
from lookplangraph.cypher.row_answers import answer_leaves_out_rows, answer_outside_rows, narrowed_answer, row_values
from lookplangraph.lm import ScriptedBackend

pytest.importorskip("ladybug")


def q(query):
    return json.dumps({"thought": "look", "tool": "run_cypher_query", "query": query})


def a(answer):
    return json.dumps({"thought": "done", "tool": "answer", "answer": answer})


def test_the_values_of_rows_are_names_of_nodes_strings_and_numbers_once_each():
    rows = [[{"name": "apple-1", "_label": "Object"}, "kitchen-1", 2], [["apple-1", "pear-3"], True, None, 2.5]]
    assert row_values(rows) == (["apple-1", "kitchen-1", "pear-3"], [2.0, 2.5])
    assert narrowed_answer(answer_schema("string"), rows) == {"type": "string", "enum": ["apple-1", "kitchen-1", "pear-3"]}
    assert narrowed_answer(answer_schema("set"), rows)["items"]["enum"] == ["apple-1", "kitchen-1", "pear-3"]
    assert narrowed_answer(answer_schema("number"), rows) == {"enum": [2, 2.5]}  # 2 rows, a list of 2
    assert narrowed_answer(answer_schema("number"), [["a"], ["b"], ["c"]]) == {"enum": [3]}  # a count of rows
    assert narrowed_answer(answer_schema("boolean"), rows) is None and narrowed_answer(answer_schema("string"), []) is None


def test_an_answer_outside_the_rows_is_named_with_what_the_rows_hold():
    rows = [["kitchen-1"], ["bedroom-1"]]
    assert answer_outside_rows(answer_schema("string"), "kitchen-1", rows) is None
    problem = answer_outside_rows(answer_schema("string"), "the rows give the answer", rows)
    assert "the rows give the answer is not a value" in problem and "kitchen-1, bedroom-1" in problem
    assert answer_outside_rows(answer_schema("set"), ["kitchen-1", "garage-1"], rows).startswith("garage-1 is not")
    assert answer_outside_rows(answer_schema("number"), 2, rows) is None
    assert answer_outside_rows(answer_schema("number"), 5, rows) is not None
    assert answer_outside_rows(answer_schema("number"), "many", rows) is not None


def test_a_list_that_leaves_out_names_of_a_one_column_result_is_named_with_what_it_left_out():
    rows = [["hanger-1"], ["hanger-2"], [{"name": "hanger-3", "_label": "Object"}], ["hanger-2"]]
    problem = answer_leaves_out_rows(answer_schema("list"), ["hanger-1", "hanger-2"], rows)
    assert problem.startswith("it gives 2 of the 3 names") and problem.count("hanger-3") == 1
    assert "hanger-1" not in problem
    assert answer_leaves_out_rows(answer_schema("set"), ["hanger-3", "hanger-1", "hanger-2"], rows) is None
    assert answer_leaves_out_rows(answer_schema("set"), [], rows).startswith("it gives 0 of the 3 names")
    # a name the rows lack is answer_outside_rows's to say; other shapes are not read this way
    assert answer_leaves_out_rows(answer_schema("set"), ["hanger-1", "hook-1"], rows) is None
    assert answer_leaves_out_rows(answer_schema("set"), ["a"], [["a", "kitchen-1"], ["b", "kitchen-1"]]) is None
    assert answer_leaves_out_rows(answer_schema("set"), ["a"], [["a"], [2]]) is None
    assert answer_leaves_out_rows(answer_schema("string"), "a", [["a"], ["b"]]) is None
    assert answer_leaves_out_rows(answer_schema("set"), ["a"], []) is None


def test_constrain_narrows_the_answer_turn_to_the_last_rows(kitchen_store):
    lm = ScriptedBackend([q("MATCH (o:Object {class: 'apple'})-[:ON_TOP_OF|INSIDE]->(a:Asset) RETURN a.name"),
                          a("table-1")])
    res = CypherAgent(lm, kitchen_store, AgentConfig(answer_from_rows="constrain")).answer_question(
        "What is the apple on?", "string")
    first, second = (r["schema"] for r in lm.requests)
    answers = [v for v in second["anyOf"] if v["properties"]["tool"]["const"] == "answer"]
    allowed = answers[0]["properties"]["answer"]["enum"]
    assert allowed == ["table-1"] and res.answer == "table-1"  # the one value the rows hold
    assert "enum" not in json.dumps([v for v in first["anyOf"] if v["properties"]["tool"]["const"] == "answer"])
    free = ScriptedBackend([q("MATCH (o:Object {class: 'apple'}) RETURN o.name"), a("apple-1")])
    CypherAgent(free, kitchen_store).answer_question("Name an apple.", "string")
    assert "enum" not in json.dumps(free.requests[1]["schema"])  # the default leaves the answer free


def test_check_sends_an_answer_outside_the_rows_back_once(kitchen_store):
    names = "MATCH (r:Room) RETURN r.name"
    lm = ScriptedBackend([q(names), a("the rows give the answer"), a("kitchen-1")])
    res = CypherAgent(lm, kitchen_store, AgentConfig(answer_from_rows="check")).answer_question(
        "Name one of the places of the home.", "string")
    assert res.sent_back and "is not a value of your last query's rows" in res.sent_back
    assert res.answer == "kitchen-1" and res.calls == 3
    assert "kitchen-1, bedroom-1" in lm.requests[2]["messages"][-1]["content"]
    free = ScriptedBackend([q(names), a("the rows give the answer")])
    assert CypherAgent(free, kitchen_store).answer_question("Name one of the places of the home.",
                                                            "string").answer == "the rows give the answer"
    with pytest.raises(ValueError, match="answer_from_rows"):
        AgentConfig(answer_from_rows="always")


def test_check_sends_a_list_that_drops_rows_back_once_and_takes_the_reply(kitchen_store):
    rooms = "MATCH (r:Room) RETURN r.name ORDER BY r.name"
    all_rooms = [r[0] for r in kitchen_store.query(rooms).rows]
    assert len(all_rooms) >= 2
    lm = ScriptedBackend([q(rooms), a(all_rooms[:1]), a(all_rooms)])
    res = CypherAgent(lm, kitchen_store, AgentConfig(answer_from_rows="check")).answer_question(
        "List the rooms in alphabetical order.", "list")
    assert res.sent_back.startswith(f"it gives 1 of the {len(all_rooms)} names") and all_rooms[-1] in res.sent_back
    assert res.answer == all_rooms and res.calls == 3
    free = ScriptedBackend([q(rooms), a(all_rooms[:1])])
    assert CypherAgent(free, kitchen_store).answer_question("List the rooms in alphabetical order.",
                                                            "list").answer == all_rooms[:1]
    # sent back once: the same short list again is the answer
    again = ScriptedBackend([q(rooms), a(all_rooms[:1]), a(all_rooms[:1])])
    assert CypherAgent(again, kitchen_store, AgentConfig(answer_from_rows="check")).answer_question(
        "List the rooms in alphabetical order.", "list").answer == all_rooms[:1]


def test_a_contents_answer_that_names_the_containers_own_holder_is_sent_back_once(kitchen_store):
    from lookplangraph.cypher.agent import contents_problem

    check = contents_problem(kitchen_store, "What is on table-1?")
    assert "table-1 is in kitchen-1: (table-1)-[:IN_ROOM]->(kitchen-1)" in check("kitchen-1")
    assert check(["apple-2"]) is None
    assert contents_problem(kitchen_store, "What is apple-2 on?") is None  # the holder is the answer here
    assert contents_problem(kitchen_store, "Where is the thing in box-1?") is None
    # asked for a room, the container's room is the answer, not a relationship read backwards
    assert contents_problem(kitchen_store, "Could you name the room with the apple on table-1?")("kitchen-1") is None
    lm = ScriptedBackend([q("MATCH (:Asset {name: 'table-1'})-[:IN_ROOM]->(r) RETURN r.name"), a(["kitchen-1"]),
                          a(["apple-2"])])
    res = CypherAgent(lm, kitchen_store).answer_question("Which objects are on table-1?", "set")
    assert res.sent_back.startswith("table-1 is in kitchen-1") and res.answer == ["apple-2"] and res.calls == 3
