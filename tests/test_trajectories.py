"""Training data from the privileged expert (a harness tool, not an LM): what the planner sends
and what the expert answered, train-pool tasks only, replayed through the SGS by the validator."""

from __future__ import annotations

import json

import pytest

from grasif import heldout
from lookplangraph.distill.planning.trajectories import build_data, validate_data
from lookplangraph.agent.prompts import static_prompt


@pytest.fixture(scope="module")
def pool(split_tasks):
    tasks = split_tasks("virtualhome")
    return [t for t in tasks if heldout.in_train_pool(t.split, t.id) and not t.goal.is_empty()][:4], tasks


@pytest.fixture(scope="module")
def data(pool, tmp_path_factory):
    out = tmp_path_factory.mktemp("distill")
    counts = build_data(pool[0], out, seeds=[None, 0], augmentations=())
    return out, counts


def test_examples_are_the_planners_messages_and_the_experts_answers(data):
    out, counts = data
    lines = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    # 4 tasks, static and seed 0; a seed-0 episode whose task the dynamic mode left as it was is not written again
    assert counts.episodes + counts.unmoved_left_out == 8 and counts.episodes == counts.successful >= 4
    assert counts.examples == len(lines) > 8
    for ex in lines:
        roles = [m["role"] for m in ex["messages"]]
        assert roles == ["system", "user", "assistant"]
        assert ex["messages"][0]["content"] == static_prompt()
        assert "Instruction:" in ex["messages"][1]["content"]
        answer = json.loads(ex["messages"][2]["content"])
        assert list(answer)[0] == "function_name" and list(answer)[-1] == "reason"
        assert ex["meta"]["split"] == "virtualhome" and ex["meta"]["seed"] in (None, 0)
    assert counts.prompt_tokens > counts.answer_tokens > 0
    assert json.loads((out / "counts.json").read_text())["examples"] == counts.examples


def test_the_validator_replays_every_episode_and_finds_a_broken_one(data, pool, tmp_path):
    out, counts = data
    by_key = {(t.split, t.id): t for t in pool[1]}
    report = validate_data(out, by_key)
    assert report.ok and report.episodes == 8 - counts.unmoved_left_out and report.examples > 8
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sft.jsonl").write_text((out / "sft.jsonl").read_text())
    episodes = [json.loads(x) for x in (out / "episodes.jsonl").read_text().splitlines()]
    episodes[0]["actions"] = ["pick_up(no_such_thing-1)"] + episodes[0]["actions"]
    episodes[1]["actions"] = [a for a in episodes[1]["actions"] if a.startswith(("go_to", "discover_objects"))]
    (broken / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    problems = validate_data(broken, by_key).problems
    assert any("no_such_thing-1" in p and "infeasible" in p for p in problems)
    assert any("goal does not hold" in p for p in problems)


def test_an_evaluation_task_is_refused_before_anything_is_written(pool, tmp_path):
    evaluation = [t for t in pool[1] if t.id == "file120_1"]
    with pytest.raises(heldout.LeakError, match="file120_1"):
        build_data(evaluation, tmp_path / "out", seeds=[None])
    assert not (tmp_path / "out").exists()


def test_data_in_the_short_format_has_no_reasons_puts_the_steps_first_and_says_so(pool, tmp_path):
    from lookplangraph.distill.training.sft import TrainConfig, prompt_metadata

    out = tmp_path / "v2"
    counts = build_data(pool[0][:2], out, seeds=[None], augmentations=(), prompt_layout="history-scene",
                        answer_format="action")
    lines = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    assert counts.examples == len(lines) > 0
    for line in lines:
        user, answer = line["messages"][1]["content"], json.loads(line["messages"][2]["content"])
        assert list(answer) == ["function_name", "node", "relation", "destination"]
        assert user.index("Previous steps:") < user.index("Scene now:")
    recorded = json.loads((out / "counts.json").read_text())
    assert (recorded["prompt_layout"], recorded["answer_format"]) == ("history-scene", "action")
    meta = prompt_metadata(TrainConfig(), lines[0]["messages"][0]["content"], out, "0" * 64)
    assert (meta["lookplangraph.prompt_layout"], meta["lookplangraph.answer_format"]) == ("history-scene", "action")
    assert meta["lookplangraph.system_prompt_name"] == "full"
    assert meta["lookplangraph.system_prompt"] == static_prompt()
    with pytest.raises(ValueError, match="answer format"):
        build_data(pool[0][:1], tmp_path / "bad", seeds=[None], augmentations=(), answer_format="haiku")
