"""benchmarks/loss_lineage.py: stages read up to the step the next stage started from, offset end
to end, bad stage specs and files refused with a message (matplotlib's Agg backend, no display)."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def lineage():
    spec = importlib.util.spec_from_file_location("loss_lineage", ROOT / "benchmarks" / "loss_lineage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _csv(path: Path, rows: list[tuple[int, float]]) -> Path:
    path.write_text("step,loss,learning_rate\n" + "".join(f"{s},{loss},1e-4\n" for s, loss in rows))
    return path


def test_stages_are_cut_at_their_steps_and_offset_end_to_end(lineage, tmp_path, capsys):
    one = _csv(tmp_path / "one.csv", [(5, 0.5), (10, 0.2), (15, 0.9)])  # step 15 led elsewhere
    two = _csv(tmp_path / "two.csv", [(5, 0.3), (10, 0.1)])
    png = tmp_path / "fig" / "loss.png"
    assert lineage.main(["--out", str(png), f"a={one}:12", f"b={two}:10"]) == 0
    out = capsys.readouterr().out
    assert "| a | 0 → 12 | 0.500 (step 5) | 0.200 | 0.200 (step 10) |" in out
    assert "| b | 12 → 22 | 0.300 (step 5) | 0.100 | 0.100 (step 10) |" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("spec", ["a", "a=x.csv", "=x.csv:3", "a=x.csv:0", "a=x.csv:many"])
def test_a_stage_spec_without_label_file_and_steps_is_refused(lineage, spec):
    with pytest.raises(ValueError, match="LABEL=LOSS_CSV:STEPS"):
        lineage.parse_stage(spec)


def test_a_file_without_the_columns_or_rows_in_range_is_refused_with_its_name(lineage, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("epoch,value\n1,0.2\n")
    late = _csv(tmp_path / "late.csv", [(20, 0.2)])
    assert lineage.main(["--out", str(tmp_path / "x.png"), f"a={bad}:5"]) == 2
    assert "bad.csv: a loss.csv has the columns step and loss" in capsys.readouterr().err
    assert lineage.main(["--out", str(tmp_path / "x.png"), f"a={late}:5"]) == 2
    assert "late.csv: no logged step up to 5" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
