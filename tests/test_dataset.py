"""The GraSIF data directory (grasif/dataset.py) and the `lookplangraph grasif` commands:
deterministic bytes, atomic replacement, listing and the Table I summary."""

from __future__ import annotations

import hashlib
import json

import pytest

from grasif import dataset
from lookplangraph.cli import main


def _digest(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_builds_have_the_same_bytes(tmp_path):
    a = dataset.build(tmp_path / "a", splits=["office"], progress=lambda m: None)
    b = dataset.build(tmp_path / "b", splits=["office"], progress=lambda m: None)
    assert _digest(a) == _digest(b)
    assert len(_digest(a)) == 1 + len(dataset.task_ids(a, "office"))


def test_a_failing_build_leaves_the_previous_build_untouched(tmp_path, monkeypatch):
    out = dataset.build(tmp_path / "g", splits=["office"], progress=lambda m: None)
    before = _digest(out)

    real = dataset.split_module

    class Broken:
        PAPER = {}

        @staticmethod
        def build_tasks():
            raise dataset.SourceError("tasks.json: broken on purpose")

    monkeypatch.setattr(dataset, "split_module", lambda s: Broken if s == "virtualhome" else real(s))
    with pytest.raises(dataset.SourceError, match="broken on purpose"):
        dataset.build(out, splits=["office", "virtualhome"], progress=lambda m: None)
    assert _digest(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".g.lock", "g"]  # no temporary directory left behind


def test_rebuilding_drops_splits_no_builder_knows(tmp_path):
    out = dataset.build(tmp_path / "g", splits=["office"], progress=lambda m: None)
    index = json.loads((out / "index.json").read_text())
    index["splits"]["extra"] = {}
    (out / "extra").mkdir()
    (out / "index.json").write_text(json.dumps(index))
    dataset.build(out, splits=["office"], progress=lambda m: None)
    assert set(dataset.read_index(out)["splits"]) == {"office"}  # unknown splits are not carried over
    assert len(dataset.task_ids(out, "office")) == 29


def test_cli_list_stats_and_missing_build(tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["grasif", "build", "--out", str(out), "--split", "office"]) == 0
    capsys.readouterr()
    assert main(["grasif", "list", "--data-dir", str(out), "--split", "office"]) == 0
    ids = capsys.readouterr().out.split()
    assert ids[0] == "office-01" and len(ids) == 29
    assert main(["grasif", "stats", "--data-dir", str(out)]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("office"))
    assert row.split()[1] == "29" and "202.6" in row  # our count beside the paper's node mean
    # a split the directory lacks is built on first use, and a partial build is completed
    fresh = tmp_path / "none"
    assert main(["grasif", "list", "--data-dir", str(fresh), "--split", "office"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.split()) == 29 and f"building office in {fresh} (first use)" in captured.err
    assert main(["grasif", "list", "--data-dir", str(out), "--split", "behavior"]) == 0
    assert dataset.built_splits(out) == ["behavior", "office"]
    assert "building behavior" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no GraSIF build here"):  # reading alone never builds
        dataset.read_index(tmp_path / "elsewhere")
