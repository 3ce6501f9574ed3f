"""Where a decision's seconds go: LookPlanGraph episodes with llama.cpp in process, each decision
broken down (run by hand, not a test).

For each *variant* (a name and planner settings or another ``--lm``), the same episodes (default:
10 tasks of the 47-task held-out sample, static, greedy) run with
:func:`lookplangraph.planners.lookplangraph.run_episode`, and every decision records:

* prompt tokens, of them served from the KV cache and evaluated anew, completion tokens;
* llama.cpp's own clocks (``llama_perf_context``): prompt evaluation and token-by-token decoding;
* building the reply schema (with the excluded actions) and compiling it into a grammar;
* the rest: sampling under the grammar, detokenizing, Python;
* the total (what the planner records as the decision's seconds);
* whether the reply's tokens as the model produced them (what the KV cache holds) are the tokens
  its text re-tokenizes to (what the next prompt holds in the conversation layout: where they
  differ, the cache serves the next prompt only up to there).

It prints one table of medians (and the total's p90) per variant, whether each variant took the
same actions as the first, and its successes, then writes ``OUT/decisions.csv`` and
``OUT/summary.md``. Nothing else should run on the machine meanwhile (the clocks are wall time).

    .venv/bin/python benchmarks/bench_decision.py --out runs/bench_decision \\
        --variant grammar:opt.jump_forward=false \\
        --variant jump \\
        --variant no-reason:reason_max_length=0 \\
        --variant history-scene:prompt_layout=history-scene \\
        --variant no-exclusions:exclude_refused=false,exclude_inapplicable=false \\
        --variant merged:lm=llamacpp:/tmp/merged-q4km.gguf

A variant is ``NAME[:KEY=VALUE,...]``: planner settings (``PlannerConfig`` keys), ``lm=SPEC``, or
``opt.KEY=VALUE`` for the backend (``opt.jump_forward=false``: the grammar decode).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm  # noqa: E402

from grasif.dataset import ensure  # noqa: E402
from grasif.task import load_task  # noqa: E402
import lookplangraph.agent.decide as decide_module  # noqa: E402
from lookplangraph.evaluation.runner import make_env  # noqa: E402
from lookplangraph.evaluation.settings import DEFAULT_LM  # noqa: E402
from lookplangraph.lm import make_backend  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402
from lookplangraph.planners.lookplangraph import run_episode  # noqa: E402

#: 10 tasks of the held-out sample: 4 VirtualHome, 2 BEHAVIOR, 4 office
TASKS = ("virtualhome/file392_1", "virtualhome/file432_1", "virtualhome/file463_2", "virtualhome/file773_1",
         "behavior/picking_up_trash", "behavior/putting_out_condiments",
         "office/office-01", "office/office-02", "office/office-03", "office/office-04")
COLUMNS = ("prompt", "cached", "evaluated", "completion", "prompt_s", "decode_s", "schema_s", "grammar_s", "rest_s",
           "total_s", "answer_ids_same")


def load_tasks(specs: list[str]) -> list:
    """Tasks named ``SPLIT/ID`` (``dev/ID`` from the dev split's sources, others from the GraSIF
    build, built on first use); ``dev`` alone: the whole dev split."""
    from grasif.dev import build_tasks

    dev = {t.id: t for t in build_tasks()} if any(s == "dev" or s.startswith("dev/") for s in specs) else {}
    if specs == ["dev"]:
        return list(dev.values())
    others = sorted({s.split("/")[0] for s in specs if not s.startswith("dev/")})
    data = ensure(None, others) if others else None
    return [dev[s[4:]] if s.startswith("dev/") else load_task(data / f"{s}.json") for s in specs]


def parse_variant(text: str) -> tuple[str, str | None, dict, dict]:
    """``NAME[:KEY=VALUE,...]`` -> (name, lm spec or None, planner settings, backend options)."""
    name, _, body = text.partition(":")
    lm, settings, options = None, {}, {}
    for item in filter(None, body.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"variant {name}: {item!r} is not KEY=VALUE")
        if key == "lm":
            lm = value
            continue
        parsed = json.loads(value) if value in ("true", "false", "null") or value.lstrip("-").isdigit() else value
        if key.startswith("opt."):
            options[key[4:]] = parsed
        else:
            settings[key] = parsed
    PlannerConfig.from_dict(settings, where=f"variant {name}")  # a bad key or value stops here
    return name, lm, settings, options


def timed(fn, add):
    """``fn`` that hands the seconds of each call to ``add``."""
    def call(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            add(time.perf_counter() - t0)
    return call


class Clocks:
    """Per-decision clocks around one LlamaCppBackend (its llama.cpp context and grammar cache)."""

    def __init__(self, lm):
        import llama_cpp

        self.lib, self.lm, self.ctx = llama_cpp, lm, lm.llm._ctx.ctx
        self.schema_s = self.grammar_s = 0.0
        self._complete = lm.complete
        lm._grammar = timed(lm._grammar, lambda s: setattr(self, "grammar_s", self.grammar_s + s))
        lm.complete = self.complete
        self.rows: list[dict] = []

    def complete(self, *a, **kw):
        self.lib.llama_perf_context_reset(self.ctx)
        c = self._complete(*a, **kw)
        perf = self.lib.llama_perf_context(self.ctx)
        prompt_s, decode_s = perf.t_p_eval_ms / 1000, perf.t_eval_ms / 1000
        u = c.usage
        self.rows.append({"prompt": u.prompt_tokens, "cached": u.cached_tokens or 0,
                          "evaluated": u.prompt_tokens - (u.cached_tokens or 0), "completion": u.completion_tokens,
                          "prompt_s": prompt_s, "decode_s": decode_s, "schema_s": self.schema_s,
                          "grammar_s": self.grammar_s,
                          "rest_s": max(0.0, c.seconds - prompt_s - decode_s - self.grammar_s),
                          "total_s": c.seconds + self.schema_s})
        self.schema_s = self.grammar_s = 0.0
        # the reply's tokens as the model produced them (what the KV cache holds) against the
        # tokens its text re-tokenizes to (what the next prompt of a conversation holds)
        llm = self.lm.llm
        held = llm.input_ids[u.prompt_tokens:llm.n_tokens].tolist()
        again = llm.tokenize(c.text.encode("utf-8"), add_bos=False, special=False)
        self.rows[-1]["answer_ids_same"] = int(bool(held) and again[:len(held)] == held)
        return c


def run_variant(name: str, spec: str, settings: dict, tasks: list, max_actions: int, lm_options: dict) -> tuple[list, list]:
    lm = make_backend(spec, **lm_options)
    clocks = Clocks(lm)
    build = decide_module.constrained_schema
    decide_module.constrained_schema = timed(build, lambda s: setattr(clocks, "schema_s", clocks.schema_s + s))
    episodes = []
    try:
        cfg = PlannerConfig.from_dict({"max_actions": max_actions, **settings})
        for task in tqdm(tasks, desc=name, unit="ep"):
            first = len(clocks.rows)
            result = run_episode(task, make_env(task), lm, cfg)
            for row in clocks.rows[first:]:
                row.update(variant=name, task=task.id)
            episodes.append({"variant": name, "task": task.id, "success": result.success, "actions": result.actions,
                             "termination": result.termination})
    finally:
        decide_module.constrained_schema = build
        lm.close()
    return clocks.rows, episodes


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", default=DEFAULT_LM, help=f"backend of every variant without lm= (default {DEFAULT_LM})")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME[:KEY=VALUE,...]",
                    help="a variant to run (repeatable; default: one, the LM's own settings)")
    ap.add_argument("--tasks", nargs="*", default=list(TASKS), metavar="SPLIT/ID",
                    help="tasks (dev/ID from the dev split; dev: all of it); default: 10 of the 47")
    ap.add_argument("--max-actions", type=int, default=12)
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: default_threads())")
    ap.add_argument("--out", required=True, metavar="DIR")
    args = ap.parse_args()
    tasks = load_tasks(args.tasks)
    variants = [parse_variant(v) for v in (args.variant or ["default"])]
    lm_options = {"n_threads": args.threads} if args.threads else {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"{len(tasks)} tasks, --max-actions {args.max_actions}")
    rows, episodes = [], []
    for name, lm, settings, options in variants:
        r, e = run_variant(name, lm or args.lm, settings, tasks, args.max_actions, {**lm_options, **options})
        rows += r
        episodes += e
    with open(out / "decisions.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["variant", "task", *COLUMNS])
        w.writeheader()
        w.writerows(rows)
    (out / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in episodes))
    reference = {e["task"]: e["actions"] for e in episodes if e["variant"] == variants[0][0]}
    head = ("| variant | decisions | success | same actions | prompt tok | cached | evaluated | completion | "
            "prompt eval s | decode s | schema s | grammar s | rest s | total s (p50) | total s (p90) | "
            "answer ids as re-tokenized |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, lm, settings, options in variants:
        mine = [r for r in rows if r["variant"] == name]
        eps = [e for e in episodes if e["variant"] == name]
        same = sum(e["actions"] == reference.get(e["task"]) for e in eps)
        med = {c: statistics.median(r[c] for r in mine) if mine else float("nan") for c in COLUMNS}
        lines.append(f"| {name} | {len(mine)} | {sum(e['success'] for e in eps)}/{len(eps)} | {same}/{len(eps)} | "
                     f"{med['prompt']:.0f} | {med['cached']:.0f} | {med['evaluated']:.0f} | {med['completion']:.0f} | "
                     f"{med['prompt_s']:.2f} | {med['decode_s']:.2f} | {med['schema_s']:.3f} | {med['grammar_s']:.3f} | "
                     f"{med['rest_s']:.2f} | {med['total_s']:.2f} | {pct([r['total_s'] for r in mine], 0.9):.2f} | "
                     f"{sum(r['answer_ids_same'] for r in mine)}/{len(mine)} |")
    text = "\n".join(lines)
    settings_text = "\n".join(f"- {n}: lm {lm or args.lm}, {settings or 'its own settings'}, backend {options or 'default'}"
                              for n, lm, settings, options in variants)
    (out / "summary.md").write_text(text + "\n\n" + settings_text + "\n")
    print(text)
    print(settings_text)


if __name__ == "__main__":
    main()
