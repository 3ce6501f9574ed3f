"""The table of ``benchmarks/lm_eval.sh`` runs: one row per run and split, one over the test sample, and the dev set apart.

    .venv/bin/python benchmarks/lm_eval_table.py runs/lm_eval runs/lm_eval_05b runs/lm_eval_dyn0
    .venv/bin/python benchmarks/lm_eval_table.py runs/lm_eval runs/lm_eval_typed --compare

Each argument is the OUT prefix given to ``lm_eval.sh`` (its directories ``OUT_vh``, ``OUT_bh``
and ``OUT_office``; a missing one is "not run"; ``OUT_dev`` of ``benchmarks/dev_eval.sh`` is shown
apart, never in the test sample's total). Per row: the episodes finished, strict SR with
its 95 % Wilson interval, APP,
LM calls per task, how episodes ended (``done`` / ``max_actions`` / ``unresolved`` / other), prompt
tokens per call with the share the prefix cache evaluated once, and seconds per decision (median
and 90th percentile over the decisions in the run's traces; where a run has no traces, the median
over episodes of LM seconds / LM calls; only indicative on a shared machine). A dynamic run
(episodes with ``moves``) gets a row more per part: the episodes whose object was moved. Markdown on stdout.
``--compare`` then pairs the first run with each other one task by task, on the test sample and on
dev separately
(:mod:`lookplangraph.evaluation.paired`: gains, losses, the sign test, the tasks), with a warning line
first for each split the two ran on different GraSIF builds of (the ``grasif_build`` each run's
``config.json`` records: :func:`lookplangraph.evaluation.runner.build_warnings`), as their task
ids then name other tasks.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from statistics import mean, median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lookplangraph.evaluation.paired import compare, outcomes, wilson  # noqa: E402
from lookplangraph.evaluation.runner import build_warnings, read_results, recorded_builds  # noqa: E402

SPLITS = (("vh", "VirtualHome"), ("bh", "BEHAVIOR"), ("office", "office"))
DEV = ("dev", "dev (chooses; not in the total)")
ENDS = ("done", "max_actions", "unresolved")
HEADER = ("| run | part | tasks | SR (strict; 95 % interval) | APP | LM calls/task | ends (done / max_actions / unresolved / other) "
          "| prompt tokens/call (cached) | s/decision (p50 / p90) |\n|---|---|---|---|---|---|---|---|---|")


def decision_seconds(run_dir: Path) -> list[float]:
    """The seconds of every LM decision in ``run_dir/traces/*.jsonl`` (empty without traces)."""
    out = []
    for trace in sorted((run_dir / "traces").glob("*.jsonl")) if (run_dir / "traces").is_dir() else ():
        for line in trace.read_text().splitlines():
            step = json.loads(line)
            if step.get("seconds") is not None and step.get("prompt_tokens"):
                out.append(float(step["seconds"]))
    return out


def quantile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def row(run: str, part: str, results: list[dict], decisions: list[float] | None = None) -> str:
    """One Markdown row over ``results`` (rows of ``results.jsonl``) and the seconds of their
    ``decisions`` (from the traces; None: estimated from the results)."""
    if not results:
        return f"| {run} | {part} | not run | | | | | | |"
    ends = Counter(r["termination"] for r in results)
    other = sum(n for kind, n in ends.items() if kind not in ENDS)
    successes = sum(bool(r["success"]) for r in results)
    calls = sum(r["lm_calls"] for r in results)
    prompt = sum(r.get("prompt_tokens", 0) for r in results)
    cached = sum(r.get("cached_tokens", 0) for r in results)
    per_decision = [r["lm_seconds"] / r["lm_calls"] for r in results if r.get("lm_calls")]
    tokens = f"{prompt / calls:.0f} ({cached / calls:.0f})" if calls else "–"
    if decisions:
        seconds = f"{median(decisions):.1f} / {quantile(decisions, 0.9):.1f}"
    else:
        seconds = f"{median(per_decision):.1f} / –" if per_decision else "–"
    lo, hi = wilson(successes, len(results))
    return (f"| {run} | {part} | {len(results)} | {successes / len(results):.3f} ({successes}; {lo:.2f}–{hi:.2f}) | "
            f"{mean(r['precision'] for r in results):.3f} | {calls / len(results):.2f} | "
            f"{' / '.join(str(ends.get(k, 0)) for k in ENDS)} / {other} | {tokens} | {seconds} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefixes", nargs="+", help="OUT prefixes of lm_eval.sh runs")
    ap.add_argument("--compare", action="store_true",
                    help="also pair the first run with each other one, task by task (gains, losses, sign test)")
    args = ap.parse_args()
    print(HEADER)
    runs, builds = {}, {}
    for prefix in args.prefixes:
        everything, seconds = [], []
        builds[Path(prefix).name] = {split: build for suffix in (*(s for s, _ in SPLITS), DEV[0])
                                     for split, build in recorded_builds(Path(f"{prefix}_{suffix}")).items()}
        for suffix, part in SPLITS:
            path = Path(f"{prefix}_{suffix}") / "results.jsonl"
            results = read_results(path) if path.exists() else []
            decisions = decision_seconds(path.parent)
            everything += results
            seconds += decisions
            print(row(Path(prefix).name, part, results, decisions))
        print(row(Path(prefix).name, "**all (test)**", everything, seconds))
        if moved := [r for r in everything if r.get("moves")]:
            print(row(Path(prefix).name, "all (test), object moved", moved))
        dev_path = Path(f"{prefix}_{DEV[0]}") / "results.jsonl"
        dev = read_results(dev_path) if dev_path.exists() else []
        if dev:
            print(row(Path(prefix).name, DEV[1], dev, decision_seconds(dev_path.parent)))
        if moved := [r for r in dev if r.get("moves")]:
            print(row(Path(prefix).name, "dev, object moved", moved))
        runs[Path(prefix).name] = {"test": outcomes(everything), "dev": outcomes(dev)}
    if args.compare and len(runs) > 1:
        first, *others = runs
        for other in others:
            for line in build_warnings({first: builds[first], other: builds[other]}):
                print(f"\n{line}")
            for part in ("dev", "test"):
                if runs[first][part] and runs[other][part]:
                    pair = compare(runs[first][part], runs[other][part])
                    print(f"\n{part}: {first} against {other}:\n" + pair.text(first, other))
    return 0


if __name__ == "__main__":
    sys.exit(main())
