"""The episode viewer (lookplangraph/viewer): reading run directories, rebuilding the memory graph
from a trace, goal units, the page's embedded data, the command line.

Run directories are made by the project's runner with SCRIPTED policies (tests/viewer_runs.py:
the error-injection policy and ScriptedBackend replies), never a language model. The page in a
real browser: tests/test_viewer_browser.py."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from grasif import dataset
from lookplangraph.lm import ScriptedBackend
from lookplangraph.evaluation.injection import ErrorInjectionPolicy
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.planners import get_planner
from lookplangraph.evaluation.runner import make_env, run_episode_to_dir
from lookplangraph.apps.viewer import ViewerError, add_parser, cmd_view, write_view
from lookplangraph.apps.viewer.goals import goal_nodes, goal_units
from lookplangraph.apps.viewer.load import load_runs, read_jsonl
from lookplangraph.apps.viewer.replay import CHANGED, PRIOR, SEEN, replay, snapshot
from viewer_runs import GIVE_UP, J, office_data, scripted_eval

BLOCK = re.compile(r'<script type="application/json" id="(lpg-[a-z]+-?\d*)">(.*?)</script>', re.S)


def blocks(page: str) -> dict[str, object]:
    """The page's JSON blocks by element id."""
    return {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(page)}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return office_data(tmp_path_factory.mktemp("grasif"))


@pytest.fixture(scope="module")
def office(data):
    return {t.id: t for t in dataset.load_split(data, "office")}


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory, data):
    """Six office episodes: four by the error-injection policy, two that give up (failures)."""
    out = tmp_path_factory.mktemp("eval")
    rows = scripted_eval(out, data, n=6, give_up={"office-02", "office-05"})
    return out, rows


def apply_delta(state: dict, delta: dict) -> dict:
    state = dict(state)
    for name in delta.get("del", ()):
        del state[name]
    for n in delta.get("set", ()):
        state[n[0]] = n
    return state


# ---------------------------------------------------------------------------------------------
# rebuilding the memory graph
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dynamic_seed", [None, 3])
def test_replay_rebuilds_the_planners_memory_graph_after_every_step(monkeypatch, office, dynamic_seed):
    """The replayed graph equals the planner's own MemoryGraph after each step (seen through a spy
    subclass that only records the instance), in static and dynamic mode."""
    import lookplangraph.planners.lookplangraph as loop

    made: list[MemoryGraph] = []

    class Recorded(MemoryGraph):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(loop, "MemoryGraph", Recorded)
    checked = discovers = 0
    for task in list(office.values())[:8]:
        records, truth = [], []

        def on_step(rec):
            records.append(asdict(rec))
            truth.append(snapshot(made[-1].graph, made[-1].unseen, task.graph, "memory"))

        result = run_episode(task, make_env(task, dynamic_seed), ErrorInjectionPolicy(task, 0.5, seed=2),
                             PlannerConfig(), on_step=on_step)
        timeline = replay(task, asdict(result), records)
        assert timeline.exact and timeline.notes == [] and timeline.belief == "memory"
        state = {n[0]: n for n in timeline.base}
        for k, (delta, want) in enumerate(zip(timeline.deltas, truth, strict=True)):
            state = apply_delta(state, delta)
            assert state == want, f"{task.id}: the graph after call {k + 1} differs"
            checked += 1
        discovers += sum(s.startswith("discover_objects(") for r in records for s in r["executed"])
    assert checked > 40 and discovers > 5


def test_replay_flags_priors_seen_and_changed_nodes_and_what_a_step_touched(office):
    task = office["office-03"]
    records = []
    result = run_episode(task, make_env(task), ErrorInjectionPolicy(task, 0.0), PlannerConfig(),
                         on_step=lambda r: records.append(asdict(r)))
    assert result.success
    timeline = replay(task, asdict(result), records)
    base = {n[0]: n for n in timeline.base}
    assert base["orange-1"][5] & PRIOR and base["orange-1"][1] == "o" and base["kitchen-1"][1] == "p"
    assert base["agent-1"][1] == "g" and base["agent-1"][2] == task.graph.agent.location
    state = base
    for rec, delta in zip(records, timeline.deltas):
        state = apply_delta(state, delta)
        if rec["executed"] and rec["executed"][0].startswith("discover_objects(counter-1)"):
            assert "counter-1" in delta["touch"]
            assert state["orange-1"][5] & SEEN and not state["orange-1"][5] & PRIOR
    assert state["orange-1"][2:4] == ["fridge-1", "in"] and state["orange-1"][5] & CHANGED


