"""The OmniGibson image-bank adapter (sim_adapters/omnigibson.py), its capture script and the
bank evaluation (lookplangraph.evaluation.gam_eval.bank_cases, ``gam-eval --bank``).

No OmniGibson and no language model run here. The bank is SYNTHETIC (tests/synthetic_bank.py:
generated colored boxes, labelled ``"synthetic": true``, not OmniGibson captures). TEST DOUBLES:
the describer VLM is the fake OpenAI-style server of tests/test_backends.py (``FakeServer``,
answering a recorded text); the parser is ScriptedBackend (fixed replies written here, not an LM).
"""

from __future__ import annotations

import base64
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lookplangraph.lm import ScriptedBackend
from lookplangraph.cli import main
from sgs.actions import parse_action
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.omnigibson import BankError, ImageBank, ImageBankEnvironment, write_png
from tests.synthetic_bank import TASKS, build_bank, write_data_dir
from tests.test_backends import HAVE_OPENAI, FakeServer, backend, completion
from vlm.descriptions import describe_truth
from lookplangraph.evaluation.gam_eval import bank_cases, evaluate
from vlm.gam import GraphAugmentation
from vlm.metrics import score

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "capture_omnigibson_bank.py"

needs_bddl = pytest.mark.skipif(importlib.util.find_spec("bddl") is None,
                                reason="bddl is not installed (pip install --no-deps bddl==3.6.0 numpy networkx future)")


@pytest.fixture(scope="module")
def tasks():
    if importlib.util.find_spec("bddl") is None:
        pytest.skip("bddl is not installed (the BEHAVIOR split is built from it)")
    from grasif import behavior as bh

    by_id = {t.id: t for t in bh.build_tasks()}
    return {i: by_id[i] for i in TASKS}


@pytest.fixture(scope="module")
def bank_dir(tasks, tmp_path_factory):
    return build_bank(tmp_path_factory.mktemp("bank"), tasks.values())


@pytest.fixture(scope="module")
def bank(bank_dir):
    return ImageBank.load(bank_dir)


@pytest.fixture(scope="module")
def data_dir(tasks, tmp_path_factory):
    return write_data_dir(tmp_path_factory.mktemp("grasif"), tasks.values())


def A(text):
    return parse_action(text)


def rows(obs):
    return [(o.name, o.relation, o.parent, tuple(o.states)) for o in obs.objects]


# ------------------------------------------------------------------------------------------
# the bank: loading and validation
# ------------------------------------------------------------------------------------------

def test_load_the_synthetic_bank(bank, bank_dir, tasks):
    assert len(bank) == len(ImageBank.load(bank_dir / "manifest.jsonl")) == 6  # 2 assets with objects per task
    assert bank.tasks() == list(TASKS)
    fridge = bank.entry("dispose_of_a_pizza_box", "electric_refrigerator-1")
    assert fridge.image.is_file() and fridge.image.read_bytes().startswith(b"\x89PNG")
    assert fridge.source["synthetic"] is True
    assert rows(fridge.truth) == [("pizza_box-1", "inside", "electric_refrigerator-1", ()),
                                  ("half__pizza-1", "inside", "pizza_box-1", ())]
    assert fridge.truth.image == str(fridge.image) and fridge.description
    assert bank.entry("buy_basic_garden_tools", "checkout-1") is None  # nothing on it: no picture
    assert [e.node for e in bank.entries("buy_basic_garden_tools")] == ["grocery_shelf-1", "floor-1"]
    for e in bank.entries():
        assert rows(e.truth) == rows(GraphEnvironment(tasks[e.task].graph).observe(e.node))


def write_manifest(root: Path, *lines, images=("a.png",)) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in images:
        write_png(root / name, 2, 2, bytes(12))
    (root / "manifest.jsonl").write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
    return root


def line(**kw):
    base = {"task": "t1", "node": "table-1", "image": "a.png",
            "objects": [{"name": "bowl-1", "relation": "ontop", "parent": "table-1", "states": []}]}
    base.update(kw)
    return base


