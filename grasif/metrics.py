"""Benchmark metrics over many episodes (paper section VI-C, appendix B).

* SR  — successful tasks / tasks;
* APP — mean over tasks of M^C_i / M_i (correctly changed goal units / goal units);
* TPA — tokens per action, averaged over *successful* tasks that recorded tokens;
* plan length — mean actions taken, beside the ground-truth plan length.
"""

from __future__ import annotations

from statistics import mean

from pydantic import BaseModel


class EpisodeRecord(BaseModel):
    """One task's outcome, as an evaluation writes it (one JSON line per episode)."""

    task_id: str
    split: str = ""
    success: bool
    precision: float
    actions: int  # actions the method produced (LM actions, not expanded primitives)
    tokens: int | None = None  # prompt + completion tokens spent planning, if recorded
    gt_actions: int | None = None
    no_change: bool = False  # the task's goal equals its initial state
    wall_s: float | None = None


class Summary(BaseModel):
    tasks: int
    sr: float
    app: float
    tpa: float | None  # None when no successful task recorded tokens
    mean_actions: float | None
    mean_gt_actions: float | None
    mean_wall_s: float | None


def summarize(records: list[EpisodeRecord]) -> Summary:
    if not records:
        return Summary(tasks=0, sr=0.0, app=0.0, tpa=None, mean_actions=None, mean_gt_actions=None, mean_wall_s=None)
    tpa = [r.tokens / r.actions for r in records if r.success and r.tokens is not None and r.actions > 0]
    gt = [r.gt_actions for r in records if r.gt_actions is not None]
    wall = [r.wall_s for r in records if r.wall_s is not None]
    return Summary(
        tasks=len(records),
        sr=sum(r.success for r in records) / len(records),
        app=mean(r.precision for r in records),
        tpa=mean(tpa) if tpa else None,
        mean_actions=mean(r.actions for r in records),
        mean_gt_actions=mean(gt) if gt else None,
        mean_wall_s=mean(wall) if wall else None,
    )


def summary_table(rows: dict[str, Summary]) -> str:
    """A plain-text table, one row per label (split, method, ...)."""
    head = f"{'':<16}{'tasks':>6}{'SR':>8}{'APP':>8}{'TPA':>9}{'actions':>9}{'GT act.':>9}"
    lines = [head, "-" * len(head)]
    for label, s in rows.items():
        tpa = f"{s.tpa:.1f}" if s.tpa is not None else "-"
        act = f"{s.mean_actions:.2f}" if s.mean_actions is not None else "-"
        gt = f"{s.mean_gt_actions:.2f}" if s.mean_gt_actions is not None else "-"
        lines.append(f"{label:<16}{s.tasks:>6}{s.sr:>8.3f}{s.app:>8.3f}{tpa:>9}{act:>9}{gt:>9}")
    return "\n".join(lines)
