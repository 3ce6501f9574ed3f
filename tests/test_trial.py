"""Human-in-the-loop trials (sim_adapters/human.py, lookplangraph/apps/trial/, ``lookplangraph trial``).

The operator here is :class:`ScriptedOperator`, a TEST DOUBLE that answers from a fixed list (no
person); the planner, the describer and the parser are ScriptedBackend: SCRIPTED replies written
for these tests, not language models. The web console is tested in tests/test_console_http.py
and, in a real browser, tests/test_console_browser.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console_server import COFFEE, J, parsed
from grasif.goals import CountGoal, GoalSpec, NodeGoal
from grasif.task import Task, load_task
from grasif.validate import validate_plan
from lookplangraph.lm import ScriptedBackend
from lookplangraph.cli import main
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.apps.trial import (PhotoError, Trial, TrialSession, checklist, photo_file_check, report_table, score,
                                 trial_dirs)
from sgs.actions import make
from sgs.io import graph_from_dict
from sim_adapters.human import HumanEnvironment, TerminalOperator, TrialPaused, done, failed, seen
from vlm.gam import GraphAugmentation

ROOT = Path(__file__).resolve().parent.parent
BUILDING = ROOT / "examples" / "office_building"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


class ScriptedOperator:
    """TEST DOUBLE of a human operator: answers each request with the next scripted answer and
    remembers the requests. An answer ``"stop"`` raises TrialPaused (the operator walks away)."""

    def __init__(self, answers):
        self.answers, self.requests = list(answers), []

    def perform(self, request):
        self.requests.append(request)
        answer = self.answers.pop(0)
        if answer == "stop":
            raise TrialPaused("scripted stop")
        return answer

    observe = perform


# the loop closes the cupboard its correction opened right after the pick-up (close_at_once)
PLAN = [J("discover_objects", "cupboard-1"), J("rearrange", "cup-2", "inside", "coffee_machine-1"),
        J("turn_on", "coffee_machine-1"), J("done")]
CUP = parsed(("cup", "inside", "cupboard-1"))


def session_for(trial, operator, plan=PLAN, parser=(CUP,), describer=None):
    lm = CachedBackend(ScriptedBackend(list(plan), name="scripted"), trial.path("lm_cache.jsonl"))
    parser_lm = ScriptedBackend(list(parser), name="scripted-parser")
    mode = "vlm" if describer is not None else "parser"
    gam = GraphAugmentation(mode, describer=describer, parser=parser_lm)
    return TrialSession(trial, operator, lm=lm, augmentation=gam), lm, parser_lm


def new_trial(tmp_path, name="t", vlm=None):
    return Trial.create(tmp_path / name, load_task(COFFEE), lm="scripted", vlm=vlm)


def test_a_whole_trial_typed_description_to_the_parser_and_a_successful_checklist(tmp_path):
    trial = new_trial(tmp_path)
    op = ScriptedOperator([seen(description="one white cup inside the cupboard"), done(), done(), done(), done(), done()])
    session, lm, parser = session_for(trial, op)
    episode = session.run()
    assert session.state == "checklist" and episode.termination == "done"
    # the operator saw each step with its LM action and the SGS expansion
    assert [str(r.step) for r in op.requests] == ["discover_objects(cupboard-1)", "open(cupboard-1)", "pick_up(cup-2)",
                                                   "close(cupboard-1)", "put_inside(coffee_machine-1)",
                                                   "turn_on(coffee_machine-1)"]
    put = op.requests[4]
    assert put.action == "rearrange(cup-2, inside, coffee_machine-1)" and put.index == 3 and len(put.expansion) == 4
    assert put.holding == "cup-2" and put.text == "Put cup-2 inside coffee_machine-1"
    # the typed text went to the parser alone
    assert "one white cup inside the cupboard" in parser.requests[0]["messages"][1]["content"]
    # what the operator reported is the planner's memory
    assert session.env.true_graph().parent["cup-2"][0] == "coffee_machine-1"
    items = session.checklist()
    assert [i.text for i in items][:2] == ["cup-2 is inside coffee_machine-1", "coffee_machine-1 is on"]
    assert [i.reported for i in items] == [True, True, True]
    result = session.finish([True, True, True])
    assert result["success"] and result["precision"] == 1.0 and result["reported_success"]
    assert result["operator_requests"] == 6 and result["failed_steps"] == [] and result["gt_actions"] == 3
    # everything is on disk
    for name in ("trial.json", "task.json", "operator.jsonl", "trace.jsonl", "augmentations.jsonl", "events.jsonl",
                 "episode.json", "checklist.json", "result.json", "lm_cache.jsonl"):
        assert trial.path(name).exists(), name
    [aug] = [json.loads(x) for x in trial.path("augmentations.jsonl").read_text().splitlines()]
    assert aug["typed"] and aug["description"] == "one white cup inside the cupboard"
    assert aug["objects"] == [{"name": "cup-2", "relation": "inside", "parent": "cupboard-1", "states": []}]
    assert json.loads(trial.path("result.json").read_text())["success"] is True
    # a second checklist changes nothing
    assert session.finish([False, False, False])["success"] is True


def test_a_failed_step_reaches_the_planner_as_feedback_with_the_operators_reason(tmp_path):
    trial = new_trial(tmp_path)
    op = ScriptedOperator([seen(description="a cup"), done(), done(), done(), failed("the machine's door is jammed")])
    session, lm, _ = session_for(trial, op, plan=PLAN[:2] + [J("done")])
    episode = session.run()
    rec = session.records[1]
    assert not rec.accepted or rec.feedback
    assert "put_inside(coffee_machine-1) failed: the operator reports: the machine's door is jammed" in rec.feedback
    assert "the machine's door is jammed" in lm.inner.requests[2]["messages"][1]["content"]  # the next prompt tells the LM
    assert episode.termination == "done"
    result = session.finish([False, False, True])
    assert result["failed_steps"] == [{"request": 5, "step": "put_inside(coffee_machine-1)",
                                       "action": "rearrange(cup-2, inside, coffee_machine-1)",
                                       "reason": "the machine's door is jammed"}]
    assert not result["success"] and result["precision"] == 0.0


def test_a_photo_goes_to_the_vlm_describer_then_the_parser_and_is_kept(tmp_path):
    trial = new_trial(tmp_path, vlm="scripted-vlm")
    photo = tmp_path / "shot.png"
    photo.write_bytes(PNG)
    describer = ScriptedBackend(["A white cup stands in the cupboard."], name="scripted-vlm")
    op = ScriptedOperator([seen(photo=str(photo)), "stop"])
    session, _, parser = session_for(trial, op, describer=describer)
    assert session.run() is None and session.state == "stopped"
    # the describer got the image; the parser its text
    content = describer.requests[0]["messages"][-1]["content"]
    assert any(part.get("type") == "image_url" for part in content)
    assert "A white cup stands in the cupboard." in parser.requests[0]["messages"][1]["content"]
    [answer] = trial.answers()
    assert answer["photo"] == "photos/001_cupboard_1.png" and trial.path(answer["photo"]).read_bytes() == PNG
    [aug] = [json.loads(x) for x in trial.path("augmentations.jsonl").read_text().splitlines()]
    assert not aug["typed"] and aug["photo"] == "photos/001_cupboard_1.png" and aug["stages"]["describer"]


def test_in_parser_mode_a_photo_alone_cannot_be_read_and_the_planner_is_told(tmp_path):
    trial = new_trial(tmp_path)
    photo = tmp_path / "shot.png"
    photo.write_bytes(PNG)
    op = ScriptedOperator([seen(photo=str(photo)), done()])
    session, _, _ = session_for(trial, op, plan=[PLAN[0], J("done")])
    session.run()
    assert "the operator typed no description of cupboard-1" in session.records[0].feedback


def _fingerprint(trial):
    return [(r["proposed"], r["accepted"], r["executed"], r["feedback"]) for r in
            map(json.loads, trial.path("trace.jsonl").read_text().splitlines())]


def test_resume_replays_recorded_answers_and_lm_replies_then_goes_on_live(tmp_path):
    answers = [seen(description="a white cup"), done(), done(), done(), failed("jammed"), done()]
    plan = PLAN[:2] + [J("turn_on", "coffee_machine-1"), J("done")]
    # the reference: one uninterrupted session
    ref = new_trial(tmp_path, "ref")
    session_for(ref, ScriptedOperator(answers))[0].run()
    # the same trial, stopped at request 4 (the server went down) and resumed in a new session
    trial = new_trial(tmp_path, "resumed")
    first = ScriptedOperator(answers[:3] + ["stop"])
    session, _, _ = session_for(trial, first, plan=plan)
    assert session.run() is None and len(trial.answers()) == 3
    again = Trial(trial.dir)
    second = ScriptedOperator(answers[3:])
    cached = 2  # decisions already in the reply cache
    session2, lm2, parser2 = session_for(again, second, plan=plan[cached:])
    episode = session2.run()
    assert episode is not None and session2.state == "checklist"
    assert [r.id for r in second.requests] == [4, 5, 6]  # recorded answers were not asked again
    assert lm2.hits == cached and parser2.calls == 1  # LM replies replayed; the (uncached) parser runs again
    assert _fingerprint(again) == _fingerprint(ref)
    assert [a["request"] for a in again.answers()] == [1, 2, 3, 4, 5, 6]


def test_a_log_that_no_longer_matches_is_set_aside_and_the_trial_goes_on_live(tmp_path):
    trial = new_trial(tmp_path)
    session, _, _ = session_for(trial, ScriptedOperator([seen(description="a cup"), done(), "stop"]))
    session.run()
    rows = trial.answers()
    rows[1]["step"] = "open(fridge-1)"  # as if another model had asked something else
    trial.path("operator.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    op = ScriptedOperator([done(), "stop"])
    session_for(Trial(trial.dir), op, plan=PLAN[2:])[0].run()
    assert [r.id for r in op.requests] == [2, 3]
    assert json.loads(trial.path("operator.superseded.jsonl").read_text())["step"] == "open(fridge-1)"
    assert [a["request"] for a in trial.answers()] == [1, 2]


def test_human_environment_contract():
    g = graph_from_dict(json.loads((BUILDING / "building.json").read_text()))
    op = ScriptedOperator([failed("the door is locked"), done(), done()])
    env = HumanEnvironment(g, op, belief=MemoryGraph)  # the belief is the caller's: here the planner's memory
    assert isinstance(env.memory, MemoryGraph) and env.true_graph() == env.memory.graph
    r = env.step(make("go_to", "meeting_room-1"))
    assert not r.ok and r.feedback == "go_to(meeting_room-1) failed: the operator reports: the door is locked"
    assert env.true_graph().agent.location == "kitchen-1"  # nothing changed
    r = env.step(make("discover_objects", "fridge-1"))  # done() is no observation
    assert not r.ok and "neither a photo nor a description" in r.feedback
    with pytest.raises(ValueError):
        env.describe("fridge-1")
    env.operator = ScriptedOperator([seen(description="milk and butter")])
    r = env.step(make("discover_objects", "fridge-1"))
    assert r.ok and r.observation.objects == () and r.observation.image is None
    assert env.describe("fridge-1") == "milk and butter" and env.typed_descriptions
    with pytest.raises(ValueError):
        seen()


def test_checklist_lines_and_scores():
    g = json.loads((BUILDING / "building.json").read_text())
    goal = GoalSpec(node_goals=[NodeGoal(node="keys-1", relation="held"),
                                NodeGoal(node="drawer-1", states=["open"], absent_states=["closed"])],
                    count_goals=[CountGoal(cls="marker", relation="inside", destination="cabinet-1", count=2)],
                    formula="(and (ontop pen-1 desk-1) (inside book-1 cabinet-1))", unchanged_elsewhere=True)
    task = Task(id="x", instruction="various", initial_graph=g, goal=goal)
    items = checklist(task)
    assert [i.text for i in items][:5] == [
        "keys-1 is in your hand", "drawer-1 is open and not closed",
        "at least 2 marker objects are inside cabinet-1", "holds: (ontop pen-1 desk-1)", "holds: (inside book-1 cabinet-1)"]
    assert items[-1].kind == "frame" and items[-1].weight == 0 and items[2].weight == 2
    assert all(i.reported is None for i in items)
    assert score(items, [True] * 6) == {"success": True, "success_changed_only": True, "precision": 1.0}
    s = score(items, [True, True, False, True, True, False])
    assert s == {"success": False, "success_changed_only": False, "precision": 4 / 6}
    assert score(items, [True] * 5 + [False]) == {"success": False, "success_changed_only": True, "precision": 1.0}
    # a task without a goal: the instruction itself, and the frame
    bare = Task(id="y", instruction="Water the plant", initial_graph=g, goal=GoalSpec())
    lines = checklist(bare)
    assert [i.kind for i in lines] == ["instruction", "frame"] and "Water the plant" in lines[0].text


def test_photos_are_checked_by_their_bytes_and_size(tmp_path):
    trial = new_trial(tmp_path)
    with pytest.raises(PhotoError, match="not a photo"):
        trial.store_photo(1, "desk-1", b"%PDF-1.7 not an image")
    with pytest.raises(PhotoError, match="over the limit"):
        trial.store_photo(1, "desk-1", PNG + b"\x00" * 2000, limit=1000)
    with pytest.raises(PhotoError, match="empty"):
        trial.store_photo(1, "desk-1", b"")
    assert not list((trial.dir / "photos").iterdir())
    assert trial.store_photo(7, "desk-1", b"\xff\xd8\xff\xe0" + b"\x00" * 20).name == "007_desk_1.jpg"
    # the terminal operator asks again for a file that is no photo
    text = tmp_path / "a.txt"
    text.write_text("hello")
    png = tmp_path / "b.png"
    png.write_bytes(PNG)
    lines = iter([str(text), f"{png} | a mug on the desk"])
    out = []
    op = TerminalOperator(read=lambda _: next(lines), write=out.append, check_photo=photo_file_check())
    from sim_adapters.human import Request

    answer = op.observe(Request(1, "observe", make("discover_objects", "desk-1")))
    assert answer.photo == str(png) and answer.description == "a mug on the desk"
    assert any("not a photo" in line for line in out)


def test_example_building_tasks_embed_the_building_and_their_plans_succeed():
    building = json.loads((BUILDING / "building.json").read_text())
    tasks = sorted((BUILDING / "tasks").glob("*.json"))
    assert len(tasks) == 3
    for path in tasks:
        task = load_task(path)
        assert task.initial_graph == building, path.name
        report = validate_plan(task.graph, task.ground_truth_plan, task.goal)
        assert report.success, (path.name, report.goal.not_met())


def _scripted_spec(*replies):
    return "scripted:" + "||".join(replies)


def test_the_terminal_trial_command_stop_resume_and_report(tmp_path, monkeypatch, capsys):
    """``lookplangraph trial --operator terminal`` with typed answers; stopped with q, resumed,
    the checklist, then ``report``. One scripted backend serves the planner and the parser."""
    spec = _scripted_spec(J("discover_objects", "cupboard-1"), CUP, J("rearrange", "cup-2", "inside", "coffee_machine-1"),
                          J("close", "cupboard-1"), J("turn_on", "coffee_machine-1"), J("done"))
    out = tmp_path / "trials" / "coffee"
    lines = iter(["a white cup on the shelf of the cupboard", "d", "q"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    rc = main(["trial", "--task-file", str(COFFEE), "--operator", "terminal", "--lm", spec, "--out", str(out)])
    assert rc == 0 and "Continue with: lookplangraph trial --resume" in capsys.readouterr().out
    assert len(Trial(out).answers()) == 2
    # resumed: the two recorded answers replay, the LM replies come from the cache (three of
    # them: two decisions, one parse); a scripted backend built anew would start at its first
    # reply, so the resumed one is given the rest
    lines = iter(["d", "f the cup does not fit", "d", "d", "y", "n", "y"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    rest = spec.removeprefix("scripted:").split("||")[3:]
    monkeypatch.setattr("lookplangraph.lm.make_backend", lambda spec, **kw: ScriptedBackend(rest))
    assert main(["trial", "--resume", str(out), "--operator", "terminal"]) == 1  # the checklist says: not a success
    shown = capsys.readouterr().out
    assert "FAILURE: precision 0.500" in shown and "[3] Pick up cup-2" in shown and "[1]" not in shown
    result = Trial(out).result()
    assert result["failed_steps"][0]["reason"] == "the cup does not fit" and result["precision"] == 0.5
    assert main(["trial", "--resume", str(out), "--lm", "x"]) == 2  # a resumed trial keeps its models
    # your own building: --graph and --instruction (the checklist asks about the instruction)
    own = tmp_path / "trials" / "own"
    monkeypatch.undo()
    lines = iter(["y", "y"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert main(["trial", "--graph", str(BUILDING / "building.json"), "--instruction", "Nothing to do today",
                 "--operator", "terminal", "--lm", _scripted_spec(J("done")), "--out", str(own)]) == 0
    assert Trial(own).result()["checklist"][0]["kind"] == "instruction"
    capsys.readouterr()
    assert trial_dirs([tmp_path / "trials"]) == [out, own]
    assert main(["report", str(tmp_path / "trials")]) == 0
    table = capsys.readouterr().out
    assert "2 finished trial(s): SR 0.500" in table and "APP 0.750" in table and "coffee_for_maria" in table
    assert main(["trial", "--instruction", "x"]) == 2


def test_report_lists_unfinished_trials_apart(tmp_path):
    trial = new_trial(tmp_path)
    session_for(trial, ScriptedOperator([seen(description="a cup"), "stop"]))[0].run()
    table = report_table([trial.dir])
    assert "unfinished" in table and "1 operator answers so far" in table and "finished trial(s)" not in table


def test_an_unusable_lm_stops_the_session_with_the_error_and_the_trial_resumes(tmp_path):
    from lookplangraph.lm import LMError

    class Broken:
        name = "scripted"
        constraints = frozenset()

        def complete(self, *args, **kwargs):
            raise LMError("the server at http://gpu:8000/v1 does not answer")

    trial = new_trial(tmp_path)
    session = TrialSession(trial, ScriptedOperator([]), lm=Broken(),
                           augmentation=GraphAugmentation("parser", parser=ScriptedBackend([CUP])))
    assert session.run() is None and session.state == "error" and "does not answer" in session.error
    assert json.loads(trial.path("events.jsonl").read_text().splitlines()[-1])["event"] == "error"
    op = ScriptedOperator([seen(description="a cup"), "stop"])
    session_for(Trial(trial.dir), op)[0].run()
    assert [r.id for r in op.requests] == [1, 2]


def action_only(fn, node=None, relation=None, destination=None, **more):
    """One SCRIPTED planner reply as an action-only model answers (no reason), or, given
    ``reason=``, the SCRIPTED answer to the explain call that asks why (not a language model)."""
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination, **more})


class TypedOperator(TerminalOperator):
    """The terminal operator with SCRIPTED typed lines (a TEST DOUBLE of the person at the
    keyboard), remembering the requests it showed."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.requests = []

    def _show(self, request):
        self.requests.append(request)
        super()._show(request)


