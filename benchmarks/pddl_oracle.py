"""Is the LLM+P pipeline itself sound? Oracle problems through Fast Downward and the validator.

For every task of the chosen splits: the ground-truth plan runs in the SGS; the goal facts of
the appendix-D domain are written from its final graph (``oracle_goal``: where each changed
object ends, closed/on states that changed; ``frame_goal``: what is closed or off at the end of
the ground truth is closed or off at the end of the plan too); the problem declares the rooms and the nodes those
facts name with their holders (``relevant_nodes``; ``--full`` declares the whole graph);
Fast Downward (lama-first) solves it; the plan maps back to primitive actions; GraSIF's
validator judges them from the initial graph **without** correction (as static plans are judged)
and with correction. No LM is involved. With ``--grammar`` each oracle problem is also checked to
be a sentence of the task's LLM+P grammar (:func:`lookplangraph.planners.pddl.grammar.accepts`:
llama.cpp's grammar engine over the embedded 0.5B model's vocabulary), i.e. that constrained
decoding can write it.

    .venv/bin/python benchmarks/pddl_oracle.py [--splits behavior office virtualhome] [--data-dir DIR]
        [--limit N] [--time-limit 60] [--full] [--grammar] [--out runs/pddl_oracle]

Writes ``OUT/results.jsonl`` (one task per line: kind, seconds, plan, verdicts, reasons) and
prints a table per split: solved, valid (strict SR without / with correction), failure kinds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from grasif import dataset
from grasif.validate import validate_plan
from lookplangraph.planners.pddl.fast_downward import solve
from lookplangraph.planners.pddl.grammar import accepts, problem_grammar
from lookplangraph.planners.pddl.problem import (PddlNames, PlanError, domain, final_graph, frame_goal, graph_problem,
                                                 oracle_goal, plan_actions, relevant_nodes)


def oracle(task, *, full: bool = False, time_limit_s: int = 60, vocab=None) -> dict:
    """One task through the oracle pipeline (module doc); a dict for results.jsonl. ``vocab``: a
    ``llama_cpp.Llama`` to check the problem against the task's grammar with."""
    initial = task.graph
    names = PddlNames(initial.nodes)
    row = {"split": task.split, "task_id": task.id}
    try:
        final = final_graph(initial, task.ground_truth_plan)
    except PlanError as exc:
        return row | {"kind": "gt_plan_invalid", "reason": str(exc)}
    facts, nodes, unexpressed = oracle_goal(initial, final, names)
    row["unexpressed"] = unexpressed
    keep = None if full else relevant_nodes(initial, nodes)
    facts = list(dict.fromkeys(facts + frame_goal(final, keep if keep is not None else initial.nodes, names)))
    problem = graph_problem(initial, facts, name=task.id, keep=keep, names=names)
    if vocab is not None:
        row["in_grammar"] = accepts(problem_grammar(initial, names), problem, vocab)
    sol = solve(domain(), problem, time_limit_s=time_limit_s)
    row |= {"kind": sol.kind, "seconds": round(sol.seconds, 3), "objects": len(keep) if keep is not None else len(initial.nodes)}
    if not sol.solved:
        return row | {"reason": sol.message}
    try:
        plan = plan_actions(sol.plan, names)
    except PlanError as exc:
        return row | {"kind": "plan_unmappable", "reason": str(exc)}
    strict = validate_plan(initial, plan, task.goal, correct=False)
    corrected = validate_plan(initial, plan, task.goal, correct=True)
    row |= {"plan": [str(a) for a in plan], "valid": strict.success, "valid_changed_only": strict.success_changed_only,
            "valid_corrected": corrected.success, "precision": strict.precision}
    if not strict.success:
        bad = strict.infeasible[:1]
        row["reason"] = (f"step {bad[0].index} {bad[0].action}: {bad[0].feedback}" if bad
                         else "; ".join([i.label for i in strict.goal.items if not i.ok][:3]
                                        + [f"side effect {i.label}" for i in strict.side_effects[:3]]))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--splits", nargs="+", default=["behavior", "office", "virtualhome"])
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None, help="first N tasks per split")
    ap.add_argument("--time-limit", type=int, default=60, help="Fast Downward's overall limit per task (s)")
    ap.add_argument("--full", action="store_true", help="declare the whole graph, not only the goal's nodes")
    ap.add_argument("--grammar", action="store_true", help="also check each problem against the task's LLM+P grammar")
    ap.add_argument("--out", type=Path, default=Path("runs/pddl_oracle"))
    args = ap.parse_args(argv)
    from tqdm import tqdm

    vocab = None
    if args.grammar:
        import llama_cpp
        from lookplangraph.lm import embedded as models

        vocab = llama_cpp.Llama(model_path=str(models.ensure_model("qwen2.5-coder-0.5b")), vocab_only=True, verbose=False)

    root = args.data_dir or dataset.default_data_dir()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    t0 = time.perf_counter()
    with open(args.out / "results.jsonl", "w") as f:
        for split in args.splits:
            tasks = dataset.load_split(root, split)[: args.limit]
            for task in tqdm(tasks, desc=split, file=sys.stderr):
                row = oracle(task, full=args.full, time_limit_s=args.time_limit, vocab=vocab)
                rows.append(row)
                f.write(json.dumps(row) + "\n")
    print(f"{'split':<12} {'tasks':>5} {'solved':>6} {'valid':>6} {'valid%':>7} {'+corr':>6} {'median s':>8} "
          f"{'in grammar':>10}  failure kinds")
    for split in args.splits:
        group = [r for r in rows if r["split"] == split]
        if not group:
            continue
        solved = [r for r in group if r["kind"] == "solved"]
        valid = sum(bool(r.get("valid")) for r in group)
        corr = sum(bool(r.get("valid_corrected")) for r in group)
        secs = sorted(r["seconds"] for r in group if "seconds" in r)
        med = secs[len(secs) // 2] if secs else 0.0
        kinds = Counter(r["kind"] for r in group if r["kind"] != "solved")
        kinds.update("invalid plan" for r in solved if not r.get("valid"))
        checked = [r["in_grammar"] for r in group if "in_grammar" in r]
        gram = f"{sum(checked)}/{len(checked)}" if checked else "–"
        print(f"{split:<12} {len(group):>5} {len(solved):>6} {valid:>6} {valid / len(group):>7.1%} {corr:>6} {med:>8.2f} "
              f"{gram:>10}  "
              + ", ".join(f"{k} {v}" for k, v in kinds.most_common()))
    print(f"{time.perf_counter() - t0:.0f} s; rows in {args.out / 'results.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
