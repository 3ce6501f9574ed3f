"""A GraSIF build checked against its sources (grasif/dataset.py): a split whose source files
changed since its build (or that was built without a record of them) is rebuilt on load with one
progress line, or refused with the command that rebuilds it; evaluations record the build, and
`lookplangraph report` / `benchmarks/lm_eval_table.py --compare` warn about runs on different
builds. Everything here lives in tmp_path: the office split's sources are a temporary copy."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

from grasif import dataset, office
from lookplangraph.cli import main
from lookplangraph.evaluation.runner import BUILD_KEY, evaluate
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig

ROOT = Path(__file__).resolve().parent.parent
DONE = '{"function_name": "done", "node": null, "relation": null, "destination": null, "reason": "scripted"}'


@pytest.fixture
def sources(tmp_path, monkeypatch):
    """A copy of the office split's data directory, which the office builder reads from here."""
    copy = tmp_path / "sources" / "office"
    shutil.copytree(office.SOURCE_DIR, copy)
    monkeypatch.setattr(office, "SOURCE_DIR", copy)
    return copy.resolve()


def _rename_first_task(sources: Path, instruction: str) -> None:
    path = sources / office.TASKS_FILE
    doc = json.loads(path.read_text())
    doc["tasks"][0]["instruction"] = instruction
    path.write_text(json.dumps(doc, indent=1))


def test_a_split_whose_source_changed_is_rebuilt_on_load(sources, tmp_path, capsys):
    data = tmp_path / "data"
    first = dataset.load_split(data, "office")
    capsys.readouterr()
    record = dataset.read_index(data)["builds"]["office"]
    assert record["builder_version"] == dataset.BUILDER_VERSION and record["project_version"]
    assert f"{sources.as_posix()}/tasks.json" in record["sources"] and "grasif/office.py" in record["sources"]
    assert dataset.load_split(data, "office")[0].instruction == first[0].instruction  # unchanged: kept, no line
    assert capsys.readouterr().err == ""

    _rename_first_task(sources, "Bring the stapler to the reception desk, changed after the build.")
    tasks = dataset.load_split(data, "office")
    err = capsys.readouterr().err.strip().splitlines()
    assert tasks[0].id == first[0].id and tasks[0].instruction.endswith("changed after the build.")  # the new task
    assert err == [f"GraSIF: rebuilding office (its sources changed since the build: {sources.as_posix()}/tasks.json) "
                   f"in {data}"]
    assert dataset.read_index(data)["builds"]["office"]["fingerprint"] != record["fingerprint"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".data.lock", "data", "sources"]  # nothing half-written left


def test_an_older_build_without_a_record_counts_as_changed(sources, tmp_path, capsys):
    data = dataset.build(tmp_path / "data", splits=["office"], progress=lambda m: None)
    index = json.loads((data / "index.json").read_text())
    del index["builds"]  # as builds made before the record wrote their index
    index["format"] = 1
    (data / "index.json").write_text(json.dumps(index))
    assert len(dataset.task_ids(data, "office")) == 29
    err = capsys.readouterr().err
    assert "GraSIF: rebuilding office (it was built by an older version, without a record of its sources) in" in err
    assert "office" in dataset.read_index(data)["builds"]


def test_a_stale_split_that_cannot_be_rebuilt_is_refused_with_the_command(sources, tmp_path, monkeypatch, capsys):
    data = dataset.build(tmp_path / "my data", splits=["office"], progress=lambda m: None)
    before = (data / "index.json").read_bytes()
    _rename_first_task(sources, "Something else entirely.")

    def unavailable(*args, **kwargs):  # as a split whose source package is not installed
        raise dataset.SourceError("the office split needs the package example-source, which is not installed: "
                                  "pip install example-source")

    monkeypatch.setattr(office, "build_tasks", unavailable)
    with pytest.raises(dataset.StaleBuildError) as caught:
        dataset.load_split(data, "office")
    message = str(caught.value)
    assert "out of date (office (its sources changed since the build" in message
    assert "pip install example-source" in message
    assert message.endswith(f"rebuild it with `lookplangraph grasif build --split office --data-dir '{data}'`")
    assert (data / "index.json").read_bytes() == before  # the old build is left as it was, and not served
    with pytest.raises(dataset.StaleBuildError, match="rebuild it with `lookplangraph grasif build --split office"):
        dataset.task_ids(data, "office", build_missing=False)  # reading alone never serves it either
    capsys.readouterr()
    assert main(["grasif", "list", "--split", "office", "--data-dir", str(data)]) == 3  # the CLI: a source error
    assert "lookplangraph grasif build --split office --data-dir" in capsys.readouterr().err


