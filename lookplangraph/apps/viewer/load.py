"""Reading run directories for the episode viewer.

:func:`load_runs` (and the functions under it) take evaluation directories (``lookplangraph
eval``: ``results.jsonl``, ``traces/``, ``config.json``), single-episode directories
(``lookplangraph run``: ``trace.jsonl``, ``result.json``, ``steps.jsonl``, ``images/``) and
trial directories (``lookplangraph trial``), or a directory holding them, and return
:class:`Run` objects of :class:`Episode` objects; a trace without a results row is an
*unfinished* episode. Tasks come from a trial's own ``task.json``, else from the GraSIF data
directory (``--data-dir``, default ``$LOOKPLANGRAPH_DATA``); without its task an episode is
still shown, without the memory graph. The reasons that ``lookplangraph explain`` (or ``view
--explain``) asked after the run are read from the run directory's ``reasons.jsonl``
(:func:`lookplangraph.evaluation.explain.read_reasons`) into :attr:`Episode.asked`.

Invariants: JSON-lines files are read leniently (a torn line is skipped and named in
:attr:`Episode.warnings` / :attr:`Run.warnings`, never fatal); a directory that is none of the
above, or a broken file that must be whole (``trial.json``), raises :class:`ViewerError` naming
the file. Docs: ``docs/guides/viewer.md`` (*Reading run directories*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from grasif.task import Task, TaskError, load_task


class ViewerError(ValueError):
    """A path that cannot be viewed; the message names the file and what is wrong."""


@dataclass
class Episode:
    """One episode as read from disk. ``result`` is the results row (an ``EpisodeResult`` as a
    dict, for a trial the checklist result or else the planner's ``episode.json``); ``None`` while
    unfinished. ``steps`` are the trace's step records in call order (a record written twice, as
    SayPlan does for the plan it executes, counts once: the later line)."""

    run: int  # index into the list of runs
    kind: str  # eval | run | trial
    directory: Path  # where relative image paths are resolved
    split: str | None
    task_id: str | None
    result: dict | None
    steps: list[dict]
    task: Task | None = None
    env_steps: list[dict] = field(default_factory=list)  # steps.jsonl of a single-episode directory
    augmentations: list[dict] = field(default_factory=list)  # a trial's augmentations.jsonl
    checklist: list[dict] | None = None  # a trial's marked goal checklist
    asked: dict[int, dict] = field(default_factory=dict)  # reasons asked after the run, by call (module doc)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Run:
    """One run directory and its episodes."""

    path: Path
    kind: str
    label: str
    config: dict | None = None
    summary: dict | None = None
    episodes: list[Episode] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def read_jsonl(path: Path) -> tuple[list[dict], list[str]]:
    """The JSON objects of a JSON-lines file and a warning per line skipped (not JSON, or not an
    object); a missing file gives nothing and no warning."""
    if not path.exists():
        return [], []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return [], [f"{path}: cannot be read ({exc.strerror})"]
    rows, warnings = [], []
    lines = text.splitlines()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            where = "its last line is torn (an interrupted write)" if i == len(lines) else f"line {i} is not JSON"
            warnings.append(f"{path.name}: {where}; skipped")
            continue
        if not isinstance(row, dict):
            warnings.append(f"{path.name}: line {i} is not a JSON object; skipped")
            continue
        rows.append(row)
    return rows, warnings


def read_json(path: Path, *, required: bool = False) -> tuple[dict | None, list[str]]:
    """A JSON object file: ``(data, [])``; ``(None, [why])`` when missing or broken, or a
    :class:`ViewerError` with ``required``."""
    if not path.exists():
        if required:
            raise ViewerError(f"{path}: missing")
        return None, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if required:
            raise ViewerError(f"{path}: not valid JSON ({exc})") from None
        return None, [f"{path.name}: not valid JSON ({exc}); ignored"]
    if not isinstance(data, dict):
        if required:
            raise ViewerError(f"{path}: not a JSON object")
        return None, [f"{path.name}: not a JSON object; ignored"]
    return data, []


def step_records(rows: list[dict], source: str) -> tuple[list[dict], list[str]]:
    """Trace rows as step records in call order: a row without a ``call`` number is skipped, a
    call written twice keeps its later row (module doc)."""
    by_call: dict[int, dict] = {}
    warnings = []
    for row in rows:
        call = row.get("call")
        if not isinstance(call, int):
            warnings.append(f"{source}: a row without a call number; skipped")
            continue
        by_call[call] = row
    return [by_call[c] for c in sorted(by_call)], warnings


def kind_of(path: Path) -> str | None:
    """``trial``, ``eval``, ``run`` or None (module doc)."""
    if (path / "trial.json").is_file():
        return "trial"
    if (path / "results.jsonl").is_file() or (path / "traces").is_dir():
        return "eval"
    if (path / "trace.jsonl").is_file() or (path / "result.json").is_file():
        return "run"
    return None


def expand(paths: list[Path]) -> list[Path]:
    """Run directories among ``paths``: each path itself, or its run subdirectories (sorted);
    :class:`ViewerError` for a path that is neither."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise ViewerError(f"{p}: no such directory")
        if not p.is_dir():
            raise ViewerError(f"{p}: not a directory (give a run directory: lookplangraph eval, run or trial output)")
        if kind_of(p):
            out.append(p)
            continue
        inner = sorted(c for c in p.iterdir() if c.is_dir() and kind_of(c))
        if not inner:
            raise ViewerError(f"{p}: not a run directory: expected results.jsonl and traces/ (lookplangraph eval), "
                              "trace.jsonl or result.json (lookplangraph run), trial.json (lookplangraph trial), "
                              "or subdirectories holding them")
        out.extend(inner)
    return out


