"""The privileged expert's two searches against each other: SR, APP and mean actions
at several action limits, on the held-out evaluation tasks (the 29 office tasks and the 18
VirtualHome/BEHAVIOR tasks of ``benchmarks/lm_eval.sh``), static and in each dynamic mode.

The expert is a harness and data tool that reads the goal from the ground truth (never a model
row): the table says how well its *search* finds moved objects, which is what a student trained
on its episodes learns. ``expert`` searches in belief space (the object prior, distance, the
instruction's hints); ``expert-oracle`` is the older room-by-room search.

    .venv/bin/python benchmarks/expert_search.py runs/expert_search
    .venv/bin/python benchmarks/expert_search.py runs/expert_search --limits 12,20,30 --seed 1
    .venv/bin/python benchmarks/expert_search.py runs/expert_recall --experts expert-view --recall named
    .venv/bin/python benchmarks/expert_search.py runs/expert_assets --experts expert-view --recall named-assets

Writes ``OUT/expert_search.csv`` and ``OUT/expert_search.md``; each cell's episodes are in
``OUT/<expert>_<mode>_a<limit>_<set>/`` (``lookplangraph eval``'s files; resumable).
"""

from __future__ import annotations

import argparse
import csv
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import dataset, heldout  # noqa: E402
from lookplangraph.distill.teacher.expert import expert_for  # noqa: E402
from lookplangraph.distill.teacher.policy import TEACHERS  # noqa: E402
from lookplangraph.evaluation.runner import evaluate  # noqa: E402
from lookplangraph.planners.config import RECALL_MODES, PlannerConfig  # noqa: E402

MODES = ("static", "paper", "anywhere")


def task_sets(data_dir: Path) -> dict[str, list]:
    """The evaluation tasks: ``office`` (29) and ``vh+bh`` (the 18 of the held-out sample)."""
    held = heldout.evaluation_tasks(data_dir)
    return {"office": [t for t in held if t.split == "office"], "vh+bh": [t for t in held if t.split != "office"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--data-dir", type=Path, default=None, help="a GraSIF build (default: the default build)")
    ap.add_argument("--limits", default="12,20,30", help="action limits (default 12,20,30)")
    ap.add_argument("--seed", type=int, default=0, help="the dynamic-mode seed (default 0)")
    ap.add_argument("--experts", default="expert,expert-oracle,expert-view",
                    help=f"of {', '.join(TEACHERS)}; default expert,expert-oracle,expert-view")
    ap.add_argument("--modes", default=",".join(MODES), help=f"default {','.join(MODES)}")
    ap.add_argument("--recall", default="here", choices=RECALL_MODES,
                    help="the planner's recall setting the expert plays under (default here; named: the view also "
                         "recalls the instruction's classes from other rooms, named-assets: and their assets there; "
                         "expert-view uses what the view shows)")
    args = ap.parse_args(argv)
    limits = [int(x) for x in args.limits.split(",")]
    sets = task_sets(args.data_dir or dataset.default_data_dir())
    rows = []
    for spec in args.experts.split(","):
        for mode in args.modes.split(","):
            for limit in limits:
                for name, tasks in sets.items():
                    label = spec if args.recall == "here" else f"{spec}+recall-{args.recall}"
                    out = args.out / f"{label}_{mode}_a{limit}_{name.replace('+', '')}"
                    results = evaluate(tasks, partial(expert_for, spec),
                                       PlannerConfig(max_actions=limit, recall=args.recall),
                                       out, dynamic_seed=None if mode == "static" else args.seed,
                                       dynamic_mode="paper" if mode == "static" else mode)
                    n = len(results)
                    ok = [r for r in results if r["success"]]
                    app = sum(r["precision"] for r in results) / n  # the episode's APP (grasif.metrics)
                    rows.append({"expert": label, "mode": mode, "max_actions": limit, "tasks": name, "n": n,
                                 "sr": len(ok) / n, "app": app,
                                 "mean_actions": sum(len(r["actions"]) for r in results) / n,
                                 "mean_actions_success": sum(len(r["actions"]) for r in ok) / max(len(ok), 1)})
                    r = rows[-1]
                    print(f"{label:<14} {mode:<9} a{limit:<3} {name:<7} SR {r['sr']:.3f} ({len(ok)}/{n})  APP "
                          f"{r['app']:.3f}  actions {r['mean_actions']:.1f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "expert_search.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"dynamic seed {args.seed}; SR (successes/tasks), APP, mean actions per episode (all / successful)", "",
             "| expert | mode | max actions | tasks | SR | APP | actions | actions (successes) |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['expert']} | {r['mode']} | {r['max_actions']} | {r['tasks']} | {r['sr']:.3f} "
              f"({round(r['sr'] * r['n'])}/{r['n']}) | {r['app']:.3f} | {r['mean_actions']:.1f} | "
              f"{r['mean_actions_success']:.1f} |" for r in rows]
    (args.out / "expert_search.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
