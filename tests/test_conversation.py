"""The conversation layout (``prompt_layout = "conversation"``) and its training data: every decision's
prompt is the chat so far, an episode is one example, injected mistakes stand untrained.

The episodes are played by the privileged expert (a harness tool, not a model) in LookPlanGraph's
own loop on train-pool tasks; no LM is involved. Tokens and the trainer: ``tests/test_distill_train.py``."""

from __future__ import annotations

import json

import pytest

from grasif import heldout
from sgs.actions import make
from lookplangraph.agent.conversation import FEEDBACK, Conversation, outcome_line
from lookplangraph.agent.decide import decision_messages
from lookplangraph.cli import main
from lookplangraph.distill.planning.conversations import (
    ConversationError, MistakeInjector, decisions, episode_conversation, mistake, trained,
)
from lookplangraph.distill.planning.trajectories import build_data, data_config, expert_episode, validate_data
from lookplangraph.distill.teacher.expert import FEEDBACK_MARK, Expert


@pytest.fixture(scope="module")
def behavior_pool(split_tasks):
    tasks = split_tasks("behavior")
    return [t for t in tasks if heldout.in_train_pool(t.split, t.id)]


def test_the_feedback_line_is_the_one_the_expert_reads():
    assert FEEDBACK == FEEDBACK_MARK
    assert outcome_line(True, None) == "Done."
    assert outcome_line(True, None, "done as: open(fridge-1), pick_up(milk-1)") == "Done as: open(fridge-1), pick_up(milk-1)."
    assert outcome_line(False, "x is a room").startswith(FEEDBACK)


def test_each_decision_is_the_conversation_so_far_and_the_answers_are_the_replies(behavior_pool):
    cfg = data_config("action", "conversation", recall="named")
    refusals = 0
    for task in behavior_pool[:8]:
        injector = MistakeInjector(Expert(), 1.0, seed=3)
        result, examples, _ = expert_episode(task, None, cfg, injector)
        assert result.success, task.id
        final = examples[-1][0] + [{"role": "assistant", "content": examples[-1][1]}]
        for n, (messages, answer, accepted) in enumerate(examples):
            assert final[:len(messages)] == messages  # nothing written is rewritten
            assert final[len(messages)] == {"role": "assistant", "content": answer}
            assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * n + ["user"]
            if n and not examples[n - 1][2]:  # the turn after a refused answer says so first
                assert messages[-1]["content"].startswith(FEEDBACK)
                refusals += 1
            elif n:
                assert messages[-1]["content"].startswith("Done")
        assert examples[0][0][1]["content"].startswith(f"Instruction: {task.instruction}\nPlaces: ")
    assert refusals >= 3  # the injected mistakes were refused and said so


def test_the_loop_sends_the_conversation_as_chat_messages():
    chat = Conversation("Put the mug on the table.")
    view = {"places": ["kitchen-1"], "agent": {"room": "kitchen-1", "holding": None},
            "assets": [], "objects": [], "remembered": [], "elsewhere": [], "recalled": []}
    first = chat.prompt(view)
    chat.answered('{"function_name": "done"}', False, "not yet")
    second = chat.prompt(view)
    assert second[:1] == first and second[1] == {"role": "assistant", "content": '{"function_name": "done"}'}
    assert second[2]["content"] == f"{FEEDBACK} not yet"
    assert decision_messages("S", second) == [{"role": "system", "content": "S"}, *second]
    with pytest.raises(ValueError, match="end with a user turn"):
        decision_messages("S", [*second, {"role": "assistant", "content": "x"}])


def test_decisions_are_the_prefixes_up_to_each_trained_answer():
    chat = [{"role": "system", "content": "S"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1", "train": False}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"}, {"role": "user", "content": "u3"},
            {"role": "assistant", "content": "a3", "train": True}]
    cut = decisions(chat)
    assert [d[-1]["content"] for d in cut] == ["a2", "a3"]
    assert cut[0] == [*chat[:4], {"role": "assistant", "content": "a2"}]
    assert cut[1][4] == {"role": "assistant", "content": "a2", "train": False}
    assert [sum(trained(m) for m in d) for d in cut] == [1, 1]
    assert [trained(m) for m in chat] == [False, False, False, False, True, False, True]


def test_a_prompt_that_is_not_the_chat_so_far_is_refused():
    s, u1, u2 = ({"role": r, "content": c} for r, c in (("system", "S"), ("user", "u1"), ("user", "u2")))
    episode_conversation([([s, u1], "a1"), ([s, u1, {"role": "assistant", "content": "a1"}, u2], "a2")], [True, True])
    with pytest.raises(ConversationError, match="decision 2"):
        episode_conversation([([s, u1], "a1"), ([s, {"role": "user", "content": "u1, rewritten"},
                                                  {"role": "assistant", "content": "a1"}, u2], "a2")], [True, True])


def test_each_mistake_kind_is_built_from_the_experts_answer(behavior_pool):
    g = behavior_pool[0].graph
    room = g.agent.location
    assert mistake("inside-on-surface", make("put_on", None, None, "table-1"), g) == make("put_inside", None, None, "table-1")
    assert mistake("inside-on-surface", make("rearrange", "cup-1", "ontop", "table-1"), g).relation == "inside"
    assert mistake("room-destination", make("put_inside", None, None, "box-1"), g).destination == room
    assert mistake("slots-shuffled", make("rearrange", "cup-1", "ontop", "table-1"), g) == make("rearrange", "table-1", "ontop", "cup-1")
    assert mistake("inside-on-surface", make("go_to", "kitchen-1"), g) is None
    wrong = mistake("not-held", make("go_to", "kitchen-1"), g)
    assert wrong is not None and wrong.function_name == "put_on" and wrong.destination in g.children(room)
    with pytest.raises(ValueError):
        MistakeInjector(Expert(), 1.5)