def test_replay_of_a_static_plan_trusts_the_map_and_applies_the_executed_plan(office):
    task = office["office-03"]
    plan = ["go_to(kitchen-1)", "open(fridge-1)", "pick_up(orange-1)", "put_inside(fridge-1)", "pick_up(apple-1)",
            "put_inside(fridge-1)", "close(fridge-1)"]
    lm = ScriptedBackend([json.dumps({"plan": plan})])
    records = []
    result = get_planner("llm-as-p").run(task, make_env(task), lm, PlannerConfig(), on_step=lambda r: records.append(asdict(r)))
    assert result.success and records[-1]["executed"] == plan
    timeline = replay(task, asdict(result), records)
    assert timeline.belief == "map"
    assert not any(n[5] & (PRIOR | SEEN) for n in timeline.base)  # the map is trusted, nothing to confirm
    final = apply_delta({n[0]: n for n in timeline.base}, timeline.deltas[-1])
    assert final["orange-1"][2:4] == ["fridge-1", "in"] and final["orange-1"][5] & CHANGED


# ---------------------------------------------------------------------------------------------
# goal units
# ---------------------------------------------------------------------------------------------
def test_goal_units_are_met_unless_the_result_lists_them(office):
    task = office["office-03"]
    env = make_env(task)
    result = asdict(run_episode(task, env, ScriptedBackend(GIVE_UP), PlannerConfig()))
    units, note = goal_units(task, result)
    assert note is None
    by_label = {u["label"]: u for u in units}
    assert by_label["orange-1"]["met"] is False and by_label["orange-1"]["expected"] == "inside fridge-1"
    assert by_label["orange-1"]["detail"].startswith("found ontop counter-1")
    assert by_label["nothing else changed"]["met"] is True
    good = asdict(run_episode(task, make_env(task), ErrorInjectionPolicy(task, 0.0), PlannerConfig()))
    assert all(u["met"] for u in goal_units(task, good)[0])
    # without the task only the unmet units are known, and the note says so
    units, note = goal_units(None, result)
    assert {u["label"] for u in units} == {"orange-1", "apple-1"} and "not at hand" in note
    # an unfinished episode is not judged
    assert {u["met"] for u in goal_units(task, None)[0]} == {None}
    assert goal_nodes(task) == ["orange-1", "fridge-1", "apple-1"] and goal_nodes(None) == []


# ---------------------------------------------------------------------------------------------
# the page
# ---------------------------------------------------------------------------------------------
def test_an_evaluation_page_holds_every_episode_its_steps_graphs_and_verdicts(evaluation, data, office, tmp_path):
    out, rows = evaluation
    page_path = write_view([out], tmp_path / "view.html", data_dir=data)
    page = page_path.read_text()
    # self-contained: no external script, style, font or image, and no "<" inside the data
    assert not re.search(r'(src|href)="(https?:)?//', page) and "<link" not in page and "@import" not in page
    found = blocks(page)
    index = found["lpg-index"]
    assert len(index["episodes"]) == len(rows) == 6
    by_task = {e["task"]: e for e in index["episodes"]}
    assert by_task["office-02"]["verdict"] == "failure" and by_task["office-01"]["verdict"] == "success"
    for row in rows:
        e = by_task[row["task_id"]]
        assert e["sr"] == int(row["success"]) and e["actions"] == len(row["actions"])
        assert e["tokens"] == row["prompt_tokens"] + row["completion_tokens"] and e["seconds"] == row["wall_s"]
        d = found[f"lpg-ep-{e['id']}"]
        trace = read_jsonl(out / "traces" / f"office__{row['task_id']}.jsonl")[0]
        assert [s["proposed"] for s in d["steps"]] == [r["proposed"] for r in trace]
        assert len(d["graph"]["deltas"]) == len(trace) and f"lpg-g-{d['graph']['base']}" in found
        assert [u["met"] for u in d["goal"]].count(False) == len([g for g in row["goal_not_met"]])
    failed = found[f"lpg-ep-{by_task['office-02']['id']}"]
    assert failed["steps"][1]["feedback"] and "unicorn-1" in failed["steps"][1]["proposed"]
    assert failed["explain"] == f"lookplangraph explain {out} --task office/office-02"  # reasons on demand
    assert any(u["met"] is False for u in failed["goal"])
    # episodes that start from the same graph share its block
    starts = {json.dumps(office[r["task_id"]].initial_graph, sort_keys=True) for r in rows}
    assert index["graphs"] == len(starts) < len(rows)


