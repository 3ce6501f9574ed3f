"""Answers of several actions (the planner setting ``actions_per_answer``, conversation layout):
reading them, their schema, the loop carrying them out until one does not go as written, and
training data chained from the privileged expert's episodes (a harness tool, not a model).

The loop tests use ``Scripted``, a test double for an LM that replies with fixed texts, on a
train-pool BEHAVIOR task; no real LM is involved."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from llama_cpp.llama_grammar import LlamaGrammar

from grasif import heldout
from lookplangraph.agent.conversation import FEEDBACK, Conversation, outcome_line
from lookplangraph.agent.decoding import action_key, chain_schema, constrained_schema
from lookplangraph.agent.replies import parse_answer
from lookplangraph.distill.planning.conversations import ConversationError, chained
from lookplangraph.distill.planning.trajectories import Replay, build_data, data_config, replays, validate_data
from lookplangraph.evaluation.runner import make_env
from lookplangraph.lm import Completion, Usage, structured
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make

TASK = "bringing_paper_to_recycling"  # a train-pool task: corridor-1, three papers and a bin on floor-1


def act(fn, node=None, relation=None, destination=None) -> dict:
    return {"function_name": fn, "node": node, "relation": relation, "destination": destination}


class Scripted:
    """Test double for an LM: the given reply texts in order, each request's messages kept."""

    name = "scripted"
    constraints = frozenset()

    def __init__(self, replies: list[str]):
        self.replies, self.requests = list(replies), []

    def complete(self, messages, **request):
        self.requests.append(messages)
        return Completion(text=self.replies.pop(0), usage=Usage(10, 2, 0), seconds=0.01)


@pytest.fixture(scope="module")
def behavior_pool(split_tasks):
    return [t for t in split_tasks("behavior") if heldout.in_train_pool(t.split, t.id)]


@pytest.fixture()
def task(behavior_pool):
    found = [t for t in behavior_pool if t.id == TASK]
    assert found, f"{TASK} is no longer in the BEHAVIOR train pool"
    return found[0]


def config(k: int) -> PlannerConfig:
    return PlannerConfig(prompt_layout="conversation", reason_max_length=0, actions_per_answer=k, max_actions=12)


def test_an_answer_is_one_action_or_a_list_of_up_to_k():
    go, done = act("go_to", "kitchen-1"), act("done")
    actions, _, error = parse_answer(json.dumps([go, act("open", "fridge-1")]), 3)
    assert error is None and [str(a) for a in actions] == ["go_to(kitchen-1)", "open(fridge-1)"]
    assert [str(a) for a in parse_answer(json.dumps(go), 3)[0]] == ["go_to(kitchen-1)"]
    assert [str(a) for a in parse_answer(json.dumps([done, go]), 3)[0]] == ["done()"]  # the episode ends at done()
    for text, says in ((json.dumps([go] * 4), "holds 4 actions; give 1 to 3"), ("[]", "holds 0 actions"),
                       (json.dumps([go, {"function_name": 3}]), "Action 2 of your answer")):
        actions, _, error = parse_answer(text, 3)
        assert actions == [] and says in error
    actions, _, error = parse_answer(json.dumps([go, go]), 1)  # one action an answer: a list is refused
    assert actions == [] and "2 items" in error


def test_the_chain_schema_binds_the_exclusions_to_the_first_action_only():
    names = ["kitchen-1", "fridge-1", "milk-1"]
    refused = action_key(make("go_to", "kitchen-1"))
    schema = chain_schema(constrained_schema(names, [refused], reason_max_length=0),
                          constrained_schema(names, (), reason_max_length=0), 3)
    go, take = act("go_to", "kitchen-1"), act("pick_up", "milk-1")
    assert structured.check(take, schema)[1] is None
    assert structured.check([take, go], schema)[1] is None  # refused in the first state, not in the next ones
    assert structured.check([take, go, go], schema)[1] is None
    for bad in ([go, take], go, [take] * 4, [take, act("pick_up", "ghost-1")], []):
        assert structured.check(bad, schema)[1] is not None, bad
    assert chain_schema(schema, schema, 1) is schema
    LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)  # llama.cpp's converter reads it
    with pytest.raises(ValueError, match="at least one action"):
        chain_schema(schema, schema, 0)


