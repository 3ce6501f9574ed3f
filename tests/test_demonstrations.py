"""Retrieved demonstrations: the shipped file holds only train-pool tasks (the held-out guard),
BM25 ranks by instruction, the block fits its budget, and the planner puts it in the system
message without the task itself. The policy in the loop is the privileged expert (a harness
tool, not an LM)."""

from __future__ import annotations

import pytest

from grasif import heldout, office
from lookplangraph.agent.demonstrations import (Demonstration, DemonstrationIndex, LeakError, demonstration_block,
                                                read_demonstrations, write_demonstrations)
from lookplangraph.distill.teacher.expert import Expert
from lookplangraph.evaluation.runner import make_env
from lookplangraph.distill.planning.trajectories import RecordingLM
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode


def demo(task_id: str, instruction: str, steps=("go_to(kitchen-1)", "done()"), split="virtualhome") -> Demonstration:
    return Demonstration(task_id, split, None, instruction, ("kitchen",), tuple(steps))


def test_the_shipped_demonstrations_are_train_pool_tasks_only():
    demos = read_demonstrations()
    manifest = heldout.load_manifest()
    assert len(demos) >= 300
    outside = sorted({f"{d.split}/{d.task_id}" for d in demos} - set(manifest["train"]))
    assert outside == []
    evaluation = {t.split("/", 1)[1] for t in manifest["eval"]}
    assert not evaluation & {d.task_id for d in demos}
    assert all(d.steps and d.steps[-1] == "done()" for d in demos)


def test_an_evaluation_task_cannot_become_a_demonstration():
    leak = demo("file120_1", "Turn on light")
    with pytest.raises(LeakError, match="file120_1"):
        DemonstrationIndex([demo("x", "y"), leak], is_held_out=lambda split, tid: not heldout.in_train_pool(split, tid))


def test_bm25_ranks_the_most_similar_instruction_first_one_episode_per_task():
    demos = [demo("a", "Turn on the TV in the living room"), demo("b", "Put the apple in the fridge"),
             Demonstration("b", "virtualhome", 0, "Put the apple in the fridge", ("kitchen",), ("done()",)),
             demo("c", "Wash the dishes in the sink")]
    top = DemonstrationIndex(demos).top("put an apple into the fridge", ["kitchen"], 2)
    assert top[0].task_id == "b"
    assert len({d.task_id for d in top}) == len(top) == 2
    assert top[0].seed is None  # the first episode of a task in the file wins a tie


def test_the_block_fits_its_budget_and_keeps_the_ends_of_a_long_demonstration():
    long = demo("a", "Put everything away", [f"rearrange(thing-{i}, inside, box-1)" for i in range(60)] + ["done()"])
    text = demonstration_block([long, demo("b", "Go to the kitchen")], max_chars=1200)
    assert len(text) <= 1200
    assert "1. rearrange(thing-0, inside, box-1)" in text and "61. done()" in text and "..." in text
    assert demonstration_block([]) == ""


def test_a_demonstration_file_round_trips_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "d.jsonl.gz"
    assert write_demonstrations([demo("a", "x"), demo("b", "y")], path) == 2
    assert [d.task_id for d in read_demonstrations(path)] == ["a", "b"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task_id": "a"}\n')
    with pytest.raises(ValueError, match="line 1"):
        read_demonstrations(bad)
    with pytest.raises(FileNotFoundError, match="distill data"):
        read_demonstrations(tmp_path / "missing.jsonl")


def test_the_planner_puts_k_demonstrations_in_the_system_message_only_when_asked():
    task = office.build_tasks()[0]
    systems = {}
    for k in (0, 2):
        lm = RecordingLM(Expert())
        env = make_env(task)
        cfg = PlannerConfig(demonstrations=k)
        lm.begin_episode(task, env, "lookplangraph", cfg)
        result = run_episode(task, env, lm, cfg)
        assert result.success
        systems[k] = {messages[0]["content"] for messages, _ in lm.calls}
        assert len(systems[k]) == 1  # the same system message at every step: a cacheable prefix
    with_demos = next(iter(systems[2]))
    assert "Solved example 1" not in next(iter(systems[0]))
    assert "Solved example 1" in with_demos and "Solved example 2" in with_demos
    assert "Solved example 3" not in with_demos
    assert task.instruction not in with_demos