COFFEE_ACTIONS = [("discover_objects", "cupboard-1"), ("rearrange", "cup-2", "inside", "coffee_machine-1"),
                  ("turn_on", "coffee_machine-1"), ("done",)]


def test_with_explain_the_operator_sees_the_asked_reason_before_approving_and_the_trace_records_it(tmp_path):
    """explain on: each action-only decision is followed by the explain call, and its reason
    reaches the operator's request (what the console and the terminal show beside the step to
    approve) and the trace; explain off: no explain call is made."""
    from lookplangraph.planners.config import PlannerConfig

    for on in (True, False):
        replies = []
        for i, a in enumerate(COFFEE_ACTIONS):
            replies += [action_only(*a)] + ([action_only(*a, reason=f"why {i}")] if on else [])
        trial = Trial.create(tmp_path / f"explain_{on}", load_task(COFFEE), lm="scripted",
                             planner=PlannerConfig(explain=on))
        assert Trial(trial.dir).planner_config().explain is on  # kept in trial.json: a resumed trial asks the same
        shown, lines = [], iter(["one white cup inside the cupboard"] + ["d"] * 5)
        op = TypedOperator(read=lambda prompt: next(lines), write=shown.append)
        planner = ScriptedBackend(replies, name="scripted")
        session = TrialSession(trial, op, lm=planner,
                               augmentation=GraphAugmentation("parser", parser=ScriptedBackend([CUP])))
        assert session.run() is not None and session.state == "checklist"
        trace = [json.loads(line) for line in trial.path("trace.jsonl").read_text().splitlines()]
        if on:
            assert [r.reason for r in op.requests] == ["why 0"] + ["why 1"] * 4 + ["why 2"]
            assert "Action: rearrange(cup-2, inside, coffee_machine-1) (step 1 of 4) — why 1" in shown
            assert [t["reason"] for t in trace] == [f"why {i}" for i in range(4)]
            assert len(planner.requests) == 8
        else:
            assert [r.reason for r in op.requests] == [None] * 6 and [t["reason"] for t in trace] == [None] * 4
            assert len(planner.requests) == 4  # no explain call
            assert not any("—" in line for line in shown)


