"""DAgger (lookplangraph.distill.planning.dagger): the student's answer is executed, the expert labels the
state the student is in, the round resumes, and a real model can be the student."""

from __future__ import annotations

import json

import pytest

from grasif import heldout
from lookplangraph.cli import main
from lookplangraph.distill.planning.dagger import run_round
from lookplangraph.distill.teacher.expert import Expert, ungrounded
from lookplangraph.distill.planning.trajectories import data_config
from lookplangraph.lm.scripted import ScriptedBackend


@pytest.fixture(scope="module")
def pool(split_tasks):
    tasks = split_tasks("virtualhome")
    return [t for t in tasks if heldout.in_train_pool(t.split, t.id) and not t.goal.is_empty()][:3]


def J(fn, node=None, relation=None, destination=None):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination})


def _right_then_wrong(task):
    """A wrong room of ``task``, and the scripted answers: the goal's room, the wrong one, ``done()``."""
    g = task.graph
    target = g.place_of(task.goal.node_goals[0].node)
    wrong = next(p for p in g.places if p not in (target, g.agent.location))
    return wrong, [J("go_to", target), J("go_to", wrong), J("done")]


def test_the_students_answers_are_executed_and_every_state_is_labelled(pool, tmp_path):
    """SCRIPTED student (a test double, not an LM): it walks to the wrong room, then stops."""
    task = pool[0]
    g = task.graph
    target = g.place_of(task.goal.node_goals[0].node)
    wrong = next(p for p in g.places if p not in (target, g.agent.location))
    student = ScriptedBackend([J("go_to", wrong), J("go_to", wrong), J("done")])
    cfg = data_config("action", "history-scene", max_actions=6)
    counts = run_round([task], student, tmp_path, cfg=cfg, seeds=[None])
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    episode = json.loads((tmp_path / "dagger_episodes.jsonl").read_text())
    assert episode["actions"][0] == f"go_to({wrong})" and not episode["success"]  # the student acted
    assert counts.episodes == 1 and counts.states == episode["states"] == 3 and len(lines) == counts.examples
    for ex in lines:
        answer = json.loads(ex["messages"][-1]["content"])
        assert list(answer) == ["function_name", "node", "relation", "destination"]  # data v2's format
        assert answer["function_name"] != "done"  # the goal does not hold: the expert goes on
        assert ungrounded(json.dumps(answer), ex["messages"][-2]["content"]) == []
        assert ex["meta"]["source"] == "dagger" and ex["meta"]["student"] == "scripted" and ex["meta"]["round"] == 1
        assert ex["meta"]["expert"] == "expert (privileged)"
    assert [ex["meta"]["student_action"] for ex in lines] == [f"go_to({wrong})", f"go_to({wrong})", "done()"]
    # the state after the student's wrong walk is labelled from where the student is, not where the expert would be
    assert f"You are in {wrong}" in lines[1]["messages"][-2]["content"]
    assert counts.agreed == 0


def test_a_round_resumes_and_counts_the_whole_directory(pool, tmp_path):
    student = ScriptedBackend([J("done")])  # SCRIPTED: stops at once
    cfg = data_config("action", "history-scene", max_actions=4)
    first = run_round(pool, student, tmp_path, cfg=cfg, seeds=[None], episodes=2)
    assert first.episodes == 2
    again = run_round(pool, student, tmp_path, cfg=cfg, seeds=[None])
    keys = [json.loads(x)["key"] for x in (tmp_path / "dagger_episodes.jsonl").read_text().splitlines()]
    assert again.episodes == 3 and len(keys) == len(set(keys)) == 3
    assert json.loads((tmp_path / "dagger_counts.json").read_text())["episodes"] == 3
    data = json.loads((tmp_path / "counts.json").read_text())
    assert data["by_source"]["dagger"] == data["examples"] == again.examples
    assert (data["prompt_layout"], data["answer_format"]) == ("history-scene", "action")


def test_counts_say_how_often_the_student_reached_the_goal_by_task_kind(pool, tmp_path):
    """SCRIPTED student (a test double): it stops at once, so no episode reaches the goal."""
    from lookplangraph.distill.planning.dagger import UNRECORDED, success_by_kind

    decoy = pool[0].model_copy(update={"provenance": {**pool[0].provenance, "kind": "decoy"}})
    plain = pool[1].model_copy(update={"provenance": {k: v for k, v in pool[1].provenance.items() if k != "kind"}})
    run_round([decoy, plain], ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action", "history-scene",
              max_actions=4), seeds=[None])
    written = json.loads((tmp_path / "dagger_counts.json").read_text())["by_kind"]
    assert written == {"(none)": {"static": {"episodes": 1, "successes": 0}},
                       "decoy": {"static": {"episodes": 1, "successes": 0}}}
    episodes = tmp_path / "dagger_episodes.jsonl"
    assert [json.loads(x)["kind"] for x in episodes.read_text().splitlines()] == ["decoy", "(none)"]
    # a line from before kinds were recorded, a dynamic one that reached the goal: counted apart, not dropped
    with open(episodes, "a") as f:
        f.write(json.dumps({"key": "x/y@0", "seed": 0, "success": True}) + "\n")
    assert success_by_kind(episodes)[UNRECORDED] == {"dynamic": {"episodes": 1, "successes": 1}}


