"""The two Cypher benchmarks as versioned JSON files, built deterministically from a GraSIF build.

Files (default directory :data:`DEFAULT_DIR`, ``lookplangraph/cypher/data``)::

    qa.v2.json          {"format": "lookplangraph-cypher-qa", "version": 2, "seed": 0,
                         "parts": {"dev": [building...], "heldout": [building...]},
                         "scenes": {split: {task id: sha256 of the task file}}, "items": [Question...]}
    grounding.v2.json   the same with "format": "lookplangraph-cypher-grounding" and GroundingItems

Scenes are split by *building* (:func:`building`), never by task, into a development part and a
held-out part (:func:`parts`, seeded); each item says its ``part``. Invariants: prompt examples
come from development scenes only (a test guards it); ``scenes`` pins the GraSIF task files the
items were built from, and :func:`load_benchmark` refuses a data directory whose files differ.
Command: ``lookplangraph cypher-build`` (:mod:`.commands`). Which buildings are in which part,
and the items: ``docs/guides/cypher.md`` (*Benchmarks*).
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

VERSION = 2
FORMATS = {"qa": "lookplangraph-cypher-qa", "grounding": "lookplangraph-cypher-grounding"}
DEFAULT_DIR = Path(__file__).resolve().parent / "data"
SPLITS = ("virtualhome", "behavior", "office")


PARTS = ("dev", "heldout")
#: VirtualHome apartments and the share of BEHAVIOR activities in the development part (:func:`parts`)
DEV_APARTMENTS = 3
DEV_SHARE = 0.3


def building(task: Task) -> str:
    """The building a task's scene belongs to: ``virtualhome:APARTMENT``, ``behavior:ACTIVITY``
    (each activity's scene is its own) or ``office:building``."""
    if task.split == "virtualhome":
        return f"virtualhome:{task.provenance.get('scene', '?')}"
    if task.split == "behavior":
        return f"behavior:{task.provenance.get('activity', task.id)}"
    return f"{task.split}:building"


def parts(tasks: list[Task], seed: int = 0) -> dict[str, str]:
    """Building -> ``dev`` or ``heldout`` (module doc): the office building dev; of the
    VirtualHome apartments and BEHAVIOR activities, shuffled with ``random.Random(f"{seed}:parts:SPLIT")``,
    the first :data:`DEV_APARTMENTS` / :data:`DEV_SHARE` dev."""
    out: dict[str, str] = {}
    for split in SPLITS:
        names = sorted({building(t) for t in tasks if t.split == split})
        if split == "office":
            out.update(dict.fromkeys(names, "dev"))
            continue
        random.Random(f"{seed}:parts:{split}").shuffle(names)
        n_dev = DEV_APARTMENTS if split == "virtualhome" else round(DEV_SHARE * len(names))
        out.update({b: ("dev" if i < n_dev else "heldout") for i, b in enumerate(names)})
    return out


class BenchmarkError(ValueError):
    """A benchmark file that is missing, of another format or version, or built from other scenes."""


def path_of(task: str, directory: Path | None = None) -> Path:
    if task not in FORMATS:
        raise BenchmarkError(f"unknown benchmark {task!r}; one of {', '.join(FORMATS)}")
    return Path(directory or DEFAULT_DIR) / f"{task}.v{VERSION}.json"


def unique_scenes(tasks: list[Task]) -> list[Task]:
    """One task per distinct initial graph (office tasks share the building), first by id."""
    seen, out = set(), []
    for t in sorted(tasks, key=lambda t: t.id):
        key = json.dumps(t.initial_graph, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _grounding(tasks: list[Task], split: str, n: int, seed: int, part: str) -> list[GroundingItem]:
    order = sorted(tasks, key=lambda t: t.id)
    random.Random(f"{seed}:{split}:grounding" + ("" if part == "dev" else f":{part}")).shuffle(order)
    made = []
    for t in order:
        item = build_item(t, seed)
        if item is not None:
            made.append(item.model_copy(update={"part": part}))
        if len(made) == n:
            break
    return made


def build(data_dir: Path, out_dir: Path | None = None, *, seed: int = 0, qa_per_split: int = 60,
          grounding_per_split: int = 20, heldout_qa_per_split: int = 320,
          progress: Callable[[str], None] = print) -> tuple[Path, Path]:
    """Build both files from the GraSIF build in ``data_dir``; return their paths. Per split,
    ``qa_per_split`` questions and ``grounding_per_split`` instructions on development scenes, and
    ``heldout_qa_per_split`` questions and ``grounding_per_split`` instructions on held-out scenes
    (none for the office, whose one building is development)."""
    index = dataset.read_index(dataset.ensure(data_dir, list(SPLITS)))
    every = {split: dataset.load_split(data_dir, split) for split in SPLITS}
    part_of = parts([t for ts in every.values() for t in ts], seed)
    questions: list[Question] = []
    goals: list[GroundingItem] = []
    used: dict[str, dict[str, dict[str, str]]] = {"qa": {}, "grounding": {}}
    for split in SPLITS:
        for part in PARTS:
            tasks = [t for t in every[split] if part_of[building(t)] == part]
            if not tasks:
                continue
            n = qa_per_split if part == "dev" else heldout_qa_per_split
            qs = build_questions(split, [(t.id, t.graph) for t in unique_scenes(tasks)], n, seed, part)
            made = _grounding(tasks, split, grounding_per_split, seed, part)
            questions += qs
            goals += made
            used["qa"].setdefault(split, {}).update({q.scene: index["splits"][split][q.scene] for q in qs})
            used["grounding"].setdefault(split, {}).update({i.task: index["splits"][split][i.task] for i in made})
            progress(f"{split} {part}: {len(qs)} questions, {len(made)} grounding tasks")
    out_dir = Path(out_dir or DEFAULT_DIR)
    out_dir.mkdir(parents=True, exist_ok=True)
    split_parts = {p: sorted(b for b, q in part_of.items() if q == p) for p in PARTS}
    paths = []
    for task, items in (("qa", questions), ("grounding", goals)):
        doc = {"format": FORMATS[task], "version": VERSION, "seed": seed, "parts": split_parts,
               "scenes": used[task], "items": [i.model_dump(mode="json") for i in items]}
        path = path_of(task, out_dir)
        path.write_text(json.dumps(doc, indent=1) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def dev_buildings() -> set[str]:
    """The buildings of the shipped benchmark's development part (its ``parts``)."""
    return set(json.loads(path_of("qa").read_text())["parts"]["dev"])


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
    index = dataset.read_index(dataset.ensure(data_dir, list(doc["scenes"])))  # built on first use
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
