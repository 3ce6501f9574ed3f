"""The comparison table of issue 10 from the directories of ``benchmarks/baselines_eval.sh``.

    .venv/bin/python benchmarks/baselines_table.py runs/bl static      # Markdown on stdout
    .venv/bin/python benchmarks/baselines_table.py runs/bl dynamic0

One line per planner and split over the tasks that every planner run on that split finished (so
a run stopped early still compares like with like; a planner with no result there is "not run"): SR (strict), SR over changed nodes, the extra
with-correction verdict of static plans, APP, TPA, LM calls, seconds per task, the failure kinds;
the paper's Table IV figures (static) beside.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from statistics import mean

from grasif.metrics import summarize
from lookplangraph.reproduce.tables import TABLE4
from lookplangraph.runner import read_results, to_record

PLANNERS = ("llm-as-p", "llm+p", "sayplan", "sayplan-lite", "react", "lookplangraph")
SPLITS = ("behavior", "virtualhome", "office")
ROW_KEY = {"llm-as-p": "llm_as_p", "llm+p": "llm_plus_p", "sayplan": "sayplan", "sayplan-lite": "sayplan_lite",
           "react": "react", "lookplangraph": "lookplangraph"}


def main(prefix: str, tag: str) -> int:
    paper = {r.key: r.paper for r in TABLE4.rows}
    print("| split | planner | tasks | SR | SR chg. | SR w/ corr. | APP | TPA | LM calls/task | s/task | failure kinds | paper SR / APP / TPA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    totals: dict[str, list[dict]] = {p: [] for p in PLANNERS}
    for split in SPLITS:
        runs = {}
        for p in PLANNERS:
            d = Path(f"{prefix}_{tag}_{p.replace('+', '_plus_')}_{split}")
            runs[p] = {r["task_id"]: r for r in read_results(d / "results.jsonl")}
        ran = [p for p in PLANNERS if runs[p]]
        common = set.intersection(*(set(runs[p]) for p in ran)) if ran else set()
        if not common:
            continue
        for p in PLANNERS:
            if p not in ran:
                print(f"| {split} | {p} | not run | | | | | | | | | |")
                continue
            rows = [runs[p][t] for t in sorted(common)]
            totals[p] += rows
            print(_line(split, p, rows, paper[ROW_KEY[p]].get(split) if tag == "static" else None))
    for p in PLANNERS:
        if totals[p]:
            print(_line("**all**", p, totals[p], None))
    return 0


def _line(split: str, planner: str, rows: list[dict], paper: dict | None) -> str:
    s = summarize([to_record(r) for r in rows])
    corr = [r["success_with_correction"] for r in rows if r.get("success_with_correction") is not None]
    kinds = Counter(r.get("failure") or r.get("termination") for r in rows if not r["success"])
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    theirs = f"{paper['sr']:.2f} / {paper['app']:.2f} / {paper['tpa']:.0f}" if paper else ""
    return (f"| {split} | {planner} | {len(rows)} | {s.sr:.3f} | {fmt(s.sr_changed_only)} | "
            f"{fmt(mean(corr)) if corr else '–'} | {s.app:.3f} | {'–' if s.tpa is None else f'{s.tpa:.0f}'} | "
            f"{mean(r['lm_calls'] for r in rows):.1f} | {mean(r['wall_s'] for r in rows):.0f} | "
            f"{', '.join(f'{k} {n}' for k, n in kinds.most_common())} | {theirs} |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