def test_a_round_adds_to_data_of_its_own_format_only(pool, tmp_path):
    from lookplangraph.distill.planning.dagger import DaggerError
    from lookplangraph.distill.planning.trajectories import build_data, validate_data

    built = build_data(pool[:1], tmp_path, seeds=[None], augmentations=(), prompt_layout="history-scene",
                       answer_format="action")
    counts = run_round(pool[1:], ScriptedBackend([J("done")]), tmp_path,  # SCRIPTED student
                       cfg=data_config("action", "history-scene", max_actions=4), seeds=[None])
    data = json.loads((tmp_path / "counts.json").read_text())
    assert data["examples"] == built.examples + counts.examples and data["by_source"]["dagger"] == counts.examples
    assert len((tmp_path / "sft.jsonl").read_text().splitlines()) == data["examples"]
    assert validate_data(tmp_path, {(t.split, t.id): t for t in pool}).ok
    with pytest.raises(DaggerError, match="action\\+reason"):
        run_round(pool, ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action+reason", "history-scene"),
                  seeds=[None])
    with pytest.raises(DaggerError, match="recall here; this round writes history-scene with action and recall named"):
        run_round(pool, ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action", "history-scene", recall="named"),
                  seeds=[None])
    with pytest.raises(DaggerError, match="labelled by 'expert \\(privileged\\)'; this round's teacher is "
                                          "'expert \\(privileged\\), view-limited search'"):
        run_round(pool, ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action", "history-scene"),
                  seeds=[None], expert=Expert(search="view"))


def test_a_real_model_is_a_student(small_model_path, pool, tmp_path, capsys):
    """The embedded 0.5B model (greedy, in process) as the student on one task."""
    out = tmp_path / "dagger"
    code = main(["distill", "dagger", "--student", f"llamacpp:{small_model_path}", "--tasks", "train-pool",
                 "--episodes", "1", "--max-actions", "3", "--seeds", "static", "--out", str(out)])
    assert code == 0
    counts = json.loads((out / "dagger_counts.json").read_text())
    assert counts["episodes"] == 1 and counts["states"] >= 1 and counts["states_per_hour"] > 0
    printed = capsys.readouterr().out
    assert "states labelled" in printed and "reached the goal by task kind: " in printed
    assert sum(c["episodes"] for modes in counts["by_kind"].values() for c in modes.values()) == 1


def test_bad_input_exits_2(tmp_path, capsys):
    assert main(["distill", "dagger", "--student", "expert", "--tasks", "everything", "--out", str(tmp_path)]) == 2
    assert "--tasks is train-pool or generated:DIR" in capsys.readouterr().err
    assert main(["distill", "dagger", "--student", "nonsense-spec", "--out", str(tmp_path / "x")]) in (2, 3)


def test_a_dynamic_seed_that_moves_nothing_is_not_rolled_out_again(pool, tmp_path):
    from sim_adapters.dynamic import perturb

    moved = [t for t in pool if perturb(t.graph, t.goal, 0, "paper", f"{t.split}/{t.id}")[1]]
    counts = run_round(pool, ScriptedBackend([J("done")]), tmp_path,  # SCRIPTED student
                       cfg=data_config("action", "history-scene", max_actions=4), seeds=[0])
    assert counts.episodes == len(moved) < len(pool)