def test_the_outcome_names_the_actions_not_carried_out():
    assert outcome_line(True, None, not_done=("pick_up(cup-1)",)) == "Done. Not carried out: pick_up(cup-1)."
    assert outcome_line(False, "x", not_done=("a()", "b()")) == f"{FEEDBACK} x Not carried out: a(), b()."
    view = {"places": ["kitchen-1"], "agent": {"room": "kitchen-1", "holding": None},
            "assets": [], "objects": [], "remembered": [], "elsewhere": [], "recalled": []}
    chat = Conversation("Tidy up.")
    chat.prompt(view)
    chat.saw({**view, "agent": {"room": "kitchen-1", "holding": "cup-1"}})  # between two actions of one answer
    chat.answered("[...]", True, None)
    assert chat.prompt({**view, "agent": {"room": "kitchen-1", "holding": None}})[-1]["content"] == \
        "Done.\nHolding cup-1.\nHolding nothing."


def test_the_loop_goes_on_while_each_action_runs_as_written(task):
    chain = json.dumps([act("pick_up", "paper-1"), act("pick_up", "paper-2"), act("done")])
    lm = Scripted([json.dumps([act("discover_objects", "floor-1"), act("done")]), chain, json.dumps(act("done"))])
    records = []
    result = run_episode(task, make_env(task, None), lm, config(3), on_step=records.append)
    # the look observed something: done() was not carried out and the next turn says so
    assert lm.requests[1][-1]["content"].startswith("Done. Not carried out: done().\nSeen: paper-1")
    # paper-1 was picked up as written, paper-2 refused (one hand), done() not tried
    assert [(r.proposed, r.accepted, r.in_answer) for r in records] == [
        ("discover_objects(floor-1)", True, 1), ("pick_up(paper-1)", True, 1), ("pick_up(paper-2)", False, 2),
        ("done()", True, 1)]
    second = lm.requests[2]
    assert second[-2] == {"role": "assistant", "content": chain}  # the answer as the model gave it
    assert second[-1]["content"].startswith(FEEDBACK) and "paper-2" in second[-1]["content"]
    assert second[-1]["content"].split("\n")[0].endswith("Not carried out: done().")
    assert "Holding paper-1." in second[-1]["content"]  # what the first action changed, after the outcome
    assert result.lm_calls == 3 and records[2].prompt_tokens == 0 and records[2].text == ""


def test_the_loop_tries_done_only_as_an_answers_first_action(task):
    both = json.dumps([act("rearrange", "paper-1", "inside", "recycling_bin-1"),
                       act("rearrange", "paper-2", "inside", "recycling_bin-1"), act("done")])
    lm = Scripted([json.dumps(act("discover_objects", "floor-1")), both, json.dumps(act("done"))])
    records = []
    result = run_episode(task, make_env(task, None), lm, config(3), on_step=records.append)
    # both rearranges ran as written; the done() after them waited for the view they left
    assert [(r.proposed, r.in_answer) for r in records] == [
        ("discover_objects(floor-1)", 1), ("rearrange(paper-1, inside, recycling_bin-1)", 1),
        ("rearrange(paper-2, inside, recycling_bin-1)", 2), ("done()", 1)]
    assert lm.requests[2][-1]["content"].split("\n")[0].endswith(". Not carried out: done().")
    assert result.lm_calls == 3 and result.termination == "done"


def test_several_actions_an_answer_need_the_conversation_layout(task):
    with pytest.raises(ValueError, match="conversation prompt layout"):
        run_episode(task, make_env(task, None), Scripted([]),
                    PlannerConfig(prompt_layout="scene-history", actions_per_answer=2))
    with pytest.raises(ValueError, match="1 to 3"):
        PlannerConfig(actions_per_answer=4)


def test_an_adapter_trained_on_chains_runs_with_them_unless_set():
    adapter = SimpleNamespace(metadata={"lookplangraph.actions_per_answer": "3"}, path=Path("chains.gguf"))
    assert PlannerConfig().settled(adapter)[0].actions_per_answer == 3
    assert PlannerConfig().settled(None)[0].actions_per_answer == 1
    one, notes = PlannerConfig(actions_per_answer=1).settled(adapter)
    assert one.actions_per_answer == 1 and any("up to 3 actions" in n for n in notes)


