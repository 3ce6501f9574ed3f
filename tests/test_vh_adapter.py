"""The VirtualHome adapter (sim_adapters.virtualhome) on the evolving graph and, through a local
test double of its HTTP protocol, the Unity client (sim_adapters.unity)."""
import importlib.util
import json
from pathlib import Path

import pytest

from grasif import virtualhome as vh
from lookplangraph.cli import main
from sgs.actions import parse_action
from sim_adapters.base import EditableEnvironment, Environment
from sim_adapters.graph_env import GraphEnvironment, observe
from sim_adapters.unity import UnityBackend
from sim_adapters.virtualhome import (UNPLUGGED_TASKS, EvolvingGraphBackend, VirtualHomeEnvironment, VirtualHomeError, check_plan,
                                      describe)
from sim_adapters.wrappers import DynamicPerturbation, StepRecorder

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("virtualhome_eval") is None,
                                reason="virtualhome-eval is not installed (pip install --no-deps virtualhome-eval==0.1.1)")

#: Programs that plug a device in before switching it on (sim_adapters.virtualhome.UNPLUGGED_TASKS).
UNPLUGGED = UNPLUGGED_TASKS
#: Tasks with dataset edges that contradict the task graph (see consistent_vh_graph), the three
#: bookmark tasks of the GraSIF cross-check, and every 20th task.
SPECIAL = {"file650_2", "file341_1", "file23_2", "file630_1", "file896_2"}


@pytest.fixture(scope="module")
def tasks():
    """The sample of the paper selection built from the installed package, by id."""
    paths = vh.program_paths()
    every = {p.stem for p, _ in paths[::20]}
    wanted = UNPLUGGED | SPECIAL | every | {"file1004_2"}
    return {p.stem: vh.make_task(vh.load_source_task(p, g)) for p, g in paths if p.stem in wanted}


@pytest.fixture(scope="module")
def backend():
    return EvolvingGraphBackend()


def A(text):
    return parse_action(text)


@pytest.fixture
def groceries(tasks, backend):
    """file1004_2: the agent in bedroom-1; food_food-1 on floor-3 in dining_room-1; freezer-1
    (closed) holds food_food-2, food_food-3 and food_kiwi-1."""
    return tasks["file1004_2"], VirtualHomeEnvironment(tasks["file1004_2"], backend)


def test_ground_truth_plans_agree_with_the_validator_but_for_unplugged_devices(tasks, backend):
    """A sample of the 308 (benchmarks/vh_adapter_check.py runs all: 301/308 agree)."""
    checks = {i: check_plan(t, VirtualHomeEnvironment(t, backend)) for i, t in tasks.items()}
    assert all(c.sgs_success for c in checks.values())  # GraSIF: every ground-truth plan succeeds
    assert {i for i, c in checks.items() if not c.agree} == UNPLUGGED
    for i, c in checks.items():
        if i in UNPLUGGED:
            assert len(c.failures) == 1 and "is unplugged" in c.failures[0] and "failed in VirtualHome" in c.failures[0]
            assert len(c.differences) == 1 and "plugged_out" in c.differences[0]  # the device stayed off
        else:
            assert c.vh_success and not c.failures and c.differences == [], i  # the same final graph
    assert len(checks) >= 25


def test_the_environment_starts_as_the_task_and_resets(groceries):
    task, env = groceries
    assert isinstance(env, Environment) and isinstance(env, EditableEnvironment)
    assert env.true_graph() == task.graph
    assert env.step(A("go_to(dining_room-1)")).ok
    assert env.true_graph().agent.location == "dining_room-1"
    env.reset()
    assert env.true_graph() == task.graph