@pytest.mark.parametrize("lines, expected", [
    (['{"task": "t1", '], "manifest.jsonl:1: not valid JSON"),
    ([line(), "[1, 2]"], "manifest.jsonl:2: not a JSON object"),
    ([{"task": "t1", "node": "table-1", "image": "a.png"}], "manifest.jsonl:1: 'objects' is missing or not a list"),
    ([line(node="")], "'node' is missing or not a non-empty string"),
    ([line(colour="red")], "unknown key(s) 'colour'"),
    ([line(image="gone.png")], "manifest.jsonl:1: image gone.png does not exist"),
    ([line(image="empty.png")], "manifest.jsonl:1: image empty.png is empty (0 bytes)"),
    ([line(), "", line()], "manifest.jsonl:3: a second entry for task t1 node table-1 (the first is on line 1)"),
    ([line(objects=[{"name": "bowl-1", "relation": "on", "parent": "table-1"}])],
     "object 'bowl-1': relation 'on' is not ontop or inside"),
    ([line(objects=[{"name": "apple-1", "relation": "inside", "parent": "bowl-1"},
                    {"name": "bowl-1", "relation": "ontop", "parent": "table-1"}])],
     "object 'apple-1' is inside 'bowl-1', which is neither the node table-1 nor an object listed before it "
     "(parents come before children)"),
    ([line(objects=[{"name": "bowl-1", "relation": "ontop", "parent": "table-1", "states": "open"}])],
     "states is not a list of strings"),
])
def test_each_bank_error_says_where_and_what(tmp_path, lines, expected):
    root = write_manifest(tmp_path / "bank", *lines)
    (root / "empty.png").write_bytes(b"")
    with pytest.raises(BankError) as exc:
        ImageBank.load(root)
    assert expected in str(exc.value)
    assert str(root / "manifest.jsonl") in str(exc.value)


def test_every_problem_is_listed_at_once_and_a_missing_manifest_is_named(tmp_path):
    root = write_manifest(tmp_path / "bank", line(image="gone.png"), "nonsense", line(task="t2", node=""))
    with pytest.raises(BankError, match=r"3 problem\(s\)") as exc:
        ImageBank.load(root / "manifest.jsonl")
    assert ":1: image gone.png" in str(exc.value) and ":2: not valid JSON" in str(exc.value) and ":3: 'node'" in str(exc.value)
    with pytest.raises(BankError, match="no image bank here"):
        ImageBank.load(tmp_path / "elsewhere")
    assert issubclass(BankError, ValueError)


# ------------------------------------------------------------------------------------------
# the environment
# ------------------------------------------------------------------------------------------

def test_a_task_without_pictures_is_refused_at_construction(tasks, bank, tmp_path):
    other = tasks["dispose_of_a_pizza_box"].model_copy(update={"id": "no_such_task"})
    with pytest.raises(BankError, match="no picture for task no_such_task; it has dispose_of_a_pizza_box, "
                                        "buy_basic_garden_tools, recycling_glass_bottles"):
        ImageBankEnvironment(other, bank)


def test_discover_with_a_picture_returns_the_true_observation_and_the_image(tasks, bank_dir):
    task = tasks["dispose_of_a_pizza_box"]
    env = ImageBankEnvironment(task, bank_dir)  # a path is loaded
    assert env.mismatches() == []
    r = env.step(A("discover_objects(electric_refrigerator-1)"))
    entry = env.bank.entry(task.id, "electric_refrigerator-1")
    assert r.ok and r.observation.image == str(entry.image)
    assert rows(r.observation) == rows(entry.truth)
    assert r.info["bank_source"]["synthetic"] is True
    assert "electric_refrigerator-1" in env.true_graph().inspected


