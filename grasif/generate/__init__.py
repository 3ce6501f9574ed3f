"""Generated worlds: training material for on-board planners, in the spirit of ProcTHOR.

``generate(kind, n, seed)`` draws buildings (:mod:`grasif.generate.worlds`: homes, or offices with
people's offices, meeting rooms, kitchens, printing and storage rooms, lounges; the wider kinds
``house``, two storeys with a garage, a shed, a laundry and a patio, and ``lab``, labs, a server
room, corridors and people's offices) and tasks on them (:mod:`grasif.generate.tasks`: every goal
kind the validator knows, several phrasings each, or with ``wording="grammar"`` instructions
composed by :mod:`grasif.generate.wording`) until ``n`` tasks passed their checks. Deterministic
for a kind, ``n``, a seed and a wording.

Generated tasks are **training** material, never evaluation: :mod:`grasif.generate.leaks` refuses
a generated scene or instruction equal to, or a renaming of, a held-out task (the 47-task sample,
the whole office split), and :func:`write` runs that check before anything is written.

Command line: ``lookplangraph grasif generate --kind home|office|house|lab --n N --seed S
[--wording grammar] --out DIR`` writes ``DIR/<building>/building.json`` and, beside it, one task
file per task (``lookplangraph run --task-file DIR/<building>/<task>.json`` runs one), and
``DIR/index.json`` (kind, seed, tasks with the SHA-256 of each file, counts by task kind), whole
or not at all. Concepts: ``docs/benchmark/generated.md``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from grasif.generate.leaks import check_leaks
from grasif.generate.tasks import KINDS, OPT_IN_KINDS, checked, draw_task
from grasif.generate.worlds import BUILDING_KINDS, building
from grasif.priors import Priors, shipped
from grasif.task import Task, load_task
from sgs.io import graph_from_dict

__all__ = ["BUILDING_KINDS", "GENERATOR", "KINDS", "OPT_IN_KINDS", "SPLIT_PREFIX", "WORDINGS", "generate",
           "is_generated", "load", "write"]

#: the generator's version, in every task's provenance: a seed draws other buildings and tasks
#: under each version (what each version changed: ``docs/results/log.md``)
GENERATOR = "grasif.generate v3"
#: the split of a generated task is this and its kind (``generated-office``)
SPLIT_PREFIX = "generated-"
#: how instructions are worded: the fixed templates, or the compositional grammar
WORDINGS = ("templates", "grammar")
#: tasks drawn on one building before the next is drawn
TASKS_PER_BUILDING = 6


def generate(kind: str, n: int, seed: int = 0, priors: Priors | None = None,
             progress: Callable[[int, int], None] | None = None, kinds: tuple[str, ...] | None = None,
             wording: str = "templates") -> list[Task]:
    """``n`` checked tasks on generated buildings of ``kind`` (``home`` or ``office``), split
    ``generated-<kind>``; ``kinds``: draw only these task kinds (default :data:`KINDS`, each
    equally often; with the default a seed gives what it always gave; :data:`OPT_IN_KINDS` only
    when named). ``ValueError`` for another kind, an unknown task kind, or ``n < 1``."""
    if kind not in BUILDING_KINDS:
        raise ValueError(f"--kind is one of {', '.join(BUILDING_KINDS)}, not {kind!r}")
    if wording not in WORDINGS:
        raise ValueError(f"--wording is one of {', '.join(WORDINGS)}, not {wording!r}")
    kinds = KINDS if kinds is None else tuple(kinds)
    if not kinds or any(k not in KINDS + OPT_IN_KINDS for k in kinds):
        raise ValueError(f"task kinds are {', '.join(KINDS + OPT_IN_KINDS)}, not {', '.join(kinds) or '(none)'}")
    if n < 1:
        raise ValueError(f"--n must be at least 1, not {n}")
    if priors is None:
        priors = shipped()
    tasks: list[Task] = []
    index = 0
    while len(tasks) < n:
        rng = random.Random(f"{GENERATOR}:{kind}:{seed}:{index}")
        b = building(kind, rng, priors)
        g = graph_from_dict(b.graph)
        world = f"{kind}-s{seed}-{index:05d}"
        kept, said = 0, set()
        for _ in range(TASKS_PER_BUILDING * 3):
            if kept == TASKS_PER_BUILDING or len(tasks) == n:
                break
            task_kind = kinds[rng.randrange(len(kinds))]
            drawn = draw_task(task_kind, g, b, rng, priors, wording)
            if drawn is None:
                continue
            task = checked(f"{world}-t{kept + 1}", f"{SPLIT_PREFIX}{kind}", b, g, drawn,
                           {"source": GENERATOR, "kind": task_kind, "building": world, "seed": seed})
            if task is None or task.instruction in said:
                continue
            said.add(task.instruction)
            tasks.append(task)
            kept += 1
            if progress:
                progress(len(tasks), n)
        index += 1
    return tasks


def is_generated(task: Task) -> bool:
    """Whether ``task`` was made by :func:`generate` (its split says so)."""
    return task.split.startswith(SPLIT_PREFIX)


def write(tasks: list[Task], out: Path, heldout: list[Task]) -> Path:
    """Write ``tasks`` into ``out`` (module doc) after the leak check against ``heldout``
    (:class:`grasif.generate.leaks.GeneratedLeak` names every leak); ``out`` must not exist yet
    or be empty. Everything is written to a sibling directory first and moved in whole."""
    check_leaks(tasks, heldout)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty: choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        files: dict[str, str] = {}
        by_kind: dict[str, int] = {}
        for t in tasks:
            world = Path(tmp) / t.provenance["building"]
            if not (world / "building.json").exists():
                world.mkdir()
                (world / "building.json").write_text(json.dumps(t.initial_graph, indent=1) + "\n")
            body = (json.dumps(t.model_dump(mode="json"), indent=1) + "\n").encode()
            (world / f"{t.id}.json").write_bytes(body)
            files[f"{t.provenance['building']}/{t.id}.json"] = hashlib.sha256(body).hexdigest()
            by_kind[t.provenance["kind"]] = by_kind.get(t.provenance["kind"], 0) + 1
        first = tasks[0].provenance if tasks else {}
        index = {"generator": GENERATOR, "split": tasks[0].split if tasks else None, "seed": first.get("seed"),
                 "tasks": len(tasks), "buildings": len({t.provenance["building"] for t in tasks}),
                 "by_kind": dict(sorted(by_kind.items())), "files": files}
        (Path(tmp) / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load(out: Path) -> list[Task]:
    """The tasks :func:`write` wrote into ``out``, each file checked against ``index.json``'s
    SHA-256; ``ValueError`` naming a missing or changed file."""
    out = Path(out)
    try:
        index = json.loads((out / "index.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{out}: not a directory of generated tasks (index.json: {exc})") from None
    tasks = []
    for rel, sha in sorted(index["files"].items()):
        path = out / rel
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            raise ValueError(f"{path}: missing, or not the file index.json lists (regenerate {out})")
        tasks.append(load_task(path))
    return tasks
