"""Graph-store speed on ~200-node GraSIF scenes: load, reload and typical queries (target: a
200-node load well under 100 ms in the default embedded store).

    .venv/bin/python benchmarks/bench_cypher.py [--data-dir DIR] [--repeat 15] [--isolation transaction|file|both]

Prints medians (and the 90th percentile) in milliseconds. The first load of a process (engine
start-up) is reported separately from the steady state.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import dataset  # noqa: E402
from lookplangraph.cypher.ladybug_store import LadybugStore  # noqa: E402
from sgs.graph import Layer  # noqa: E402

QUERIES = {
    "count by class": "MATCH (o:Object) RETURN o.class, count(*) AS n ORDER BY n DESC LIMIT 5",
    "objects in a room (2 hops+)": "MATCH (o:Object)-[:ON_TOP_OF|INSIDE*1..4]->(:Asset)-[:IN_ROOM]->(r:Room) "
                                   "RETURN r.name, count(o) ORDER BY r.name",
    "states filter": "MATCH (a:Asset) WHERE 'closed' IN a.states RETURN count(a)",
    "parameter lookup": "MATCH (o:Object {name: $name})-[:ON_TOP_OF|INSIDE]->(p) RETURN p.name",
}


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"median {1000 * statistics.median(values):7.1f} ms   p90 {1000 * p90:7.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", help="GraSIF build (default $LOOKPLANGRAPH_DATA)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--isolation", choices=["transaction", "file", "both"], default="both")
    args = ap.parse_args()
    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    scenes = {split: dataset.load_split(root, split)[0].graph for split in ("office", "virtualhome")}
    isolations = ["transaction", "file"] if args.isolation == "both" else [args.isolation]
    for isolation in isolations:
        for split, graph in scenes.items():
            store = LadybugStore(isolation=isolation)
            t0 = time.perf_counter()
            store.load(graph)
            first = time.perf_counter() - t0
            loads = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                store.load(graph)
                loads.append(time.perf_counter() - t0)
            name = graph.names(Layer.OBJECT)[0]
            print(f"[{isolation}] {split}: {len(graph.nodes)} nodes; first load {1000 * first:.1f} ms")
            print(f"  load   {_ms(loads)}")
            for label, q in QUERIES.items():
                times = []
                for _ in range(args.repeat):
                    r = store.query(q, {"name": name} if "$name" in q else None)
                    times.append(r.seconds)
                print(f"  query  {_ms(times)}   {label}")
            store.close()


if __name__ == "__main__":
    main()
