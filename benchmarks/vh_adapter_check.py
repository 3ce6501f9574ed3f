"""Every VirtualHome ground-truth plan through the VirtualHome adapter (run by hand, not a test;
``tests/test_vh_adapter.py`` checks a sample of ~30 tasks).

For each task of the split (the paper selection, 308 tasks) the ground-truth plan is validated
by GraSIF's validator (the SGS; strict success), and the SGS's primitive steps run one by one in
VirtualHome's evolving graph through :class:`sim_adapters.virtualhome.VirtualHomeEnvironment`; the
task's goal is then judged on VirtualHome's final graph (strict, and every step accepted). Prints
the agreement of the two verdicts, every disagreement with VirtualHome's refusal, how many final
graphs are identical, and the time.

    .venv/bin/python benchmarks/vh_adapter_check.py [--data-dir DIR] [--dynamic SEED]

``--data-dir``: a GraSIF build (default: the tasks are built from the installed package).
``--dynamic SEED``: also start each task in dynamic mode and check that VirtualHome's state is the
perturbed graph (moves as in the graph environment).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import dataset  # noqa: E402
from grasif import virtualhome as vh  # noqa: E402
from sim_adapters.graph_env import GraphEnvironment  # noqa: E402
from sim_adapters.virtualhome import EvolvingGraphBackend, VirtualHomeEnvironment, check_plan  # noqa: E402
from sim_adapters.wrappers import DynamicPerturbation  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="GraSIF data directory (default: build from the installed package)")
    parser.add_argument("--dynamic", type=int, metavar="SEED", help="also check dynamic mode with this seed")
    parser.add_argument("--dynamic-mode", default="anywhere", choices=["paper", "anywhere"],
                        help="the dynamic mode (sim_adapters.dynamic; default anywhere: every task is perturbed)")
    args = parser.parse_args()
    t0 = time.perf_counter()
    tasks = (dataset.load_split(Path(args.data_dir), vh.SPLIT) if args.data_dir else vh.build_tasks("paper"))
    t1 = time.perf_counter()
    backend = EvolvingGraphBackend()
    checks, rewired = [], 0
    for task in tasks:
        env = VirtualHomeEnvironment(task, backend)
        rewired += bool(env.rewired)
        checks.append(check_plan(task, env))
    t2 = time.perf_counter()
    agree = [c for c in checks if c.agree]
    steps = sum(c.steps for c in checks)
    print(f"{len(agree)}/{len(checks)} verdicts agree (GraSIF validator, strict, vs the goal on VirtualHome's final graph)")
    print(f"{sum(not c.differences for c in checks)}/{len(checks)} final graphs identical; "
          f"{sum(c.sgs_success for c in checks)} validator successes, {sum(c.vh_success for c in checks)} in VirtualHome")
    print(f"{rewired} tasks start from a VirtualHome graph with contradicting edges rewired (consistent_vh_graph)")
    for c in checks:
        if not c.agree or c.differences:
            print(f"  {c.task_id}: validator {'success' if c.sgs_success else 'failure'}, "
                  f"VirtualHome {'success' if c.vh_success else 'failure'}")
            for line in c.failures + [f"graph: {d}" for d in c.differences] + [f"goal: {g}" for g in c.not_met]:
                print(f"      {line}")
    print(f"time: {t2 - t1:.1f} s for {len(checks)} tasks ({steps} primitive steps, "
          f"{1000 * (t2 - t1) / max(steps, 1):.1f} ms per step incl. reset and conversion); tasks loaded in {t1 - t0:.1f} s")
    if args.dynamic is not None:
        t3 = time.perf_counter()
        same = 0
        for task in tasks:
            env = DynamicPerturbation(VirtualHomeEnvironment(task, backend), task.goal, args.dynamic, mode=args.dynamic_mode,
                                      key=f"{task.split}/{task.id}")
            graph_env = DynamicPerturbation(GraphEnvironment(task.graph), task.goal, args.dynamic, mode=args.dynamic_mode,
                                      key=f"{task.split}/{task.id}")
            env.reset()  # the moves are drawn at reset
            graph_env.reset()
            same += env.moves == graph_env.moves and env.true_graph() == graph_env.true_graph()
        print(f"dynamic mode, seed {args.dynamic}: {same}/{len(tasks)} tasks start VirtualHome in the perturbed graph "
              f"({time.perf_counter() - t3:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
