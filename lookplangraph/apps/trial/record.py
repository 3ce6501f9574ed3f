"""A trial on disk: :class:`Trial` creates or opens a trial directory (``runs/<trial>/``, its files:
:mod:`lookplangraph.apps.trial`) and keeps its settings, task, events and photos there;
:func:`task_from_graph`, :func:`new_trial_dir`, :func:`trial_dirs` and :func:`report_table` make a
task, name, find and report trials. What cannot be used raises :class:`TrialError`."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grasif.goals import GoalSpec
from grasif.metrics import summarize
from grasif.task import Task, load_task, save_task
from sgs.io import graph_to_dict, load_graph

from lookplangraph.planners.config import PlannerConfig
from lookplangraph.evaluation.runner import read_results, to_record
from lookplangraph.apps.trial.photos import DEFAULT_MAX_PHOTO_BYTES, check_photo_size, photo_type


class TrialError(ValueError):
    """A trial directory or input that cannot be used; the message names the problem."""


def _slug(text: str, n: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:n] or "task"


# -- the trial directory -----------------------------------------------------------------------
class Trial:
    """A trial directory (module doc). :meth:`create` starts one, ``Trial(dir)`` opens one."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        if not (self.dir / "trial.json").is_file():
            raise TrialError(f"{self.dir}: not a trial directory (no trial.json)")
        try:
            self.settings = json.loads((self.dir / "trial.json").read_text())
        except json.JSONDecodeError as exc:
            raise TrialError(f"{self.dir / 'trial.json'}: not valid JSON ({exc})") from None
        try:
            self.task = load_task(self.dir / "task.json")
        except ValueError as exc:
            raise TrialError(str(exc)) from None

    @classmethod
    def create(cls, directory: str | Path, task: Task, *, lm: str, vlm: str | None = None, parser_lm: str | None = None,
               planner: PlannerConfig | None = None, lm_options: dict | None = None,
               vlm_options: dict | None = None) -> "Trial":
        """A new trial of ``task`` in ``directory`` (which must not hold one yet). The
        augmentation mode is ``vlm`` with a describer (``vlm``), else ``parser``."""
        directory = Path(directory)
        if (directory / "trial.json").exists():
            raise TrialError(f"{directory} already holds a trial; resume it with --resume {directory}")
        (directory / "photos").mkdir(parents=True, exist_ok=True)
        save_task(task, directory / "task.json")
        settings = {"name": directory.name, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "lm": lm,
                    "lm_options": lm_options or {}, "vlm": vlm, "vlm_options": vlm_options or {},
                    "parser_lm": parser_lm, "augmentation": "vlm" if vlm else "parser",
                    "planner": asdict(planner or PlannerConfig())}
        (directory / "trial.json").write_text(json.dumps(settings, indent=1) + "\n")
        return cls(directory)

    @property
    def name(self) -> str:
        return self.settings.get("name") or self.dir.name

    @property
    def augmentation_mode(self) -> str:
        return self.settings.get("augmentation", "parser")

    def planner_config(self) -> PlannerConfig:
        return PlannerConfig.from_dict(self.settings.get("planner", {}), where=str(self.path("trial.json")))

    def path(self, name: str) -> Path:
        return self.dir / name

    def answers(self) -> list[dict]:
        """The recorded operator answers (a torn last line is skipped)."""
        return read_results(self.path("operator.jsonl"))

    def result(self) -> dict | None:
        p = self.path("result.json")
        return json.loads(p.read_text()) if p.exists() else None

    def event(self, kind: str, **info: Any) -> None:
        with open(self.path("events.jsonl"), "a") as f:
            f.write(json.dumps({"event": kind, "at": round(time.time(), 3), **info}) + "\n")

    def store_photo(self, request_id: int, node: str, data: bytes, limit: int = DEFAULT_MAX_PHOTO_BYTES) -> Path:
        """Check ``data`` (a real photo, at most ``limit`` bytes) and save it as
        ``photos/NNN_node.ext``; :class:`PhotoError` otherwise (nothing is saved)."""
        check_photo_size(len(data), limit)
        ext = photo_type(data)
        (self.dir / "photos").mkdir(exist_ok=True)
        path = self.dir / "photos" / f"{request_id:03d}_{_slug(node, 60)}.{ext}"
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
        return path


