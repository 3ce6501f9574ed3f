"""Reasons on demand (lookplangraph.agent.decide.explain, the loop's ``explain`` setting): the reason
of a decided action, asked of the LM after the fact with the action fixed by the schema. The LM
here is ScriptedBackend: SCRIPTED replies, not a real LM; the replay of a recorded run
(lookplangraph.evaluation.explain) uses it by design, to give back the recorded replies."""

from __future__ import annotations

import json

import pytest

from grasif.goals import GoalSpec, NodeGoal
from grasif.task import Task
from lookplangraph.agent.decide import decision_messages, explain
from lookplangraph.evaluation.explain import ReplayError
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.actions import make
from sim_adapters.graph_env import GraphEnvironment

from conftest import kitchen_dict


def A(fn, node=None, relation=None, destination=None, **more):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination, **more})


def test_explain_fixes_the_action_and_decodes_only_the_reason():
    lm = ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="the bed is where it goes")])
    said = explain(lm, "static", "dynamic", make("rearrange", "apple-2", "ontop", "bed-1"))
    assert said.reason == "the bed is where it goes" and str(said.action) == "rearrange(apple-2, ontop, bed-1)"
    request = lm.requests[0]
    assert request["messages"] == decision_messages("static", "dynamic")
    props = request["schema"]["properties"]
    assert list(props) == ["function_name", "node", "relation", "destination", "reason"]
    assert props["function_name"]["enum"] == ["rearrange"] and props["destination"]["enum"] == ["bed-1"]
    assert props["reason"]["maxLength"] > 0
    explain(lm, "s", "d", make("done"))
    assert lm.requests[1]["schema"]["properties"]["node"] == {"type": "null"}


def test_the_loop_records_explained_reasons_but_keeps_them_out_of_the_prompts():
    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)
    decisions = [A("go_to", "kitchen-1"), A("discover_objects", "table-1"), A("rearrange", "apple-2", "ontop", "bed-1"),
                 A("done")]
    for on in (True, False):
        replies = []
        for i, d in enumerate(decisions):
            replies += [d, json.dumps({**json.loads(d), "reason": f"why {i}"})] if on else [d]
        lm, steps = ScriptedBackend(replies), []
        cfg = PlannerConfig(reason_max_length=0, explain=on)
        result = run_episode(task, GraphEnvironment(task.graph, goal), lm, cfg, on_step=steps.append)
        assert result.success
        assert [s.reason for s in steps] == ([f"why {i}" for i in range(4)] if on else [None] * 4)
        prompts = [r["messages"][-1]["content"] for r in lm.requests if r["schema"]["properties"].get("reason") is None]
        assert len(prompts) == 4 and not any("why" in p for p in prompts)
        assert "- go_to(kitchen-1)" in prompts[1]


def recorded_run(tmp_path, replies, **settings):
    """A run directory as `lookplangraph run` writes it, from SCRIPTED replies (not a real LM);
    returns it, the task, and the prompts the episode's LM was sent."""
    from lookplangraph.evaluation.runner import run_episode_to_dir
    from lookplangraph.evaluation.settings import load_settings

    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)
    s = load_settings(None, {"lm": "scripted", "reason_max_length": 0, **settings}, note=lambda _: None)
    lm = ScriptedBackend(replies)
    run_episode_to_dir(task, lm, s.config, tmp_path / "run", meta=s.as_dict())
    return tmp_path / "run", task, [r["messages"] for r in lm.requests]


def test_a_recorded_run_is_replayed_to_the_prompts_its_lm_saw(tmp_path):
    from lookplangraph.evaluation.explain import chosen_prompts, explain_steps, load_episode, replay_prompts

    decisions = [A("go_to", "kitchen-1"), A("discover_objects", "table-1"), A("pick_up", "banana-9"),
                 A("rearrange", "apple-2", "ontop", "bed-1"), A("done")]
    run_dir, task, sent = recorded_run(tmp_path, decisions)
    loaded, settings, trace = load_episode(run_dir)
    assert loaded.id == task.id and settings.config.reason_max_length == 0 and len(trace) == 5
    prompts = replay_prompts(loaded, settings, trace)
    assert [decision_messages(p.static, p.dynamic) for p in prompts] == sent  # byte for byte
    assert not trace[2]["accepted"] and "no node 'banana-9'" in trace[2]["feedback"]  # a refusal is replayed too
    assert "no node 'banana-9'" in prompts[3].dynamic
    why = ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="it belongs on the bed")])
    [(p, said)] = explain_steps(why, chosen_prompts(prompts, [4]))
    assert said.reason == "it belongs on the bed" and why.requests[0]["messages"] == sent[3]
    with pytest.raises(ReplayError, match="no call 9"):
        chosen_prompts(prompts, [9])


def test_a_conversation_run_is_replayed_and_explained_on_the_whole_chat(tmp_path):
    from lookplangraph.evaluation.explain import explain_steps, load_episode, replay_prompts

    decisions = [A("go_to", "kitchen-1"), A("pick_up", "banana-9"), A("rearrange", "apple-2", "ontop", "bed-1"),
                 A("done")]
    run_dir, _, sent = recorded_run(tmp_path, decisions, prompt_layout="conversation")
    loaded, settings, trace = load_episode(run_dir)
    prompts = replay_prompts(loaded, settings, trace)
    assert [decision_messages(p.static, p.dynamic) for p in prompts] == sent  # byte for byte, every turn
    assert [m["content"] for m in prompts[2].dynamic if m["role"] == "assistant"] == decisions[:2]
    assert prompts[2].dynamic[-1]["content"].startswith("Feedback on your last answer:")
    why = ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="it belongs on the bed")])
    [(_, said)] = explain_steps(why, prompts[2:3])
    assert said.reason == "it belongs on the bed" and why.requests[0]["messages"] == sent[2]


def test_a_replay_that_diverges_or_a_run_that_cannot_be_replayed_is_a_clear_error(tmp_path):
    from lookplangraph.evaluation.explain import load_episode, replay_prompts

    run_dir, task, _ = recorded_run(tmp_path, [A("go_to", "kitchen-1"), A("done")])
    loaded, settings, trace = load_episode(run_dir)
    trace[0]["proposed"] = "go_to(bedroom-1)"
    with pytest.raises(ReplayError, match="diverges at call 1"):
        replay_prompts(loaded, settings, trace)
    settings.augmentation = "parser"
    with pytest.raises(ReplayError, match="ground-truth augmentation"):
        replay_prompts(loaded, settings, trace)
    (run_dir / "config.json").unlink()
    with pytest.raises(ReplayError, match="no config.json"):
        load_episode(run_dir)


def test_the_explain_command_names_what_it_cannot_replay(tmp_path, capsys):
    from lookplangraph.cli import main

    run_dir, _, _ = recorded_run(tmp_path, [A("go_to", "kitchen-1"), A("done")])
    assert main(["explain", str(run_dir), "--call", "7"]) == 2
    assert "no call 7 in this episode (calls 1 to 2)" in capsys.readouterr().err
    assert main(["explain", str(tmp_path)]) == 2
    assert "no config.json" in capsys.readouterr().err
