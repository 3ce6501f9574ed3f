"""The comparison table of issue 10 from the directories of ``benchmarks/baselines_eval.sh``.

    .venv/bin/python benchmarks/baselines_table.py runs/bl static      # Markdown on stdout
    .venv/bin/python benchmarks/baselines_table.py runs/bl dynamic0
    .venv/bin/python benchmarks/baselines_table.py runs/gpu static --planners llm-as-p lookplangraph sg-rwr --own

One line per planner and split over the tasks that every planner run on that split finished (so
a run stopped early still compares like with like; a planner with no result there is "not run"): SR (strict), SR over changed nodes, the extra
with-correction verdict of static plans, APP, TPA, LM calls, seconds per task, the failure kinds;
the paper's Table IV figures (static) beside. ``--own`` adds a second table: each planner over
every task it finished (its own sample, larger than the common one when a run was cut short).
``--planners`` chooses the planners (default: the paper's six; ``sg-rwr`` has no paper figure).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from statistics import mean

from grasif.metrics import summarize
from lookplangraph.reproduce.tables import TABLE4
from lookplangraph.runner import read_results, to_record

PLANNERS = ("llm-as-p", "llm+p", "sayplan", "sayplan-lite", "react", "lookplangraph")
KNOWN = PLANNERS + ("sg-rwr",)
SPLITS = ("behavior", "virtualhome", "office")
ROW_KEY = {"llm-as-p": "llm_as_p", "llm+p": "llm_plus_p", "sayplan": "sayplan", "sayplan-lite": "sayplan_lite",
           "react": "react", "lookplangraph": "lookplangraph"}
HEADER = ("| split | planner | tasks | SR | SR chg. | SR w/ corr. | APP | TPA | LM calls/task | s/task | failure kinds | paper SR / APP / TPA |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(prefix: str, tag: str, planners: tuple[str, ...] = PLANNERS, own: bool = False) -> int:
    paper = {r.key: r.paper for r in TABLE4.rows}
    runs_of = {split: {p: {r["task_id"]: r for r in read_results(_run_dir(prefix, tag, p, split) / "results.jsonl")}
                       for p in planners} for split in SPLITS}
    print(f"Tasks every planner finished ({prefix}_{tag}_*):\n")
    _table(runs_of, planners, tag, paper, common_only=True)
    if own:
        print(f"\nEach planner over every task it finished ({prefix}_{tag}_*):\n")
        _table(runs_of, planners, tag, paper, common_only=False)
    return 0


def _run_dir(prefix: str, tag: str, planner: str, split: str) -> Path:
    return Path(f"{prefix}_{tag}_{planner.replace('+', '_plus_')}_{split}")


def _table(runs_of: dict, planners: tuple[str, ...], tag: str, paper: dict, common_only: bool) -> None:
    print(HEADER)
    totals: dict[str, list[dict]] = {p: [] for p in planners}
    for split in SPLITS:
        runs = runs_of[split]
        ran = [p for p in planners if runs[p]]
        common = set.intersection(*(set(runs[p]) for p in ran)) if ran else set()
        if not common:
            continue
        for p in planners:
            if p not in ran:
                print(f"| {split} | {p} | not run | | | | | | | | | |")
                continue
            rows = [runs[p][t] for t in sorted(common if common_only else runs[p])]
            totals[p] += rows
            theirs = paper[ROW_KEY[p]].get(split) if tag == "static" and p in ROW_KEY else None
            print(_line(split, p, rows, theirs))
    for p in planners:
        if totals[p]:
            print(_line("**all**", p, totals[p], None))


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
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("prefix", help="the OUT_PREFIX given to baselines_eval.sh (e.g. runs/bl)")
    ap.add_argument("tag", help="static, dynamic0, dynamic1, ...")
    ap.add_argument("--planners", nargs="+", choices=KNOWN, default=PLANNERS)
    ap.add_argument("--own", action="store_true", help="also each planner over every task it finished")
    a = ap.parse_args()
    sys.exit(main(a.prefix, a.tag, tuple(a.planners), a.own))