def test_the_trial_command_asks_reasons_unless_no_explain_and_resume_keeps_the_setting(tmp_path, monkeypatch, capsys):
    """``trial --explain`` is the default, stored in trial.json; ``--no-explain`` asks nothing; a
    resumed trial refuses the flag. The planner is a SCRIPTED backend (not a language model)."""
    for flags, on in (([], True), (["--no-explain"], False)):
        planner = ScriptedBackend([action_only("discover_objects", "cupboard-1"),
                                   action_only("discover_objects", "cupboard-1", reason="cups are kept there")])
        monkeypatch.setattr("lookplangraph.lm.make_backend", lambda spec, **kw: planner)
        monkeypatch.setattr("builtins.input", lambda prompt="": "q")
        out = tmp_path / f"coffee_{on}"
        assert main(["trial", "--task-file", str(COFFEE), "--operator", "terminal", "--out", str(out), *flags]) == 0
        shown = capsys.readouterr().out
        assert Trial(out).planner_config().explain is on
        assert ("Action: discover_objects(cupboard-1) — cups are kept there" in shown) is on
        assert len(planner.requests) == (2 if on else 1)
        assert main(["trial", "--resume", str(out), "--no-explain" if on else "--explain"]) == 2
        assert f"drop --{'no-' if on else ''}explain" in capsys.readouterr().err


def test_a_trial_plans_one_action_an_answer(tmp_path):
    """The operator approves each action before its steps run: a trial never takes answers of
    several actions, neither asked for in its planner settings nor from an adapter trained on them."""
    from lookplangraph.planners.config import PlannerConfig

    chained = Trial.create(tmp_path / "chained", load_task(COFFEE), lm="scripted",
                           planner=PlannerConfig(actions_per_answer=3))
    with pytest.raises(ValueError, match="actions_per_answer 1, not 3"):
        session_for(chained, ScriptedOperator([]))
    session, _, _ = session_for(new_trial(tmp_path), ScriptedOperator([]))
    assert session.cfg.actions_per_answer == 1  # set, so an adapter's own setting does not apply
