"""The error-injection curve: success rate against injected error rate in each correction mode
(``rules``, ``feedback``, ``none``: :mod:`lookplangraph.planners.lookplangraph`), over many tasks (the
:class:`~lookplangraph.evaluation.injection.ErrorInjectionPolicy` in the loop).

Output: ``curve.csv`` (one row per rate × mode: episodes, SR (strict), SR over the changed
nodes only, APP, mean LM calls per
task, injected errors per task, infeasible plan actions per task) and ``curve.png``/``curve.svg``
when matplotlib is installed.
"""

from __future__ import annotations

import csv
from pathlib import Path
from statistics import mean

from grasif.task import Task

from lookplangraph.evaluation.injection import ErrorInjectionPolicy
from lookplangraph.planners.config import CORRECTION_MODES, PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sim_adapters.graph_env import GraphEnvironment


def curve(tasks: list[Task], rates: list[float], seeds: int = 3, max_actions: int = 100, progress=None,
          modes: tuple[str, ...] = CORRECTION_MODES) -> list[dict]:
    """One row per (rate, correction mode): SR and APP over ``tasks`` × ``seeds`` episodes."""
    rows = []
    total = len(rates) * len(modes) * seeds * len(tasks)
    done = 0
    for rate in rates:
        for correction in modes:
            cfg = PlannerConfig(max_actions=max_actions, correction=correction)
            ok, ok_changed, prec, calls, injected, infeasible = [], [], [], [], [], []
            for seed in range(seeds):
                for task in tasks:
                    policy = ErrorInjectionPolicy(task, rate, seed)
                    r = run_episode(task, GraphEnvironment(task.graph, task.goal), policy, cfg)
                    ok.append(r.success)
                    ok_changed.append(r.success_changed_only)
                    prec.append(r.precision)
                    calls.append(r.lm_calls)
                    injected.append(policy.injected)
                    infeasible.append(len(r.infeasible))
                    done += 1
                    if progress and (done % 50 == 0 or done == total):
                        progress(done, total, None)
            rows.append({"rate": rate, "correction": correction, "episodes": len(ok), "sr": mean(ok),
                         "sr_changed_only": mean(ok_changed),
                         "app": mean(prec), "calls_per_task": mean(calls), "errors_per_task": mean(injected),
                         "infeasible_per_task": mean(infeasible)})
    return rows


def curve_table(rows: list[dict]) -> str:
    head = (f"{'rate':>6}{'correction':>12}{'episodes':>10}{'SR':>8}{'SR chg.':>9}{'APP':>8}{'calls/task':>12}"
            f"{'errors/task':>13}"
            f"{'infeasible/task':>17}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['rate']:>6.2f}{r['correction']:>12}{r['episodes']:>10}{r['sr']:>8.3f}"
                     f"{r['sr_changed_only']:>9.3f}{r['app']:>8.3f}{r['calls_per_task']:>12.2f}{r['errors_per_task']:>13.2f}"
                     f"{r['infeasible_per_task']:>17.2f}")
    return "\n".join(lines)


def write_curve(rows: list[dict], out: Path) -> None:
    """``out/curve.csv`` and, with matplotlib, ``out/curve.png`` and ``.svg``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "curve.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    try:
        plot_curve(rows, out / "curve")
    except ImportError:
        return


def read_curve(path: Path) -> list[dict]:
    """The rows of a ``curve.csv`` (numbers as numbers)."""
    with open(path, newline="") as f:
        return [{k: (v if k == "correction" else int(v) if k == "episodes" else float(v)) for k, v in row.items()}
                for row in csv.DictReader(f)]


def plot_curve(rows: list[dict], stem: Path) -> None:
    """SR against injected error rate, one line per correction mode: ``stem``.png and .svg
    (``ImportError`` without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    labels = {"rules": "rules (feedback + correction)", "feedback": "feedback only", "none": "none (paper's ablation)"}
    for mode, style in zip(labels, ("o-", "s--", "^:")):
        pts = [(r["rate"], r["sr"]) for r in rows if r["correction"] == mode]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=labels[mode])
    ax.set_xlabel("injected error rate (per ground-truth step)")
    ax.set_ylabel("success rate (strict)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(title="SGS correction")
    ax.set_title(f"Error injection over {rows[0]['episodes']} episodes per point")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(stem.with_suffix(f".{ext}"), dpi=120)
    plt.close(fig)
