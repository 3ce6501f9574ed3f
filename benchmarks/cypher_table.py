"""The table of ``lookplangraph cypher-eval`` runs: one row per run, one column per run by kind, and pairs.

    .venv/bin/python benchmarks/cypher_table.py runs/cy_dev_v5 runs/cy_dev_cand runs/cy_dev_cand_check
    .venv/bin/python benchmarks/cypher_table.py runs/cy_dev_v5 runs/cy_dev_cand --compare --by template

Each argument is a ``cypher-eval --out`` directory (its ``results.jsonl`` and ``meta.json``). Per
run: the LM and ``answer_from_rows`` it ran with, the items, those answered correctly with the 95 %
Wilson interval, the answers sent back once (``sent_back``: an unusable answer or, with ``check``,
one the rows do not give) and questioned (an answer right after an empty result), LM calls and LM
seconds per item (only indicative on a shared machine). Then solved by ``--by`` (the item's
``kind``, ``template`` or ``split``) for every run. ``--compare`` pairs the first run with each
other item by item (:mod:`lookplangraph.evaluation.paired`: gains, losses, the sign test, the
items), on the items both ran. Markdown on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lookplangraph.evaluation.paired import compare, wilson  # noqa: E402
from lookplangraph.evaluation.runner import read_results  # noqa: E402

BY = ("kind", "template", "split")


def read_run(path: Path) -> tuple[dict, list[dict]]:
    """``meta.json`` (empty when absent) and the rows of ``results.jsonl`` of one run, read as
    ``cypher-eval`` reads them to resume; SystemExit naming the directory when it holds no results."""
    if not (path / "results.jsonl").is_file():
        raise SystemExit(f"{path}: no results.jsonl (not a cypher-eval --out directory)")
    meta_file = path / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    return meta, read_results(path / "results.jsonl")


def _lm(meta: dict) -> str:
    lm = str(meta.get("lm", "?"))
    return lm.rsplit("/", 1)[-1] if "+" in lm else lm


def run_row(name: str, meta: dict, rows: list[dict]) -> str:
    n = len(rows)
    solved = sum(bool(r.get("correct")) for r in rows)
    lo, hi = wilson(solved, n)
    calls = mean(r.get("calls") or 0 for r in rows) if rows else 0.0
    lm_s = mean(r.get("lm_seconds") or 0.0 for r in rows) if rows else 0.0
    return (f"| {name} | {_lm(meta)} | {meta.get('answer_from_rows', '?')} | {n} | {solved} ({lo:.2f}–{hi:.2f}) | "
            f"{sum(bool(r.get('sent_back')) for r in rows)} | {sum(bool(r.get('questioned')) for r in rows)} | "
            f"{calls:.2f} | {lm_s:.1f} |")


def by_table(names: list[str], runs: list[list[dict]], by: str) -> list[str]:
    counts: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0] for _ in runs])
    for i, rows in enumerate(runs):
        for r in rows:
            c = counts[str(r.get(by, "?"))][i]
            c[0] += bool(r.get("correct"))
            c[1] += 1
    lines = [f"| {by} | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key in sorted(counts):
        lines.append(f"| {key} | " + " | ".join(f"{s} of {n}" if n else "not run" for s, n in counts[key]) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="cypher-eval --out directories")
    ap.add_argument("--by", choices=BY, default="kind", help="what the second table groups items by (default: kind)")
    ap.add_argument("--compare", action="store_true", help="pair the first run with each other one, item by item")
    args = ap.parse_args(argv)
    loaded = [read_run(p) for p in args.runs]
    names = [p.name for p in args.runs]
    print("| run | LM | answers | items | correct (95 % interval) | sent back | questioned | LM calls/item | LM s/item |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (meta, rows) in zip(names, loaded):
        print(run_row(name, meta, rows))
    print()
    print("\n".join(by_table(names, [rows for _, rows in loaded], args.by)))
    if args.compare:
        first = {r["id"]: bool(r.get("correct")) for r in loaded[0][1]}
        for name, (_, rows) in zip(names[1:], loaded[1:]):
            print()
            print(compare(first, {r["id"]: bool(r.get("correct")) for r in rows}).text(names[0], name)
                  .replace(" tasks both finished", " items both ran"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
