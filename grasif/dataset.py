"""The GraSIF data directory: building it from the split builders, listing and describing it.

Each split is a module with ``SPLIT`` (its name), ``PAPER`` (the paper's Table I row) and
``build_tasks() -> list[Task]`` (deterministic; raises :class:`SourceError` naming the bad source).

Layout of a data directory (default ``$LOOKPLANGRAPH_DATA`` or ``~/.cache/lookplangraph/grasif``)::

    index.json                # splits, their task ids and each file's sha256
    <split>/<task id>.json    # one task per file (grasif.task format)

A build writes into a fresh sibling directory and swaps it in only when every split has been
built and written, so a failed or interrupted build never overwrites a good one.

Builds happen on first use: :func:`load_split` and :func:`task_ids` build (through :func:`ensure`)
a split a directory lacks, with a progress line on standard error, so a partial build is
completed, never reported as missing; a directory without any build gets every split. A split whose source package is not installed raises
:class:`SourceError` with the pip command. Concepts: ``docs/benchmark/index.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from statistics import mean
from typing import Callable

from grasif.task import Task, load_task
from sgs.graph import Layer

#: split name -> module that builds it
SPLIT_MODULES = {"virtualhome": "grasif.virtualhome", "behavior": "grasif.behavior", "office": "grasif.office",
                 "dev": "grasif.dev"}


class SourceError(RuntimeError):
    """Source data for a split is missing or broken; the message names the package or file."""


def default_data_dir() -> Path:
    env = os.environ.get("LOOKPLANGRAPH_DATA")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "lookplangraph" / "grasif"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def built_splits(data_dir: Path) -> list[str]:
    """The splits a build in ``data_dir`` holds (none when there is no build there)."""
    index = Path(data_dir) / "index.json"
    return _built_splits(json.loads(index.read_text())) if index.is_file() else []


def ensure(data_dir: Path | None = None, splits: list[str] | None = None,
           progress: Callable[[str], None] = _to_stderr) -> Path:
    """The build in ``data_dir`` (default :func:`default_data_dir`) holding ``splits``: the splits
    it lacks are built now, the others kept. Without ``splits``, a directory that holds a build
    is kept as it is and one that holds none gets every split. Returns the directory."""
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    if splits is None and (data_dir / "index.json").is_file():
        return data_dir
    wanted = list(splits or SPLIT_MODULES)
    for split in wanted:
        split_module(split)  # an unknown name is a KeyError before anything is built
    missing = [s for s in wanted if s not in built_splits(data_dir)]
    if missing:  # one line; a line per split when there are several
        progress(f"GraSIF: building {', '.join(missing)} in {data_dir} (first use)")
        build(data_dir, splits=missing, progress=progress if len(missing) > 1 else lambda m: None)
    return data_dir


def split_module(split: str):
    if split not in SPLIT_MODULES:
        raise KeyError(f"unknown split {split!r}; splits are {', '.join(SPLIT_MODULES)}")
    return importlib.import_module(SPLIT_MODULES[split])


def _dump(task: Task) -> bytes:
    return (json.dumps(task.model_dump(mode="json"), indent=1) + "\n").encode()


def build(out: Path | None = None, splits: list[str] | None = None, progress: Callable[[str], None] = print) -> Path:
    """Build ``splits`` (default: all) into ``out``; return the directory. Atomic (see module doc).

    Splits not rebuilt are carried over from an existing build in ``out``.
    """
    out = Path(out) if out is not None else default_data_dir()
    splits = list(splits or SPLIT_MODULES)
    out.parent.mkdir(parents=True, exist_ok=True)
    old_index = read_index(out) if (out / "index.json").exists() else {"splits": {}}
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".building-", dir=out.parent))
    try:
        index = {"format": 1, "splits": {}}
        for split in SPLIT_MODULES:
            if split not in splits:
                if split in old_index["splits"]:
                    shutil.copytree(out / split, tmp / split)
                    index["splits"][split] = old_index["splits"][split]
                continue
            tasks = split_module(split).build_tasks()
            ids = [t.id for t in tasks]
            if len(set(ids)) != len(ids):
                raise SourceError(f"split {split}: duplicate task ids")
            (tmp / split).mkdir()
            files = {}
            for task in tasks:
                data = _dump(task)
                (tmp / split / f"{task.id}.json").write_bytes(data)
                files[task.id] = hashlib.sha256(data).hexdigest()
            index["splits"][split] = files
            progress(f"built {split}: {len(tasks)} tasks")
        (tmp / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
        backup = None
        if out.exists():
            backup = out.with_name(out.name + ".old")
            shutil.rmtree(backup, ignore_errors=True)
            out.rename(backup)
        tmp.rename(out)
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_index(data_dir: Path) -> dict:
    path = Path(data_dir) / "index.json"
    if not path.exists():
        raise FileNotFoundError(f"{data_dir}: no GraSIF build here; run `lookplangraph grasif build`")
    return json.loads(path.read_text())


def task_ids(data_dir: Path, split: str | None = None, build_missing: bool = True) -> list[tuple[str, str]]:
    """(split, task id) pairs of a build, in index order. Unless ``build_missing`` is false, a
    named split the build lacks is built first, and with ``split=None`` a directory holding no
    build at all gets every split (one that holds a build is listed as it is)."""
    if build_missing and (split is None or split in SPLIT_MODULES):
        ensure(data_dir, [split] if split else None)
    index = read_index(data_dir)
    if split is not None and split not in index["splits"]:
        raise KeyError(f"split {split!r} is not in the build at {data_dir}; built: {', '.join(index['splits'])}")
    return [(s, t) for s in _built_splits(index) if split in (None, s) for t in index["splits"][s]]


def load_split(data_dir: Path, split: str, build_missing: bool = True) -> list[Task]:
    """The tasks of ``split`` in ``data_dir``, built first where missing (see :func:`task_ids`)."""
    return [load_task(Path(data_dir) / s / f"{t}.json") for s, t in task_ids(data_dir, split, build_missing)]


def split_stats(tasks: list[Task]) -> dict[str, float]:
    """Table I quantities: task count and means of places, nodes (places+assets+objects) and GT actions."""
    if not tasks:
        return {"tasks": 0, "rooms": 0.0, "nodes": 0.0, "actions": 0.0, "no_change": 0}
    graphs = [t.graph for t in tasks]
    return {
        "tasks": len(tasks),
        "rooms": mean(len(g.names(Layer.PLACE)) for g in graphs),
        "nodes": mean(len(g.nodes) for g in graphs),
        "actions": mean(len(t.ground_truth_plan) for t in tasks),
        "no_change": sum(t.goal.is_empty() for t in tasks),
    }


def _built_splits(index: dict) -> list[str]:
    """Splits of a build in the canonical order (virtualhome, behavior, office)."""
    return [s for s in SPLIT_MODULES if s in index["splits"]] + sorted(set(index["splits"]) - set(SPLIT_MODULES))


def stats_table(data_dir: Path) -> str:
    """Table I of the paper for a build, each split beside the paper's figures."""
    head = (f"{'split':<13}{'tasks':>7}{'rooms':>8}{'nodes':>9}{'actions':>9}{'no-change':>11}"
            f"   | paper:{'tasks':>6}{'rooms':>7}{'nodes':>8}{'actions':>9}")
    lines = [head, "-" * len(head)]
    for split in _built_splits(read_index(data_dir)):
        s = split_stats(load_split(data_dir, split))
        p = split_module(split).PAPER
        lines.append(
            f"{split:<13}{s['tasks']:>7}{s['rooms']:>8.2f}{s['nodes']:>9.1f}{s['actions']:>9.2f}{s['no_change']:>11}"
            f"   |       {p['tasks']:>5}{p['rooms']:>7}{p['nodes']:>8}{p['actions']:>9}"
        )
    lines.append("rooms, nodes (places + assets + objects) and actions (ground-truth plan steps) are means per task;")
    lines.append("no-change: tasks whose goal already holds in the initial graph (report them separately).")
    return "\n".join(lines)