def test_a_conversation_round_trains_the_agreed_answers_and_branches_the_rest(pool, tmp_path):
    """SCRIPTED student (a test double, not an LM): the right room, then the wrong one, then stops."""
    from lookplangraph.distill.planning.conversations import trained

    task = pool[0]
    wrong, said = _right_then_wrong(task)
    counts = run_round([task], ScriptedBackend(said), tmp_path, cfg=data_config("action", "conversation", max_actions=6),
                       seeds=[None])
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    student = [ex for ex in lines if ex["meta"]["kind"] == "student"]
    branches = [ex for ex in lines if ex["meta"]["kind"] == "branch"]
    answers = [m for m in (student[0]["messages"] if student else []) if m["role"] == "assistant"]
    assert counts.states == 3 and len(lines) == counts.examples
    assert {ex["meta"]["student_success"] for ex in lines} == {False}  # it stopped before the goal
    assert len(branches) == 3 - counts.agreed - counts.left_out_done - counts.left_out_ungrounded
    assert {ex["meta"]["student_action"] for ex in branches} >= {f"go_to({wrong})"}  # the wrong walk is relabelled
    if student:  # the chat holds the student's answers exactly as given, trained where the expert agreed
        assert [a["content"] for a in answers] == said and sum(trained(a) for a in answers) == counts.agreed
    for ex in branches:
        *before, label = ex["messages"]
        assert trained(label) and not any(trained(m) for m in before)
        answer = json.loads(label["content"])
        assert answer["function_name"] != "done" and answer["node"] != wrong
        assert [m["content"] for m in before if m["role"] == "assistant"] == said[:ex["meta"]["step"] - 1]


def test_a_continuation_is_the_expert_taking_over_from_the_state_on(pool, tmp_path):
    """SCRIPTED student (a test double, not an LM): the right room, then the wrong one, then stops.
    With branches="continuation" each state the expert answers otherwise gives the student's chat
    up to it (replayed, untrained) and the expert's own episode from it, its answers trained."""
    from lookplangraph.distill.planning.conversations import trained

    task = pool[0]
    wrong, said = _right_then_wrong(task)
    cfg = data_config("action", "conversation", max_actions=12)
    run_round([task], ScriptedBackend(said), tmp_path / "answer", cfg=cfg, seeds=[None])
    counts = run_round([task], ScriptedBackend(said), tmp_path / "cont", cfg=cfg, seeds=[None],
                       branches="continuation", expert=Expert())
    read = lambda d: [json.loads(x) for x in (tmp_path / d / "sft.jsonl").read_text().splitlines()]
    branches = {ex["meta"]["step"]: ex for ex in read("answer") if ex["meta"]["kind"] == "branch"}
    went_on = [ex for ex in read("cont") if ex["meta"]["kind"] == "continuation"]
    assert branches and counts.continuations == len(went_on) == len(branches) and counts.continuations_diverged == 0
    for ex in went_on:
        step, answers = ex["meta"]["step"], [m for m in ex["messages"] if m["role"] == "assistant"]
        assert [a["content"] for a in answers[:step - 1]] == said[:step - 1]  # the student's, replayed
        assert not any(trained(a) for a in answers[:step - 1])
        # the state is the branch's: the same chat before it and the same first answer of the expert's
        assert ex["messages"][:2 * step] == [{**m, "train": False} if m["role"] == "assistant" else m
                                                 for m in branches[step]["messages"][:-1]]
        assert answers[step - 1]["content"] == branches[step]["messages"][-1]["content"]
        assert ex["meta"]["trained"] == sum(trained(a) for a in answers) >= 1
        assert ex["meta"]["decisions"] == len(answers) > step  # the expert went on after its first answer
        if ex["meta"]["expert_success"]:  # the expert reached the goal: its every answer is learnt
            assert all(trained(a) for a in answers[step - 1:])
            assert json.loads(answers[-1]["content"])["function_name"] == "done"


def test_a_continuation_replays_a_dynamic_episode_to_the_same_state(pool, tmp_path):
    """SCRIPTED student (a test double, not an LM) in paper-mode dynamic: the replay draws the same
    moves, so every state the expert answers otherwise is reached again and continued."""
    from lookplangraph.evaluation.runner import dynamic_moves

    task = next(t for t in pool if dynamic_moves(t, 0))
    g = task.graph
    wrong = [p for p in g.places if p != g.agent.location][:2]
    counts = run_round([task], ScriptedBackend([J("go_to", p) for p in wrong] + [J("done")]), tmp_path,
                       cfg=data_config("action", "conversation", max_actions=12), seeds=[0],
                       branches="continuation", expert=Expert())
    assert counts.episodes == 1 and counts.continuations >= 1 and counts.continuations_diverged == 0


def test_continuations_need_the_conversation_layout(pool, tmp_path):
    from lookplangraph.distill.planning.dagger import DaggerError

    with pytest.raises(DaggerError, match="conversation layout"):
        run_round(pool[:1], ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action", "history-scene"),
                  seeds=[None], branches="continuation")
    with pytest.raises(DaggerError, match="branches is one of"):
        run_round(pool[:1], ScriptedBackend([J("done")]), tmp_path, cfg=data_config("action", "conversation"),
                  seeds=[None], branches="whole")


