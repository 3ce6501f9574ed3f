"""Tasks, graphs and goals as the commands read them: a GraSIF split's tasks (built on demand), a
task, graph or goal file, ``--split`` and ``--seeds`` flags. Bad input is :class:`UsageError`
(exit 2); a source package that is missing is :class:`Unavailable` (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

from grasif.goals import GoalSpec, goal_from_graphs
from grasif.task import TaskError, load_task
from sgs.graph import GraphError, SceneGraph
from sgs.io import graph_from_dict, load_graph

from lookplangraph.cli.conventions import Unavailable, UsageError, deprecated

SPLITS = ["virtualhome", "behavior", "office", "dev"]
DATA_DIR_HELP = "GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)"


def read_json(path: str):
    """The JSON in ``path``; a missing or unreadable file is :class:`UsageError`."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None


def read_graph(path: str) -> SceneGraph:
    """The scene graph in ``path`` (the paper's JSON format); a missing or invalid file is
    :class:`UsageError` (the errors of :func:`sgs.io.load_graph` name the file)."""
    try:
        return load_graph(path)
    except (GraphError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None


def read_goal(path: str, initial, by_class: bool) -> GoalSpec:
    """A goal file is either a goal graph (paper format) or a goal specification (grasif.goals)."""
    data = read_json(path)
    if isinstance(data, dict) and any(k in data for k in ("node_goals", "count_goals", "formula")):
        try:
            spec = GoalSpec.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
    else:
        try:
            spec = goal_from_graphs(initial, graph_from_dict(data), by_class=by_class)
        except (GraphError, ValueError) as exc:
            raise UsageError(f"{path}: {exc}") from None
    problems = spec.check_names(initial)
    if problems:
        raise UsageError(f"{path}: " + "; ".join(problems))
    return spec


def source_error(exc: Exception) -> Exception:
    """A GraSIF build's error as the command's: a source package that is not installed (or cannot
    be imported) is unavailable (3), anything else bad input (2)."""
    from grasif.dataset import SourceError

    text = str(exc).strip("'\"")
    if isinstance(exc, SourceError) and ("not installed" in text or "cannot be imported" in text):
        return Unavailable(text)
    return UsageError(text)


def select_tasks(s, data_dir: str | None, task_file: str | None = None, generated: str | None = None):
    """Tasks of the settings' split (built on demand when the split is missing), or of the
    ``generated`` directory (:func:`generated_tasks`), with ``--task`` and ``--limit`` applied."""
    from grasif import dataset

    if task_file:
        try:
            return [load_task(task_file)]
        except TaskError as exc:
            raise UsageError(str(exc)) from None
    if generated:
        tasks, where = generated_tasks([generated]), generated
    else:
        if not s.split:
            raise UsageError("give --split (virtualhome, behavior or office) or --task-file")
        root = Path(data_dir) if data_dir else dataset.default_data_dir()
        try:
            tasks = dataset.load_split(root, s.split)  # built on first use
        except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise source_error(exc) from None
        where = f"split {s.split}; see `lookplangraph grasif list --split {s.split}`"
    if s.selection:
        tasks = [t for t in tasks if s.selection in t.provenance.get("selections", [])]
        if not tasks:
            raise UsageError(f"no task of split {s.split} is in selection {s.selection!r} (virtualhome has 'strict' and 'paper')")
    if s.tasks:
        by_id = {t.id: t for t in tasks}
        missing = [t for t in s.tasks if t not in by_id]
        if missing:
            raise UsageError(f"no task {', '.join(missing)} in {where}")
        tasks = [by_id[t] for t in s.tasks]
    if s.limit:
        tasks = tasks[: s.limit]
    return tasks


def generated_tasks(dirs: list[str]) -> list:
    """The tasks of ``grasif generate`` directories (:func:`grasif.generate.load`); bad input is
    :class:`UsageError`."""
    from grasif.generate import load

    tasks = []
    for d in dirs:
        try:
            tasks += load(Path(d))
        except ValueError as exc:
            raise UsageError(f"--generated: {exc}") from None
    return tasks


def seed_list(text: str) -> list[int | None]:
    """``static,0,1`` as ``[None, 0, 1]`` (None: the static episode)."""
    try:
        return [None if x == "static" else int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--seeds takes 'static' and integers, comma-separated, not {text!r}") from None


def split_flag(p, *, several: bool, choices=SPLITS, help: str | None = None, alias: bool = False) -> None:
    """``--split S`` (one split) or ``--split S [S ...]`` (several; also repeatable); ``alias``:
    the old ``--splits S [S ...]`` as a deprecated alias."""
    if several:
        p.add_argument("--split", nargs="+", action="extend", choices=choices, metavar="S",
                       help=f"{help or 'only these splits'}: one or more of {', '.join(choices)} (or the flag repeated)")
        if alias:
            deprecated(p, "--splits", "split", "--split", nargs="+", extend=True, choices=choices)
    else:
        p.add_argument("--split", choices=choices, metavar="S", help=f"{help or 'the split'}: {', '.join(choices)}")
