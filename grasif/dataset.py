"""The GraSIF data directory: building it from the split builders, listing and describing it.

Each split is a module with ``SPLIT`` (its name), ``PAPER`` (the paper's Table I row) and
``build_tasks() -> list[Task]`` (deterministic; raises :class:`SourceError` naming the bad source).

Layout of a data directory (default ``$LOOKPLANGRAPH_DATA`` or ``~/.cache/lookplangraph/grasif``)::

    index.json                # splits, their task ids and each file's sha256; what each was built from
    <split>/<task id>.json    # one task per file (grasif.task format)

A build writes into a fresh sibling directory and swaps it in only when every split has been
built and written, so a failed or interrupted build never overwrites a good one (nor leaves a
half-written ``index.json``). Builds of one directory take turns: :func:`build` and the checks
and builds of :func:`ensure` hold an exclusive lock on the sibling file ``.<name>.lock``
(``fcntl.flock``; where it does not exist, as on Windows, builds are not locked), so two
evaluations started together on a stale or missing build rebuild it once: the second waits
(one progress line) and then finds the build the first made.

What a split was built from (``index["builds"][split]``, :func:`sources_record`): the project's
version, :data:`BUILDER_VERSION`, the SHA-256 of each source file under ``grasif/`` its builder
reads (:func:`source_files`: the builder's modules, the modules every builder shares and the
split's data directory, its module's ``SOURCE_DIR``), the version of the installed package it
was converted from (virtualhome-eval, bddl), and ``fingerprint``, one digest of the builder
version, files and package versions. A split *matches its sources* when the builder version and
every file's hash are the recorded ones and the recorded package version is the installed one
(a package that is not installed is not compared). The project version is recorded only: a
release that changes none of a split's sources keeps its build.

Builds happen on first use: :func:`load_split` and :func:`task_ids` build (through :func:`ensure`)
a split a directory lacks, with a progress line on standard error, so a partial build is
completed, never reported as missing; a directory without any build gets every split. A split
that no longer matches its sources, or was built without a record of them (an older build), is
rebuilt the same way with one progress line (``GraSIF: rebuilding office in DIR (its sources
changed since the build: grasif/data/office/tasks.json)``); where it cannot be rebuilt (its source
package is not installed, a source file is broken) the load is refused with
:class:`StaleBuildError`, which gives the reason and the ``lookplangraph grasif build`` command
that rebuilds it. A stale build is never served. A split whose source package is not installed
raises :class:`SourceError` with the pip command. A directory assembled by hand rather than by
:func:`build` (test fixtures) says so with a top-level ``"assembled"`` entry in its index (who
made it): its splits are served as they are, never compared with the sources.

:func:`build_of` gives the build record (``fingerprint``, ``builder_version``,
``project_version``) of a task :func:`load_split` served, for results to record
(:mod:`lookplangraph.evaluation.runner`). Concepts: ``docs/benchmark/index.md``.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import shlex
import shutil
import sys
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path
from statistics import mean
from typing import Callable, Iterator

try:
    import fcntl
except ImportError:  # not on Windows: builds are not locked there (module doc)
    fcntl = None

from grasif.task import Task, load_task
from sgs.graph import Layer

#: split name -> module that builds it
SPLIT_MODULES = {"virtualhome": "grasif.virtualhome", "behavior": "grasif.behavior", "office": "grasif.office",
                 "dev": "grasif.dev"}

#: The version of :func:`build` itself: raise it when the same sources would be written as other
#: bytes (the task file format, :func:`_dump`), so every build made before is rebuilt.
BUILDER_VERSION = 1
#: The ``grasif/`` directory the source files are read from; paths under it are recorded relative
#: to its parent (``grasif/office.py``).
GRASIF_ROOT = Path(__file__).resolve().parent
#: What each split's builder reads besides its data directory (its module's ``SOURCE_DIR``):
#: modules or packages, relative to :data:`GRASIF_ROOT`.
SPLIT_SOURCES = {"virtualhome": ("virtualhome",), "behavior": ("behavior",), "office": ("office.py",),
                 "dev": ("dev.py", "office.py")}
#: Modules every builder uses: the task format, goals and their formulas, the plan check.
SHARED_SOURCES = ("task.py", "goals.py", "formula.py", "validate.py")
#: The installed distribution a split is converted from; its version is part of the record.
SOURCE_PACKAGES = {"virtualhome": "virtualhome-eval", "behavior": "bddl"}


class SourceError(RuntimeError):
    """Source data for a split is missing or broken; the message names the package or file."""


class StaleBuildError(SourceError):
    """A split's build no longer matches its sources and cannot be rebuilt now; the message says
    why and gives the command that rebuilds it."""


def default_data_dir() -> Path:
    env = os.environ.get("LOOKPLANGRAPH_DATA")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "lookplangraph" / "grasif"


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _quiet(message: str) -> None:
    pass


def built_splits(data_dir: Path) -> list[str]:
    """The splits a build in ``data_dir`` holds (none when there is no build there)."""
    index = Path(data_dir) / "index.json"
    return _built_splits(json.loads(index.read_text())) if index.is_file() else []


# ---------------------------------------------------------------------------------------------
# what a split is built from
# ---------------------------------------------------------------------------------------------
def project_version() -> str:
    """The installed version of the ``lookplangraph`` project (``unknown`` when not installed)."""
    try:
        return importlib.metadata.version("lookplangraph")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _label(path: Path) -> str:
    """How a source file is named in the record: relative to the project for files under
    :data:`GRASIF_ROOT`, else its absolute path."""
    try:
        return path.relative_to(GRASIF_ROOT.parent).as_posix()
    except ValueError:
        return path.as_posix()


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not p.name.startswith(".") and p.suffix != ".pyc")


def source_files(split: str) -> dict[str, Path]:
    """The source files of ``split`` under ``grasif/`` (module doc), label -> path."""
    module = split_module(split)
    paths = [GRASIF_ROOT / rel for rel in (*SPLIT_SOURCES.get(split, ()), *SHARED_SOURCES)]
    data = getattr(module, "SOURCE_DIR", None)
    if data is not None:
        paths.append(Path(data).resolve())
    files: dict[str, Path] = {}
    for path in paths:
        for f in _files_under(path):
            files[_label(f)] = f
    return dict(sorted(files.items()))


def _fingerprint(record: dict) -> str:
    what = {k: record.get(k) for k in ("builder_version", "sources", "packages")}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def sources_record(split: str) -> dict:
    """What ``split`` would be built from now: ``project_version``, ``builder_version``,
    ``sources`` (label -> SHA-256), ``packages`` (distribution -> version; only for a split
    converted from an installed package) and their ``fingerprint``."""
    record: dict = {"project_version": project_version(), "builder_version": BUILDER_VERSION,
                    "sources": {label: hashlib.sha256(path.read_bytes()).hexdigest()
                                for label, path in source_files(split).items()}}
    if split in SOURCE_PACKAGES:
        record["packages"] = {SOURCE_PACKAGES[split]: _package_version(SOURCE_PACKAGES[split]) or "unknown"}
    record["fingerprint"] = _fingerprint(record)
    return record


def _listed(names: list[str], most: int = 3) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def stale_reason(index: dict, split: str) -> str | None:
    """Why the build of ``split`` in ``index`` no longer matches its sources (module doc); None
    when it does, or when the directory was assembled by hand."""
    if index.get("assembled") or split not in SPLIT_MODULES:
        return None
    recorded = index.get("builds", {}).get(split)
    if not isinstance(recorded, dict) or "sources" not in recorded:
        return "it was built by an older version, without a record of its sources"
    if recorded.get("builder_version") != BUILDER_VERSION:
        return f"it was built by builder version {recorded.get('builder_version')}, this one is {BUILDER_VERSION}"
    now = {label: hashlib.sha256(path.read_bytes()).hexdigest() for label, path in source_files(split).items()}
    was = recorded.get("sources") or {}
    changed = sorted(label for label in set(now) | set(was) if now.get(label) != was.get(label))
    if changed:
        return f"its sources changed since the build: {_listed(changed)}"
    for distribution, version in (recorded.get("packages") or {}).items():
        installed = _package_version(distribution)
        if installed is not None and installed != version:
            return f"it was built from {distribution} {version}, {installed} is installed"
    return None


def rebuild_command(data_dir: Path, splits: list[str]) -> str:
    """The command that rebuilds ``splits`` in ``data_dir`` (keeping the others)."""
    return f"`lookplangraph grasif build --split {' '.join(splits)} --data-dir {shlex.quote(str(data_dir))}`"


def _stale(data_dir: Path, splits: list[str]) -> dict[str, str]:
    """The splits among ``splits`` built in ``data_dir`` that no longer match their sources, with why."""
    path = Path(data_dir) / "index.json"
    if not path.is_file():
        return {}
    index = json.loads(path.read_text())
    return {s: why for s in splits if s in index.get("splits", {}) and (why := stale_reason(index, s))}


def _stale_text(stale: dict[str, str]) -> str:
    return ", ".join(f"{split} ({why})" for split, why in stale.items())


def check(data_dir: Path, splits: list[str] | None = None) -> None:
    """Raise :class:`StaleBuildError` (with the rebuild command) when a built split of
    ``splits`` (default: all built) no longer matches its sources; never builds."""
    data_dir = Path(data_dir)
    wanted = list(splits) if splits is not None else [s for s in built_splits(data_dir) if s in SPLIT_MODULES]
    stale = _stale(data_dir, wanted)
    if stale:
        raise StaleBuildError(f"the GraSIF build in {data_dir} is out of date: {_stale_text(stale)}; rebuild it with "
                              f"{rebuild_command(data_dir, list(stale))}")


def lock_path(data_dir: Path) -> Path:
    """The file whose lock builds of ``data_dir`` take turns on (module doc)."""
    data_dir = Path(data_dir)
    return data_dir.with_name(f".{data_dir.name}.lock")


@contextmanager
def build_lock(data_dir: Path, progress: Callable[[str], None] = _to_stderr) -> Iterator[None]:
    """Hold the exclusive build lock of ``data_dir``; if another process holds it, say so once
    through ``progress`` and wait for it. Not reentrant: the build functions take it themselves."""
    path = lock_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                progress(f"GraSIF: waiting for another process's build of {Path(data_dir)}")
                fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def ensure(data_dir: Path | None = None, splits: list[str] | None = None,
           progress: Callable[[str], None] = _to_stderr) -> Path:
    """The build in ``data_dir`` (default :func:`default_data_dir`) holding ``splits``, each
    matching its sources: the splits it lacks are built now, those whose sources changed since
    their build rebuilt (one progress line; :class:`StaleBuildError` where that is impossible),
    the others kept. Without ``splits``, a directory that holds a build keeps the splits it holds
    (each checked the same way) and one that holds none gets every split. Returns the directory."""
    data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
    for split in splits or ():
        split_module(split)  # an unknown name is a KeyError before anything is built
    if _needs_nothing(data_dir, splits):
        return data_dir  # the common case, without the lock
    with build_lock(data_dir, progress):  # what another process built meanwhile is read after the wait
        _ensure_locked(data_dir, splits, progress)
    return data_dir


def _wanted(data_dir: Path, splits: list[str] | None) -> list[str]:
    if splits is None and (data_dir / "index.json").is_file():
        return [s for s in built_splits(data_dir) if s in SPLIT_MODULES]
    return list(splits or SPLIT_MODULES)


def _needs_nothing(data_dir: Path, splits: list[str] | None) -> bool:
    wanted = _wanted(data_dir, splits)
    built = built_splits(data_dir)
    return all(s in built for s in wanted) and not _stale(data_dir, wanted)


def _ensure_locked(data_dir: Path, splits: list[str] | None, progress: Callable[[str], None]) -> None:
    wanted = _wanted(data_dir, splits)
    built = built_splits(data_dir)
    missing = [s for s in wanted if s not in built]
    stale = _stale(data_dir, [s for s in wanted if s in built])
    if missing:  # one line; a line per split when there are several
        progress(f"GraSIF: building {', '.join(missing)} in {data_dir} (first use)")
    if stale:
        progress(f"GraSIF: rebuilding {_stale_text(stale)} in {data_dir}")
    todo = missing + list(stale)
    if todo:
        try:
            _build_locked(data_dir, todo, progress if len(todo) > 1 else _quiet)
        except SourceError as exc:
            if not stale:
                raise
            raise StaleBuildError(
                f"the GraSIF build in {data_dir} is out of date ({_stale_text(stale)}) and cannot be rebuilt "
                f"now: {exc}. Once that is fixed, rebuild it with {rebuild_command(data_dir, list(stale))}"
            ) from exc


def split_module(split: str):
    if split not in SPLIT_MODULES:
        raise KeyError(f"unknown split {split!r}; splits are {', '.join(SPLIT_MODULES)}")
    return importlib.import_module(SPLIT_MODULES[split])


def _dump(task: Task) -> bytes:
    return (json.dumps(task.model_dump(mode="json"), indent=1) + "\n").encode()


def build(out: Path | None = None, splits: list[str] | None = None, progress: Callable[[str], None] = print) -> Path:
    """Build ``splits`` (default: all) into ``out``; return the directory. Atomic (see module doc).

    Splits not rebuilt are carried over from an existing build in ``out``, with their records.
    Each split built gets the record of its sources (:func:`sources_record`), taken before its
    builder runs.
    """
    out = Path(out) if out is not None else default_data_dir()
    splits = list(splits or SPLIT_MODULES)
    with build_lock(out, progress):
        _build_locked(out, splits, progress)
    return out


def _build_locked(out: Path, splits: list[str], progress: Callable[[str], None]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    old_index = read_index(out) if (out / "index.json").exists() else {"splits": {}}
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".building-", dir=out.parent))
    try:
        index = {"format": 2, "splits": {}, "builds": {}}
        for split in SPLIT_MODULES:
            if split not in splits:
                if split in old_index["splits"]:
                    shutil.copytree(out / split, tmp / split)
                    index["splits"][split] = old_index["splits"][split]
                    if split in old_index.get("builds", {}):
                        index["builds"][split] = old_index["builds"][split]
                continue
            record = sources_record(split)  # before building: a source edited meanwhile shows as changed
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
            index["builds"][split] = record
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


def read_index(data_dir: Path) -> dict:
    path = Path(data_dir) / "index.json"
    if not path.exists():
        raise FileNotFoundError(f"{data_dir}: no GraSIF build here; run `lookplangraph grasif build`")
    return json.loads(path.read_text())


def task_ids(data_dir: Path, split: str | None = None, build_missing: bool = True) -> list[tuple[str, str]]:
    """(split, task id) pairs of a build, in index order. Unless ``build_missing`` is false, a
    named split the build lacks is built first, and with ``split=None`` a directory holding no
    build at all gets every split (one that holds a build is listed as it is); either way a split
    whose sources changed is rebuilt first (:func:`ensure`). With ``build_missing`` false nothing
    is built, and a split whose sources changed raises :class:`StaleBuildError` (:func:`check`)."""
    if build_missing and (split is None or split in SPLIT_MODULES):
        ensure(data_dir, [split] if split else None)
    elif split is None or split in SPLIT_MODULES:
        check(data_dir, [split] if split else None)
    index = read_index(data_dir)
    if split is not None and split not in index["splits"]:
        raise KeyError(f"split {split!r} is not in the build at {data_dir}; built: {', '.join(index['splits'])}")
    return [(s, t) for s in _built_splits(index) if split in (None, s) for t in index["splits"][s]]


#: id(task) -> (a weak reference to it, the build record of the split it was served from)
_SERVED: dict[int, tuple[weakref.ref, dict]] = {}


def _remember(task: Task, build: dict) -> None:
    key = id(task)
    _SERVED[key] = (weakref.ref(task, lambda _ref, key=key: _SERVED.pop(key, None)), build)


def build_of(task: Task) -> dict | None:
    """The build record (``fingerprint``, ``builder_version``, ``project_version``) of the split
    :func:`load_split` served ``task`` from; None for a task that came from elsewhere (a task
    file, generated tasks, a directory assembled by hand)."""
    entry = _SERVED.get(id(task))
    return entry[1] if entry is not None and entry[0]() is task else None


def builds_of(tasks: list[Task]) -> dict[str, dict]:
    """Split -> build record (:func:`build_of`) of the tasks that came from a build."""
    found: dict[str, dict] = {}
    for task in tasks:
        build = build_of(task)
        if build is not None:
            found.setdefault(task.split, build)
    return found


def load_split(data_dir: Path, split: str, build_missing: bool = True) -> list[Task]:
    """The tasks of ``split`` in ``data_dir``, built or rebuilt first where missing or out of date
    (see :func:`task_ids`); each is remembered with its build's record (:func:`build_of`)."""
    pairs = task_ids(data_dir, split, build_missing)
    tasks = [load_task(Path(data_dir) / s / f"{t}.json") for s, t in pairs]
    index = read_index(data_dir)
    recorded = index.get("builds", {}).get(split)
    if isinstance(recorded, dict) and "fingerprint" in recorded and not index.get("assembled"):
        build = {k: recorded.get(k) for k in ("fingerprint", "builder_version", "project_version")}
        for task in tasks:
            _remember(task, build)
    return tasks


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
