"""Low-level execution failures (sim_adapters/failures.py) and how each planner meets them.

The planners' LM here is the privileged EXPERT (lookplangraph/distill/teacher/): a harness
tool that reads the true graph, not a language model."""

from __future__ import annotations

import csv
import json

import pytest

from grasif import office
from lookplangraph.distill.teacher.expert import Expert
from lookplangraph.evaluation.runner import make_env, read_results
from lookplangraph.planners import get_planner
from lookplangraph.planners.config import PlannerConfig
from sgs.actions import make
from sim_adapters.env_checker import check_env
from sim_adapters.failures import FEEDBACK, KINDS, LowLevelFailures, parse_rates
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.human import HumanEnvironment, done, failed
from sim_adapters.wrappers import DynamicPerturbation, StepRecorder


@pytest.fixture(scope="module")
def tasks():
    return office.build_tasks()


def stapler_task(tasks):
    return next(t for t in tasks if t.id == "office-01")


def only(kind: str) -> dict:
    return {kind: 0.99}


def walk_to_the_stapler(env, g):
    """office-01: go to the room the stapler is in."""
    room = g.place_of("stapler-2")
    assert env.step(make("go_to", room)).ok
    return room


def test_rates_are_checked():
    assert parse_rates(0.1) == dict.fromkeys(KINDS, 0.1)
    assert parse_rates({"grasp": 0.2}) == {"grasp": 0.2, "navigation": 0.0, "device": 0.0, "slip": 0.0, "placement": 0.0}
    for bad, message in ((1.0, r"\[0, 1\)"), (-0.1, r"\[0, 1\)"), ({"gripper": 0.1}, "unknown failure kind"),
                         ({"grasp": "often"}, "must be a number")):
        with pytest.raises(ValueError, match=message):
            parse_rates(bad)


def test_a_failed_grasp_changes_nothing_and_says_so(tasks):
    task = stapler_task(tasks)
    env = LowLevelFailures(GraphEnvironment(task.graph), only("grasp"), seed=1)
    env.reset()
    g = env.true_graph()
    walk_to_the_stapler(env, g)
    before = env.true_graph()
    holder = before.parent["stapler-2"][0]
    if before.nodes[holder].has("closed"):
        assert env.step(make("open", holder)).ok
        before = env.true_graph()
    r = env.step(make("pick_up", "stapler-2"))
    assert not r.ok and r.info["failure"] == "grasp" and r.outcome is None
    assert r.feedback.startswith("grasp failed") and "stapler-2" in r.feedback
    assert env.true_graph() == before  # a refused step changes nothing
    assert [(kind, action) for _, kind, action in env.failures] == [("grasp", "pick_up(stapler-2)")]


def test_navigation_and_device_failures_leave_the_robot_where_it_was(tasks):
    task = next(t for t in tasks if any(v.has("off") for v in t.graph.nodes.values()))
    env = LowLevelFailures(GraphEnvironment(task.graph), only("navigation"), seed=3)
    env.reset()
    g = env.true_graph()
    here = g.agent.location
    other = next(p for p in g.places if p != here)
    r = env.step(make("go_to", other))
    assert not r.ok and r.info["failure"] == "navigation" and f"still in {here}" in r.feedback
    assert env.true_graph() == g

    device = next(n for n, v in g.nodes.items() if v.has("off"))
    env = LowLevelFailures(GraphEnvironment(task.graph), only("device"), seed=3)
    env.reset()
    assert env.step(make("go_to", g.place_of(device))).ok or g.place_of(device) == here
    before = env.true_graph()
    r = env.step(make("turn_on", device))
    assert not r.ok and r.info["failure"] == "device" and env.true_graph() == before
    assert r.feedback == FEEDBACK["device"].format(node=device)


def room_with_a_cup():
    """room-1: a table holding cup-1, a shelf, an open cabinet; the agent in the room."""
    from sgs.graph import Agent, Layer, Node, Relation, SceneGraph

    nodes = {n.name: n for n in (Node("room-1", Layer.PLACE), Node("table-1", Layer.ASSET), Node("shelf-1", Layer.ASSET),
                                 Node("cabinet-1", Layer.ASSET, states=("open",)), Node("cup-1", Layer.OBJECT))}
    parent = {"table-1": ("room-1", Relation.IN_ROOM), "shelf-1": ("room-1", Relation.IN_ROOM),
              "cabinet-1": ("room-1", Relation.IN_ROOM), "cup-1": ("table-1", Relation.ONTOP)}
    return SceneGraph(nodes, parent, Agent(location="room-1"))