def test_the_share_of_episodes_with_a_mistake_is_the_rate_asked(behavior_pool, tmp_path):
    # the decision is drawn before the end of the episode's clean run, and a kind that does not
    # apply there gives way to the next of the episode's order: every episode asked gets one
    counts = build_data(behavior_pool[:16], tmp_path, seeds=[None], augmentations=(), prompt_layout="conversation",
                        answer_format="action", recall="named", mistakes=1.0, mistake_seed=2)
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    with_mistake = [ex for ex in lines if ex["meta"]["mistakes"]]
    print("EPISODES", len(lines), len(with_mistake), [ex["meta"]["decisions"] for ex in lines if not ex["meta"]["mistakes"]]); assert counts.mistakes["episodes"] == len(with_mistake) == len(lines) == 16
    assert len({m["kind"] for ex in with_mistake for m in ex["meta"]["mistakes"]}) >= 3


def test_conversation_data_trains_the_recovery_not_the_mistake(behavior_pool, tmp_path):
    counts = build_data(behavior_pool[:10], tmp_path, seeds=[None], augmentations=(), prompt_layout="conversation",
                        answer_format="action", recall="named", mistakes=1.0, mistake_seed=1)
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert len(lines) == counts.examples == counts.successful
    assert counts.decisions == sum(trained(m) for ex in lines for m in ex["messages"])
    assert counts.mistakes["episodes"] >= 5 and counts.mistakes["refused"] >= 5
    for ex in lines:
        answers = [m for m in ex["messages"] if m["role"] == "assistant"]
        assert len(answers) == ex["meta"]["decisions"]
        for m in ex["meta"]["mistakes"]:
            assert answers[m["step"] - 1].get("train") is False  # the mistake is not learnt
            if m["refused"] and m["step"] < len(answers):  # the next user turn is the simulator's feedback
                turn = [x for x in ex["messages"] if x["role"] == "user"][m["step"]]
                assert turn["content"].startswith(FEEDBACK)
        recovered = [answers[m["step"]] for m in ex["meta"]["mistakes"] if m["refused"] and m["kind"] != "repeat-refused"
                     and m["step"] + 1 not in {x["step"] for x in ex["meta"]["mistakes"]}]
        assert all(trained(a) for a in recovered)  # the expert's answer after the feedback is
    report = validate_data(tmp_path, {(t.split, t.id): t for t in behavior_pool})
    assert report.ok, report.problems[:3]
    assert json.loads((tmp_path / "counts.json").read_text())["decisions"] == counts.decisions


def test_the_validator_reads_every_trained_answer_of_a_conversation(behavior_pool, tmp_path):
    build_data(behavior_pool[:2], tmp_path, seeds=[None], augmentations=(), prompt_layout="conversation",
               answer_format="action", recall="named")
    path = tmp_path / "sft.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    answers = [i for i, m in enumerate(lines[0]["messages"]) if m["role"] == "assistant"]
    assert len(answers) >= 3
    bad = json.loads(lines[0]["messages"][answers[1]]["content"])
    bad["node"] = "spaceship-9"  # a name no user turn before it shows
    lines[0]["messages"][answers[1]]["content"] = json.dumps(bad)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = validate_data(tmp_path, {(t.split, t.id): t for t in behavior_pool})
    assert any(f"turn {answers[1]}" in p and "spaceship-9" in p for p in report.problems)


def test_mistakes_need_the_conversation_layout(behavior_pool, tmp_path, capsys):
    with pytest.raises(ValueError, match="conversation layout"):
        build_data(behavior_pool[:1], tmp_path, seeds=[None], augmentations=(), mistakes=0.5)
    assert main(["distill", "data", "--out", str(tmp_path / "x"), "--mistakes", "0.5", "--limit", "1"]) == 2
    assert "--prompt-layout conversation" in capsys.readouterr().err
    assert main(["distill", "data", "--out", str(tmp_path / "y"), "--prompt-layout", "conversation",
                 "--mistakes", "2", "--limit", "1"]) == 2


def test_a_mix_of_conversations_counts_their_decisions_and_mistakes(behavior_pool, tmp_path):
    from lookplangraph.distill.training.mix import Take, mix

    counts = build_data(behavior_pool[:6], tmp_path / "conv", seeds=[None], augmentations=(),
                        prompt_layout="conversation", answer_format="action", recall="named", mistakes=1.0)
    mixed = mix([Take(tmp_path / "conv")], tmp_path / "mix", system="S", system_name="compact")
    assert mixed["prompt_layout"] == "conversation" and mixed["decisions"] == counts.decisions
    assert mixed["mistakes"]["episodes"] == counts.mistakes["episodes"]
    rows = [json.loads(x) for x in (tmp_path / "mix" / "sft.jsonl").read_text().splitlines()]
    assert all(r["messages"][0] == {"role": "system", "content": "S"} for r in rows)
    assert sum(trained(m) for r in rows for m in r["messages"]) == counts.decisions  # the marks travel
