"""The harness proof: the privileged expert (:mod:`lookplangraph.distill.teacher.expert`) in the loop
of each planner, over whole splits, static and dynamic seeds, in the graph environment and the
VirtualHome adapter. Strict SR 1.0 says the harness (prompts' reply path, SGS checks, corrections,
environments, goal judgement) lets a perfect policy succeed; every failure is listed with its
reason, so that what stays below 1.0 is named task by task.

``lookplangraph expert-proof`` runs it and writes ``proof.csv`` (one row per planner × correction ×
environment × seed: episodes, SR, SR changed-only, APP, calls/task) and ``failures.csv`` (planner,
correction, environment, seed, task, termination, what was not met). See ``docs/guides/expert.md``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Callable

from grasif.task import Task

from lookplangraph.distill.teacher.expert import Expert
from lookplangraph.evaluation.runner import check_env, make_env
from lookplangraph.planners import get_planner
from lookplangraph.planners.config import PlannerConfig, ReActConfig



@dataclass
class ProofRow:
    planner: str
    correction: str
    env: str
    seed: int | None
    split: str
    episodes: int = 0
    success: list[bool] = field(default_factory=list)
    success_changed: list[bool] = field(default_factory=list)
    precision: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"planner": self.planner, "correction": self.correction, "env": self.env,
                "seed": "static" if self.seed is None else self.seed, "split": self.split,
                "episodes": self.episodes, "sr": round(mean(self.success), 4) if self.success else None,
                "sr_changed_only": round(mean(self.success_changed), 4) if self.success else None,
                "app": round(mean(self.precision), 4) if self.precision else None,
                "calls_per_task": round(mean(self.calls), 2) if self.calls else None,
                "failures": len(self.failures)}


def run_proof(tasks: list[Task], *, planners: list[tuple[str, str]], seeds: list[int | None], env: str = "graph",
              max_actions: int = 200, progress: Callable[[int, int, dict], None] | None = None) -> list[ProofRow]:
    """One :class:`ProofRow` per (planner, correction) × seed over ``tasks`` (all of one split)
    in ``env``. ``planners``: ``(planner, correction)`` pairs."""
    check_env(env, tasks)
    rows = []
    total, done = len(planners) * len(seeds) * len(tasks), 0
    expert = Expert()
    for planner, correction in planners:
        plan = get_planner(planner)
        cfg = PlannerConfig(max_actions=max_actions, correction=correction,
                            react=ReActConfig(max_steps=2 * max_actions))  # ReAct's call limit beside the action limit
        for seed in seeds:
            row = ProofRow(planner, correction, env, seed, tasks[0].split if tasks else "")
            for task in tasks:
                environment = make_env(task, seed, env)
                expert.begin_episode(task, environment, planner, cfg)
                r = plan.run(task, environment, expert, cfg)
                row.episodes += 1
                row.success.append(r.success)
                row.success_changed.append(r.success_changed_only)
                row.precision.append(r.precision)
                row.calls.append(r.lm_calls)
                if not r.success:
                    row.failures.append({"planner": planner, "correction": correction, "env": env,
                                         "seed": "static" if seed is None else seed, "task": task.id,
                                         "termination": r.termination,
                                         "why": "; ".join(r.goal_not_met[:3] + r.infeasible[:1])})
                done += 1
                if progress:
                    progress(done, total, {"task_id": task.id, "success": r.success})
            rows.append(row)
    return rows


def proof_table(rows: list[ProofRow]) -> str:
    head = f"{'planner':<14}{'correction':<11}{'env':<13}{'seed':<8}{'split':<12}{'episodes':>9}{'SR':>7}{'SR chg.':>8}{'APP':>7}{'calls':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        d = r.as_dict()
        if not r.episodes:
            continue  # nothing ran (every task of the split left out)
        lines.append(f"{d['planner']:<14}{d['correction']:<11}{d['env']:<13}{str(d['seed']):<8}{d['split']:<12}"
                     f"{d['episodes']:>9}{d['sr']:>7.3f}{d['sr_changed_only']:>8.3f}{d['app']:>7.3f}{d['calls_per_task']:>7.1f}")
    return "\n".join(lines)


def write_proof(rows: list[ProofRow], out: Path) -> None:
    """``out/proof.csv`` and ``out/failures.csv`` (module doc)."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "proof.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ProofRow("", "", "", None, "").as_dict()))
        w.writeheader()
        w.writerows(r.as_dict() for r in rows)
    with open(out / "failures.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["planner", "correction", "env", "seed", "task", "termination", "why"])
        w.writeheader()
        for r in rows:
            w.writerows(r.failures)