def test_each_primitive_becomes_virtualhome_lines(groceries):
    _, env = groceries
    steps = ["go_to(dining_room-1)", "open(freezer-1)", "pick_up(food_food-2)", "put_on(freezer-1)",
             "discover_objects(freezer-1)", "close(freezer-1)"]
    lines = [env.step(A(s)).info["lines"] for s in steps]
    assert lines == [
        ["[Walk] <dining_room> (201)"],
        ["[Walk] <freezer> (289)", "[Open] <freezer> (289)"],
        ["[Walk] <food_food> (2001)", "[Grab] <food_food> (2001)"],
        ["[Walk] <freezer> (289)", "[PutBack] <food_food> (2001) <freezer> (289)"],
        ["[Walk] <freezer> (289)", "[TurnTo] <freezer> (289)"],
        ["[Walk] <freezer> (289)", "[Close] <freezer> (289)"],
    ]
    g = env.true_graph()
    assert g.parent["food_food-2"][0] == "freezer-1" and g.parent["food_food-2"][1].value == "ontop"
    assert g.nodes["freezer-1"].has("closed") and "freezer-1" in g.inspected


def test_virtualhome_refusals_are_feedback_in_our_names(groceries):
    _, env = groceries
    env.step(A("go_to(dining_room-1)"))
    before = env.true_graph()
    r = env.step(A("pick_up(food_food-2)"))
    assert not r.ok and r.feedback.startswith("pick_up(food_food-2) failed in VirtualHome: food_food-2 is inside other closed thing")
    assert "(2001)" in r.info["virtualhome"]  # VirtualHome's own message, with its ids
    assert env.true_graph() == before  # a refused step changes nothing (the walk included)
    r = env.step(A("put_inside(freezer-1)"))
    assert not r.ok and "holds nothing" in r.feedback


def test_what_virtualhome_cannot_check_is_refused_before_it(groceries):
    _, env = groceries
    cases = {
        "pick_up(food_food-1)": "food_food-1 is in dining_room-1 but the agent is in bedroom-1; go_to(dining_room-1) first",
        "go_to(freezer-1)": "go_to takes a room; freezer-1 is not one",
        "open(bedroom-1)": "bedroom-1 is a room",
        "pick_up(cupboard-9)": "cupboard-9 is not a node of this VirtualHome scene and was not seen anywhere",
    }
    for action, feedback in cases.items():
        r = env.step(A(action))
        assert not r.ok and feedback in r.feedback, (action, r.feedback)
    env.step(A("go_to(dining_room-1)"))
    env.step(A("pick_up(food_food-1)"))
    r = env.step(A("pick_up(food_kiwi-1)"))
    assert not r.ok and "holds food_food-1 and has one hand" in r.feedback


def test_the_backend_reports_unparsable_lines_and_missing_ids(groceries, backend):
    assert not backend.execute(["[Fly] <freezer> (289)"]).ok
    assert "cannot parse" in backend.execute(["[Fly] <freezer> (289)"]).message
    r = backend.execute(["[Walk] <freezer> (999999)"])
    assert not r.ok and "no node with id 999999" in r.message


def test_names_bind_by_class_under_the_parent_where_they_were_seen(groceries):
    _, env = groceries
    truth = env.true_graph()
    env.binding.note("food_food-9", "freezer-1")
    env.binding.note("food_food-8", "freezer-1")
    env.binding.note("food_food-7", "freezer-1")
    assert env.binding.bind("food_food-9", truth) == "food_food-2"  # lowest unbound id first
    assert env.binding.bind("food_food-8", truth) == "food_food-3"
    with pytest.raises(ValueError, match="no unbound food_food on or inside freezer-1"):
        env.binding.bind("food_food-7", truth)
    for step in ("go_to(dining_room-1)", "open(freezer-1)", "pick_up(food_food-9)"):
        assert env.step(A(step)).ok
    assert env.true_graph().agent.holding == "food_food-2"
    r = env.step(A("pick_up(food_food-7)"))
    assert not r.ok and "no unbound food_food" in r.feedback


