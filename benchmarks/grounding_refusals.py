#!/usr/bin/env python
"""False refusals of the planner's grounding check on ground-truth plans, per split: how many
steps of the benchmark's own plans the check would refuse (it must refuse none), and how many
instructions it reads a descriptor or a place in (lookplangraph.evaluation.grounding_audit).

    .venv/bin/python benchmarks/grounding_refusals.py                      # GraSIF's splits and dev
    .venv/bin/python benchmarks/grounding_refusals.py --generated 500      # and 500 generated tasks per building
                                                                           # kind, every task kind, grammar wording
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grasif.dataset import SPLIT_MODULES, default_data_dir, load_split
from grasif.generate import BUILDING_KINDS, KINDS, OPT_IN_KINDS, generate
from lookplangraph.evaluation.grounding_audit import false_refusals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="GraSIF build directory (default: the user's)")
    ap.add_argument("--generated", type=int, default=0,
                    help="also N generated tasks per building kind (every task kind, grammar wording, seed 1)")
    ap.add_argument("--no-places", action="store_true", help="the check without place descriptors")
    args = ap.parse_args(argv)
    data = args.data or default_data_dir()
    sets = {split: load_split(data, split, build_missing=True) for split in SPLIT_MODULES}
    for kind in BUILDING_KINDS if args.generated else ():
        sets[f"generated-{kind}"] = generate(kind, args.generated, seed=1, kinds=KINDS + OPT_IN_KINDS, wording="grammar")
    print(f"{'set':<20} {'tasks':>6} {'steps':>7} {'described':>10} {'placed':>7} {'refused':>8}")
    total = 0
    for name, tasks in sets.items():
        audits = [false_refusals(t, places=not args.no_places) for t in tasks]
        refused = [(a.task_id, step, fb) for a in audits for step, fb in a.refused]
        total += len(refused)
        print(f"{name:<20} {len(audits):>6} {sum(a.steps for a in audits):>7} "
              f"{sum(a.described for a in audits):>10} {sum(a.placed for a in audits):>7} {len(refused):>8}")
        for task_id, step, fb in refused:
            print(f"    {task_id}: {fb}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