def test_a_slip_puts_the_object_where_the_report_says():
    from sgs.graph import Relation

    env = LowLevelFailures(GraphEnvironment(room_with_a_cup()), only("slip"), seed=0)
    env.reset()
    assert env.step(make("pick_up", "cup-1")).ok
    r = env.step(make("put_on", None, None, "shelf-1"))
    assert r.ok and r.info["failure"] == "slip" and r.outcome is not None
    landed = r.outcome.destination
    after = env.true_graph()
    assert landed in ("table-1", "cabinet-1")  # another surface of the room
    assert after.parent["cup-1"] == (landed, Relation.ONTOP) and after.agent.holding is None
    assert r.feedback == FEEDBACK["slip"].format(held="cup-1", instead=landed)
    assert [(kind, action) for _, kind, action in env.failures] == [("slip", "put_on(shelf-1)")]


def test_a_placement_ends_on_top_instead_of_inside():
    from sgs.graph import Relation

    env = LowLevelFailures(GraphEnvironment(room_with_a_cup()), only("placement"), seed=0)
    env.reset()
    assert env.step(make("pick_up", "cup-1")).ok
    r = env.step(make("put_inside", None, None, "cabinet-1"))
    assert r.ok and r.info["failure"] == "placement" and str(r.outcome) == "put_on(cabinet-1)"
    assert env.true_graph().parent["cup-1"] == ("cabinet-1", Relation.ONTOP)
    assert "on top of cabinet-1, not inside" in r.feedback


def test_a_failure_is_repaired_when_the_same_attempt_later_goes_through():
    """A failed grasp is repaired by a later pick_up of the same object; a slip by putting the same
    object on the same surface again; another action repairs nothing."""
    env = LowLevelFailures(GraphEnvironment(room_with_a_cup()), {"grasp": 0.5, "slip": 0.5}, seed=0)
    env.reset()
    for _ in range(20):  # until a grasp fails once
        if not env.step(make("pick_up", "cup-1")).ok:
            break
        assert env.step(make("put_on", None, None, "table-1")).ok or env.failures
    else:
        pytest.fail("no grasp failed in 20 tries at rate 0.5")
    grasp = next(i for i, (_, kind, _) in enumerate(env.failures) if kind == "grasp" and env.repaired[i] is None)
    env.step(make("turn_on", "cup-1"))  # refused (a cup has no switch): repairs nothing
    assert env.repaired[grasp] is None
    env.rates["grasp"] = 0.0
    assert env.step(make("pick_up", "cup-1")).ok
    assert env.repaired[grasp] > env.failures[grasp][0]  # the step of the pick_up that went through

    env = LowLevelFailures(GraphEnvironment(room_with_a_cup()), only("slip"), seed=0)
    env.reset()
    assert env.step(make("pick_up", "cup-1")).ok
    assert env.step(make("put_on", None, None, "shelf-1")).info["failure"] == "slip"
    assert env.repaired == [None]
    env.rates["slip"] = 0.0
    assert env.step(make("pick_up", "cup-1")).ok and env.repaired == [None]
    # steps: pick_up, put_on (slipped), pick_up, put_on: the fourth repairs the slip
    assert env.step(make("put_on", None, None, "shelf-1")).ok and env.repaired == [4]
    env.reset()
    assert env.failures == [] and env.repaired == []


def test_refused_actions_stay_refused_and_the_draws_repeat_with_the_seed(tasks):
    task = stapler_task(tasks)
    env = LowLevelFailures(GraphEnvironment(task.graph), 0.5, seed=7)
    env.reset()
    r = env.step(make("pick_up", "desk-5"))  # an asset: the SGS refuses it, no failure is drawn
    assert not r.ok and "failure" not in r.info and env.failures == []

    def run() -> list:
        env.reset()
        g = env.true_graph()
        for place in list(g.places) * 2:
            env.step(make("go_to", place))
        return list(env.failures)

    first = run()
    assert first and run() == first  # reset starts the same draws again
    assert all(kind == "navigation" for _, kind, _ in first)


def test_the_wrapper_keeps_the_environment_protocol(tasks):
    task = stapler_task(tasks)
    check_env(LowLevelFailures(GraphEnvironment(task.graph), 0.2, seed=0))
    wrapped = StepRecorder(LowLevelFailures(DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 0, mode="anywhere"), 0.2), "/tmp")
    assert wrapped.get_wrapper_attr("rates")["grasp"] == 0.2 and wrapped.moves == []


@pytest.mark.parametrize("planner", ["lookplangraph", "react"])
def test_the_expert_recovers_from_every_transient_failure(tasks, planner):
    """Step-wise planners see each failure as feedback (LookPlanGraph) or an observation (ReAct)
    and try again: with failures at 20% per kind the expert still succeeds on the office tasks."""
    cfg = PlannerConfig(max_actions=40)
    failures = kinds = 0
    for task in tasks[:12]:
        env = make_env(task, None, "graph", 0.2, failure_seed=0)
        expert = Expert()
        expert.begin_episode(task, env, planner, cfg)
        records = []
        result = get_planner(planner).run(task, env, expert, cfg, on_step=records.append)
        assert result.success, (task.id, result.termination, result.goal_not_met)
        failures += len(env.failures)
        kinds += sum(1 for r in records if r.failure)
        assert result.low_level_repaired == len(env.failures)  # every failed attempt was made again, and went through
    assert failures >= 8 and kinds > 0  # failures happened, and the records name them