def test_torn_lines_and_an_unfinished_episode_are_shown_not_fatal(evaluation, data, tmp_path):
    import shutil

    out = tmp_path / "eval"
    shutil.copytree(evaluation[0], out)
    with open(out / "results.jsonl", "a") as f:
        f.write('{"task_id": "office-09", "split": "off')  # torn by an interruption
    trace = out / "traces" / "office__office-01.jsonl"
    trace.write_text(trace.read_text() + '{"call": 99, "reas')
    # an episode that was running when the evaluation stopped: a trace, no results row
    (out / "traces" / "office__office-07.jsonl").write_text(json.dumps(
        {"call": 1, "reason": "</script><b>not markup</b>", "proposed": "go_to(kitchen-1)", "accepted": True, "text": "",
         "executed": ["go_to(kitchen-1)"]}) + "\n")
    runs = load_runs([out], data)
    assert any("results.jsonl: its last line is torn" in w for w in runs[0].warnings)
    eps = {e.task_id: e for e in runs[0].episodes}
    assert any("torn" in w for w in eps["office-01"].warnings) and 99 not in [s["call"] for s in eps["office-01"].steps]
    assert eps["office-07"].result is None
    page = write_view([out], tmp_path / "v.html", data_dir=data).read_text()
    assert "<b>not markup" not in page  # data never closes its script element
    found = blocks(page)
    rows = {e["task"]: e for e in found["lpg-index"]["episodes"]}
    assert rows["office-07"]["verdict"] == "unfinished" and rows["office-07"]["sr"] is None
    d = found[f"lpg-ep-{rows['office-07']['id']}"]
    assert d["result"] is None and len(d["graph"]["deltas"]) == 1
    assert d["steps"][0]["reason"] == "</script><b>not markup</b>"


def test_a_single_run_directory_and_its_task_file(data, office, tmp_path):
    task = office["office-03"]
    run = tmp_path / "run"
    run_episode_to_dir(task, ScriptedBackend(GIVE_UP), PlannerConfig(), run)
    # the run keeps its task: the graph is drawn without the data directory
    found = blocks(write_view([run], tmp_path / "own.html", data_dir=tmp_path / "nowhere").read_text())
    assert found["lpg-ep-0"]["graph"]["belief"] == "memory"
    assert found["lpg-ep-0"]["explain"] == f"lookplangraph explain {run}"
    # without task.json nor the data directory: the timeline, but no memory graph, and only the unmet goal units
    (run / "task.json").unlink()
    found = blocks(write_view([run], data_dir=tmp_path / "nowhere").read_text())
    d = found["lpg-ep-0"]
    assert d["graph"] is None and "--data-dir" in d["graphWhy"]
    assert [s["proposed"] for s in d["steps"]] == ["go_to(kitchen-1)", "pick_up(unicorn-1)", "done()"]
    assert any("nowhere" in w for w in found["lpg-index"]["runs"][0]["warnings"])
    assert (run / "view.html").exists()  # the default place of the page
    found = blocks(write_view([run], tmp_path / "v.html", data_dir=data).read_text())
    assert found["lpg-ep-0"]["graph"]["belief"] == "memory" and found["lpg-index"]["episodes"][0]["verdict"] == "failure"


