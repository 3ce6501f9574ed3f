"""Worked examples for the Cypher agent (lookplangraph.cypher.examples): the shipped pool holds
only training scenes and training phrasings, retrieval gives distinct templates, the agent writes
them into its system prompt, the command refuses bad input.

The LM in the agent test is ``ScriptedBackend``: SCRIPTED replies (fixed texts, not a language
model); the test checks the prompt the agent builds around it."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from grasif.heldout import in_train_pool
from lookplangraph.agent.demonstrations import LeakError
from lookplangraph.cypher.agent import AgentConfig, CypherAgent
from lookplangraph.cypher.benchmark import building
from lookplangraph.cypher.examples import (GENERATED, ExampleIndex, WorkedExample, example_block,
                                           examples_from_training, read_examples, shipped_index,
                                           with_worked_examples, write_examples)
from lookplangraph.cypher.phrasings import REWORDED
from lookplangraph.cypher.qa import TEMPLATES
from lookplangraph.cypher.benchmark import dev_buildings
from lookplangraph.lm import ScriptedBackend


def _ex(question, template, building_="generated", query="MATCH (n) RETURN n.name", split="generated-office"):
    return WorkedExample(question, query, template, split, "t1", building_)


@pytest.fixture(scope="module")
def shipped():
    return read_examples()


def _asked(store, kitchen, index, config, question="Is fridge-1 open?") -> list[dict]:
    """The transcript of the agent asked ``question`` (a boolean) with a SCRIPTED reply (not a model)."""
    lm = ScriptedBackend([json.dumps({"thought": "t", "tool": "answer", "answer": False})])
    return CypherAgent(lm, store, config, graph=kitchen, example_index=index).answer_question(
        question, "boolean").transcript


def test_the_shipped_examples_come_from_training_scenes_only(shipped, split_tasks):
    tasks = {(t.split, t.id): t for s in ("virtualhome", "behavior", "office") for t in split_tasks(s)}
    dev = dev_buildings()
    assert {e.template for e in shipped if e.kind == "qa"} == set(TEMPLATES)
    assert any(e.kind == "grounding" and e.split == "behavior" for e in shipped)
    grasif_scenes = [e for e in shipped if e.building != GENERATED]
    assert grasif_scenes and len(grasif_scenes) < len(shipped)  # both kinds of scene are there
    for e in shipped:
        if e.building == GENERATED:
            assert e.split.startswith("generated"), e
            continue
        task = tasks[(e.split, e.scene)]
        assert building(task) == e.building and e.building in dev, e
        assert in_train_pool(e.split, e.scene), e
    for kind in ("qa", "grounding"):  # the index's own check passes too
        ExampleIndex([e for e in shipped if e.kind == kind])


def test_no_shipped_example_is_asked_in_a_reworded_phrasing(shipped):
    def loose(text):  # a phrasing with every field as any text
        return re.compile("^" + ".+".join(re.escape(p) for p in re.split(r"\{\w+\}", text)) + "$", re.IGNORECASE)

    reworded = {t: [loose(p) for p in ps] for t, ps in REWORDED.items()}
    hits = [e.question for e in shipped if e.kind == "qa" and any(r.match(e.question) for r in reworded[e.template])]
    assert hits == []


def test_an_example_of_a_held_out_building_is_refused():
    ok = _ex("How many mugs are there?", "count_class_scene")
    def vh(scene, apartment):
        return WorkedExample("Is x open?", "MATCH (n) RETURN 1", "state_bool", "virtualhome", scene, apartment)

    dev = {"virtualhome:apartment_0"}
    assert ExampleIndex([ok, vh("file1003_2", "virtualhome:apartment_0")], dev=dev)  # a train-pool task
    with pytest.raises(LeakError, match="held-out"):  # a held-out building
        ExampleIndex([ok, vh("file1003_2", "virtualhome:apartment_5")], dev=dev)
    with pytest.raises(LeakError, match="evaluation tasks: virtualhome/file27_2"):  # a planning evaluation task
        ExampleIndex([ok, vh("file27_2", "virtualhome:apartment_0")], dev=dev)
    with pytest.raises(ValueError, match="no worked examples"):
        ExampleIndex([], dev=dev)


def test_retrieval_gives_the_nearest_question_of_each_template(shipped):
    index = shipped_index("qa")
    deep = index.top("Which objects are on top of or inside cabinet-1, directly or through other objects (at any depth)?", 3)
    assert [e.template for e in deep][0] == "contain_deep_set"
    assert len({e.template for e in deep}) == 3
    assert "*1.." in deep[0].query  # the gold query walks any depth
    room = index.top("In which room is alarm-2?", 1)
    assert room[0].template == "location_room" and "IN_ROOM" in room[0].query
    assert index.top("anything", 0) == []
    car = shipped_index("grounding").top("Cleaning out the car: take the cups and the newspaper out of the car.", 2)
    assert len(car) == 2 and len({(e.split, e.scene) for e in car}) == 2  # one per scene
    assert all(e.kind == "grounding" and e.answer.startswith("{") for e in car)
    with pytest.raises(ValueError, match="unknown kind"):
        shipped_index("plans")


def test_examples_are_read_off_cypher_data_output_and_written_whole(tmp_path):
    def line(source, question, content, split="generated-home", scene="g-1"):
        meta = {"source": source, "split": split, "scene": scene, "template": "state_bool", "question": question}
        return json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": question},
                                        {"role": "assistant", "content": content}], "meta": meta})

    def grounded(instruction, *contents):  # one line per assistant turn, as cypher-data writes them
        meta = {"source": "cypher-gold-grounding", "split": "generated-home", "scene": "g-2", "instruction": instruction}
        messages = [{"role": "user", "content": instruction}]
        lines = []
        for c in contents:
            messages = messages + [{"role": "assistant", "content": c}, {"role": "user", "content": "rows"}]
            lines.append(json.dumps({"messages": messages[:-1], "meta": meta}))
        return lines

    query = json.dumps({"thought": "t", "tool": "run_cypher_query", "query": "MATCH (n) RETURN 1"})
    answer = json.dumps({"thought": "t", "tool": "answer", "answer": True})
    goal = json.dumps({"thought": "t", "tool": "answer", "answer": {"formula": "(ontop a-1 b-1)"}})
    sft = tmp_path / "sft.jsonl"
    sft.write_text("\n".join([line("cypher-gold", "Is a open?", query), line("cypher-gold", "Is a open?", query),
                              *grounded("Put a on b.", query, goal), *grounded("Put c on d.", query),
                              line("cypher-gold", "Is b open?", answer),
                              line("cypher-gold", "Is c open?", query, split="virtualhome", scene="t9")]) + "\n")
    got = examples_from_training([sft], {("virtualhome", "t9"): "virtualhome:apartment_1"})
    assert [(e.kind, e.question, e.building) for e in got] == [
        ("qa", "Is a open?", GENERATED), ("grounding", "Put a on b.", GENERATED), ("qa", "Is c open?", "virtualhome:apartment_1")]
    assert got[0].query == got[1].query == "MATCH (n) RETURN 1"
    assert json.loads(got[1].answer) == {"formula": "(ontop a-1 b-1)"} and got[1].template == "grounding"
    with pytest.raises(ValueError, match="one kind"):
        ExampleIndex(got, dev={"virtualhome:apartment_1"})
    block = example_block([got[1]])
    assert "Instruction: Put a on b.\nFirst query: MATCH (n) RETURN 1\nGoal: {\"formula\": \"(ontop a-1 b-1)\"}" in block
    with pytest.raises(ValueError, match="neither generated nor a GraSIF task"):
        examples_from_training([sft], {})
    out = tmp_path / "ex.jsonl.gz"
    assert write_examples(got, out) == 3 and not (tmp_path / "ex.jsonl.gz.part").exists()
    assert read_examples(out) == got and len(gzip.decompress(out.read_bytes()).splitlines()) == 3
    with pytest.raises(FileNotFoundError, match="cypher-examples"):
        read_examples(tmp_path / "none.jsonl.gz")


def test_the_agent_ends_its_system_prompt_with_the_examples(kitchen, kitchen_store):
    index = ExampleIndex([_ex("Is fridge-9 open?", "state_bool", query="MATCH (n {name: 'fridge-9'}) RETURN n.states"),
                          _ex("How many spoons are there?", "count_class_scene")], dev=set())
    store = kitchen_store

    def system(config):
        return _asked(store, kitchen, index, config)[0]["content"]

    with_one = system(AgentConfig(worked_examples=1))
    assert with_one.endswith(example_block(index.top("Is fridge-1 open?", 1)))
    assert "Question: Is fridge-9 open?\nQuery: MATCH (n {name: 'fridge-9'}) RETURN n.states" in with_one
    assert "How many spoons" not in with_one
    assert "fridge-9" not in system(AgentConfig())  # none by default
    assert "fridge-9" not in system(AgentConfig(variant="whole-graph", worked_examples=2))  # no queries there
    lm = ScriptedBackend([json.dumps({"thought": "t", "tool": "answer", "answer": {"formula": "(open fridge-1)"}})])
    goal_system = CypherAgent(lm, store, AgentConfig(worked_goals=1), example_index=index).ground(
        "Open the fridge.").transcript[0]["content"]  # instructions draw on the shipped examples
    assert goal_system.endswith(example_block(shipped_index("grounding").top("Open the fridge.", 1)))
    assert "Instruction: " in goal_system and "fridge-9" not in goal_system
    lm = ScriptedBackend([json.dumps({"thought": "t", "tool": "answer", "answer": {"formula": "(open fridge-1)"}})])
    plain = CypherAgent(lm, store, AgentConfig(worked_examples=2)).ground("Open the fridge.").transcript[0]["content"]
    assert "First query: " not in plain  # questions' examples are not instructions'
    with pytest.raises(ValueError, match="cannot be negative"):
        AgentConfig(worked_examples=-1)
    with pytest.raises(ValueError, match="cannot be negative"):
        AgentConfig(worked_goals=-1)


def test_training_prompts_get_the_examples_the_agent_would_write_but_never_their_own(kitchen, kitchen_store):
    index = ExampleIndex([_ex("Is the door of fridge-9 open?", "state_bool",
                              query="MATCH (n {name: 'fridge-9'}) RETURN n.states"),
                          _ex("How many spoons are there?", "count_class_scene")], dev=set())
    plain = _asked(kitchen_store, kitchen, index, AgentConfig())
    with_one = _asked(kitchen_store, kitchen, index, AgentConfig(worked_examples=1))
    meta = {"source": "cypher-gold", "split": "generated-home", "scene": "home-7", "question": "Is fridge-1 open?"}
    row = {"messages": plain, "meta": meta}
    made = with_worked_examples(row, index, 1, share=1.0)
    assert made["messages"][0]["content"] == with_one[0]["content"]  # what ask --worked-examples 1 writes
    assert made["messages"][1:] == plain[1:] and made["meta"]["worked_examples"] == 1
    assert row["messages"][0]["content"] == plain[0]["content"]  # the row given is left as it was
    assert with_worked_examples(row, index, 1, share=0.0) is row
    assert with_worked_examples(row, index, 0, share=1.0) is row
    for other in ({**meta, "source": "cypher-recovery"}, {**meta, "source": "cypher-gold-grounding"}):
        assert with_worked_examples({"messages": plain, "meta": other}, index, 1, share=1.0)["messages"] == plain
    # never the question's own scene, nor its own words: the next best of that template, or none
    own = ExampleIndex([WorkedExample("Is fridge-1 open?", "Q-SAME-WORDS", "state_bool", "generated-office", "o-1",
                                      GENERATED),
                        WorkedExample("Is FRIDGE-3 open ?", "Q-SAME-BUT-NUMBER", "state_bool", "generated-office",
                                      "o-2", GENERATED),
                        WorkedExample("Is fridge-2 open?", "Q-SAME-SCENE", "state_bool", "generated-home", "home-7",
                                      GENERATED),
                        WorkedExample("Is the oven open?", "Q-OTHER", "state_bool", "generated-home", "home-8",
                                      GENERATED)], dev=set())
    system = with_worked_examples(row, own, 2, share=1.0)["messages"][0]["content"]
    assert "Q-OTHER" in system and "Q-SAME" not in system
    # which questions get them is fixed by the question, so every turn of one item agrees
    rows = [{"messages": plain, "meta": {**meta, "question": f"Is fridge-{i} open?", "turn": t}}
            for i in range(200) for t in (1, 2)]
    got = [with_worked_examples(r, own, 1, share=0.5) is not r for r in rows]
    assert all(got[i] == got[i + 1] for i in range(0, len(got), 2))
    assert 60 < sum(got[::2]) < 140


def test_the_command_writes_the_pool_and_refuses_bad_input(tmp_path, capsys):
    from lookplangraph.cli import main

    assert main(["cypher-examples", "--from", str(tmp_path / "none"), "--out", str(tmp_path / "e.jsonl.gz")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "sft.jsonl"
    meta = {"source": "cypher-gold", "split": "virtualhome", "scene": "no_such_task", "template": "state_bool",
            "question": "Is a open?"}
    bad.write_text(json.dumps({"messages": [{"role": "assistant", "content": json.dumps(
        {"thought": "t", "tool": "run_cypher_query", "query": "MATCH (n) RETURN 1"})}], "meta": meta}) + "\n")
    assert main(["cypher-examples", "--from", str(tmp_path), "--out", str(tmp_path / "e.jsonl.gz")]) == 2
    assert "neither generated nor a GraSIF task" in capsys.readouterr().err
    assert not (tmp_path / "e.jsonl.gz").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "sft.jsonl").write_text(json.dumps({"messages": [], "meta": {"source": "distill"}}) + "\n")
    assert main(["cypher-examples", "--from", str(empty), "--out", str(tmp_path / "e.jsonl.gz")]) == 2
    assert "no gold question" in capsys.readouterr().err
    meta.update(split="generated-office", scene="g-1")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"messages": [{"role": "assistant", "content": json.dumps(
        {"thought": "t", "tool": "run_cypher_query", "query": "MATCH (n) RETURN 1"})}], "meta": meta}) + "\n")
    assert main(["cypher-examples", "--from", str(good), "--out", str(tmp_path / "e.jsonl.gz")]) == 0
    assert "1 worked examples" in capsys.readouterr().out
    assert [e.question for e in read_examples(tmp_path / "e.jsonl.gz")] == ["Is a open?"]


def test_a_file_that_is_not_cypher_data_output_is_refused_with_its_line(tmp_path):
    bad = tmp_path / "sft.jsonl"
    bad.write_text('{"messages": [], "meta": {"source": "cypher-gold", "question": "Is a open?"}}\n{oops\n')
    with pytest.raises(ValueError, match=r"sft.jsonl:1: not an example of cypher-data"):
        examples_from_training([bad], {})
    bad.write_text("{oops\n")
    with pytest.raises(ValueError, match=r"sft.jsonl:1: not a JSON line"):
        examples_from_training([bad], {})