def _evaluate(data: Path, out: Path, n: int = 1) -> list[dict]:
    tasks = dataset.load_split(data, "office")[:n]
    return evaluate(tasks, lambda: ScriptedBackend([DONE]), PlannerConfig(), out, meta={"lm": "scripted"})


def test_results_record_the_build_and_refuse_to_mix_builds(sources, tmp_path, capsys):
    data = tmp_path / "data"
    _evaluate(data, tmp_path / "run")
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    record = dataset.read_index(data)["builds"]["office"]
    assert config["lm"] == "scripted"
    assert config[BUILD_KEY] == {"office": {"fingerprint": record["fingerprint"], "builder_version": 1,
                                            "project_version": record["project_version"]}}
    assert dataset.builds_of(office.build_tasks()) == {}  # tasks not served from a build record nothing

    _rename_first_task(sources, "A task changed after the first episodes ran.")
    with pytest.raises(ValueError, match="run on another GraSIF build .* resuming would mix the two"):
        _evaluate(data, tmp_path / "run", n=2)
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 1


def _two_runs_on_different_builds(sources: Path, tmp_path: Path, names=("one", "two")) -> list[Path]:
    data = tmp_path / "data"
    first, second = (tmp_path / n for n in names)
    _evaluate(data, first)
    _rename_first_task(sources, "A task changed between the two runs.")
    _evaluate(data, second)
    return [first, second]


def test_report_warns_about_runs_on_different_builds(sources, tmp_path, capsys):
    one, two = _two_runs_on_different_builds(sources, tmp_path)
    same = tmp_path / "same"
    shutil.copytree(one, same)
    capsys.readouterr()
    assert main(["report", str(one), str(same)]) == 0
    assert "warning" not in capsys.readouterr().out  # one build: no warning
    assert main(["report", str(one), str(two)]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning:")]
    fp = {d: json.loads((d / "config.json").read_text())[BUILD_KEY]["office"]["fingerprint"][:12] for d in (one, two)}
    assert warnings == [f"warning: these runs were made on different GraSIF builds of split office (one: build "
                        f"{fp[one]}; two: build {fp[two]}); its tasks differ between them, so their scores are not "
                        "comparable"]


def test_lm_eval_table_compare_warns_about_runs_on_different_builds(sources, tmp_path, capsys, monkeypatch):
    a, _ = _two_runs_on_different_builds(sources, tmp_path, names=("a_office", "b_office"))
    shutil.copytree(a, tmp_path / "c_office")  # the same build as a
    spec = importlib.util.spec_from_file_location("lm_eval_table", ROOT / "benchmarks" / "lm_eval_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    capsys.readouterr()
    monkeypatch.setattr(sys, "argv", ["lm_eval_table.py", str(tmp_path / "a"), str(tmp_path / "b"), "--compare"])
    assert table.main() == 0
    out = capsys.readouterr().out
    assert "warning: these runs were made on different GraSIF builds of split office (a: build" in out
    assert out.index("warning:") < out.index("test: a against b")
    monkeypatch.setattr(sys, "argv", ["lm_eval_table.py", str(tmp_path / "a"), str(tmp_path / "c"), "--compare"])
    assert table.main() == 0
    out = capsys.readouterr().out
    assert "test: a against c" in out and "warning" not in out


def test_two_builds_of_one_directory_take_turns_and_the_second_finds_the_first_ones(sources, tmp_path, monkeypatch):
    """Two threads stand for two evaluations started together on a directory without the office
    split: the second waits on the build lock while the first builds (its builder held until the
    second says it waits), then finds the split built and builds nothing."""
    data = tmp_path / "data"
    built, started, waiting, release = [], threading.Event(), threading.Event(), threading.Event()
    real_build_tasks = office.build_tasks

    def held_builder():
        built.append(threading.current_thread().name)
        started.set()
        assert release.wait(60), "the second build never waited"  # a deadlock guard, not a timing assertion
        return real_build_tasks()

    monkeypatch.setattr(office, "build_tasks", held_builder)
    second_said = []

    def second_progress(line):
        second_said.append(line)
        if line.startswith("GraSIF: waiting"):
            waiting.set()

    first = threading.Thread(target=dataset.build, args=(data, ["office"]), kwargs={"progress": lambda m: None},
                             name="first")
    second = threading.Thread(target=dataset.ensure, args=(data, ["office"], second_progress), name="second")
    first.start()
    assert started.wait(60)  # the first holds the lock and is building
    second.start()
    assert waiting.wait(60)
    release.set()
    first.join(60), second.join(60)
    assert not first.is_alive() and not second.is_alive()
    assert built == ["first"]  # one build: the second found the first one's
    assert second_said == [f"GraSIF: waiting for another process's build of {data}"]
    assert len(dataset.task_ids(data, "office", build_missing=False)) == 29
    assert sorted(p.name for p in tmp_path.iterdir()) == [".data.lock", "data", "sources"]