class TaskSource:
    """Finds tasks by split and id in a GraSIF data directory (``None``: none given), caching
    them; each problem is said once in :attr:`warnings`."""

    def __init__(self, data_dir: Path | None):
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.cache: dict[tuple[str, str], Task | None] = {}
        self.warnings: list[str] = []
        if self.data_dir is not None and not self.data_dir.is_dir():
            self.warnings.append(f"{self.data_dir}: no such GraSIF data directory; memory graphs and goal units "
                                 "need the tasks (--data-dir)")
            self.data_dir = None

    def get(self, split: str | None, task_id: str | None) -> tuple[Task | None, str | None]:
        """The task and, when it is not found, why."""
        if not split or not task_id:
            return None, "the episode names no task"
        if self.data_dir is None:
            return None, "no GraSIF data directory given (--data-dir or $LOOKPLANGRAPH_DATA): no task to draw from"
        key = (split, task_id)
        if key not in self.cache:
            try:
                self.cache[key] = load_task(self.data_dir / split / f"{task_id}.json")
            except TaskError as exc:
                self.cache[key] = None
                self.warnings.append(str(exc))
        task = self.cache[key]
        return task, None if task is not None else f"task {split}/{task_id} not found in {self.data_dir}"


def load_run(path: Path, index: int, tasks: TaskSource) -> Run:
    """One run directory (module doc); :class:`ViewerError` when it is not one."""
    kind = kind_of(path)
    if kind == "eval":
        return _load_eval(path, index, tasks)
    if kind == "run":
        return _load_single(path, index, tasks)
    if kind == "trial":
        return _load_trial(path, index)
    raise ViewerError(f"{path}: not a run directory")


def load_runs(paths: list[Path], data_dir: Path | None = None) -> list[Run]:
    """Every run directory of ``paths`` (:func:`expand`), with the tasks of their episodes."""
    tasks = TaskSource(data_dir)
    runs = [load_run(p, i, tasks) for i, p in enumerate(expand(paths))]
    if runs and tasks.warnings:
        runs[0].warnings.extend(dict.fromkeys(tasks.warnings))
    return runs


def _label(path: Path) -> str:
    return path.resolve().name or str(path)


