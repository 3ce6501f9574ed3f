"""The held-out protocol: which GraSIF tasks evaluate a planner and which may train one.

**Evaluation tasks** never appear in training data, demonstrations or prompt examples: the
47-task sample of ``benchmarks/lm_eval.sh`` (:data:`EVAL_VIRTUALHOME`, :data:`EVAL_BEHAVIOR`) and
every office task. **Development tasks** (:data:`DEV_SPLITS`, the buildings of :mod:`grasif.dev`)
are where every choice is made; they never enter training material either
(:func:`kept_out_tasks`). **The train pool** is the rest of VirtualHome and BEHAVIOR minus the
*siblings* of evaluation tasks (:func:`family_keys`): the same RobotHow program family
(``file647_*``) or program title, the same BEHAVIOR activity.

The split is pinned by a manifest (:data:`MANIFEST`): the task ids of both sides with the SHA-256
of each task file as ``grasif build`` writes it, the excluded siblings with the key they share,
and the seeds of each side (dynamic-mode seeds; ``null`` is the static episode). :func:`check`
rebuilds the split from a GraSIF build and says where it differs from the manifest, and where an
evaluation task or a sibling reaches the pool. Command line: ``python -m grasif.heldout
[--data-dir DIR] [--write]`` (``--write`` writes the manifest anew).
Concepts: ``docs/benchmark/heldout.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import lru_cache
from pathlib import Path

from grasif import dataset
from grasif.task import Task

#: the VirtualHome and BEHAVIOR tasks of the 47-task evaluation sample (benchmarks/lm_eval.sh)
EVAL_VIRTUALHOME = ("file120_1", "file27_2", "file331_2", "file392_1", "file432_1", "file44_1", "file463_2",
                    "file487_1", "file647_2", "file650_1", "file705_1", "file773_1")
EVAL_BEHAVIOR = ("buy_a_belt", "lighting_fireplace", "packing_recreational_vehicle_for_trip", "picking_up_trash",
                 "putting_backpack_in_car_for_school", "putting_out_condiments")
EVAL_IDS = {("virtualhome", t) for t in EVAL_VIRTUALHOME} | {("behavior", t) for t in EVAL_BEHAVIOR}
#: every task of these splits evaluates
EVAL_SPLITS = ("office",)
#: splits the train pool is drawn from
POOL_SPLITS = ("virtualhome", "behavior")
#: splits whose tasks choose designs: kept out of training like the evaluation tasks
DEV_SPLITS = ("dev",)
#: generated building kinds kept for development (dev part (a): buildings from templates no
#: training material is drawn from): ``grasif generate --kind lab`` makes dev tasks, and no
#: training data may take them (:func:`is_dev_generated`)
DEV_BUILDING_KINDS = ("lab",)
#: dynamic-mode seeds of each side (None: the static episode)
SEEDS = {"eval": [None, 0, 1], "train": [None, 0, 1, 2, 3]}

MANIFEST = Path(__file__).resolve().parent / "data" / "heldout_v1.json"


class LeakError(ValueError):
    """The split lets an evaluation task or a sibling of one into the train pool, or a build
    differs from the pinned manifest; the message lists every problem."""


def family_keys(task: Task) -> set[str]:
    """What makes two tasks siblings (module doc): a shared key."""
    prov = task.provenance or {}
    if task.split == "virtualhome":
        keys = {"program:" + task.id.rsplit("_", 1)[0]}
        if prov.get("title"):
            keys.add("title:" + str(prov["title"]).strip().lower())
        return keys
    if task.split == "behavior":
        return {"activity:" + str(prov.get("activity") or task.id)}
    return {f"{task.split}:{task.id}"}


def is_eval(task: Task) -> bool:
    """Whether ``task`` evaluates (module doc)."""
    return task.split in EVAL_SPLITS or (task.split, task.id) in EVAL_IDS


def evaluation_tasks(data_dir: Path) -> list[Task]:
    """The evaluation tasks of a GraSIF build (:func:`is_eval`: the 47-task sample), in split
    order: what no training material may equal or rename."""
    return [t for split in (*POOL_SPLITS, *EVAL_SPLITS) for t in dataset.load_split(data_dir, split) if is_eval(t)]


def kept_out_tasks(data_dir: Path) -> list[Task]:
    """Every task no training material may equal or rename: the evaluation tasks and the
    development tasks (module doc)."""
    return evaluation_tasks(data_dir) + [t for split in DEV_SPLITS for t in dataset.load_split(data_dir, split)]


def is_dev_split(split: str) -> bool:
    """Whether ``split`` is that of tasks generated on a building kind kept for development
    (:data:`DEV_BUILDING_KINDS`; ``generated-lab``): dev material, never training material."""
    return split in {f"generated-{kind}" for kind in DEV_BUILDING_KINDS}


def is_dev_generated(task: Task) -> bool:
    """Whether ``task`` was generated on a building kind kept for development (:func:`is_dev_split`)."""
    return is_dev_split(task.split)


def in_train_pool(split: str, task_id: str, manifest: dict | None = None) -> bool:
    """Whether ``split/task_id`` is in the manifest's train pool: what alone may become training
    data or a demonstration."""
    return f"{split}/{task_id}" in (manifest if manifest is not None else _pinned())["train"]


@lru_cache(maxsize=1)
def _pinned() -> dict:
    return load_manifest()


def build_split(data_dir: Path) -> dict:
    """The split of a GraSIF build (``data_dir``) as a manifest."""
    index = dataset.read_index(dataset.ensure(data_dir, [*EVAL_SPLITS, *POOL_SPLITS]))
    tasks = [t for split in (*EVAL_SPLITS, *POOL_SPLITS) for t in dataset.load_split(data_dir, split)]
    known = {(t.split, t.id) for t in tasks}
    absent = sorted(f"{s}/{t}" for s, t in EVAL_IDS - known)
    if absent:
        raise LeakError(f"{data_dir}: evaluation task(s) {', '.join(absent)} are not in the build")
    evaluation = [t for t in tasks if is_eval(t)]
    eval_keys: dict[str, str] = {}
    for t in evaluation:
        for key in family_keys(t):
            eval_keys.setdefault(key, f"{t.split}/{t.id}")
    pool, siblings = [], []
    for t in tasks:
        if is_eval(t) or t.split not in POOL_SPLITS:
            continue
        shared = sorted(k for k in family_keys(t) if k in eval_keys)
        if shared:
            siblings.append({"task": f"{t.split}/{t.id}", "key": shared[0], "of": eval_keys[shared[0]]})
        else:
            pool.append(t)

    def pinned(ts: list[Task]) -> dict[str, str]:
        return {f"{t.split}/{t.id}": index["splits"][t.split][t.id] for t in ts}

    return {"protocol": "heldout_v1", "seeds": SEEDS, "eval": pinned(evaluation), "train": pinned(pool),
            "excluded_siblings": siblings,
            "counts": {"eval": len(evaluation), "train": len(pool), "excluded_siblings": len(siblings)}}


def load_manifest(path: Path = MANIFEST) -> dict:
    return json.loads(Path(path).read_text())


def check(data_dir: Path, manifest: dict | None = None) -> dict:
    """The split of ``data_dir`` if it is the manifest's and leaks nothing; else :class:`LeakError`."""
    manifest = manifest if manifest is not None else load_manifest()
    problems = leaks(manifest)
    built = build_split(data_dir)
    for side in ("eval", "train"):
        if built[side] != manifest[side]:
            changed = sorted(set(built[side].items()) ^ set(manifest[side].items()))
            problems.append(f"{side}: the build differs from the manifest at {', '.join(k for k, _ in changed[:8])}"
                            + (f" and {len(changed) - 8} more" if len(changed) > 8 else ""))
    if problems:
        raise LeakError("; ".join(problems))
    return built


