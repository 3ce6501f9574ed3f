"""lookplangraph reproduce: rows, resumption, the report. The LM is a SCRIPTED backend
(``scripted:`` replies, not a model): these tests check the harness, not planning quality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lookplangraph.cli import main
from lookplangraph.evaluation.reproduce.run import Options, ReproduceError, check_out, default_configs_dir, plan, row_settings, sample_tasks
from lookplangraph.evaluation.reproduce.tables import TABLES

SCRIPTED = 'scripted:{"plan": []}'


@pytest.fixture(scope="module")
def grasif_data(grasif_copy):
    """All three splits: the module's own copy of the session's build (``grasif_copy``)."""
    return grasif_copy()


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_row_config_exists_and_loads(grasif_data):
    opts = Options(lm="llamacpp:qwen2.5-coder-1.5b", out=Path("unused"), data_dir=grasif_data, configs=default_configs_dir())
    for name, table in TABLES.items():
        for row in table.rows:
            if row.config in (None, "@gam"):
                continue
            for split in table.splits:
                s = row_settings(row, split, opts)
                assert s.split == split and s.lm == opts.lm and s.cache is True
    # Table II's perceiving rows use the augmentation module; their GT twins the true objects
    t2 = TABLES["table2"]
    by = {r.key: r for r in t2.rows}
    assert row_settings(by["react"], "behavior", opts).augmentation == "parser"
    assert row_settings(by["react_gt"], "behavior", opts).augmentation == "ground_truth"
    assert row_settings(by["lookplangraph"], "virtualhome", opts).dynamic is True


def test_server_lm_drops_llamacpp_options(grasif_data):
    opts = Options(lm="openai:m@http://127.0.0.1:9/v1", out=Path("unused"), data_dir=grasif_data,
                   configs=default_configs_dir())
    row = TABLES["table4"].rows[0]
    assert "n_ctx" in row_settings(row, "office", Options(**{**opts.__dict__, "lm": "llamacpp:x"})).lm_options
    assert row_settings(row, "office", opts).lm_options == {}


def test_sample_is_seeded_and_the_same_for_every_row(grasif_data):
    a = [t.id for t in sample_tasks(grasif_data, "office", 3, 0)]
    assert a == [t.id for t in sample_tasks(grasif_data, "office", 3, 0)]
    assert len(a) == 3 and a != [t.id for t in sample_tasks(grasif_data, "office", 3, 1)]
    cells = plan(["table4"], Options(lm=SCRIPTED, out=Path("o"), data_dir=grasif_data, configs=default_configs_dir()))
    assert len(cells) == 6 * 3


def test_reproduce_table4_runs_resumes_and_reports(grasif_data, tmp_path, capsys):
    out = tmp_path / "rep"
    argv = ["reproduce", "table4", "--lm", SCRIPTED, "--limit", "1", "--out", str(out), "--data-dir", str(grasif_data),
            "--quiet"]
    assert main(argv) == 0
    cells = sorted(p.name for p in (out / "table4").iterdir())
    assert len(cells) == 18 and "llm_plus_p_behavior" in cells
    first = {c: _rows(out / "table4" / c / "results.jsonl") for c in cells}
    assert all(len(rows) == 1 for rows in first.values())
    md = (out / "report" / "table4.md").read_text()
    assert "| LookPlanGraph | 1/1 |" in md and "*(0.62)*" in md  # ours, then the paper's office SR
    for ext in ("png", "svg", "csv", "json"):
        assert (out / "report" / f"table4.{ext}").stat().st_size > 0
    records = json.loads((out / "report" / "table4.json").read_text())["records"]
    assert {r["metric"] for r in records} == {"sr", "app", "tpa"} and len(records) == 6 * 3 * 3
    # rerun: nothing is run twice (one row per task, the same rows)
    assert main(argv) == 0
    assert {c: _rows(out / "table4" / c / "results.jsonl") for c in cells} == first
    # another run's settings in the same directory are refused
    capsys.readouterr()
    assert main([*argv[:5], "2", *argv[6:]]) == 2
    assert "holds a run with other settings" in capsys.readouterr().err


def test_partial_cells_show_finished_of_planned(grasif_data, tmp_path):
    out = tmp_path / "rep"
    assert main(["reproduce", "table4", "--lm", SCRIPTED, "--limit", "2", "--out", str(out), "--data-dir",
                 str(grasif_data), "--quiet"]) == 0
    results = out / "table4" / "react_office" / "results.jsonl"
    results.write_text(results.read_text().splitlines(keepends=True)[0])  # as if stopped after one episode
    assert main(["reproduce", "table4", "--report-only", "--lm", SCRIPTED, "--limit", "2", "--out", str(out),
                 "--data-dir", str(grasif_data)]) == 0
    line = next(l for l in (out / "report" / "table4.md").read_text().splitlines() if l.startswith("| ReAct |"))
    assert line.split(" | ")[1] == "1/2"


def test_check_out_refuses_a_broken_identity_file(tmp_path):
    opts = Options(lm=SCRIPTED, out=tmp_path, data_dir=tmp_path, configs=tmp_path)
    (tmp_path / "reproduce.json").write_text("{torn")
    with pytest.raises(ReproduceError, match="not JSON"):
        check_out(opts)


def test_missing_config_is_a_clear_error(grasif_data, tmp_path, capsys):
    assert main(["reproduce", "table5", "--lm", SCRIPTED, "--limit", "1", "--out", str(tmp_path / "o"),
                 "--configs", str(tmp_path), "--data-dir", str(grasif_data), "--quiet"]) == 2
    assert "no such config" in capsys.readouterr().err


def test_splits_restrict_the_columns_and_table5_adds_the_injection_curve(grasif_data, tmp_path):
    out = tmp_path / "rep"
    assert main(["reproduce", "table5", "--lm", SCRIPTED, "--limit", "1", "--splits", "office", "--out", str(out),
                 "--data-dir", str(grasif_data), "--quiet"]) == 0
    assert sorted(p.name for p in (out / "table5").iterdir()) == sorted(
        ["injection"] + [f"{r.key}_office" for r in TABLES["table5"].rows if r.config])
    curve = (out / "table5" / "injection" / "curve.csv").read_text().splitlines()
    assert len(curve) == 1 + 7 * 3  # header, then every rate in every correction mode
    assert (out / "report" / "injection_curve.svg").exists() and "injection_curve.png" in (out / "report" / "README.md").read_text()
    md = (out / "report" / "table5.md").read_text()
    assert "| GPT-4o | – | – *(0.76)* |" in md  # the paper's model rows: the paper's figures only


def test_reproduce_over_endpoints_shares_the_servers_among_the_rows(grasif_data, tmp_path, capsys):
    # two SCRIPTED OpenAI-style servers (ground-truth steps, not a model): LookPlanGraph's row
    # succeeds through them, the other rows get done() and fail to plan (harness test only)
    from grasif.dataset import load_split
    from lookplangraph.evaluation.scripted_server import ScriptedServer

    tasks = load_split(grasif_data, "office")
    out = tmp_path / "rep"
    with ScriptedServer(tasks) as a, ScriptedServer(tasks) as b:
        argv = ["reproduce", "table4", "--lm", "openai:scripted", "--endpoints", f"{a.url},{b.url}",
                "--endpoint-concurrency", "2", "--limit", "2", "--concurrency", "2", "--processes", "2",
                "--splits", "office", "--out", str(out), "--data-dir", str(grasif_data), "--quiet"]
        assert main(argv) == 0  # each row's two episodes in two worker processes
        assert a.answered + b.answered > 0 and max(a.max_in_flight, b.max_in_flight) <= 2
    rows = _rows(out / "table4" / "lookplangraph_office" / "results.jsonl")
    assert len(rows) == 2 and all(r["success"] for r in rows) and {r["lm"] for r in rows} == {"openai:scripted@pool"}
    assert len(list((out / "table4").iterdir())) == 6
    capsys.readouterr()
    bad = ["reproduce", "table4", "--lm", "llamacpp:qwen2.5-coder-1.5b", "--endpoints", "http://127.0.0.1:9/v1",
           "--limit", "1", "--splits", "office", "--out", str(tmp_path / "bad"), "--data-dir", str(grasif_data), "--quiet"]
    assert main(bad) == 2 and "needs an openai:MODEL backend" in capsys.readouterr().err
