"""Batch evaluation (resume, summaries), settings files and the error-injection policy.
LMs here are ScriptedBackend (SCRIPTED replies, not a real LM) or the error-injection policy."""

from __future__ import annotations

import json

import pytest

from grasif import office
from lookplangraph.lm import ScriptedBackend
from lookplangraph.evaluation.injection import ErrorInjectionPolicy, script_for
from lookplangraph.evaluation.injection_curve import curve
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.evaluation.runner import evaluate, read_results
from lookplangraph.evaluation.settings import SettingsError, load_settings
from sim_adapters.graph_env import GraphEnvironment


@pytest.fixture(scope="module")
def office_tasks():
    return office.build_tasks()


def test_evaluation_resumes_without_losing_or_repeating_episodes(tmp_path, office_tasks):
    tasks = office_tasks[:4]
    calls = []

    def factory():
        lm = ScriptedBackend(['{"function_name": "done", "node": null, "relation": null, "destination": null, "reason": "scripted"}'])
        calls.append(lm)
        return lm

    evaluate(tasks[:2], factory, PlannerConfig(), tmp_path)
    results = tmp_path / "results.jsonl"
    with open(results, "a") as f:
        f.write('{"task_id": "office-03", "split": "off')  # an interruption tore this line
    rows = evaluate(tasks, factory, PlannerConfig(), tmp_path)
    ids = [r["task_id"] for r in read_results(results)]
    assert sorted(ids) == sorted(t.id for t in tasks) and len(ids) == len(set(ids)) == 4
    assert sum(lm.calls for lm in calls) == 4  # each episode ran once: one "done" call each
    assert len(rows) == 4
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["all"]["tasks"] == 4 and summary["all"]["sr"] == 0.0
    csv_lines = (tmp_path / "summary.csv").read_text().splitlines()
    assert csv_lines[0].startswith("split,task_id,success") and len(csv_lines) == 5
    assert (tmp_path / "traces" / "office__office-01.jsonl").exists()


