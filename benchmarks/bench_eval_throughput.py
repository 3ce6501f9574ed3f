"""Throughput of the evaluation harness against scripted OpenAI-compatible servers.

The servers are ``lookplangraph.evaluation.scripted_server`` processes (a SCRIPTED stand-in, not a language
model): each answers every chat completion after a fixed ``--delay`` (default 200 ms) with the next
step of the task's ground-truth plan, so LookPlanGraph episodes run to their end on the real
GraSIF office tasks (each task repeated under new ids to have enough episodes). The harness is
``lookplangraph.evaluation.runner.evaluate`` with ``--concurrency K`` workers on an endpoint pool
(``lookplangraph.lm.pool``) over the servers, exactly what ``lookplangraph eval --lm
openai:MODEL --endpoints ...`` runs. The servers run in their own processes, so their CPU is not
counted as the harness's.

For each K it reports:

* episodes/s, and the bound ``K / (mean LM calls per episode x delay)``: what K workers could do
  if nothing but the servers' delay took time; target: at least 80% of it;
* the same throughput against the schedule bound: the wall time these episodes (their LM calls
  in queue order) would take on K workers if only the delay took time, over the measured one
  (the bound above ignores that the last episodes leave workers idle);
* overhead: the part of episode wall time that is not the servers' delay,
  ``sum(wall_s - lm_calls x delay) / sum(wall_s)`` (client, HTTP, the server's own handling,
  planner, SGS, traces, waiting for the GIL or a CPU); and the harness's part of it, the episode
  wall time not spent inside a server (the servers report their handling time at
  ``/v1/stats``); target: at most 2%;
* the harness's CPU share (its CPU time, worker processes included, over wall time; 1.0 = one core
  busy) and CPU milliseconds per LM call.

Usage::

    .venv/bin/python benchmarks/bench_eval_throughput.py [--ks 1,4,16,64] [--delay 0.2] [--servers 2]
        [--rounds 4] [--structured MODE] [--processes P] [--profile K]

``--rounds R``: about R episodes per worker at each K (at least 8 episodes; default 4). ``--profile K``
runs K under cProfile and prints the top functions by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import office  # noqa: E402
from lookplangraph.lm.pool import pool_factory  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402
from lookplangraph.evaluation.runner import evaluate  # noqa: E402

TARGET_THROUGHPUT = 0.80  # of the delay bound, up to K = 64 workers
TARGET_OVERHEAD = 0.02  # of episode wall time


def start_servers(n: int, delay: float) -> tuple[list[subprocess.Popen], list[str]]:
    procs, urls = [], []
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    for _ in range(n):
        p = subprocess.Popen([sys.executable, "-m", "lookplangraph.evaluation.scripted_server", "--split", "office",
                              "--delay", str(delay)], stdout=subprocess.PIPE, text=True, env=env)
        procs.append(p)
    for p in procs:
        urls.append(p.stdout.readline().strip())
    return procs, urls


def episodes(n: int):
    """``n`` office tasks, the split repeated under new ids (the servers find tasks by instruction)."""
    base = office.build_tasks()
    return [base[i % len(base)].model_copy(update={"id": f"{base[i % len(base)].id}~{i // len(base)}"})
            for i in range(n)]


def server_stats(urls: list[str]) -> tuple[int, float]:
    """Requests served and their summed time in the servers (body read to reply sent)."""
    n, busy = 0, 0.0
    for url in urls:
        with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
            stats = json.loads(r.read())
        n, busy = n + stats["requests"], busy + stats["busy_s"]
    return n, busy


def schedule_bound(calls: list[int], k: int, delay: float) -> float:
    """Wall time of the episodes (LM calls each, in queue order) on ``k`` workers if only the
    servers' delay took time: each goes to the first free worker, as the runner's queue does."""
    free = [0.0] * k
    for n in calls:
        i = free.index(min(free))
        free[i] += n * delay
    return max(free)


def cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (the worker processes of an
    evaluation end with it; the servers run on, so they are not counted)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def log_line(line: str) -> None:
    print(line, file=sys.stderr)


def run_k(k: int, urls: list[str], delay: float, rounds: int, profile: bool = False,
          structured: str = "json_schema", processes: int = 1) -> dict:
    tasks = episodes(max(8, rounds * k))
    out = Path(tempfile.mkdtemp(prefix=f"bench_eval_k{k}_"))
    factory = pool_factory("openai:scripted", urls, {"max_retries": 2, "backoff": 0.1, "timeout": 30,
                                                      "structured": structured},
                           log=log_line)
    profiles: list = []
    if profile:  # cProfile sees one thread: profile each worker's episodes, the main thread's work
        import cProfile

        from lookplangraph.evaluation import runner

        plain = runner.traced_episode

        def profiled(*a, **kw):
            prof = cProfile.Profile()
            profiles.append(prof)
            return prof.runcall(plain, *a, **kw)

        runner.traced_episode = profiled
        main_prof = cProfile.Profile()
        profiles.append(main_prof)
        main_prof.enable()
    n0, busy0 = server_stats(urls)
    c0, t0 = cpu_seconds(), time.perf_counter()
    rows = evaluate(tasks, factory, PlannerConfig(), out, concurrency=k, processes=processes, log=log_line)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    n1, busy1 = server_stats(urls)
    if profile:
        main_prof.disable()
        runner.traced_episode = plain
    shutil.rmtree(out, ignore_errors=True)
    calls = sum(r["lm_calls"] for r in rows)
    ep_wall = sum(r["wall_s"] for r in rows)
    bound = k / (calls / len(rows) * delay) if delay else float("inf")
    order = {t.id: i for i, t in enumerate(tasks)}
    makespan = schedule_bound([r["lm_calls"] for r in sorted(rows, key=lambda r: order[r["task_id"]])], k, delay)
    assert n1 - n0 == calls, f"the servers saw {n1 - n0} requests for {calls} LM calls"
    return {
        "k": k, "episodes": len(rows), "success": sum(r["success"] for r in rows), "calls": calls,
        "wall": wall, "eps": len(rows) / wall, "bound": bound, "ratio": len(rows) / wall / bound,
        "sched_ratio": makespan / wall,
        "overhead": (ep_wall - calls * delay) / ep_wall, "harness": (ep_wall - (busy1 - busy0)) / ep_wall,
        "outside_lm": (ep_wall - sum(r["lm_seconds"] for r in rows)) / ep_wall,
        "cpu_share": cpu / wall, "cpu_ms_per_call": 1000 * cpu / calls, "profiles": profiles,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,4,16,64", help="worker counts (default 1,4,16,64)")
    ap.add_argument("--delay", type=float, default=0.2, help="the servers' reply delay in seconds (default 0.2)")
    ap.add_argument("--servers", type=int, default=2, help="scripted server processes (default 2)")
    ap.add_argument("--rounds", type=int, default=4, help="about this many episodes per worker (default 4)")
    ap.add_argument("--processes", type=int, default=1, metavar="P",
                    help="worker processes of the evaluation (default 1: threads); each K uses min(P, K)")
    ap.add_argument("--profile", type=int, metavar="K", help="profile this K (cProfile) instead of the table")
    ap.add_argument("--structured", default="json_schema",
                    help="the backend's structured mode (default json_schema; structured_outputs, guided_json and "
                         "json_object send the schema without the excluded actions, which costs more CPU)")
    args = ap.parse_args()
    procs, urls = start_servers(args.servers, args.delay)
    try:
        run_k(2, urls, 0.0, 1)  # warm-up: imports and first connections are not the harness's steady cost
        if args.profile:
            import pstats

            r = run_k(args.profile, urls, args.delay, args.rounds, profile=True, structured=args.structured)
            print(f"K={r['k']}: {r['eps']:.2f} episodes/s ({100 * r['ratio']:.0f}% of the bound), overhead "
                  f"{100 * r['overhead']:.1f}%, CPU {r['cpu_ms_per_call']:.2f} ms per LM call")
            stats = pstats.Stats(*r["profiles"]).strip_dirs()
            stats.sort_stats("cumulative").print_stats(30)
            stats.sort_stats("tottime").print_stats(30)
            return 0
        print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.1f}; {args.servers} scripted server process(es), delay {args.delay * 1000:.0f} ms; "
              f"office tasks, LookPlanGraph planner, ground-truth replies; structured {args.structured}; "
              f"{args.processes} worker process(es)" + (" (threads of the harness)" if args.processes == 1 else ""))
        head = (f"{'K':>3} {'episodes':>8} {'ok':>4} {'LM calls':>8} {'wall s':>7} {'episodes/s':>10} {'bound/s':>8} "
                f"{'of bound':>8} {'of sched':>8} {'overhead':>8} {'harness':>8} {'outside LM':>10} {'CPU share':>9} "
                f"{'CPU ms/call':>11}  target")
        print(head)
        missed = False
        for k in (int(x) for x in args.ks.split(",")):
            r = run_k(k, urls, args.delay, args.rounds, structured=args.structured, processes=args.processes)
            ok = r["ratio"] >= TARGET_THROUGHPUT and (k > 16 or r["overhead"] <= TARGET_OVERHEAD)
            missed |= not ok
            print(f"{r['k']:>3} {r['episodes']:>8} {r['success']:>4} {r['calls']:>8} {r['wall']:>7.1f} {r['eps']:>10.2f} "
                  f"{r['bound']:>8.2f} {100 * r['ratio']:>7.0f}% {100 * r['sched_ratio']:>7.0f}% {100 * r['overhead']:>7.1f}% "
                  f"{100 * r['harness']:>7.1f}% {100 * r['outside_lm']:>9.1f}% "
                  f"{r['cpu_share']:>9.2f} {r['cpu_ms_per_call']:>11.2f}  {'met' if ok else 'MISSED'}", flush=True)
        print(f"target: episodes/s >= {TARGET_THROUGHPUT:.0%} of K / (calls per episode x delay) up to K = 64, "
              f"harness overhead <= {TARGET_OVERHEAD:.0%} of episode wall time up to K = 16\n"
              "of bound: episodes/s over K / (mean LM calls per episode x delay); of sched: the wall time the same "
              "episodes would take on K workers if only the delay took time, over the measured wall time (the tail "
              "of the last episodes is in it)\n"
              "overhead: episode wall time not in the servers' delay (client, HTTP, server, planner, GIL); harness: "
              "episode wall time not inside a server (the servers' own handling taken out); outside LM: not inside "
              "an LM call at all (planner, SGS, traces)")
        return 1 if missed else 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
