"""Seconds per SG-RwR code run: a fresh locked-down sandbox process, the scene graph as data, the
trusted prelude building ``G`` (and the Reasoner's tools), then a one-line snippet.

    python benchmarks/sgrwr_snippet_overhead.py [--runs 20] [--task office-02]

Prints median and 90th percentile per agent and the isolation achieved. The graph is the office
building (203 nodes) unless another office task is named.
"""

from __future__ import annotations

import argparse
import statistics
import time

from tqdm import tqdm

from grasif import office
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.sgrwr.agents import config_sandbox
from lookplangraph.planners.sgrwr.graphdata import graph_data, prelude

SNIPPETS = {"retriever": "print(len(G))", "reasoner": "print(room_of('cabinet-6'))"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--task", default="office-02")
    args = ap.parse_args()
    task = {t.id: t for t in office.build_tasks()}[args.task]
    data = graph_data(task.graph)
    sandbox = config_sandbox(PlannerConfig())
    print(f"{args.task}: {len(task.graph.nodes)} nodes; isolation {sandbox.isolation}")
    for agent, snippet in SNIPPETS.items():
        seconds = []
        for _ in tqdm(range(args.runs), desc=agent, leave=False):
            t0 = time.perf_counter()
            r = sandbox.run(snippet, data=data, prelude=prelude(agent))
            seconds.append(time.perf_counter() - t0)
            if not r.ok:
                raise SystemExit(f"{agent} snippet failed: {r.kind}: {r.error}")
        seconds.sort()
        p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
        print(f"{agent:9} {args.runs} runs: median {statistics.median(seconds):.3f} s, p90 {p90:.3f} s "
              f"(output {r.stdout.strip()!r})")


if __name__ == "__main__":
    main()