def leaks(manifest: dict) -> list[str]:
    """What in a manifest lets evaluation into training: an evaluation task in the pool, or an
    excluded sibling in the pool."""
    train = set(manifest["train"])
    problems = [f"evaluation task {t} is in the train pool" for t in sorted(set(manifest["eval"]) & train)]
    problems += [f"{s['task']} (sibling of {s['of']} by {s['key']}) is in the train pool"
                 for s in manifest["excluded_siblings"] if s["task"] in train]
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grasif.heldout", description=__doc__.split("\n\n")[0],
                                epilog="example: python -m grasif.heldout --data-dir ~/.cache/lookplangraph/grasif")
    p.add_argument("--data-dir", type=Path, default=None, help="a GraSIF build (default: the default build)")
    p.add_argument("--write", action="store_true", help=f"write the manifest ({MANIFEST}) from the build")
    args = p.parse_args(argv)
    data_dir = args.data_dir or dataset.default_data_dir()
    try:
        if args.write:
            split = build_split(data_dir)
            MANIFEST.write_text(json.dumps(split, indent=1, sort_keys=True) + "\n")
        else:
            split = check(data_dir)
    except (LeakError, FileNotFoundError) as exc:
        print(f"heldout: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, FileNotFoundError) else 1
    print(json.dumps(split["counts"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
