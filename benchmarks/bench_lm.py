"""Seconds per LM decision with the project's real prompts (run by hand, not a test).

For each model: load it, then decide() three times on the first step of a task (the gift-basket
example by default): call 1 with a cold KV cache, calls 2-3 with the same static prompt and a
changed dynamic part (the history grows), so the static prefix comes from the cache.

    .venv/bin/python benchmarks/bench_lm.py [qwen2.5-coder-0.5b qwen2.5-coder-1.5b] [--task T.json] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from grasif.task import load_task
from lookplangraph.agent.decide import decide
from lookplangraph.lm import LlamaCppBackend, default_threads
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.prompts import dynamic_prompt, static_prompt
from lookplangraph.agent.view import render, visible_names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
    ap.add_argument("--task", default="examples/gift_basket/task.json")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    task = load_task(args.task)
    memory = MemoryGraph(task.graph)
    scene, names = render(memory), visible_names(memory)
    static = static_prompt()
    history: list[tuple[str, str, str]] = []
    print(f"{platform.python_implementation()} {platform.python_version()}, cpus={os.cpu_count()}, "
          f"load={os.getloadavg()[0]:.2f}, threads={args.threads or default_threads()}")
    print(f"{'model':<22}{'call':>5}{'prompt':>8}{'cached':>8}{'compl.':>8}{'seconds':>9}  action")
    for model in args.models:
        t0 = time.perf_counter()
        lm = LlamaCppBackend(model, n_ctx=4096, n_threads=args.threads)
        load = time.perf_counter() - t0
        for call in (1, 2, 3):
            r = decide(lm, static, dynamic_prompt(task.instruction, scene, history, None), names)
            print(f"{model:<22}{call:>5}{r.usage.prompt_tokens:>8}{r.usage.cached_tokens or 0:>8}"
                  f"{r.usage.completion_tokens:>8}{r.seconds:>9.1f}  {r.action or r.error}")
            history.append(("looked around", str(r.action) if r.action else "none", ""))
        print(f"{model:<22} load {load:.1f} s")


if __name__ == "__main__":
    main()