def test_discover_without_a_picture_is_refused_and_changes_nothing(tasks, bank):
    task = tasks["buy_basic_garden_tools"]
    env = ImageBankEnvironment(task, bank)
    before = env.true_graph()
    r = env.step(A("discover_objects(checkout-1)"))
    assert not r.ok and r.observation is None
    assert "checkout-1" in r.feedback and "buy_basic_garden_tools" in r.feedback and "no picture" in r.feedback
    assert env.true_graph() == before
    r = env.step(A("discover_objects(grocery_store-1)"))  # the SGS's own reason comes first
    assert not r.ok and "is a room" in r.feedback
    r = env.step(A("discover_objects(money-1)"))  # inside the closed backpack
    assert not r.ok and "closed" in r.feedback


def test_a_name_the_augmentation_made_up_finds_the_true_node(tasks, bank):
    task = tasks["dispose_of_a_pizza_box"]
    env = ImageBankEnvironment(task, bank)
    if not hasattr(env, "note_seen"):
        pytest.skip("the graph environment has no name binding yet")
    env.note_seen("pizza_box-7", "electric_refrigerator-1")  # what a describer might call pizza_box-1
    assert env.step(A("open(electric_refrigerator-1)")).ok
    r = env.step(A("discover_objects(pizza_box-7)"))
    assert not r.ok and "no picture of pizza_box-7 (pizza_box-1)" in r.feedback
    r = env.step(A("discover_objects(ghost-1)"))
    assert not r.ok and "ghost-1" in r.feedback and "picture" not in r.feedback


def test_actions_run_on_the_sgs_and_pictures_stay_as_captured(tasks, bank):
    task = tasks["recycling_glass_bottles"]
    env = ImageBankEnvironment(task, bank)
    for text in ["open(cabinet-1)", "discover_objects(cabinet-1)", "pick_up(carboy-1)", "open(recycling_bin-1)",
                 "put_inside(recycling_bin-1)"]:
        r = env.step(A(text))
        assert r.ok, (text, r.feedback)
    assert env.true_graph().parent["carboy-1"][0] == "recycling_bin-1"
    assert "open" in env.true_graph().nodes["cabinet-1"].states
    r = env.step(A("discover_objects(floor-1)"))
    floor = bank.entry(task.id, "floor-1")
    assert r.ok and r.observation.image == str(floor.image)
    assert ("carboy-1", "inside", "recycling_bin-1", ()) in rows(r.observation)  # the current graph ...
    assert "carboy-1" not in [o.name for o in floor.truth.objects]  # ... the picture as captured
    r = env.step(A("pick_up(carboy-2)"))
    assert r.ok
    env.reset()
    assert env.true_graph() == env.initial and not env.true_graph().inspected


def test_dynamic_mode_moves_objects_in_the_sgs_only(tasks, bank):
    from sim_adapters.wrappers import DynamicPerturbation

    task = tasks["recycling_glass_bottles"]
    env = DynamicPerturbation(ImageBankEnvironment(task, bank), task.goal, seed=1, mode="anywhere")
    env.reset()  # the moves are drawn at reset
    assert env.moves  # something moved
    assert env.true_graph() != task.graph


def test_describe_gives_the_recorded_description(tasks, bank, tmp_path):
    task = tasks["dispose_of_a_pizza_box"]
    env = ImageBankEnvironment(task, bank)
    assert env.describe("electric_refrigerator-1") == bank.entry(task.id, "electric_refrigerator-1").description
    plain_bank = build_bank(tmp_path / "plain", [task], descriptions=False)
    plain = ImageBankEnvironment(task, plain_bank, describer=describe_truth)  # else the describer passed in writes it
    assert plain.describe("floor-1") == GraphEnvironment(task.graph, describer=describe_truth).describe("floor-1")
    with pytest.raises(ValueError, match="given no describer"):
        ImageBankEnvironment(task, plain_bank).describe("floor-1")


# ------------------------------------------------------------------------------------------
# the VLM augmentation path on a bank picture (TEST DOUBLES: fake server, scripted parser)
# ------------------------------------------------------------------------------------------

DESCRIPTION = "Inside the refrigerator there is a pizza box, and a half pizza lies inside the box."


