"""benchmarks/cypher_table.py: the table and the pairs of cypher-eval runs, read from results
files written here (no LM runs)."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load():
    spec = importlib.util.spec_from_file_location("cypher_table", ROOT / "benchmarks" / "cypher_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_run(path: Path, mode: str, correct: dict[str, bool], sent_back: tuple[str, ...] = ()):
    path.mkdir()
    (path / "meta.json").write_text(json.dumps({"lm": "llamacpp:qwen2.5-coder-1.5b+/x/lpg-v5.gguf",
                                                "answer_from_rows": mode}))
    kinds = {"q1": "collection", "q2": "collection", "q3": "count", "q4": "count"}
    (path / "results.jsonl").write_text("".join(json.dumps(
        {"id": i, "kind": kinds[i], "template": "t", "split": "office", "correct": ok,
         "sent_back": "it gives 1 of the 3 names" if i in sent_back else None, "questioned": False,
         "calls": 3 if i in sent_back else 2, "lm_seconds": 4.0}) + "\n" for i, ok in correct.items()))


def test_the_table_counts_each_run_and_kind_and_pairs_item_by_item(tmp_path, capsys):
    write_run(tmp_path / "free", "free", {"q1": False, "q2": True, "q3": True, "q4": False})
    write_run(tmp_path / "check", "check", {"q1": True, "q2": True, "q3": False, "q4": True}, sent_back=("q1",))
    assert load().main([str(tmp_path / "free"), str(tmp_path / "check"), "--compare"]) == 0
    out = capsys.readouterr().out
    assert "| free | lpg-v5.gguf | free | 4 | 2 (0.15–0.85) | 0 | 0 | 2.00 | 4.0 |" in out
    assert "| check | lpg-v5.gguf | check | 4 | 3 (0.30–0.95) | 1 | 0 | 2.25 | 4.0 |" in out
    assert "| collection | 1 of 2 | 2 of 2 |" in out and "| count | 1 of 2 | 1 of 2 |" in out
    assert "4 items both ran" in out and "check gains 2, loses 1" in out
    assert "solved by check only: q1, q4" in out and "solved by free only: q3" in out


def test_a_directory_without_results_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no results.jsonl"):
        load().main([str(tmp_path)])
