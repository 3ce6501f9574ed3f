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


def test_the_explain_command_saves_its_reasons_merged_and_the_viewer_shows_them(tmp_path, monkeypatch, capsys):
    """explain writes each reason to RUN_DIR/reasons.jsonl (merged with what is there, one line
    per step), and the viewer shows a saved reason for a step whose trace has none, as asked
    after the run, with its LM. The reasons' LM is a ScriptedBackend: SCRIPTED replies."""
    from lookplangraph.apps.viewer import write_view
    from lookplangraph.cli import main
    from lookplangraph.evaluation.explain import REASONS_FILE, read_reasons, save_reasons

    decisions = [A("go_to", "kitchen-1"), A("discover_objects", "table-1"), A("rearrange", "apple-2", "ontop", "bed-1"),
                 A("done")]
    run_dir, _, _ = recorded_run(tmp_path, decisions)
    asked = []

    def scripted(spec, **options):  # the SCRIPTED stand-in of the reasons' LM
        asked.append(spec)
        return ScriptedBackend([A("discover_objects", "table-1", reason=f"{spec}: the apple may be on the table"),
                                A("rearrange", "apple-2", "ontop", "bed-1", reason=f"{spec}: it goes on the bed")])

    monkeypatch.setattr("lookplangraph.lm.make_backend", scripted)
    assert main(["explain", str(run_dir), "--call", "2", "3"]) == 0
    out = capsys.readouterr().out
    assert "[2] discover_objects(table-1): scripted: the apple may be on the table" in out
    assert f"2 reason(s) saved in {run_dir / REASONS_FILE}" in out
    rows = [json.loads(line) for line in (run_dir / REASONS_FILE).read_text().splitlines()]
    assert [(r["split"], r["task_id"], r["call"], r["proposed"], r["lm"]) for r in rows] == [
        ("test", "apple", 2, "discover_objects(table-1)", "scripted"),
        ("test", "apple", 3, "rearrange(apple-2, ontop, bed-1)", "scripted")]
    # asked again of another LM: call 3 is replaced, call 2 kept; no temporary file is left
    monkeypatch.setattr("lookplangraph.lm.make_backend",
                        lambda spec, **kw: ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="again")]))
    assert main(["explain", str(run_dir), "--call", "3", "--lm", "openai:other"]) == 0
    saved = read_reasons(run_dir)
    assert sorted(saved) == [("test", "apple", 2), ("test", "apple", 3)]
    assert saved[("test", "apple", 3)]["reason"] == "again" and saved[("test", "apple", 3)]["lm"] == "openai:other"
    assert sorted(p.name for p in run_dir.iterdir() if "reasons" in p.name) == [REASONS_FILE]
    # a saved reason of another action (a run directory written again) is not shown for the step
    save_reasons(run_dir, [{"split": "test", "task_id": "apple", "call": 4, "proposed": "go_to(bedroom-1)",
                            "reason": "stale", "lm": "x"}])
    found = blocks(write_view([run_dir], tmp_path / "v.html", data_dir=tmp_path / "nowhere").read_text())
    steps = found["lpg-ep-0"]["steps"]
    assert steps[0]["reason"] is None and "asked" not in steps[0]  # the page shows the explain command there
    when = saved[("test", "apple", 3)]["asked"]
    assert steps[1]["asked"]["reason"] == "scripted: the apple may be on the table"
    assert steps[1]["asked"]["by"].startswith("LM scripted, ")
    assert steps[2]["asked"] == {"reason": "again", "by": f"LM openai:other, {when}"}
    assert "asked" not in steps[3]
    # who gave the reasons is said once for the episode, not on every step
    assert found["lpg-ep-0"]["askedBy"] == sorted({steps[1]["asked"]["by"], steps[2]["asked"]["by"]})
    assert found["lpg-ep-0"]["explain"] == f"lookplangraph explain {run_dir}"


