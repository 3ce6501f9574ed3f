"""Per-task costs of an SG-RwR evaluation directory (``lookplangraph eval --planner sg-rwr``).

Reads ``OUT/results.jsonl`` and prints, per task and in total: success (strict), precision,
termination/failure kind, LM calls per agent, prompt + completion tokens over both agents and all
debug loops, sandbox runs and failed runs, code sent back by the assume-guard, queries answered
from an earlier answer (`sgrwr_repeat_answers`), actions sent (step mode: done() included), sandbox
seconds.

    python benchmarks/sgrwr_costs.py runs/sgrwr_bh6
"""

from __future__ import annotations

import sys
from pathlib import Path

from lookplangraph.evaluation.runner import read_results


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    rows = read_results(Path(argv[0]) / "results.jsonl")
    if not rows:
        print(f"{argv[0]}: no finished episodes", file=sys.stderr)
        return 1
    head = f"{'task':40} {'ok':>3} {'prec':>5} {'end':>17} {'reas':>5} {'retr':>5} {'tokens':>8} {'runs':>5} {'fail':>5} {'guard':>5} {'rep':>4} {'acts':>4} {'sb_s':>6}"
    print(head)
    total = {"ok": 0, "prec": 0.0, "reas": 0, "retr": 0, "tokens": 0, "runs": 0, "fail": 0, "guard": 0, "rep": 0, "acts": 0, "sb": 0.0}
    for r in rows:
        calls = r.get("agent_calls") or {}
        tokens = r["prompt_tokens"] + r["completion_tokens"]
        end = r.get("failure") or r["termination"]
        print(f"{r['task_id'][:40]:40} {int(r['success']):>3} {r['precision']:>5.2f} {end[:17]:>17} "
              f"{calls.get('reasoner', 0):>5} {calls.get('retriever', 0):>5} {tokens:>8} {r.get('sandbox_runs', 0):>5} "
              f"{r.get('sandbox_failures', 0):>5} {r.get('guard_refusals', 0):>5} {r.get('repeated_queries', 0):>4} {len(r.get('actions') or []):>4} "
              f"{r.get('sandbox_seconds', 0.0):>6.1f}")
        total["ok"] += r["success"]
        total["prec"] += r["precision"]
        total["reas"] += calls.get("reasoner", 0)
        total["retr"] += calls.get("retriever", 0)
        total["tokens"] += tokens
        total["runs"] += r.get("sandbox_runs", 0)
        total["fail"] += r.get("sandbox_failures", 0)
        total["guard"] += r.get("guard_refusals", 0)
        total["rep"] += r.get("repeated_queries", 0)
        total["acts"] += len(r.get("actions") or [])
        total["sb"] += r.get("sandbox_seconds", 0.0)
    n = len(rows)
    print(f"{'all (' + str(n) + ' tasks)':40} {total['ok']:>3} {total['prec'] / n:>5.2f} {'SR ' + format(total['ok'] / n, '.0%'):>17} "
          f"{total['reas']:>5} {total['retr']:>5} {total['tokens']:>8} {total['runs']:>5} {total['fail']:>5} "
          f"{total['guard']:>5} {total['rep']:>4} {total['acts']:>4} {total['sb']:>6.1f}")
    isolation = sorted({r.get("sandbox_isolation") for r in rows if r.get("sandbox_isolation")})
    if isolation:
        print("isolation:", "; ".join(isolation))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