def test_chaining_joins_only_answers_that_went_on_and_moves_the_views_news():
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "Instruction: x"},
            {"role": "assistant", "content": json.dumps(act("go_to", "kitchen-1"))},
            {"role": "user", "content": "Done.\nIn kitchen-1. Assets here: fridge-1."},
            {"role": "assistant", "content": json.dumps(act("open", "fridge-1"))},
            {"role": "user", "content": "Done.\nChanged: fridge-1 (open)."},
            {"role": "assistant", "content": json.dumps(act("put_on", None, None, "fridge-1")), "train": False},
            {"role": "user", "content": f"{FEEDBACK} you hold nothing"},
            {"role": "assistant", "content": json.dumps(act("done"))}]
    joined = chained(chat, 3, [True, True, False, False])
    # done() joins nothing, even after an action that went on
    assert chained([*chat[:3], chat[-2], chat[-1]], 3, [True, False])[-1] == chat[-1]
    assert [m["content"] for m in joined if m["role"] == "assistant"][0] == \
        json.dumps([act("go_to", "kitchen-1"), act("open", "fridge-1")])
    # the mistake stays alone and untrained; the news between the joined actions follow its outcome line
    assert joined[4] == {**chat[6]} and joined[3]["content"] == \
        "Done.\nIn kitchen-1. Assets here: fridge-1.\nChanged: fridge-1 (open)."
    assert chained(chat, 1, [True] * 4) == chat
    # a name the first decision's view did not offer is not written ahead
    assert chained(chat, 3, [True, True, False, False], [{"kitchen-1"}, None, None, None])[2] == chat[2]
    with pytest.raises(ConversationError, match="4 answers but 2 flags"):
        chained(chat, 3, [True, True])


def test_chained_data_replays_in_the_loop_with_fewer_answers(behavior_pool, tmp_path):
    counts = build_data(behavior_pool[:12], tmp_path, seeds=[None, 0], augmentations=(), prompt_layout="conversation",
                        answer_format="action", recall="named", mistakes=0.25, actions_per_answer=3)
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert json.loads((tmp_path / "counts.json").read_text())["actions_per_answer"] == 3
    assert counts.chained_answers > 0 and counts.chains_not_replayed == 0
    answers = sum(m["role"] == "assistant" for r in rows for m in r["messages"])
    actions = sum(r["meta"]["decisions"] for r in rows)
    assert answers < actions
    # distill validate reads every action of every answer against the prompt before it
    report = validate_data(tmp_path, {(t.split, t.id): t for t in behavior_pool[:12]})
    assert report.examples == len(rows) and report.problems == []
    cfg = data_config("action", "conversation", recall="named")
    for row in rows:
        lists = [json.loads(m["content"]) for m in row["messages"] if m["role"] == "assistant"
                 and m["content"].startswith("[")]
        assert all(2 <= len(x) <= 3 for x in lists)
        if lists:
            task = next(t for t in behavior_pool if t.id == row["meta"]["task_id"])
            assert replays(row["messages"], task, row["meta"]["seed"], replace(cfg, actions_per_answer=3))
            # and the same answers one action an answer do not replay: the chat is another one
            assert not replays(row["messages"], task, row["meta"]["seed"], cfg)
            break
    else:
        pytest.fail("no chained conversation")


def test_the_replay_refuses_a_prompt_that_is_not_the_conversation(task):
    lm = Replay([{"role": "system", "content": "S"}, {"role": "user", "content": "not this"},
                 {"role": "assistant", "content": json.dumps(act("done"))}])
    with pytest.raises(ConversationError, match="not the conversation so far"):
        run_episode(task, make_env(task, None), lm, config(3))


def test_the_viewer_shows_which_answer_an_action_came_with(task, tmp_path):
    from lookplangraph.apps.viewer import write_view
    from lookplangraph.evaluation.runner import run_episode_to_dir

    lm = Scripted([json.dumps([act("discover_objects", "floor-1"), act("done")]),
                   json.dumps([act("rearrange", "paper-1", "inside", "recycling_bin-1"),
                               act("rearrange", "paper-2", "inside", "recycling_bin-1"), act("done")]),
                   json.dumps(act("done"))])
    run = tmp_path / "run"
    run_episode_to_dir(task, lm, config(3), run)
    page = (write_view([run], tmp_path / "v.html")).read_text()
    found = {m.group(1): json.loads(m.group(2)) for m in re.finditer(
        r'<script type="application/json" id="(lpg-[a-z]+-?\d*)">(.*?)</script>', page, re.S)}
    steps = found["lpg-ep-0"]["steps"]
    assert [(s["proposed"], s.get("inAnswer")) for s in steps] == [
        ("discover_objects(floor-1)", None), ("rearrange(paper-1, inside, recycling_bin-1)", None),
        ("rearrange(paper-2, inside, recycling_bin-1)", 2), ("done()", None)]
    assert found["lpg-index"]["episodes"][0]["calls"] == 3 and found["lpg-ep-0"]["graph"] is not None
