"""Overhead of the sandbox for LM-written code, per snippet.

One run = spawn ``python -I`` + bootstrap (limits, payload, imports, prelude, lockdown) + a
trivial snippet over a 200-node scene graph passed as node-link data, as SG-RwR uses it. Reports
the median and p95 wall time of ``Sandbox.run`` (the constructor's probe is timed separately),
the isolation achieved, and, for comparison, the same run with the lockdown features skipped
(test-only switch) and a bare ``python -I -c pass``.

Usage::

    .venv/bin/python benchmarks/bench_sandbox.py [--reps 30] [--nodes 200]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import networkx as nx  # noqa: E402
from tqdm import tqdm  # noqa: E402

from lookplangraph.sandbox import Sandbox  # noqa: E402

PRELUDE = """
import networkx as nx
G = nx.node_link_graph(DATA, edges="links")
"""
SNIPPET = "print(len(G), sorted(n for n in G if G.nodes[n]['layer'] == 'room'))"


def scene(nodes: int) -> dict:
    """A room / asset / object tree of ``nodes`` nodes with name, layer, class, states, affordances."""
    g = nx.DiGraph()
    rooms = [f"room-{i}" for i in range(max(1, nodes // 25))]
    for room in rooms:
        g.add_node(room, name=room, layer="room", states=[], affordances=[], **{"class": "room"})
    i = 0
    while g.number_of_nodes() < nodes:
        room = rooms[i % len(rooms)]
        asset = f"table-{i}"
        g.add_node(asset, name=asset, layer="asset", states=["closed"], affordances=["put_on"], **{"class": "table"})
        g.add_edge(asset, room, relation="in_room")
        for j in range(3):
            if g.number_of_nodes() >= nodes:
                break
            obj = f"mug-{i}-{j}"
            g.add_node(obj, name=obj, layer="object", states=[], affordances=["pick_up"], **{"class": "mug"})
            g.add_edge(obj, asset, relation="ontop")
        i += 1
    return nx.node_link_data(g, edges="links")


def timed(fn, reps: int, label: str) -> list[float]:
    out = []
    for _ in tqdm(range(reps), desc=label, leave=False):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]
    return f"{name:<44} median {statistics.median(xs) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--nodes", type=int, default=200)
    args = ap.parse_args()
    data = scene(args.nodes)
    t = time.perf_counter()
    box = Sandbox()
    probe_s = time.perf_counter() - t
    check = box.run(SNIPPET, data=data, prelude=PRELUDE)
    assert check.ok, check
    bare = Sandbox(require_strong=False, _disable=frozenset({"landlock", "netns", "chroot", "fdfreeze"}))
    results = {
        f"Sandbox.run, {args.nodes} nodes ({box.isolation})": timed(
            lambda: box.run(SNIPPET, data=data, prelude=PRELUDE), args.reps, "sandbox"),
        "  same, lockdown layers skipped (rlimits only)": timed(
            lambda: bare.run(SNIPPET, data=data, prelude=PRELUDE), args.reps, "rlimits only"),
        "  bare `python -I -c pass`": timed(
            lambda: subprocess.run([sys.executable, "-I", "-c", "pass"], check=True), args.reps, "bare"),
        "  bare `python -I -c 'import networkx'`": timed(
            lambda: subprocess.run([sys.executable, "-I", "-c", "import networkx"], check=True), args.reps,
            "networkx"),
    }
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"kernel {platform.release()}, uid {os.geteuid()}")
    print(f"isolation: {box.isolation}")
    print(f"probe (Sandbox constructor): {probe_s * 1000:.0f} ms; snippet output: {check.stdout.strip()[:60]}...")
    for name, xs in results.items():
        print(summary(name, xs))


if __name__ == "__main__":
    main()
