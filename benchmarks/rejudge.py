"""Judge finished evaluations again under today's goals, and compare them in one table (run by
hand, not a test).

An evaluation written by an older version of the project (before side effects counted, say)
still holds each episode's executed primitive steps. For static-mode episodes (no ``--dynamic``)
this replays them from the task's initial graph with the SGS, checks the task's goal as the
current data directory has it (strict success, changed-only success, precision) and counts the
infeasible plan actions the episode recorded. Dynamic-mode runs are refused: their initial graph
is not the task's.

    .venv/bin/python benchmarks/rejudge.py runs/A runs/B ... [--data-dir DIR] [--markdown]

Columns: tasks, SR (strict), SR (changed nodes only), APP, episodes ended by unresolved replies,
LM calls per task, accepted actions per task, seconds per LM decision.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import mean

from grasif import dataset
from grasif.goals import evaluate_goal
from lookplangraph.evaluation.runner import read_results
from sgs.actions import parse_action
from sgs.simulator import Infeasible, apply


def rejudge(row: dict, task) -> dict:
    """Strict and changed-only success and precision of one results row, replayed on ``task``."""
    if row.get("config", {}).get("dynamic") or row.get("moves"):
        raise ValueError(f"{row['task_id']}: a dynamic-mode episode cannot be replayed from the task's graph")
    graph = task.graph
    for step in row["executed"]:
        try:
            graph = apply(graph, parse_action(step))
        except Infeasible as exc:  # the environment executed it, so the replay must too
            raise ValueError(f"{row['task_id']}: replaying {step} failed: {exc}") from None
    goal = evaluate_goal(task.goal, graph, task.graph)
    clean = not row.get("infeasible")
    return {"success": goal.success and clean, "success_changed_only": goal.success_changed_only and clean,
            "precision": goal.precision}


def table(runs: dict[str, list[tuple[dict, dict]]], markdown: bool) -> str:
    head = ["run", "tasks", "SR", "SR chg.", "APP", "unresolved", "calls/task", "actions/task", "s/decision"]
    rows = []
    for label, pairs in runs.items():
        calls = sum(r["lm_calls"] for r, _ in pairs)
        rows.append([
            label, str(len(pairs)),
            f"{mean(j['success'] for _, j in pairs):.3f}", f"{mean(j['success_changed_only'] for _, j in pairs):.3f}",
            f"{mean(j['precision'] for _, j in pairs):.3f}",
            str(sum(r["termination"] == "unresolved" for r, _ in pairs)),
            f"{calls / len(pairs):.2f}", f"{mean(len(r['actions']) for r, _ in pairs):.2f}",
            f"{sum(r['lm_seconds'] for r, _ in pairs) / calls:.1f}" if calls else "-",
        ])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(out)
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = lambda r: "  ".join(x.ljust(w) if i == 0 else x.rjust(w) for i, (x, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(head), "-" * len(fmt(head))] + [fmt(r) for r in rows])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="evaluation directories (with results.jsonl)")
    ap.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--label", action="append", help="LABEL=DIR1,DIR2: one row over several directories")
    args = ap.parse_args()
    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    cache: dict[str, dict] = {}
    runs: dict[str, list[tuple[dict, dict]]] = {}
    groups = [(Path(d).name, [d]) for d in args.dirs]
    for spec in args.label or []:
        label, _, dirs = spec.partition("=")
        groups.append((label, dirs.split(",")))
    for label, dirs in groups:
        pairs = []
        for d in dirs:
            rows = read_results(Path(d) / "results.jsonl")
            if not rows:
                print(f"{d}: no finished episodes", file=sys.stderr)
                return 2
            for row in rows:
                split = row["split"]
                if split not in cache:
                    cache[split] = {t.id: t for t in dataset.load_split(root, split)}
                pairs.append((row, rejudge(row, cache[split][row["task_id"]])))
        runs[label] = pairs
    print(table(runs, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