def test_discover_returns_the_ground_truth_and_a_description(groceries):
    task, env = groceries
    env.step(A("go_to(dining_room-1)"))
    r = env.step(A("discover_objects(freezer-1)"))
    assert r.observation == observe(task.graph, "freezer-1")
    assert [o.name for o in r.observation.objects] == ["food_food-2", "food_food-3", "food_kiwi-1"]
    assert r.observation.image is None  # the evolving graph renders nothing
    text = env.describe("freezer-1")
    assert text == describe(task.graph, "freezer-1") == (
        "On the freezer: nothing. Inside the freezer: a food (clean), a food (clean), a food kiwi (clean).")


def test_dynamic_mode_mirrors_the_moves_into_virtualhome(tasks, backend):
    task = tasks["file1004_2"]
    env = DynamicPerturbation(VirtualHomeEnvironment(task, backend), task.goal, 3, mode="anywhere")
    graph_env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, 3, mode="anywhere")
    env.reset()  # the moves are drawn at reset
    graph_env.reset()
    assert env.moves == graph_env.moves == ["food_food-1: ontop floor-3 -> inside oven-1"]
    assert env.true_graph() == graph_env.true_graph()
    for step in ("go_to(dining_room-1)", "discover_objects(oven-1)"):
        r = env.step(A(step))
    assert "food_food-1" in [o.name for o in r.observation.objects]
    r = env.step(A("pick_up(food_food-1)"))  # VirtualHome has it inside the closed oven
    assert not r.ok and "inside other closed thing" in r.feedback


def test_only_moved_objects_can_be_mirrored(groceries):
    task, env = groceries
    nodes = dict(task.graph.nodes)
    nodes["freezer-1"] = nodes["freezer-1"].with_state("open")
    with pytest.raises(ValueError, match="freezer-1"):
        env.set_initial(task.graph.evolve(nodes=nodes))


def test_a_task_of_another_split_is_refused(tmp_path):
    from grasif.task import Task

    other = Task(id="x", split="office", instruction="i", initial_graph={"nodes": {"rooms": [{"name": "r-1"}],
                 "asset": [], "objects": [], "agent": {"name": "agent-1", "location": "r-1", "holding": "nothing"}}},
                 goal={"node_goals": []})
    with pytest.raises(VirtualHomeError, match="does not come from VirtualHome"):
        VirtualHomeEnvironment(other)


# -- the command line, with a scripted LM ------------------------------------------------------
SCRIPT = ["go_to(dining_room-1)", "discover_objects(floor-3)", "open(freezer-1)",
          "rearrange(food_food-1, inside, freezer-1)", "done()"]  # SCRIPTED replies, not an LM


def _task_file(task, tmp_path):
    path = tmp_path / f"{task.id}.json"
    path.write_text(json.dumps(task.model_dump(mode="json")))
    return path


