"""The lookplangraph command: verdicts, exit codes, readable errors."""
import json
import subprocess
import sys

import pytest

from lookplangraph.cli import main
from tests.conftest import EXAMPLES

GB = EXAMPLES / "gift_basket"


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_validate_success_exits_0(capsys):
    code, out, _ = run(capsys, "validate", "--initial", str(GB / "initial.json"), "--goal", str(GB / "goal.json"), "--plan", str(GB / "plan.json"))
    assert code == 0
    assert "16/16 correct" in out and out.strip().endswith("SUCCESS")


def test_validate_failure_exits_1_and_says_why(capsys, tmp_path):
    plan = json.loads((GB / "plan.json").read_text())[:-1]
    (tmp_path / "p.json").write_text(json.dumps(plan))
    code, out, _ = run(capsys, "validate", "--initial", str(GB / "initial.json"), "--goal", str(GB / "goal.json"), "--plan", str(tmp_path / "p.json"))
    assert code == 1
    assert "not met: bow-4: expected inside wicker_basket-4; found ontop table-2" in out
    assert "FAILURE: goal not reached" in out


def test_validate_json_output(capsys):
    code, out, _ = run(capsys, "validate", "--json", "--initial", str(GB / "initial.json"), "--goal", str(GB / "goal.json"), "--plan", str(GB / "plan.json"))
    verdict = json.loads(out)
    assert code == 0 and verdict["success"] is True and verdict["total"] == 16 and verdict["primitive_actions"] == 32


@pytest.mark.parametrize("make_bad, message", [
    (lambda p: p.write_text("{oops"), "not valid JSON"),
    (lambda p: p.write_text(json.dumps({"nodes": {"rooms": [{"name": "r-1"}], "objects": [{"name": "a-1", "relation": "ontop_of", "related_to": "t-1"}]}})), "unknown parent 't-1'"),
])
def test_bad_initial_graph_exits_2(capsys, tmp_path, make_bad, message):
    bad = tmp_path / "init.json"
    make_bad(bad)
    code, _, err = run(capsys, "validate", "--initial", str(bad), "--goal", str(GB / "goal.json"), "--plan", str(GB / "plan.json"))
    assert code == 2 and message in err and "init.json" in err


def test_bad_plan_and_missing_file_exit_2(capsys, tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"steps": []}))
    code, _, err = run(capsys, "validate", "--initial", str(GB / "initial.json"), "--goal", str(GB / "goal.json"), "--plan", str(tmp_path / "p.json"))
    assert code == 2 and "JSON list" in err
    code, _, err = run(capsys, "validate", "--initial", str(tmp_path / "nope.json"), "--goal", str(GB / "goal.json"), "--plan", str(GB / "plan.json"))
    assert code == 2 and "no such file" in err


def test_validate_task_file_with_formula_goal(capsys):
    code, out, _ = run(capsys, "validate", "--task-file", str(GB / "task.json"))
    assert code == 0 and "4/4 correct" in out


def test_show_prints_a_tree(capsys):
    code, out, _ = run(capsys, "show", str(GB / "initial.json"))
    assert code == 0
    assert "living_room-1 (agent here)" in out
    assert "│   ├── candle-1 (ontop) [off]" in out
    assert out.strip().endswith("1 places, 3 assets, 20 objects")


def test_console_script_is_installed():
    proc = subprocess.run([sys.executable, "-m", "lookplangraph.cli", "show", str(GB / "initial.json")], capture_output=True, text=True)
    assert proc.returncode == 0 and "wicker_basket-4" in proc.stdout


@pytest.mark.parametrize("argv", [
    ["show", "MISSING"],
    ["validate", "--initial", "MISSING", "--goal", str(GB / "goal.json"), "--plan", str(GB / "plan.json")],
    ["trial", "--graph", "MISSING", "--instruction", "tidy up", "--goal", str(GB / "goal.json"), "--operator", "terminal"],
    ["trial", "--graph", "MISSING", "--instruction", "tidy up", "--operator", "terminal"],
])
def test_a_missing_graph_file_is_bad_input_named_in_one_line(capsys, tmp_path, argv):
    missing = str(tmp_path / "nope.json")
    code, _, err = run(capsys, *[missing if a == "MISSING" else a for a in argv])
    assert code == 2
    assert err.startswith("error: ") and missing in err and "no such" in err and "Traceback" not in err


def test_a_graph_file_that_is_not_json_is_bad_input(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    code, _, err = run(capsys, "trial", "--graph", str(bad), "--instruction", "tidy up", "--goal", str(GB / "goal.json"),
                       "--operator", "terminal")
    assert code == 2 and err.count(str(bad)) == 1 and "not valid JSON" in err