def test_a_static_plan_stops_at_a_failure(tasks):
    """LLM-as-P (a static plan): the step that fails is the plan's last; the episode fails."""
    cfg = PlannerConfig()
    stopped = 0
    for task in tasks[:12]:
        env = make_env(task, None, "graph", 0.3, failure_seed=1)
        expert = Expert()
        expert.begin_episode(task, env, "llm-as-p", cfg)
        result = get_planner("llm-as-p").run(task, env, expert, cfg)
        if env.failures:
            stopped += 1
            assert not result.success and result.failure == "infeasible_step"
            assert result.infeasible and any(k in result.infeasible[0] for k in ("failed", "slipped", "did not respond",
                                                                                   "ended on top"))
        else:
            assert result.success
    assert stopped > 0


def test_a_person_reports_a_failure_in_the_same_words(tasks):
    """A trial's "failed, because ..." with a failure kind gives the wrapper's report."""
    from lookplangraph.agent.memory import MemoryGraph

    task = stapler_task(tasks)

    class Says:  # a scripted operator (test double): the door is locked, then any other reason
        def __init__(self):
            self.answers = [failed("navigation the corridor door is locked"), failed("the lift is out of order")]

        def perform(self, request):
            return self.answers.pop(0)

        def observe(self, request):
            return done()

    env = HumanEnvironment(task.graph, Says(), belief=MemoryGraph)
    env.reset()
    here = task.graph.agent.location
    other = next(p for p in task.graph.places if p != here)
    r = env.step(make("go_to", other))
    assert not r.ok and r.info["failure"] == "navigation"
    assert r.feedback == FEEDBACK["navigation"].format(node=other, here=here) + "; the operator adds: the corridor door is locked"
    r = env.step(make("go_to", other))
    assert not r.ok and "failure" not in r.info and r.feedback.endswith("the operator reports: the lift is out of order")


def test_failure_counts_of_results():
    from lookplangraph.evaluation.runner import failure_counts, failure_text

    rows = [{"success": True, "low_level_failures": ["grasp: pick_up(a)", "slip: put_on(b)"], "low_level_repaired": 2},
            {"success": False, "low_level_failures": ["grasp: pick_up(c)"], "low_level_repaired": 0},
            {"success": False, "low_level_failures": [], "low_level_repaired": 0}]
    assert failure_counts(rows) == {"drawn": 3, "repaired": 2, "recovered": 2, "kinds": {"grasp": 2, "slip": 1}}
    assert failure_text(rows) == ("low-level failures: 3 (grasp 2, slip 1); repaired (the same attempt later went "
                                  "through): 2 (67%); in episodes that succeeded: 2 (67%)")
    assert failure_text(rows[2:]) is None
    del rows[1]["low_level_repaired"]  # a result written before repairs were counted
    assert failure_counts(rows)["repaired"] is None
    assert "repaired (the same attempt later went through): unknown" in failure_text(rows)


def test_cli_eval_with_failures(tmp_path, capsys):
    from lookplangraph.cli import main

    out = tmp_path / "out"
    args = ["eval", "--split", "office", "--data-dir", str(tmp_path / "data"), "--limit", "4", "--lm", "expert",
            "--failures", "0.1", "--failure-seed", "2", "--max-actions", "40", "--out", str(out)]
    assert main(args) == 0
    rows = read_results(out / "results.jsonl")
    assert len(rows) == 4 and all(r["success"] for r in rows)
    config = json.loads((out / "config.json").read_text())
    assert config["failures"] == 0.1 and config["failure_seed"] == 2
    failed_steps = [json.loads(line) for p in (out / "traces").iterdir() for line in p.read_text().splitlines()]
    assert any(rec["failure"] for rec in failed_steps)
    drawn = sum(len(r["low_level_failures"]) for r in rows)
    repaired = sum(r["low_level_repaired"] for r in rows)
    assert drawn > 0 and repaired == drawn  # the expert makes every failed attempt again
    printed = capsys.readouterr().out
    assert f"low-level failures: {drawn} (" in printed and f"in episodes that succeeded: {drawn} (100%)" in printed
    with open(out / "summary.csv") as f:
        per_task = list(csv.DictReader(f))
    assert sum(int(r["low_level_failures"]) for r in per_task) == drawn
    assert main(args[:-2] + ["--failures", "1.5", "--out", str(tmp_path / "bad")]) == 2
    assert "[0, 1)" in capsys.readouterr().err