def test_view_explain_asks_only_for_the_steps_without_a_reason(tmp_path, monkeypatch, capsys):
    """``view --explain`` asks the run's LM (a SCRIPTED ScriptedBackend here) for the steps whose
    trace has no reason and that have none saved, saves them, then writes the page; asked again
    it asks nothing. ``view`` alone asks nothing; an LM that cannot be used still gets the page
    written, exit code 3."""
    from lookplangraph.cli import main
    from lookplangraph.evaluation.explain import read_reasons, save_reasons
    from lookplangraph.lm import LMError

    decisions = [A("go_to", "kitchen-1", reason="the apple is in the kitchen"), A("discover_objects", "table-1"),
                 A("rearrange", "apple-2", "ontop", "bed-1"), A("done")]
    run_dir, _, _ = recorded_run(tmp_path, decisions)
    save_reasons(run_dir, [{"split": "test", "task_id": "apple", "call": 2, "proposed": "discover_objects(table-1)",
                            "reason": "saved before", "lm": "scripted"}])
    lms = []

    def scripted(spec, **options):  # the SCRIPTED stand-in of the run's LM
        lms.append(ScriptedBackend([A("rearrange", "apple-2", "ontop", "bed-1", reason="it goes on the bed"),
                                    A("done", reason="the apple is on the bed")]))
        return lms[-1]

    monkeypatch.setattr("lookplangraph.lm.make_backend", scripted)
    page = tmp_path / "page.html"
    assert main(["view", str(run_dir), "--out", str(page), "--no-explain"]) == 0 and not lms
    assert main(["view", str(run_dir), "--lm", "x"]) == 2 and "goes with --explain" in capsys.readouterr().err
    assert main(["view", str(run_dir), "--out", str(page), "--explain"]) == 0
    out = capsys.readouterr().out
    assert f"reasons: {run_dir}: asking scripted for 2 step(s)" in out and "reasons: 2 saved of 2 asked" in out
    [lm] = lms
    fixed = [r["schema"]["properties"]["function_name"]["enum"] for r in lm.requests]
    assert fixed == [["rearrange"], ["done"]]  # only the steps without a reason, the action fixed
    steps = blocks(page.read_text())["lpg-ep-0"]["steps"]
    assert steps[0]["reason"] == "the apple is in the kitchen" and "asked" not in steps[0]
    assert [s["asked"]["reason"] for s in steps[1:]] == ["saved before", "it goes on the bed", "the apple is on the bed"]
    assert main(["view", str(run_dir), "--out", str(page), "--explain"]) == 0 and len(lms) == 1  # nothing left to ask
    assert "every step has its reason" in capsys.readouterr().out
    # an LM that cannot be used: the page is written with what was saved, exit code 3
    (run_dir / "reasons.jsonl").unlink()

    def broken(spec, **options):
        raise LMError("no server at http://gpu:8000/v1")

    monkeypatch.setattr("lookplangraph.lm.make_backend", broken)
    page.unlink()
    assert main(["view", str(run_dir), "--out", str(page), "--explain"]) == 3
    assert "no server at" in capsys.readouterr().err and page.exists() and read_reasons(run_dir) == {}


def blocks(page: str) -> dict:
    """The page's JSON blocks by element id."""
    import re

    return {m.group(1): json.loads(m.group(2))
            for m in re.finditer(r'<script type="application/json" id="([^"]+)">(.*?)</script>', page, re.S)}


def test_run_explain_prints_each_steps_asked_reason():
    """``run --explain`` echoes each step with format_step: the reason the explain call gave is
    on its line. The LM is a ScriptedBackend: SCRIPTED replies, not a language model."""
    from lookplangraph.evaluation.runner import format_step

    goal = GoalSpec(node_goals=[NodeGoal(node="apple-2", relation="ontop", destination="bed-1")])
    task = Task(id="apple", split="test", instruction="Put the apple on the bed.", initial_graph=kitchen_dict(), goal=goal)
    lm, steps = ScriptedBackend([A("done"), A("done", reason="nothing is left to do")]), []
    run_episode(task, GraphEnvironment(task.graph, goal), lm, PlannerConfig(reason_max_length=0, explain=True),
                on_step=steps.append)
    assert format_step(steps[0]).splitlines()[1] == "     reason: nothing is left to do"