def test_a_trial_directory_shows_its_photo_and_the_operators_checklist(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="Pillow makes the thumbnails (it comes with matplotlib)")

    from console_server import COFFEE, parsed
    from grasif.task import load_task
    from lookplangraph.apps.trial import Trial, TrialSession
    from sim_adapters.human import TrialPaused, done, seen
    from vlm.gam import GraphAugmentation

    class ScriptedOperator:  # TEST DOUBLE of the person: fixed answers
        def __init__(self, answers):
            self.answers = list(answers)

        def perform(self, request):
            answer = self.answers.pop(0)
            if answer == "stop":
                raise TrialPaused("scripted stop")
            return answer

        observe = perform

    photo = tmp_path / "cupboard.png"
    Image.new("RGB", (1200, 900), (200, 180, 150)).save(photo)
    trial = Trial.create(tmp_path / "trial", load_task(COFFEE), lm="scripted", vlm="scripted-vlm")
    plan = [J("discover_objects", "cupboard-1"), J("rearrange", "cup-2", "inside", "coffee_machine-1"),
            J("turn_on", "coffee_machine-1"), J("done")]
    gam = GraphAugmentation("vlm", describer=ScriptedBackend(["A white cup in the cupboard."], name="scripted-vlm"),
                            parser=ScriptedBackend([parsed(("cup", "inside", "cupboard-1"))], name="scripted-parser"))
    session = TrialSession(trial, ScriptedOperator([seen(photo=str(photo))] + [done()] * 5),
                           lm=ScriptedBackend(plan), augmentation=gam)
    session.run()
    session.finish([True, False, True])
    found = blocks(write_view([trial.dir], tmp_path / "t.html").read_text())
    d = found["lpg-ep-0"]
    [perceived] = [p for s in d["steps"] for p in s["perceived"]]
    assert perceived["description"] == "A white cup in the cupboard." and perceived["img"] == 0
    thumb = found["lpg-img-0"]
    assert thumb.startswith("data:image/jpeg;base64,") and len(thumb) < 40_000  # downscaled, not the 1200x900 photo
    assert [u["met"] for u in d["goal"]] == [True, False, True]  # the operator's marks
    assert found["lpg-index"]["episodes"][0]["verdict"] == "failure" and d["graph"]["exact"]
    # with no room for images the photo is left out, and the page says why
    found = blocks(write_view([trial.dir], tmp_path / "t0.html", image_budget_mb=0).read_text())
    assert found["lpg-ep-0"]["steps"][0]["perceived"][0]["img"] is None
    assert any("image budget" in n for n in found["lpg-ep-0"]["notes"])


def test_a_directory_of_runs_and_clear_errors_for_what_is_not_one(evaluation, data, tmp_path):
    with pytest.raises(ViewerError, match="no such directory"):
        write_view([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewerError, match="not a run directory: expected results.jsonl"):
        write_view([tmp_path / "empty"])
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ViewerError, match="not a directory"):
        write_view([tmp_path / "file.txt"])
    broken = tmp_path / "broken_trial"
    broken.mkdir()
    (broken / "trial.json").write_text("{not json")
    with pytest.raises(ViewerError, match="trial.json: not valid JSON"):
        write_view([broken])
    import shutil

    shutil.copytree(evaluation[0], tmp_path / "runs" / "b-eval")  # a directory holding run directories
    shutil.copytree(evaluation[0], tmp_path / "runs" / "a-eval")
    (tmp_path / "runs" / "notes").mkdir()
    runs = load_runs([tmp_path / "runs"], data)
    assert [(r.kind, r.label) for r in runs] == [("eval", "a-eval"), ("eval", "b-eval")]
    assert [len(r.episodes) for r in runs] == [6, 6] and {e.run for e in runs[1].episodes} == {1}


def test_the_view_command(evaluation, data, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="lookplangraph")
    add_parser(parser.add_subparsers(dest="command", required=True))
    out = tmp_path / "page.html"
    args = parser.parse_args(["view", str(evaluation[0]), "--out", str(out), "--data-dir", str(data)])
    assert args.func is cmd_view
    assert args.func(args) == 0
    assert str(out) in capsys.readouterr().out and blocks(out.read_text())["lpg-index"]["episodes"]
    args = parser.parse_args(["view", str(tmp_path / "missing")])
    assert cmd_view(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "no such directory" in err


def test_a_run_with_images_shows_each_observations_thumbnail(tmp_path):
    """A single episode in the image-bank environment (a SYNTHETIC bank of generated pictures,
    tests/synthetic_bank.py): the environment's image of discover_objects is in the step."""
    pytest.importorskip("bddl", reason="the BEHAVIOR split is built from bddl")
    from grasif import behavior
    from tests.synthetic_bank import build_bank, write_data_dir

    task = next(t for t in behavior.build_tasks() if t.id == "dispose_of_a_pizza_box")
    bank = build_bank(tmp_path / "bank", [task])
    data = write_data_dir(tmp_path / "grasif", [task])
    run = tmp_path / "run"
    lm = ScriptedBackend([J("discover_objects", "electric_refrigerator-1"), J("done")])
    run_episode_to_dir(task, lm, PlannerConfig(), run, env=f"omnigibson-bank@{bank}")
    [image] = list((run / "images").iterdir())  # the environment's picture, kept with the run
    found = blocks(write_view([run], tmp_path / "v.html", data_dir=data).read_text())
    step = found["lpg-ep-0"]["steps"][0]
    assert step["executed"][-1] == "discover_objects(electric_refrigerator-1)" and step["shots"] == [0]
    assert found["lpg-img-0"].startswith("data:image/") and found["lpg-ep-0"]["graph"]["exact"]
    assert image.suffix == ".png"
