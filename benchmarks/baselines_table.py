"""The planners' comparison table from the directories of ``benchmarks/baselines_eval.sh``.

    .venv/bin/python benchmarks/baselines_table.py runs/bl static      # Markdown on stdout
    .venv/bin/python benchmarks/baselines_table.py runs/bl dynamic0
    .venv/bin/python benchmarks/baselines_table.py runs/gpu static --planners llm-as-p lookplangraph sg-rwr --own

One line per planner and split over the tasks that every planner run on that split finished (so
a run stopped early still compares like with like; a planner with no result there is "not run"): SR (strict), SR over changed nodes, the extra
with-correction verdict of static plans, APP, TPA, LM calls, seconds per task, the failure kinds;
the paper's Table IV figures (static) beside. ``--own`` adds a second table: each planner over
every task it finished (its own sample, larger than the common one when a run was cut short).
``--planners`` chooses the planners (default: the paper's six; ``sg-rwr`` and ``sg-rwr-step``, its
step mode, have no paper figure);
``--plot F.png`` draws SR and APP of the first table beside the paper's figures.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from statistics import mean

from grasif.metrics import summarize
from lookplangraph.evaluation.reproduce.tables import TABLE4
from lookplangraph.evaluation.runner import read_results, to_record

PLANNERS = ("llm-as-p", "llm+p", "sayplan", "sayplan-lite", "react", "lookplangraph")
KNOWN = PLANNERS + ("sg-rwr", "sg-rwr-step")  # sg-rwr-step: baselines_eval.sh with SGRWR_STEP=1
SPLITS = ("behavior", "virtualhome", "office")
ROW_KEY = {"llm-as-p": "llm_as_p", "llm+p": "llm_plus_p", "sayplan": "sayplan", "sayplan-lite": "sayplan_lite",
           "react": "react", "lookplangraph": "lookplangraph"}
HEADER = ("| split | planner | tasks | SR | SR chg. | SR w/ corr. | APP | TPA | LM calls/task | s/task | failure kinds | paper SR / APP / TPA |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(prefix: str, tag: str, planners: tuple[str, ...] = PLANNERS, own: bool = False,
         plot: str | None = None) -> int:
    paper = {r.key: r.paper for r in TABLE4.rows}
    runs_of = {split: {p: {r["task_id"]: r for r in read_results(_run_dir(prefix, tag, p, split) / "results.jsonl")}
                       for p in planners} for split in SPLITS}
    print(f"Tasks every planner finished ({prefix}_{tag}_*):\n")
    common = _table(runs_of, planners, tag, paper, common_only=True)
    if plot:
        _plot(common, planners, tag, paper, Path(plot), f"{prefix}_{tag}_*")
        print(f"\nplot: {plot}")
    if own:
        print(f"\nEach planner over every task it finished ({prefix}_{tag}_*):\n")
        _table(runs_of, planners, tag, paper, common_only=False)
    return 0


def _run_dir(prefix: str, tag: str, planner: str, split: str) -> Path:
    return Path(f"{prefix}_{tag}_{planner.replace('+', '_plus_')}_{split}")


def _table(runs_of: dict, planners: tuple[str, ...], tag: str, paper: dict, common_only: bool) -> dict:
    """Print the table; return ``{(split, planner): rows}`` (split ``all`` for the totals)."""
    shown: dict[tuple[str, str], list[dict]] = {}
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
            shown[split, p] = rows
            theirs = paper[ROW_KEY[p]].get(split) if tag == "static" and p in ROW_KEY else None
            print(_line(split, p, rows, theirs))
    for p in planners:
        if totals[p]:
            shown["all", p] = totals[p]
            print(_line("**all**", p, totals[p], None))
    return shown


def _plot(shown: dict, planners: tuple[str, ...], tag: str, paper: dict, out: Path, title: str) -> None:
    """SR and APP per planner, one row of panels per split (and all splits): our bars solid, the
    paper's Table IV figures (static runs only) hatched beside them; task counts under the bars."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    splits = [s for s in (*SPLITS, "all") if any((s, p) in shown for p in planners)]
    fig, axes = plt.subplots(len(splits), 2, squeeze=False, figsize=(11, 2.8 * len(splits) + 0.6))
    xs = range(len(planners))
    for i, split in enumerate(splits):
        ours = [summarize([to_record(r) for r in shown[split, p]]) if (split, p) in shown else None
                for p in planners]
        for j, metric in enumerate(("sr", "app")):
            ax = axes[i][j]
            ax.bar([x - 0.2 for x in xs], [getattr(s, metric) if s else 0 for s in ours], 0.4, label="ours",
                   color="#1f77b4")
            theirs = [paper[ROW_KEY[p]].get(split, {}).get(metric) if tag == "static" and p in ROW_KEY else None
                      for p in planners]
            if any(v is not None for v in theirs):
                ax.bar([x + 0.2 for x in xs], [v or 0 for v in theirs], 0.4, label="paper (Table IV)",
                       color="#ff7f0e", alpha=0.55, hatch="//")
            for x, s in zip(xs, ours):
                ax.text(x - 0.2, 0.01, "n/a" if s is None else f"n={len(shown[split, planners[x]])}",
                        ha="center", va="bottom", fontsize=6, rotation=90)
            ax.set_xticks(list(xs))
            ax.set_xticklabels(planners, rotation=30, ha="right", fontsize=8)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{split}: {'SR (strict)' if metric == 'sr' else 'APP'}", fontsize=9)
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Planners on the tasks all of them finished ({title})", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)


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
    ap.add_argument("--plot", metavar="PNG", help="also plot SR and APP of the first table to this file")
    a = ap.parse_args()
    sys.exit(main(a.prefix, a.tag, tuple(a.planners), a.own, a.plot))
