"""Success against low-level failure rate (sim_adapters/failures.py) on the 47-task held-out sample.

For each planner and each rate, ``lookplangraph eval`` (the same :func:`evaluate`) runs the 12
VirtualHome, 6 BEHAVIOR and 29 office tasks of ``benchmarks/lm_eval.sh`` (grasif.heldout's
evaluation tasks) with ``--failures RATE --failure-seed SEED`` into ``OUT/PLANNER_rRATE_SPLIT``
(resumable: rerun to continue), then writes ``OUT/failure_curve.csv``, ``OUT/failure_curve.md``
and ``OUT/failure_curve.png``: strict SR per planner and rate, the failures drawn, the share of
failures *repaired* (the planner made the same attempt again and it went through:
``EpisodeResult.low_level_repaired``, whatever became of the episode) and the share *recovered*
(those in episodes that still succeeded).

The default LM is the privileged EXPERT (a harness tool that reads the true graph, never a model
row): it shows what recovery the harness allows. With ``--lm llamacpp:qwen2.5-coder-1.5b`` (hours
of CPU per planner and rate) the same table is the embedded model's. A model's replies are kept in
one reply cache per planner, ``OUT/PLANNER_lm_cache.jsonl`` (:mod:`lookplangraph.lm.cache`;
``--no-cache`` turns it off): greedy decoding answers the same prompt the same way, so an episode
at a higher rate replays the calls of the same episode at a lower rate until its first failure
makes the prompts differ, and only the calls after it cost model time. Run the rates in rising
order (the default) to profit from it.

    .venv/bin/python benchmarks/failure_curve.py runs/failures_expert
    .venv/bin/python benchmarks/failure_curve.py runs/failures_1_5b --lm llamacpp:qwen2.5-coder-1.5b \\
        --planners lookplangraph,react --max-actions 12
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import dataset, heldout  # noqa: E402
from lookplangraph.evaluation.runner import evaluate, failure_counts  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402

PLANNERS = ("lookplangraph", "react", "sayplan", "sayplan-lite", "llm-as-p")
RATES = (0.0, 0.05, 0.1, 0.2, 0.3)


def sample(data_dir: Path) -> dict[str, list]:
    """The 47 evaluation tasks by split (a split not built yet is built first, as ``eval`` does)."""
    dataset.ensure(data_dir, list(dataset.SPLIT_MODULES))
    out = {}
    for split, ids in (("virtualhome", heldout.EVAL_VIRTUALHOME), ("behavior", heldout.EVAL_BEHAVIOR)):
        by_id = {t.id: t for t in dataset.load_split(data_dir, split)}
        out[split] = [by_id[i] for i in ids]
    out["office"] = dataset.load_split(data_dir, "office")
    return out


def lm_factory(spec: str, cache: Path | None):
    """The planners' LM: the expert, or a model whose replies go through the reply cache ``cache``."""
    if spec == "expert":
        from lookplangraph.distill.teacher.expert import Expert

        return Expert
    from lookplangraph.lm.pool import lm_factory as make

    return make(spec, {}, cache=cache)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--lm", default="expert", help="the planners' LM (default: the privileged expert)")
    ap.add_argument("--planners", default=",".join(PLANNERS))
    ap.add_argument("--rates", default=",".join(str(r) for r in RATES))
    ap.add_argument("--seed", type=int, default=0, help="the failures' seed (default 0)")
    ap.add_argument("--max-actions", type=int, default=40, help="accepted actions per episode (default 40: room "
                                                                 "to recover; lm_eval.sh uses 12)")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                    help="a model's replies in one cache per planner, shared by the rates (default on; the expert "
                         "has none)")
    args = ap.parse_args()
    data_dir = args.data_dir or dataset.default_data_dir()
    tasks = sample(data_dir)
    planners = [p for p in args.planners.split(",") if p]
    rates = [float(r) for r in args.rates.split(",") if r]
    cfg = PlannerConfig(max_actions=args.max_actions)
    rows = []
    for planner in planners:
        cache = args.out / f"{planner}_lm_cache.jsonl" if args.cache and args.lm != "expert" else None
        for rate in rates:
            results = []
            for split, split_tasks in tasks.items():
                out = args.out / f"{planner}_r{rate:g}_{split}"
                results += evaluate(split_tasks, lm_factory(args.lm, cache), cfg, out, planner=planner, failures=rate,
                                    failure_seed=args.seed, log=lambda line: print(line, file=sys.stderr),
                                    meta={"lm": args.lm, "planner": planner, "failures": rate,
                                          "failure_seed": args.seed, "max_actions": args.max_actions})
            counts = failure_counts(results)
            drawn, repaired, recovered = counts["drawn"], counts["repaired"], counts["recovered"]
            in_domain = [r for r in results if r["split"] != "office"]
            rows.append({"planner": planner, "rate": rate, "tasks": len(results),
                         "sr": sum(r["success"] for r in results) / len(results),
                         "sr_vh_bh": sum(r["success"] for r in in_domain) / len(in_domain),
                         "sr_office": sum(r["success"] for r in results if r["split"] == "office") / len(tasks["office"]),
                         "failures": drawn, "repaired": repaired / drawn if drawn and repaired is not None else None,
                         "recovered": recovered / drawn if drawn else None})
            print(f"{planner} rate {rate:g}: SR {rows[-1]['sr']:.3f}, {drawn} failures, "
                  f"repaired {share(rows[-1]['repaired'])}, recovered {share(rows[-1]['recovered'])}", flush=True)
    write(rows, args.out, args.lm)
    return 0


def share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def write(rows: list[dict], out: Path, lm: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "failure_curve.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"LM: {lm}{' (privileged harness tool, not a model)' if lm == 'expert' else ''}", "",
             "| planner | failure rate | tasks | SR | SR VirtualHome+BEHAVIOR | SR office | failures drawn | repaired "
             "| recovered |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['planner']} | {r['rate']:g} | {r['tasks']} | {r['sr']:.3f} | {r['sr_vh_bh']:.3f} | "
                     f"{r['sr_office']:.3f} | {r['failures']} | {share(r['repaired'])} | {share(r['recovered'])} |")
    (out / "failure_curve.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for planner in dict.fromkeys(r["planner"] for r in rows):
        mine = [r for r in rows if r["planner"] == planner]
        ax.plot([r["rate"] for r in mine], [r["sr"] for r in mine], marker="o", label=planner)
    ax.set_xlabel("low-level failure rate (each kind)")
    ax.set_ylabel("strict SR, 47 held-out tasks")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"Success against failure rate ({lm})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "failure_curve.png", dpi=120)


if __name__ == "__main__":
    sys.exit(main())
