"""GraSIF dev split: buildings written by hand to choose designs on, never to report and never to
train on.

The 47-task held-out sample (:mod:`grasif.heldout`) is the test: it reports a release and picks
nothing. Every choice (an adapter, a rule, a prompt, a data weight) is made on this split instead.
Its buildings are unlike the repository's others, and their instructions are written in everyday
phrasing, not the generator's templates:

* ``clinic`` — a health clinic of 15 rooms (exam and treatment rooms, a nurses' station with a
  vaccine fridge, a blood lab, a sterilisation room, two doctors' offices, records);
* ``flat`` — a family flat of 11 rooms (a nursery, a child's room, a study, a laundry room, a
  pantry, a balcony).

Each building is a directory of ``grasif/data/dev/`` in the office split's format
(:mod:`grasif.office`: ``building.json`` and ``tasks.json`` with edits, goal and ground-truth plan)
and is checked the same way: every plan must reach its goal through the SGS with no side effect,
and no goal part may hold at the start (the independent check of each task). Task ids are
``<building>-NN``. The leak guard (:func:`grasif.heldout.kept_out_tasks`, the training-data test)
keeps these tasks out of training data, demonstrations and prompt examples.
"""

from __future__ import annotations

from pathlib import Path

from grasif.dataset import SourceError
from grasif.office import BUILDING_FILE, TASKS_FILE, build_task, load_sources
from grasif.task import Task

SPLIT = "dev"
#: the split is ours: no paper row to compare with
PAPER = {"tasks": "–", "rooms": "–", "nodes": "–", "actions": "–"}
#: where the buildings live (package data), one directory each
SOURCE_DIR = Path(__file__).resolve().parent / "data" / "dev"
BUILDINGS = ("clinic", "flat")
PROVENANCE = "written by hand for the LookPlanGraph project as a development building (choices are made on it; never trained on)"


def build_tasks(source_dir: str | Path | None = None) -> list[Task]:
    """Every dev task, sorted by id; deterministic. Raises :class:`SourceError` naming the file and
    the task for any problem (see :mod:`grasif.office`), and for a task id that does not start
    with its building's name."""
    root = Path(source_dir if source_dir is not None else SOURCE_DIR)
    tasks: list[Task] = []
    for name in BUILDINGS:
        directory = root / name
        building, sources = load_sources(directory)
        files = [f"grasif/data/dev/{name}/{BUILDING_FILE}", f"grasif/data/dev/{name}/{TASKS_FILE}"]
        for src in sources:
            if not src.id.startswith(f"{name}-"):
                raise SourceError(f"{directory / TASKS_FILE}: task {src.id}: a {name} task id starts with '{name}-'")
            tasks.append(build_task(src, building, directory / TASKS_FILE, split=SPLIT, source=PROVENANCE, files=files,
                                    extra={"building": name}))
    return sorted(tasks, key=lambda t: t.id)


__all__ = ["SPLIT", "PAPER", "BUILDINGS", "SOURCE_DIR", "build_tasks"]
