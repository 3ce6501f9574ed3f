"""The training loss of an adapter trained in stages, end to end: one plot over the stages'
``loss.csv`` files (``distill train`` writes one per run: ``step,loss,learning_rate``), each
stage's steps offset by the steps of the stages before it (run by hand, not a test).

A stage is ``LABEL=LOSS_CSV:STEPS``: the stage's rows up to step STEPS (the step whose adapter the
next stage started from; rows after it led elsewhere and are left out). Writes the PNG (stage
boundaries drawn, each stage labelled) and prints a table of each stage's first, lowest and last
logged loss.

    .venv/bin/python benchmarks/loss_lineage.py --out docs/figures/lpg_v6_loss.png \\
        --title "lpg-v6: lpg-v5 trained on 2-core CPUs in three stages" \\
        conv-v1=data/training/conv-v1/run/loss.csv:63 \\
        v14=data/training/mix-v14/run/loss.csv:112 \\
        v17=data/training/mix-v17/run/loss.csv:98
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path


def parse_stage(text: str) -> tuple[str, Path, int]:
    """``LABEL=LOSS_CSV:STEPS`` as (label, path, steps); raises ``ValueError`` naming the form."""
    label, sep, rest = text.partition("=")
    path, colon, steps = rest.rpartition(":")
    if not (sep and colon and label and path and steps.isdigit() and int(steps) > 0):
        raise ValueError(f"a stage is LABEL=LOSS_CSV:STEPS (steps > 0), not {text!r}")
    return label, Path(path), int(steps)


def read_loss(path: Path, steps: int) -> list[tuple[int, float]]:
    """The (step, loss) rows of a ``loss.csv`` up to ``steps``; raises ``ValueError`` for a file
    without the ``step`` and ``loss`` columns or without a row in range."""
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        if not {"step", "loss"} <= set(reader.fieldnames or ()):
            raise ValueError(f"{path}: a loss.csv has the columns step and loss, not {reader.fieldnames}")
        rows = [(int(r["step"]), float(r["loss"])) for r in reader if int(r["step"]) <= steps]
    if not rows:
        raise ValueError(f"{path}: no logged step up to {steps}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stages", nargs="+", metavar="LABEL=LOSS_CSV:STEPS", help="the stages, in training order")
    ap.add_argument("--out", required=True, type=Path, help="the PNG to write")
    ap.add_argument("--title", default="training loss by stage")
    args = ap.parse_args(argv)
    try:
        stages = [(label, steps, read_loss(path, steps)) for label, path, steps in map(parse_stage, args.stages)]
    except (ValueError, OSError) as e:
        print(f"loss_lineage: {e}", file=sys.stderr)
        return 2

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=120)
    print("| stage | steps (overall) | first logged loss | lowest | last logged |")
    print("|---|---|---|---|---|")
    offset = 0
    for label, steps, rows in stages:
        xs = [offset + s for s, _ in rows]
        ys = [loss for _, loss in rows]
        ax.plot(xs, ys, lw=1.5, marker=".", label=label)
        if offset:
            ax.axvline(offset, color="grey", lw=0.8, ls="--")
        print(f"| {label} | {offset} → {offset + steps} | {ys[0]:.3f} (step {rows[0][0]}) | {min(ys):.3f} | "
              f"{ys[-1]:.3f} (step {rows[-1][0]}) |")
        offset += steps
    ax.set_xlabel("optimizer step, the stages end to end")
    ax.set_ylabel("loss (answer tokens)")
    ax.set_title(args.title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out)
    plt.close(fig)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