def perfect(obs):
    """The parser reply that lists ``obs`` exactly (a fixed text, not an LM)."""
    return json.dumps({"objects": [{"name": o.name, "relation": o.relation, "related_to": o.parent,
                                    "states": list(o.states)} for o in obs.objects]})


@pytest.mark.skipif(not HAVE_OPENAI, reason="the openai package is not installed")
def test_vlm_augmentation_of_a_bank_picture_scored_against_its_truth(tasks, bank):
    task = tasks["dispose_of_a_pizza_box"]
    env = ImageBankEnvironment(task, bank)
    obs = env.step(A("discover_objects(electric_refrigerator-1)")).observation
    entry = bank.entry(task.id, "electric_refrigerator-1")
    parser = ScriptedBackend([perfect(entry.truth)], name="scripted:parser")  # TEST DOUBLE
    with FakeServer([(200, completion(DESCRIPTION), 0)]) as srv:  # TEST DOUBLE of a VLM server
        gam = GraphAugmentation("vlm", describer=backend(srv.url), parser=parser)
        aug = gam.augment(obs.node, image=obs.image, names=["pizza_box-1", "half__pizza-1", "ashcan-1"])
    [user] = srv.requests[0][1]["messages"]
    text, picture = user["content"]
    assert "electric_refrigerator-1" in text["text"]
    url = picture["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == entry.image.read_bytes()
    assert DESCRIPTION in parser.requests[0]["messages"][1]["content"]
    s = score(aug.observation, entry.truth)
    assert s.success and s.node_f1 == 1.0 and aug.observation.image == obs.image


def test_bank_cases_and_evaluation(bank, bank_dir, data_dir, tmp_path):
    cases = bank_cases(bank_dir, data_dir)
    assert [(c.task_id, c.node) for c in cases] == [(e.task, e.node) for e in bank.entries()]
    c = cases[0]
    assert c.split == "behavior" and c.image == str(bank.entry(c.task_id, c.node).image)
    assert c.description == bank.entry(c.task_id, c.node).description
    assert {"pizza_box-1", "half__pizza-1", "ashcan-1"} <= set(c.names)
    summary = evaluate(cases, GraphAugmentation("ground_truth"), tmp_path / "gt")
    assert summary["behavior"]["n"] == 6 and summary["behavior"]["success"] == 1.0
    row = json.loads((tmp_path / "gt" / "results.jsonl").read_text().splitlines()[0])
    assert row["image"] == c.image
    other = write_data_dir(tmp_path / "other", [])
    with pytest.raises(BankError, match="dispose_of_a_pizza_box of the image bank is not in the GraSIF build"):
        bank_cases(bank, other)


@pytest.mark.skipif(not HAVE_OPENAI, reason="the openai package is not installed")
def test_gam_eval_bank_vlm_command(bank, bank_dir, data_dir, tmp_path, capsys):
    replies = "||".join(perfect(e.truth) for e in bank.entries())  # fixed parser replies, in manifest order
    out = tmp_path / "vlm"
    with FakeServer([(200, completion(DESCRIPTION), 0)]) as srv:  # TEST DOUBLE of a VLM server
        code = main(["gam-eval", "--bank", str(bank_dir), "--mode", "vlm", "--vlm", f"openai:m1@{srv.url}",
                     "--lm", f"scripted:{replies}", "--data-dir", str(data_dir), "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "6 observations (bank" in printed
    assert len(srv.requests) == 6
    sent = [base64.b64decode(r[1]["messages"][0]["content"][1]["image_url"]["url"].split(",", 1)[1]) for r in srv.requests]
    assert sent == [e.image.read_bytes() for e in bank.entries()]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["behavior"]["success"] == 1.0 and summary["behavior"]["n"] == 6
    rows_ = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["description"] == DESCRIPTION for r in rows_)
    config = json.loads((out / "config.json").read_text())
    assert config["mode"] == "vlm" and config["vlm"] == f"openai:m1@{srv.url}" and config["bank"] == str(bank_dir.resolve())


def test_gam_eval_bank_other_modes_and_errors(bank, bank_dir, data_dir, tmp_path, capsys):
    code = main(["gam-eval", "--bank", str(bank_dir), "--mode", "ground_truth", "--data-dir", str(data_dir),
                 "--out", str(tmp_path / "gt")])
    assert code == 0 and "1.000" in capsys.readouterr().out
    replies = "||".join(perfect(e.truth) for e in bank.entries())
    code = main(["gam-eval", "--bank", str(bank_dir), "--mode", "parser", "--lm", f"scripted:{replies}",
                 "--data-dir", str(data_dir), "--out", str(tmp_path / "parser")])
    assert code == 0
    rows_ = [json.loads(l) for l in (tmp_path / "parser" / "results.jsonl").read_text().splitlines()]
    assert [r["description"] for r in rows_] == [e.description for e in bank.entries()]
    capsys.readouterr()
    assert main(["gam-eval", "--mode", "vlm", "--vlm", "openai:m1@http://127.0.0.1:9/v1"]) == 2
    assert "needs pictures: give --bank DIR" in capsys.readouterr().err
    assert main(["gam-eval", "--mode", "vlm", "--bank", str(bank_dir), "--data-dir", str(data_dir)]) == 2
    assert "needs --vlm SPEC" in capsys.readouterr().err
    plain = write_manifest(tmp_path / "plain", line(task="dispose_of_a_pizza_box", node="floor-1", objects=[]))
    assert main(["gam-eval", "--mode", "parser", "--bank", str(plain), "--data-dir", str(data_dir), "--lm", "scripted:{}",
                 "--out", str(tmp_path / "p2")]) == 2
    assert "have none" in capsys.readouterr().err
    assert main(["gam-eval", "--mode", "ground_truth", "--bank", str(tmp_path / "nowhere"), "--data-dir", str(data_dir)]) == 2
    assert "no image bank here" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# the capture script (cannot run here: no OmniGibson)
# ------------------------------------------------------------------------------------------

def test_capture_script_help_and_missing_omnigibson(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "--distances" in r.stdout and "--out" in r.stdout
    if importlib.util.find_spec("omnigibson") is not None:
        pytest.skip("OmniGibson is installed here")
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "b"), "dispose_of_a_pizza_box"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "pip install omnigibson" in r.stderr and "RTX" in r.stderr
    assert not (tmp_path / "b").exists()


def _script():
    spec = importlib.util.spec_from_file_location("capture_omnigibson_bank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rotate(q, v):
    x, y, z, w = q
    u = (x, y, z)
    cross = lambda a, b: (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
    t = tuple(2 * c for c in cross(u, v))
    c2 = cross(u, t)
    return tuple(v[i] + w * t[i] + c2[i] for i in range(3))


@pytest.mark.parametrize("eye", [(3.0, 1.0, 2.0), (-1.0, -2.0, 0.5), (0.2, 0.1, 4.0), (0.0, -3.0, 1.0)])
def test_capture_camera_looks_at_the_asset(eye):
    target = (0.5, 0.5, 0.8)
    q = _script().look_at(list(eye), list(target))
    assert math.isclose(sum(c * c for c in q), 1.0, rel_tol=1e-9)
    forward = _rotate(q, (0.0, 0.0, -1.0))  # a USD camera looks along its -Z
    want = [t - e for t, e in zip(target, eye)]
    n = math.sqrt(sum(c * c for c in want))
    assert all(math.isclose(f, w / n, abs_tol=1e-9) for f, w in zip(forward, want))
    up = _rotate(q, (0.0, 1.0, 0.0))
    assert up[2] > 0  # image up is world up (no roll)


def test_capture_resume_drops_a_torn_last_line(tmp_path):
    (tmp_path / "manifest.jsonl").write_text(json.dumps(line()) + "\n" + '{"task": "t1", "node": "sh')
    assert _script().done_entries(tmp_path) == {("t1", "table-1")}
    assert (tmp_path / "manifest.jsonl").read_text().endswith("\n")
