"""Reasons on demand for a recorded episode: the prompt of each decision rebuilt, and the LM asked
why it chose what it did.

A LookPlanGraph run without reasons (``reason_max_length = 0``) records each decision's reply,
not its prompt. :func:`replay_prompts` rebuilds the prompts by running the episode again with the
same settings, task and environment, the recorded replies given back in order by a
:class:`~lookplangraph.lm.scripted.ScriptedBackend` (no model runs): the loop, the corrections and
the environment are deterministic, so every prompt is the one the model saw. The replay must
propose what the trace recorded at every call; where it does not (another version, other
settings), :class:`ReplayError` says at which call. :func:`explain_steps` then asks a model
(normally the run's own) for the reason of chosen steps with
:func:`lookplangraph.agent.decide.explain`: the action is fixed, only the reason is decoded, and
no prompt is changed. Only runs of the LookPlanGraph planner with ground-truth augmentation can be
replayed.

The reasons asked are kept in the run directory's :data:`REASONS_FILE` (``reasons.jsonl``): one
JSON object per ``(split, task_id, call)`` with the ``proposed`` action it explains, the
``reason``, the ``lm`` spec that gave it and when (``asked``). :func:`save_reasons` merges new rows
into the file (a row replaces the one of the same key) and writes it whole to a temporary file that
is renamed, so a reader never sees half; :func:`read_reasons` reads it leniently (a torn or foreign
line is skipped). The viewer shows a saved reason for a step whose trace has none, as asked after
the fact, when the step still proposes that action. Docs: ``docs/concepts/loop.md#reasons-on-demand``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Iterator

from grasif import dataset
from grasif.task import Task, TaskError, load_task

from lookplangraph.agent.decide import LMReply, explain, reply_of
from lookplangraph.evaluation.runner import make_env
from lookplangraph.evaluation.settings import RUN_KEYS, RunSettings, SettingsError, load_settings
from lookplangraph.lm.base import Usage
from lookplangraph.lm.scripted import ScriptedBackend
from lookplangraph.planners import get_planner
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import StepRecord


class ReplayError(ValueError):
    """A run that cannot be replayed, or whose replay proposes other actions than its trace."""


@dataclass(frozen=True)
class Prompt:
    """One recorded decision with the prompt it was made on (``static``: system message,
    ``dynamic``: user message, or in the conversation layout the turns after the system message)."""

    call: int
    reply: str
    static: str
    dynamic: "str | list[dict[str, str]]"


def read_trace(path: Path) -> list[dict]:
    """The step records of a trace file (one JSON object per line); :class:`ReplayError` if it
    is missing or unreadable."""
    try:
        lines = path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as exc:
        raise ReplayError(f"cannot read the trace {path}: {exc}") from None


def load_episode(run_dir: Path, task: str | None = None, data_dir: Path | None = None,
                 task_file: Path | None = None) -> tuple[Task, RunSettings, list[dict]]:
    """The task, settings and trace of one recorded episode: a ``run`` directory (``task.json``,
    ``config.json``, ``trace.jsonl``) or an ``eval`` directory (``config.json``,
    ``traces/SPLIT__ID.jsonl``) with ``task`` (``SPLIT/ID`` or ``ID``; may be left out when it
    holds one episode), the task read from the data build at ``data_dir`` (default: the user's)
    or from ``task_file``. Raises :class:`ReplayError` saying what is missing."""
    run_dir = Path(run_dir)
    try:
        recorded = json.loads((run_dir / "config.json").read_text())
    except FileNotFoundError:
        raise ReplayError(f"{run_dir}: no config.json (not a run or eval directory, or written before runs "
                          "recorded their settings)") from None
    except ValueError as exc:
        raise ReplayError(f"{run_dir}/config.json is not JSON: {exc}") from None
    known = set(RUN_KEYS) | {f.name for f in fields(PlannerConfig)}
    try:
        settings = load_settings(None, {k: v for k, v in recorded.items() if k in known}, note=lambda _: None)
    except (SettingsError, ValueError) as exc:
        raise ReplayError(f"{run_dir}/config.json: {exc}") from None
    if (run_dir / "trace.jsonl").is_file():
        trace_path, task_path = run_dir / "trace.jsonl", task_file or run_dir / "task.json"
    else:
        traces = sorted((run_dir / "traces").glob("*.jsonl"))
        if task is None:
            if len(traces) != 1:
                raise ReplayError(f"{run_dir} holds {len(traces)} episodes: name one with --task SPLIT/ID")
            trace_path = traces[0]
        else:
            split, _, task_id = task.rpartition("/")
            matches = [t for t in traces if t.stem == f"{split}__{task_id}" or (not split and
                                                                                t.stem.split("__", 1)[1] == task_id)]
            if len(matches) != 1:
                raise ReplayError(f"{run_dir}: {'no' if not matches else 'more than one'} finished episode of task {task}")
            trace_path = matches[0]
        task_path = task_file
    split, _, task_id = trace_path.stem.partition("__")
    if task_path is None:
        try:
            tasks = dataset.load_split(data_dir or dataset.default_data_dir(), split)
        except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise ReplayError(f"cannot load split {split!r}: {exc}; give the task with --task-file") from None
        found = [t for t in tasks if t.id == task_id]
        if not found:
            raise ReplayError(f"no task {task_id} in split {split} (a generated task? give it with --task-file)")
        loaded = found[0]
    else:
        try:
            loaded = load_task(task_path)
        except (TaskError, OSError) as exc:
            raise ReplayError(f"cannot read the task {task_path}: {exc}") from None
    return loaded, settings, read_trace(trace_path)


def replay_prompts(task: Task, settings: RunSettings, trace: list[dict]) -> list[Prompt]:
    """Every decision of ``trace`` (a LookPlanGraph episode of ``task`` run with ``settings``)
    with the prompt it was made on (module doc). Raises :class:`ReplayError` for a run that
    cannot be replayed or a replay that diverges from the trace."""
    if settings.planner != "lookplangraph":
        raise ReplayError(f"only LookPlanGraph runs can be replayed (this one ran {settings.planner})")
    if settings.augmentation != "ground_truth":
        raise ReplayError(f"a run with {settings.augmentation} augmentation called models to perceive; "
                          "only ground-truth augmentation can be replayed")
    if settings.env.startswith("virtualhome-unity") or settings.env.startswith("omnigibson"):
        raise ReplayError(f"the environment {settings.env} is not replayed here (a server or an image bank)")
    if not trace:
        raise ReplayError("the trace has no decisions")
    lm = ScriptedBackend([step["text"] for step in trace], name="replay of the recorded replies")
    replayed: list[StepRecord] = []
    env = make_env(task, settings.seed if settings.dynamic else None, settings.env, settings.failures,
                   settings.failure_seed, settings.dynamic_mode)
    config = replace(settings.config, explain=False)  # the replay's LM only gives the recorded replies
    get_planner("lookplangraph").run(task, env, lm, config, on_step=replayed.append)
    for recorded, again in zip(trace, replayed):
        if recorded.get("proposed") != again.proposed:
            raise ReplayError(f"the replay diverges at call {again.call}: the trace proposed {recorded.get('proposed')}, "
                              f"the replay {again.proposed} (a run of another version or other settings)")
    if len(replayed) != len(trace):
        raise ReplayError(f"the replay made {len(replayed)} decisions, the trace {len(trace)}")
    return [Prompt(i + 1, step["text"], req["messages"][0]["content"],
                   req["messages"][1]["content"] if len(req["messages"]) == 2 else req["messages"][1:])
            for i, (step, req) in enumerate(zip(trace, lm.requests))]


def chosen_prompts(prompts: list[Prompt], calls: list[int] | None) -> list[Prompt]:
    """The prompts of the decisions numbered ``calls`` (None: all); :class:`ReplayError` naming
    a call the episode does not have."""
    if calls is None:
        return list(prompts)
    missing = sorted(set(calls) - {p.call for p in prompts})
    if missing:
        raise ReplayError(f"no call {', '.join(map(str, missing))} in this episode (calls 1 to {len(prompts)})")
    return [p for p in prompts if p.call in calls]


def explain_steps(lm, prompts: list[Prompt]) -> list[tuple[Prompt, LMReply]]:
    """The reason ``lm`` gives for each decision of ``prompts`` that named an action (a reply
    that named none has nothing to explain and is left out). Raises what ``complete()`` raises."""
    out = []
    for p in prompts:
        action = reply_of(p.reply, Usage(), 0.0).action
        if action is not None:
            out.append((p, explain(lm, p.static, p.dynamic, action)))
    return out


#: the file of a run directory (``run`` or ``eval``) that keeps the reasons asked after the run
REASONS_FILE = "reasons.jsonl"

#: a saved reason's key: ``(split, task_id, call)``
ReasonKey = "tuple[str, str, int]"


def reason_rows(task: Task, trace: list[dict], explained: list[tuple[Prompt, LMReply]], lm_spec: str) -> list[dict]:
    """The rows of :data:`REASONS_FILE` for ``explained`` (:func:`explain_steps` of ``task``'s
    episode ``trace``) given by the LM ``lm_spec``; a reply without a reason gives no row."""
    asked = time.strftime("%Y-%m-%d %H:%M:%S")
    return [{"split": task.split, "task_id": task.id, "call": p.call, "proposed": trace[p.call - 1].get("proposed"),
             "reason": said.reason, "lm": lm_spec, "asked": asked}
            for p, said in explained if said.reason]


def read_reasons(run_dir: Path) -> dict[tuple[str, str, int], dict]:
    """The saved reasons of ``run_dir`` by ``(split, task_id, call)`` (module doc); none when the
    file is missing or unreadable."""
    try:
        lines = (Path(run_dir) / REASONS_FILE).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if (isinstance(row, dict) and isinstance(row.get("split"), str) and isinstance(row.get("task_id"), str)
                and isinstance(row.get("call"), int) and isinstance(row.get("reason"), str) and row["reason"]):
            out[(row["split"], row["task_id"], row["call"])] = row
    return out


def save_reasons(run_dir: Path, rows: list[dict]) -> Path:
    """Merge ``rows`` (:func:`reason_rows`) into ``run_dir``'s :data:`REASONS_FILE`, written whole
    and renamed into place (module doc); the file's path."""
    path = Path(run_dir) / REASONS_FILE
    merged = read_reasons(run_dir)
    for row in rows:
        merged[(row["split"], row["task_id"], row["call"])] = row
    tmp = path.with_name(f".{REASONS_FILE}.{os.getpid()}.part")
    tmp.write_text("".join(json.dumps(merged[k], ensure_ascii=False) + "\n" for k in sorted(merged)), encoding="utf-8")
    os.replace(tmp, path)
    return path


def ask_and_save(lm, task: Task, trace: list[dict], prompts: list[Prompt], run_dir: Path,
                 lm_spec: str) -> Iterator[tuple[Prompt, LMReply, int]]:
    """For each of ``prompts`` (of ``task``'s episode ``trace``) that names an action, the LM's
    reason (:func:`explain_steps`), saved in ``run_dir``'s :data:`REASONS_FILE` as soon as it is
    given (an interrupted caller keeps the ones before); yields ``(prompt, reply, rows saved)``."""
    for p in prompts:
        for _, said in explain_steps(lm, [p]):
            rows = reason_rows(task, trace, [(p, said)], lm_spec)
            if rows:
                save_reasons(run_dir, rows)
            yield p, said, len(rows)


def unexplained_calls(trace: list[dict], saved: dict[tuple[str, str, int], dict], split: str, task_id: str) -> list[int]:
    """The calls of ``trace`` (the episode ``split``/``task_id``) that proposed an action and have
    no reason, neither in the trace nor saved for that action."""
    out = []
    for step in trace:
        call, proposed = step.get("call"), step.get("proposed")
        if not isinstance(call, int) or not proposed or step.get("reason"):
            continue
        kept = saved.get((split, task_id, call))
        if kept is None or kept.get("proposed") != proposed:
            out.append(call)
    return out
