"""Benchmark metrics over many episodes (paper section VI-C, appendix B).

* SR  — successful tasks / tasks (strict, the paper's: goal reached, no infeasible action and no
  side effect where the goal says everything else stays unchanged);
* SR chg. — the same over the goal units alone, side effects not counted (``sr_changed_only``;
  unknown for results written before it was recorded);
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
    success: bool  # strict: goal units met and no side effect
    success_changed_only: bool | None = None  # goal units met, side effects ignored; None: not recorded
    precision: float
    actions: int  # actions the method produced (LM actions, not expanded primitives)
    tokens: int | None = None  # prompt + completion tokens spent planning, if recorded
    gt_actions: int | None = None
    no_change: bool = False  # the task's goal equals its initial state
    wall_s: float | None = None
    lm_calls: int | None = None  # LM calls made, if recorded
    lm_seconds: float | None = None  # seconds spent in those calls


class Summary(BaseModel):
    tasks: int
    sr: float
    sr_changed_only: float | None = None  # None unless every task recorded it
    app: float
    tpa: float | None  # None when no successful task recorded tokens
    mean_actions: float | None
    mean_gt_actions: float | None
    mean_wall_s: float | None
    lm_seconds_per_call: float | None = None  # over all recorded calls of the tasks


def summarize(records: list[EpisodeRecord]) -> Summary:
    if not records:
        return Summary(tasks=0, sr=0.0, app=0.0, tpa=None, mean_actions=None, mean_gt_actions=None, mean_wall_s=None)
    tpa = [r.tokens / r.actions for r in records if r.success and r.tokens is not None and r.actions > 0]
    gt = [r.gt_actions for r in records if r.gt_actions is not None]
    wall = [r.wall_s for r in records if r.wall_s is not None]
    timed = [r for r in records if r.lm_calls and r.lm_seconds is not None]
    calls = sum(r.lm_calls for r in timed)
    lenient = [r.success_changed_only for r in records]
    return Summary(
        tasks=len(records),
        sr=sum(r.success for r in records) / len(records),
        sr_changed_only=sum(lenient) / len(records) if None not in lenient else None,
        app=mean(r.precision for r in records),
        tpa=mean(tpa) if tpa else None,
        mean_actions=mean(r.actions for r in records),
        mean_gt_actions=mean(gt) if gt else None,
        mean_wall_s=mean(wall) if wall else None,
        lm_seconds_per_call=round(sum(r.lm_seconds for r in timed) / calls, 3) if calls else None,
    )


def summary_table(rows: dict[str, Summary]) -> str:
    """A plain-text table, one row per label (split, method, run ...)."""
    width = max([16] + [len(label) + 2 for label in rows])
    head = f"{'':<{width}}{'tasks':>6}{'SR':>8}{'SR chg.':>9}{'APP':>8}{'TPA':>9}{'actions':>9}{'GT act.':>9}{'s/task':>8}{'s/call':>8}"
    lines = [head, "-" * len(head)]

    def f(v, fmt):
        return format(v, fmt) if v is not None else "-"

    for label, s in rows.items():
        lines.append(f"{label:<{width}}{s.tasks:>6}{s.sr:>8.3f}{f(s.sr_changed_only, '.3f'):>9}{s.app:>8.3f}{f(s.tpa, '.1f'):>9}"
                     f"{f(s.mean_actions, '.2f'):>9}{f(s.mean_gt_actions, '.2f'):>9}{f(s.mean_wall_s, '.1f'):>8}"
                     f"{f(s.lm_seconds_per_call, '.1f'):>8}")
    return "\n".join(lines)