def new_trial_dir(task: Task, root: Path = Path("runs")) -> Path:
    return root / f"trial_{time.strftime('%Y%m%d-%H%M%S')}_{_slug(task.id, 40)}"


def task_from_graph(graph_path: str | Path, instruction: str, goal: GoalSpec | None = None,
                    task_id: str | None = None) -> Task:
    """A task for a researcher's own building: a graph in the paper's JSON format and an
    instruction (and a goal, when given; else the checklist asks about the instruction itself)."""
    path = Path(graph_path)
    try:
        graph = load_graph(path)  # errors name the file
    except FileNotFoundError:
        raise TrialError(f"{path}: no such graph file") from None
    except ValueError as exc:  # bad JSON, or a GraphError
        raise TrialError(str(exc)) from None
    task = Task(id=task_id or _slug(instruction), split="trial", instruction=instruction,
                initial_graph=graph_to_dict(graph), goal=goal or GoalSpec(), provenance={"source": str(path)})
    if goal is not None:
        problems = goal.check_names(task.graph)
        if problems:
            raise TrialError("; ".join(problems))
    return task


# -- reports --------------------------------------------------------------------------------------
def trial_dirs(paths: list[str | Path]) -> list[Path]:
    """Trial directories among ``paths``: each path that is one, or the trial directories right
    inside it."""
    out = []
    for p in map(Path, paths):
        if (p / "trial.json").is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(c for c in p.iterdir() if (c / "trial.json").is_file())
    return out


def report_table(dirs: list[Path]) -> str:
    """One line per trial and the totals as a benchmark reports them (SR, APP, actions), plus
    primitive steps, failed steps, photos and operator time. Unfinished trials are listed and
    left out of the totals."""
    head = f"{'trial':<44}{'task':<22}{'success':>8}{'prec.':>7}{'actions':>8}{'steps':>7}{'failed':>7}{'photos':>7}{'op. min':>8}{'LM calls':>9}"
    lines = [head, "-" * len(head)]
    rows = []
    for d in dirs:
        try:
            trial = Trial(d)
        except TrialError as exc:
            lines.append(f"{d.name:<44}{'(unreadable: ' + str(exc)[:60] + ')'}")
            continue
        r = trial.result()
        if r is None:
            n = len(trial.answers())
            lines.append(f"{trial.name[:43]:<44}{trial.task.id[:21]:<22}{'unfinished':>8}   ({n} operator answers so far)")
            continue
        rows.append(r)
        lines.append(f"{trial.name[:43]:<44}{trial.task.id[:21]:<22}{'yes' if r['success'] else 'no':>8}{r['precision']:>7.3f}"
                     f"{len(r['actions']):>8}{len(r['executed']):>7}{len(r['failed_steps']):>7}{r['photos']:>7}"
                     f"{r['operator_seconds'] / 60:>8.1f}{r['lm_calls']:>9}")
    if rows:
        s = summarize([to_record(r) for r in rows])
        lines.append("-" * len(head))
        steps = sum(len(r["executed"]) for r in rows) / len(rows)
        op = sum(r["operator_seconds"] for r in rows) / len(rows) / 60
        lines.append(f"{len(rows)} finished trial(s): SR {s.sr:.3f}, SR chg. {s.sr_changed_only:.3f}, APP {s.app:.3f}, "
                     f"actions {s.mean_actions:.2f}, primitive steps {steps:.2f}, "
                     f"failed steps {sum(len(r['failed_steps']) for r in rows)}, operator {op:.1f} min per trial"
                     + (f", TPA {s.tpa:.1f}" if s.tpa is not None else ""))
    return "\n".join(lines)