def test_the_cli_offers_the_branches_the_round_knows(tmp_path, capsys):
    from lookplangraph.cli.onboard import DAGGER_BRANCHES
    from lookplangraph.distill.planning.dagger import BRANCHES

    assert DAGGER_BRANCHES == BRANCHES
    assert main(["distill", "dagger", "--student", "scripted:done()", "--out", str(tmp_path), "--branches", "continuation",
                 "--prompt-layout", "history-scene", "--episodes", "1"]) == 2
    assert "needs the conversation layout" in capsys.readouterr().err


def test_a_round_is_labelled_again_by_replaying_its_recorded_answers(pool, tmp_path):
    """SCRIPTED student (a test double, not an LM): a round, then ``replay:DIR`` with another
    teacher. The replayed episodes are the recorded ones (same states, same answers in the chats),
    now labelled by the new teacher, as continuations or as one-answer branches; a round recorded
    before episodes kept their answers is read back from its examples; a replay the loop asks more
    of is counted and writes nothing."""
    from lookplangraph.distill.planning.conversations import trained
    from lookplangraph.distill.planning.replay import RecordedStudent, ReplayError

    task = pool[0]
    wrong, said = _right_then_wrong(task)
    cfg = data_config("action", "conversation", max_actions=12)
    first = run_round([task], ScriptedBackend(said), tmp_path / "a", cfg=cfg, seeds=[None], branches="continuation")
    recorded = json.loads((tmp_path / "a" / "dagger_episodes.jsonl").read_text())
    assert recorded["answers"] == said

    again = run_round([task], RecordedStudent(tmp_path / "a"), tmp_path / "b", cfg=cfg, seeds=[None],
                      branches="continuation", expert=Expert(search="view"))
    assert (again.episodes, again.states, again.replays_diverged) == (1, first.states, 0)
    counts = json.loads((tmp_path / "b" / "counts.json").read_text())
    assert counts["expert"] == "expert (privileged), view-limited search"
    lines = [json.loads(x) for x in (tmp_path / "b" / "sft.jsonl").read_text().splitlines()]
    for ex in lines:
        answers = [m["content"] for m in ex["messages"] if m["role"] == "assistant"]
        n = len(answers) if ex["meta"]["kind"] == "student" else ex["meta"]["step"] - 1
        assert answers[:n] == said[:n]  # the student's answers, as recorded
        assert ex["meta"]["student"].startswith("scripted, replayed from")

    # the same round as one-answer branches: the student's recorded answers, then the one trained label
    run_round([task], RecordedStudent(tmp_path / "a"), tmp_path / "br", cfg=cfg, seeds=[None],
              branches="answer", expert=Expert(search="view"))
    rows = [json.loads(x) for x in (tmp_path / "br" / "sft.jsonl").read_text().splitlines()]
    branches = [ex for ex in rows if ex["meta"]["kind"] == "branch"]
    assert branches
    for ex in branches:
        turns = [m for m in ex["messages"] if m["role"] == "assistant"]
        assert [m["content"] for m in turns[:-1]] == said[:len(turns) - 1]
        assert [trained(m) for m in turns] == [False] * (len(turns) - 1) + [True]
        assert turns[-1]["content"] != said[len(turns) - 1]  # the teacher's label where the student differed

    # an older round: no answers on its episode lines, read back from its examples
    old = tmp_path / "old"
    old.mkdir()
    (old / "sft.jsonl").write_text((tmp_path / "a" / "sft.jsonl").read_text())
    (old / "dagger_episodes.jsonl").write_text(json.dumps({k: v for k, v in recorded.items() if k != "answers"}) + "\n")
    assert RecordedStudent(old).answers == {recorded["key"]: said}

    # answers that end before the loop does: the replay diverged, and no example is written
    (old / "dagger_episodes.jsonl").write_text(json.dumps({**recorded, "answers": said[:2]}) + "\n")
    short = run_round([task], RecordedStudent(old), tmp_path / "c", cfg=cfg, seeds=[None])
    assert (short.replays_diverged, short.examples, short.episodes) == (1, 0, 0)
    assert not (tmp_path / "c" / "sft.jsonl").exists() or not (tmp_path / "c" / "sft.jsonl").read_text().strip()
    assert json.loads((tmp_path / "c" / "dagger_episodes.jsonl").read_text())["replay"] == "diverged"

    from lookplangraph.distill.planning.dagger import DaggerError

    with pytest.raises(DaggerError, match="1 recorded episodes are of tasks not among those given"):
        run_round(pool[1:], RecordedStudent(tmp_path / "a"), tmp_path / "e", cfg=cfg, seeds=[None])
    with pytest.raises(ReplayError, match="no DAgger round to replay"):
        RecordedStudent(tmp_path / "nothing")
    assert main(["distill", "dagger", "--student", f"replay:{tmp_path / 'nothing'}", "--out", str(tmp_path / "d"),
                 "--episodes", "1"]) == 2
