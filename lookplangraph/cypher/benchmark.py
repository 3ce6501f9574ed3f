"""The two Cypher benchmarks as versioned JSON files, built deterministically from a GraSIF build.

Files (default directory :data:`DEFAULT_DIR`, ``lookplangraph/cypher/data``)::

    qa.v1.json          {"format": "lookplangraph-cypher-qa", "version": 1, "seed": 0,
                         "scenes": {split: {task id: sha256 of the task file}}, "items": [Question...]}
    grounding.v1.json   the same with "format": "lookplangraph-cypher-grounding" and GroundingItems

``scenes`` pins the GraSIF task files the items were built from (their sha256 in the build's
``index.json``): :func:`load_benchmark` refuses a data directory whose files differ, since the
answers would no longer fit the graphs. Command: ``lookplangraph cypher-build`` (see
:mod:`.commands`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Callable

from grasif import dataset
from grasif.task import Task, load_task

from lookplangraph.cypher.grounding import GroundingItem, build_item
from lookplangraph.cypher.qa import Question, build_questions

VERSION = 1
FORMATS = {"qa": "lookplangraph-cypher-qa", "grounding": "lookplangraph-cypher-grounding"}
DEFAULT_DIR = Path(__file__).resolve().parent / "data"
SPLITS = ("virtualhome", "behavior", "office")


class BenchmarkError(ValueError):
    """A benchmark file that is missing, of another format or version, or built from other scenes."""


def path_of(task: str, directory: Path | None = None) -> Path:
    if task not in FORMATS:
        raise BenchmarkError(f"unknown benchmark {task!r}; one of {', '.join(FORMATS)}")
    return Path(directory or DEFAULT_DIR) / f"{task}.v{VERSION}.json"


def _unique_scenes(tasks: list[Task]) -> list[Task]:
    """One task per distinct initial graph (office tasks share the building), first by id."""
    seen, out = set(), []
    for t in sorted(tasks, key=lambda t: t.id):
        key = json.dumps(t.initial_graph, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def build(data_dir: Path, out_dir: Path | None = None, *, seed: int = 0, qa_per_split: int = 60,
          grounding_per_split: int = 20, progress: Callable[[str], None] = print) -> tuple[Path, Path]:
    """Build both files from the GraSIF build in ``data_dir``; return their paths."""
    index = dataset.read_index(data_dir)
    questions: list[Question] = []
    goals: list[GroundingItem] = []
    used: dict[str, dict[str, dict[str, str]]] = {"qa": {}, "grounding": {}}
    for split in SPLITS:
        tasks = dataset.load_split(data_dir, split)
        qs = build_questions(split, [(t.id, t.graph) for t in _unique_scenes(tasks)], qa_per_split, seed)
        questions += qs
        used["qa"][split] = {q.scene: index["splits"][split][q.scene] for q in qs}
        order = sorted(tasks, key=lambda t: t.id)
        random.Random(f"{seed}:{split}:grounding").shuffle(order)
        made = []
        for t in order:
            item = build_item(t, seed)
            if item is not None:
                made.append(item)
            if len(made) == grounding_per_split:
                break
        goals += made
        used["grounding"][split] = {i.task: index["splits"][split][i.task] for i in made}
        progress(f"{split}: {len(qs)} questions, {len(made)} grounding tasks")
    out_dir = Path(out_dir or DEFAULT_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for task, items in (("qa", questions), ("grounding", goals)):
        doc = {"format": FORMATS[task], "version": VERSION, "seed": seed, "scenes": used[task],
               "items": [i.model_dump(mode="json") for i in items]}
        path = path_of(task, out_dir)
        path.write_text(json.dumps(doc, indent=1) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def load_benchmark(task: str, directory: Path | None = None, data_dir: Path | None = None):
    """Items of benchmark ``task`` (``qa`` or ``grounding``) and the scene graphs they refer to:
    ``(items, {(split, task id): Task})``. Checks format, version and the scenes' sha256."""
    path = path_of(task, directory)
    if not path.exists():
        raise BenchmarkError(f"{path}: not built; run `lookplangraph cypher-build`")
    doc = json.loads(path.read_text())
    if doc.get("format") != FORMATS[task] or doc.get("version") != VERSION:
        raise BenchmarkError(f"{path}: format {doc.get('format')!r} version {doc.get('version')!r}; "
                             f"expected {FORMATS[task]!r} version {VERSION}")
    data_dir = Path(data_dir) if data_dir else dataset.default_data_dir()
    index = dataset.read_index(data_dir)
    scenes: dict[tuple[str, str], Task] = {}
    for split, pins in doc["scenes"].items():
        for task_id, sha in pins.items():
            have = index["splits"].get(split, {}).get(task_id)
            if have != sha:
                raise BenchmarkError(f"{path}: built from {split}/{task_id} with sha256 {sha[:12]}, but {data_dir} "
                                     f"has {str(have)[:12]}; rebuild the benchmark (lookplangraph cypher-build)")
            scenes[(split, task_id)] = load_task(data_dir / split / f"{task_id}.json")
    model = Question if task == "qa" else GroundingItem
    return [model.model_validate(i) for i in doc["items"]], scenes