def _load_eval(path: Path, index: int, tasks: TaskSource) -> Run:
    run = Run(path, "eval", _label(path))
    run.config, w1 = read_json(path / "config.json")
    run.summary, w2 = read_json(path / "summary.json")
    rows, w3 = read_jsonl(path / "results.jsonl")
    run.warnings += w1 + w2 + w3
    reasons = _reasons(path)
    seen: set[tuple[str, str]] = set()
    finished: list[tuple[str, str, dict]] = []
    for row in rows:
        split, task_id = row.get("split"), row.get("task_id")
        if not isinstance(split, str) or not isinstance(task_id, str):
            run.warnings.append("results.jsonl: a row without split and task_id; skipped")
            continue
        if (split, task_id) in seen:
            run.warnings.append(f"results.jsonl: {split}/{task_id} appears twice; the first row is shown")
            continue
        seen.add((split, task_id))
        finished.append((split, task_id, row))
    traces = path / "traces"
    unfinished = []
    if traces.is_dir():
        for f in sorted(traces.glob("*.jsonl")):
            split, sep, task_id = f.stem.partition("__")
            if sep and (split, task_id) not in seen:
                unfinished.append((split, task_id, None))
    for split, task_id, row in finished + unfinished:
        trace = traces / f"{split}__{task_id}.jsonl"
        raw, warnings = read_jsonl(trace)
        steps, w = step_records(raw, trace.name)
        if row is not None and not trace.exists():
            warnings.append(f"traces/{trace.name} is missing: no timeline")
        task, why = tasks.get(split, task_id)
        ep = Episode(index, "eval", path, split, task_id, row, steps, task, warnings=warnings + w,
                     asked=_asked(reasons, split, task_id))
        if why and task is None:
            ep.warnings.append(why)
        run.episodes.append(ep)
    return run


def _load_single(path: Path, index: int, tasks: TaskSource) -> Run:
    run = Run(path, "run", _label(path))
    result, warnings = read_json(path / "result.json")
    raw, w = read_jsonl(path / "trace.jsonl")
    steps, w2 = step_records(raw, "trace.jsonl")
    env_steps, w3 = read_jsonl(path / "steps.jsonl")
    split = result.get("split") if result else None
    task_id = result.get("task_id") if result else None
    task, why = None, None
    if (path / "task.json").is_file():
        try:
            task = load_task(path / "task.json")
        except TaskError as exc:
            why = str(exc)
    if task is None and why is None:
        task, why = tasks.get(split, task_id)
    if result is None:
        warnings.append("result.json is missing: the episode did not finish")
    ep = Episode(index, "run", path, split, task_id, result, steps, task, env_steps=env_steps,
                 warnings=warnings + w + w2 + w3 + ([why] if why and task is None else []))
    if task is not None and ep.split is None:
        ep.split, ep.task_id = task.split, task.id
    ep.asked = _asked(_reasons(path), ep.split, ep.task_id)
    run.episodes.append(ep)
    return run


def _reasons(path: Path) -> dict:
    # here, not at the top: it adds ~0.05 s to every command's start (lookplangraph --help)
    from lookplangraph.evaluation.explain import read_reasons

    return read_reasons(path)


def _asked(reasons: dict, split: str | None, task_id: str | None) -> dict[int, dict]:
    return {call: row for (s, t, call), row in reasons.items() if s == split and t == task_id}


def _load_trial(path: Path, index: int) -> Run:
    settings, _ = read_json(path / "trial.json", required=True)
    run = Run(path, "trial", str(settings.get("name") or _label(path)), config=settings)
    warnings: list[str] = []
    try:
        task = load_task(path / "task.json")
    except TaskError as exc:
        task = None
        warnings.append(str(exc))
    result, w1 = read_json(path / "result.json")
    episode, w2 = read_json(path / "episode.json")
    raw, w3 = read_jsonl(path / "trace.jsonl")
    steps, w4 = step_records(raw, "trace.jsonl")
    augs, w5 = read_jsonl(path / "augmentations.jsonl")
    warnings += w1 + w2 + w3 + w4 + w5
    checklist = result.get("checklist") if result else None
    if result is None and episode is not None:
        warnings.append("the goal checklist is not filled in yet: the verdict shown is the planner's own")
    elif result is None:
        warnings.append("the trial has not finished")
    row = result or episode
    ep = Episode(index, "trial", path, task.split if task else None, task.id if task else None, row, steps, task,
                 augmentations=augs, checklist=checklist if isinstance(checklist, list) else None, warnings=warnings)
    run.episodes.append(ep)
    return run