def test_run_with_env_virtualhome_and_a_scripted_lm(tasks, tmp_path, capsys):
    task_file = _task_file(tasks["file1004_2"], tmp_path)
    out = tmp_path / "run"
    code = main(["run", "--task-file", str(task_file), "--env", "virtualhome", "--out", str(out),
                 "--lm", "scripted:" + "||".join(SCRIPT)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "environment virtualhome" in printed and "SUCCESS" in printed
    result = json.loads((out / "result.json").read_text())
    assert result["success"] and result["executed"][-2:] == ["pick_up(food_food-1)", "put_inside(freezer-1)"]
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert steps[-1]["info"]["lines"] == ["[Walk] <freezer> (289)", "[PutIn] <food_food> (1000) <freezer> (289)"]


def test_env_virtualhome_refuses_other_splits_and_unknown_envs(capsys):
    task_file = str(EXAMPLES / "gift_basket" / "task.json")
    assert main(["run", "--task-file", task_file, "--env", "virtualhome", "--lm", "scripted:done()"]) == 2
    assert "--env virtualhome runs only the virtualhome split" in capsys.readouterr().err
    assert main(["run", "--task-file", task_file, "--env", "unity", "--lm", "scripted:done()"]) == 2
    assert "unknown environment 'unity'" in capsys.readouterr().err


# -- the Unity client, against a local test double ---------------------------------------------
@pytest.fixture
def fake_unity(tasks):
    from unity_double import FakeUnity  # TEST DOUBLE of the protocol, not the simulator

    init, _ = vh.task_source_graph(tasks["file1004_2"])
    with FakeUnity(next(n for n in init["nodes"] if n["category"] == "Characters")) as fake:
        yield fake


def test_unity_backend_runs_a_plan_with_images(tasks, fake_unity, tmp_path):
    task = tasks["file1004_2"]
    env = StepRecorder(VirtualHomeEnvironment(task, UnityBackend(fake_unity.url)), tmp_path / "run")
    env.reset()
    assert env.true_graph() == task.graph
    for step in ("go_to(dining_room-1)", "discover_objects(freezer-1)", "open(freezer-1)"):
        r = env.step(A(step))
        assert r.ok, r.feedback
    image = tmp_path / "run" / "images" / "002_freezer-1.png"
    assert env.records[1]["image"] == str(image) and image.read_bytes() == fake_unity.image
    r = env.step(A("pick_up(food_food-1)"))
    assert r.ok and env.true_graph().agent.holding == "food_food-1"
    assert fake_unity.violations == []
    script = [q for q in fake_unity.requests if q["action"] == "render_script"][-1]
    assert script["stringParams"][1:] == ["<char0> [Walk] <food_food> (1000)", "<char0> [Grab] <food_food> (1000)"]
    assert {"clear", "environment", "expand_scene", "add_character", "camera_count", "character_cameras",
            "render_script", "environment_graph", "camera_image"} <= {q["action"] for q in fake_unity.requests}
    camera = next(q for q in fake_unity.requests if q["action"] == "camera_image")
    assert camera["intParams"] == [5 + 5]  # after the 5 static cameras, the character's FIRST_PERSON


def test_unity_refusals_are_feedback(tasks, fake_unity):
    env = VirtualHomeEnvironment(tasks["file1004_2"], UnityBackend(fake_unity.url))
    env.step(A("go_to(dining_room-1)"))
    r = env.step(A("pick_up(food_food-2)"))
    assert not r.ok and "food_food-2 is inside other closed thing" in r.feedback
    visible = env.backend.client.visible_objects(env.backend.camera)
    assert isinstance(visible, dict) and visible
    assert fake_unity.requests[-1]["action"] == "observation" and fake_unity.requests[-1]["intParams"] == [10]
    assert fake_unity.violations == []


def test_an_unreachable_simulator_is_an_error_naming_the_url(tasks, capsys, tmp_path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(VirtualHomeError, match=f"cannot reach the VirtualHome Unity simulator at {url}"):
        VirtualHomeEnvironment(tasks["file1004_2"], UnityBackend(url))
    task_file = _task_file(tasks["file1004_2"], tmp_path)
    assert main(["run", "--task-file", str(task_file), "--env", f"virtualhome-unity@{url}", "--out", str(tmp_path / "r"),
                 "--lm", "scripted:done()"]) == 3  # exit code 3: a simulator that cannot be reached
    assert f"cannot reach the VirtualHome Unity simulator at {url}" in capsys.readouterr().err


def test_run_with_env_virtualhome_unity_and_a_scripted_lm(tasks, fake_unity, tmp_path, capsys):
    task_file = _task_file(tasks["file1004_2"], tmp_path)
    out = tmp_path / "run"
    code = main(["run", "--task-file", str(task_file), "--env", f"virtualhome-unity@{fake_unity.url}", "--out", str(out),
                 "--lm", "scripted:" + "||".join(SCRIPT)])
    assert code == 0, capsys.readouterr().out
    assert sorted(p.name for p in (out / "images").iterdir()) == ["002_floor-3.png"]
    assert fake_unity.violations == []