def test_settings_file_and_flag_override(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('lm = "openai:gpt-4o"\nsplit = "office"\ncorrection = "none"\nlimit = 5\n')
    s = load_settings(str(cfg), {"limit": 2, "split": None})
    assert (s.lm, s.split, s.config.correction, s.limit) == ("openai:gpt-4o", "office", "none", 2)
    assert s.planner_config().correction == "none"
    assert load_settings(str(cfg), {"correction": "feedback"}).planner_config().correction == "feedback"
    # the old boolean is refused with what it meant, never guessed
    cfg.write_text("correction = false\n")
    with pytest.raises(SettingsError, match="for feedback without corrections write feedback"):
        load_settings(str(cfg), {})
    cfg.write_text('correction = "off"\n')
    with pytest.raises(SettingsError, match="rules, feedback, none"):
        load_settings(str(cfg), {})
    cfg.write_text("lm = 'x'\nbogus = 1\n")
    with pytest.raises(SettingsError, match="unknown key.*bogus"):
        load_settings(str(cfg), {})
    cfg.write_text("lm = \n")
    with pytest.raises(SettingsError, match="not valid TOML"):
        load_settings(str(cfg), {})


def test_every_shipped_config_loads():
    from pathlib import Path

    configs = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.toml"))
    assert len(configs) >= 6
    for path in configs:
        load_settings(str(path), {})


def test_injection_script_runs_without_correction_and_policy_is_exact_at_rate_zero(office_tasks):
    for task in office_tasks:
        assert script_for(task)[-1].function_name == "done"
        for correction in ("rules", "feedback", "none"):
            policy = ErrorInjectionPolicy(task, 0.0)
            r = run_episode(task, GraphEnvironment(task.graph, task.goal), policy, PlannerConfig(correction=correction, max_actions=80))
            assert r.success, (task.id, correction, r.goal_not_met)
            assert r.lm_calls == len(script_for(task)) and policy.injected == 0


def test_injected_errors_cost_more_without_correction(office_tasks):
    rows = curve(office_tasks, [1.0], seeds=2)
    rules, feedback, none = rows
    assert [r["correction"] for r in rows] == ["rules", "feedback", "none"]
    assert rules["errors_per_task"] > 1
    assert rules["sr"] > feedback["sr"] > none["sr"]
    # only the paper's ablation lets infeasible actions into the plan
    assert rules["infeasible_per_task"] == feedback["infeasible_per_task"] == 0 < none["infeasible_per_task"]


def test_cli_eval_records_and_replays_lm_replies(tmp_path, capsys):
    from lookplangraph.cli import main

    data = tmp_path / "data"
    first = ['scripted:{"function_name": "go_to", "node": "kitchen-1"}||{"function_name": "done"}']  # SCRIPTED
    args = ["eval", "--split", "office", "--data-dir", str(data), "--limit", "2"]
    assert main(args + ["--lm", *first, "--cache", "--out", str(tmp_path / "a")]) == 0
    assert len((tmp_path / "a" / "lm_cache.jsonl").read_text().splitlines()) >= 2
    # a different script, but the recorded replies answer the same prompts: the same episodes
    again = ['scripted:{"function_name": "done"}']  # SCRIPTED
    assert main(args + ["--lm", *again, "--cache", str(tmp_path / "a" / "lm_cache.jsonl"), "--out", str(tmp_path / "b")]) == 0
    a = [json.loads(x)["actions"] for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    b = [json.loads(x)["actions"] for x in (tmp_path / "b" / "results.jsonl").read_text().splitlines()]
    assert a == b and any("go_to(kitchen-1)" in acts for acts in b)


def test_cli_report_compares_evaluation_directories(tmp_path, capsys):
    from lookplangraph.cli import main

    args = ["eval", "--split", "office", "--data-dir", str(tmp_path / "data"), "--limit", "1",
            "--lm", 'scripted:{"function_name": "done"}']  # SCRIPTED, not an LM
    assert main(args + ["--out", str(tmp_path / "one")]) == 0
    assert main(args + ["--no-correction", "--out", str(tmp_path / "two")]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "one"), str(tmp_path / "two")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:5] == ["tasks", "SR", "SR", "chg.", "APP"]  # strict SR, then changed-only SR
    assert [line.split()[0] for line in lines[2:]] == ["one", "two"]
    assert [line.split()[2:4] for line in lines[2:]] == [["0.000", "0.000"]] * 2  # done at once: neither verdict
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_planner_tables_and_old_flat_keys(tmp_path):
    """Baselines' settings are tables of their own; the flat keys of older configs load into the
    same tables and a note says how to write them now; a key unknown in a table is refused."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('planner = "sg-rwr"\nmax_actions = 12\n\n[sg_rwr]\nmode = "step"\nmax_rounds = 20\n\n[react]\nmax_steps = 7\n')
    notes = []
    s = load_settings(str(cfg), {}, note=notes.append)
    assert (s.config.max_actions, s.config.sg_rwr.mode, s.config.sg_rwr.max_rounds, s.config.react.max_steps) == \
        (12, "step", 20, 7) and notes == []
    cfg.write_text('planner = "sg-rwr"\nsgrwr_mode = "step"\nsgrwr_max_rounds = 20\n')
    old = load_settings(str(cfg), {}, note=notes.append)
    assert old.config == s.config.__class__(sg_rwr=s.config.sg_rwr)  # same tables, loop defaults
    assert len(notes) == 1 and "sgrwr_max_rounds -> [sg_rwr] max_rounds" in notes[0]
    cfg.write_text('[sg_rwr]\nrounds = 3\n')
    with pytest.raises(SettingsError, match=r"unknown key\(s\) rounds in \[sg_rwr\]"):
        load_settings(str(cfg), {})
    cfg.write_text('[sg_rwr]\nmode = "dynamic"\n')
    with pytest.raises(SettingsError, match="sg_rwr.mode must be one of static, step"):
        load_settings(str(cfg), {})
