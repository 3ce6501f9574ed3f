"""Micro-benchmark of the Scene Graph Simulator on a deterministic ~200-node scene graph.

Measures, with ``time.perf_counter`` over many repetitions (median and p95):

(a) ``check()`` (validation, correction and application) per LM action, for a realistic mix of
    primitive actions and ``rearrange`` calls, some of them infeasible;
(b) full-plan validation of a 10-step plan with ``sgs.simulator.run_plan``;
(c) loading the graph from its JSON dict with ``sgs.io.graph_from_dict``.

Usage::

    .venv/bin/python benchmarks/bench_sgs.py [--reps 30] [--actions 400] [--seed 0] [--breakdown]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sgs.actions import Action  # noqa: E402
from sgs.graph import Layer, SceneGraph  # noqa: E402
from sgs.io import graph_from_dict  # noqa: E402
from sgs.simulator import check, run_plan  # noqa: E402

TARGET_ACTION_US = 50.0
TARGET_PLAN_MS = 5.0

ROOMS = ("kitchen", "living_room", "bedroom", "bathroom", "office", "dining_room", "hallway", "garage")
# (class, affordances, states): 5 assets per room -> 40 assets.
ASSET_KINDS = (
    ("table", ["put_on"], []),
    ("cabinet", ["put_on", "put_inside", "open", "close"], ["closed"]),
    ("fridge", ["put_inside", "open", "close"], ["closed"]),
    ("shelf", ["put_on"], []),
    ("tv", ["turn_on", "turn_off"], ["off"]),
    ("lamp", ["turn_on", "turn_off"], ["on"]),
    ("drawer", ["put_inside", "open", "close"], ["open"]),
)
OBJECT_KINDS = (
    ("apple", ["pick_up"], []),
    ("cup", ["pick_up", "put_inside"], ["clean"]),
    ("plate", ["pick_up", "put_on"], ["dirty"]),
    ("book", ["pick_up", "put_on"], []),
    ("box", ["pick_up", "put_inside", "open", "close"], ["closed"]),
    ("bowl", ["pick_up", "put_inside", "put_on"], []),
    ("candle", ["pick_up", "turn_on", "turn_off"], ["off"]),
    ("remote", ["pick_up"], []),
)


def build_graph_dict(n_objects: int = 152, seed: int = 0) -> dict:
    """8 rooms, 40 assets (closed containers, switchable devices), ``n_objects`` objects nested on
    and inside assets and other objects (depth <= 3). Deterministic for a given seed."""
    rng = random.Random(seed)
    counters: dict[str, int] = {}

    def fresh(cls: str) -> str:
        counters[cls] = counters.get(cls, 0) + 1
        return f"{cls}-{counters[cls]}"

    rooms = [{"name": fresh(r)} for r in ROOMS]
    assets = []
    for i, room in enumerate(rooms):
        for j in range(5):
            cls, aff, states = ASSET_KINDS[(i + j) % len(ASSET_KINDS)]
            assets.append({"name": fresh(cls), "room": room["name"], "states": list(states), "affordances": list(aff)})
    supports = [(a["name"], a["affordances"], 0) for a in assets if {"put_on", "put_inside"} & set(a["affordances"])]
    objects = []
    for _ in range(n_objects):
        cls, aff, states = OBJECT_KINDS[rng.randrange(len(OBJECT_KINDS))]
        name = fresh(cls)
        sup, sup_aff, depth = rng.choice(supports)
        rels = [r for r, a in (("ontop_of", "put_on"), ("inside_of", "put_inside")) if a in sup_aff]
        objects.append({"name": name, "relation": rng.choice(rels), "related_to": sup, "states": list(states), "affordances": list(aff)})
        if depth + 1 < 3 and {"put_on", "put_inside"} & set(aff):
            supports.append((name, aff, depth + 1))
    agent = {"name": "agent-1", "location": rooms[0]["name"], "holding": "nothing"}
    return {"nodes": {"rooms": rooms, "asset": assets, "objects": objects, "agent": agent}}


def build_workload(graph: SceneGraph, n_actions: int, seed: int) -> list[Action]:
    """A realistic, deterministic LM action stream: ~40% rearrange, pick-up/put pairs, go_to,
    open/close, toggles, discover_objects, and ~10% mistakes (unknown node, wrong relation,
    bare class names, picking up with a full hand)."""
    rng = random.Random(seed)
    places = graph.places
    assets = graph.names(Layer.ASSET)
    objects = graph.names(Layer.OBJECT)
    containers = [n for n in assets + objects if graph.nodes[n].has("open") or graph.nodes[n].has("closed")]
    switches = [n for n in assets + objects if graph.nodes[n].has("on") or graph.nodes[n].has("off")]
    supports = [n for n in assets + objects if {"put_on", "put_inside"} & set(graph.nodes[n].affordances or ())]
    out: list[Action] = []
    g = graph
    while len(out) < n_actions:
        r = rng.random()
        held = g.agent.holding
        if r < 0.40:
            obj = held if held and rng.random() < 0.8 else rng.choice(objects)
            dest = rng.choice(supports)
            rel = "inside" if "put_inside" in (g.nodes[dest].affordances or ()) and rng.random() < 0.5 else "ontop"
            a = Action(function_name="rearrange", node=obj, relation=rel, destination=dest)
        elif r < 0.55:
            if held:
                dest = rng.choice(supports)
                fn = "put_inside" if "put_inside" in (g.nodes[dest].affordances or ()) else "put_on"
                a = Action(function_name=fn, node=held, destination=dest)
            else:
                a = Action(function_name="pick_up", node=rng.choice(objects))
        elif r < 0.65:
            a = Action(function_name="go_to", node=rng.choice(places))
        elif r < 0.75:
            c = rng.choice(containers)
            a = Action(function_name="close" if g.nodes[c].has("open") else "open", node=c)
        elif r < 0.83:
            s = rng.choice(switches)
            a = Action(function_name="turn_off" if g.nodes[s].has("on") else "turn_on", node=s)
        elif r < 0.90:
            a = Action(function_name="discover_objects", node=rng.choice(assets))
        else:  # mistakes an LM makes
            a = rng.choice([
                Action(function_name="pick_up", node="unicorn-1"),
                Action(function_name="rearrange", node=rng.choice(objects), relation="under", destination=rng.choice(assets)),
                Action(function_name="pick_up", node="fridge"),
                Action(function_name="go_to", node=rng.choice(assets)),
                Action(function_name="teleport", node=rng.choice(places)),
                Action(function_name="rearrange", node=rng.choice(objects), relation="ontop", destination="tabel-1"),
            ])
        out.append(a)
        g = check(g, a).graph
    return out


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def bench_actions(graph: SceneGraph, workload: list[Action], reps: int) -> tuple[list[float], dict, dict]:
    times: list[float] = []
    by_kind: dict[str, list[float]] = {}
    stats = {"accepted": 0, "rejected": 0, "primitive_steps": 0}
    clock = time.perf_counter
    for rep in range(reps + 1):  # the first pass warms up and is not recorded
        g = graph
        for a in workload:
            t0 = clock()
            out = check(g, a)
            t1 = clock()
            g = out.graph
            if rep:
                times.append(t1 - t0)
                by_kind.setdefault(f"{a.function_name} ({'ok' if out.ok else 'rejected'})", []).append(t1 - t0)
            elif out.ok:
                stats["accepted"] += 1
                stats["primitive_steps"] += len(out.actions)
            else:
                stats["rejected"] += 1
    return times, stats, by_kind


def bench_plans(graph: SceneGraph, workload: list[Action], reps: int, plan_len: int = 10) -> list[float]:
    starts: list[SceneGraph] = []
    g = graph
    for i, a in enumerate(workload):
        if i % plan_len == 0:
            starts.append(g)
        g = check(g, a).graph
    plans = [(starts[i], workload[i * plan_len:(i + 1) * plan_len]) for i in range(len(workload) // plan_len)]
    times: list[float] = []
    clock = time.perf_counter
    for rep in range(reps + 1):
        for start, plan in plans:
            t0 = clock()
            run_plan(start, plan)
            t1 = clock()
            if rep:
                times.append(t1 - t0)
    return times


def bench_load(data: dict, reps: int) -> list[float]:
    times = []
    clock = time.perf_counter
    graph_from_dict(data)
    for _ in range(reps):
        t0 = clock()
        graph_from_dict(data)
        times.append(clock() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=30, help="repetitions of the action workload and of the plans (default 30)")
    ap.add_argument("--actions", type=int, default=400, help="LM actions in the workload (default 400)")
    ap.add_argument("--load-reps", type=int, default=500, help="repetitions of the JSON load (default 500)")
    ap.add_argument("--objects", type=int, default=152, help="objects in the graph (default 152 -> 200 nodes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--breakdown", action="store_true", help="also print (a) per action kind")
    args = ap.parse_args(argv)

    data = build_graph_dict(args.objects, args.seed)
    graph = graph_from_dict(data)
    workload = build_workload(graph, args.actions, args.seed)
    kinds: dict[str, int] = {}
    for a in workload:
        kinds[a.function_name] = kinds.get(a.function_name, 0) + 1

    t_act, stats, by_kind = bench_actions(graph, workload, args.reps)
    t_plan = bench_plans(graph, workload, args.reps)
    t_load = bench_load(data, args.load_reps)

    n_closed = sum(1 for n in graph.nodes.values() if n.has("closed"))
    n_switch = sum(1 for n in graph.nodes.values() if n.has("on") or n.has("off"))
    print("Scene Graph Simulator benchmark")
    print(f"  python {platform.python_version()} ({platform.python_implementation()}), {platform.system()} {platform.machine()}, "
          f"cpu_count={os.cpu_count()}, processor={platform.processor() or 'n/a'}")
    print(f"  graph: {len(graph.nodes)} nodes = {len(graph.places)} places, {len(graph.names(Layer.ASSET))} assets, "
          f"{len(graph.names(Layer.OBJECT))} objects; {n_closed} closed, {n_switch} switchable")
    print(f"  workload: {len(workload)} LM actions ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}); "
          f"{stats['accepted']} accepted -> {stats['primitive_steps']} primitive steps, {stats['rejected']} rejected")
    print(f"  repetitions: {args.reps} x workload, {args.reps} x {len(workload) // 10} plans, {args.load_reps} x load")
    print()
    rows = [
        ("(a) check()+apply per LM action", t_act, 1e6, "us", TARGET_ACTION_US),
        ("(b) run_plan per 10-step plan", t_plan, 1e3, "ms", TARGET_PLAN_MS),
        (f"(c) graph_from_dict ({len(graph.nodes)} nodes)", t_load, 1e3, "ms", None),
    ]
    header = f"{'measure':<38} {'n':>7} {'median':>10} {'p95':>10} {'mean':>10} {'target':>10}  {'median':>6} {'p95':>6}"
    print(header)
    print("-" * len(header))
    for label, times, scale, unit, target in rows:
        med, p95, mean = statistics.median(times) * scale, percentile(times, 0.95) * scale, statistics.fmean(times) * scale
        tgt = f"<= {target:g} {unit}" if target is not None else "-"
        v_med = ("PASS" if med <= target else "MISS") if target is not None else "-"
        v_p95 = ("PASS" if p95 <= target else "MISS") if target is not None else "-"
        print(f"{label:<38} {len(times):>7} {med:>7.2f} {unit} {p95:>7.2f} {unit} {mean:>7.2f} {unit} {tgt:>10}  {v_med:>6} {v_p95:>6}")
    if args.breakdown:
        print()
        print(f"{'(a) by action kind':<38} {'n':>7} {'median':>10} {'p95':>10} {'mean':>10}")
        for kind, times in sorted(by_kind.items(), key=lambda kv: -statistics.fmean(kv[1])):
            print(f"  {kind:<36} {len(times):>7} {statistics.median(times) * 1e6:>7.2f} us "
                  f"{percentile(times, 0.95) * 1e6:>7.2f} us {statistics.fmean(times) * 1e6:>7.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
