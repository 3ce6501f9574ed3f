"""Run the rows of the paper's tables (:mod:`.tables`) on the same tasks, resumably.

Layout under ``out``::

    reproduce.json                 the run's model(s), --limit and seed (a rerun must match them)
    <table>/<row>_<split>/         one evaluation directory per cell (lookplangraph.evaluation.runner.evaluate:
                                   results.jsonl, traces/, summary.json, lm_cache.jsonl)
    table3/gam_<split>/            graph augmentation evaluations (lookplangraph.evaluation.gam_eval)
    table5/injection/              the error-injection curve (a scripted policy, no LM)
    report/                        tables and plots (lookplangraph.evaluation.reproduce.report)

Rerunning the same command skips every finished episode (each cell's ``results.jsonl``) and
replays cached LM replies, so an interrupted run loses at most the episodes in flight.
``limit`` picks a seeded sample of each split, the same tasks for every row.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from grasif import dataset
from grasif.task import Task
from vlm.gam import GraphAugmentation

from lookplangraph.evaluation.gam_eval import bank_cases, evaluate as evaluate_gam, sample_cases
from lookplangraph.evaluation.injection_curve import curve, write_curve
from lookplangraph.lm import make_backend, parse_spec
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.lm.pool import lm_factory
from lookplangraph.evaluation.reproduce.tables import TABLES, Row
from lookplangraph.evaluation.runner import evaluate
from lookplangraph.evaluation.settings import RunSettings, load_settings

#: Table III's observations per split in a full run
GAM_FULL_PER_SPLIT = 150
#: the error-injection curve of Table V's correction modes
INJECTION_RATES = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
INJECTION_SEEDS = 3


class ReproduceError(ValueError):
    """Settings that cannot be reproduced (a missing config, another run's directory ...)."""


@dataclass
class Options:
    """What ``lookplangraph reproduce`` was given (``configs`` is the folder of Table configs)."""

    lm: str
    out: Path
    data_dir: Path
    configs: Path
    vlm: str | None = None
    bank: str | None = None
    limit: int | None = None
    seed: int = 0
    concurrency: int = 1
    processes: int = 1  # worker processes per row (lookplangraph.evaluation.runner.evaluate)
    endpoints: str | None = None  # "URL,URL": servers of ``lm`` shared by every row (lookplangraph.lm.pool)
    endpoint_concurrency: int | None = None
    endpoint_rate: float | None = None

    def identity(self) -> dict:
        """What must be equal for two runs to share ``out``."""
        return {"lm": self.lm, "vlm": self.vlm, "bank": self.bank, "limit": self.limit, "seed": self.seed}


@dataclass
class Cell:
    """One (row, split) of a table: where its results are and which tasks (or observations) it has."""

    table: str
    row: Row
    split: str
    dir: Path
    keys: list[str] = field(default_factory=list)


def default_configs_dir() -> Path:
    """``configs/`` of the source checkout this package runs from, else of the working directory."""
    here = Path(__file__).resolve().parents[3] / "configs"
    return here if here.is_dir() else Path("configs")


def sample_tasks(data_dir: Path, split: str, limit: int | None, seed: int) -> list[Task]:
    """All tasks of ``split`` (built on demand), or a seeded sample of ``limit`` in task order."""
    tasks = dataset.load_split(data_dir, split)
    if limit is None or limit >= len(tasks):
        return tasks
    picked = set(random.Random(f"reproduce|{seed}|{split}").sample(range(len(tasks)), limit))
    return [t for i, t in enumerate(tasks) if i in picked]


def check_out(opts: Options) -> None:
    """Record the run's identity in ``out/reproduce.json``; refuse a directory of another run."""
    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / "reproduce.json"
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            raise ReproduceError(f"{path} is not JSON; move it away or use another --out") from None
        if old != opts.identity():
            raise ReproduceError(f"{opts.out} holds a run with other settings ({json.dumps(old)}); "
                                 f"use another --out or the same --lm/--vlm/--bank/--limit/--seed")
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(opts.identity(), indent=1) + "\n")
    tmp.replace(path)


def row_settings(row: Row, split: str, opts: Options) -> RunSettings:
    """The row's config with the run's LM, the split, and the row's overrides. A config's
    ``lm_options`` are kept only when ``--lm`` is of the config's backend kind (``n_ctx`` means
    nothing to a server)."""
    path = opts.configs / row.config
    if not path.exists():
        raise ReproduceError(f"{path}: no such config (give --configs DIR, the folder of configs/table*.toml)")
    base = load_settings(str(path), {})
    overrides = dict(row.overrides)
    env = None
    if overrides.get("augmentation") == "@gam":
        if opts.vlm and opts.bank and split == "behavior":
            overrides.update(augmentation="vlm", vlm=opts.vlm)
            env = f"omnigibson-bank@{opts.bank}"
        else:
            overrides["augmentation"] = "parser"
    same_kind = parse_spec(opts.lm)[0] == parse_spec(base.lm)[0]
    return load_settings(str(path), {**overrides, "lm": opts.lm, "split": split, "env": env,
                                     "lm_options": base.lm_options if same_kind else {}, "cache": True,
                                     "concurrency": opts.concurrency})


def plan(names: list[str], opts: Options, splits: list[str] | None = None) -> list[Cell]:
    """Every cell of the tables ``names`` (only the columns ``splits``, when given)."""
    cells = []
    for name in names:
        table = TABLES[name]
        for row in table.rows:
            if row.config is None:
                continue
            for split in table.splits:
                if splits and split not in splits:
                    continue
                cells.append(Cell(name, row, split, opts.out / name / f"{row.key}_{split}"))
    return cells


def _lm_factory(s: RunSettings, out: Path, opts: Options):
    """One cached LM per worker, over ``opts.endpoints`` when given
    (:func:`lookplangraph.lm.pool.lm_factory`)."""
    try:
        return lm_factory(s.lm, s.lm_options, endpoints=opts.endpoints, concurrency=opts.endpoint_concurrency,
                          rate=opts.endpoint_rate, cache=out / "lm_cache.jsonl")
    except ValueError as exc:
        raise ReproduceError(str(exc)) from None


def assign_keys(cells: list[Cell], opts: Options) -> tuple[dict[str, list[Task]], dict[str, list]]:
    """Fill each cell's ``keys`` (its tasks, or Table III's observations); return the tasks and
    the observations per split."""
    tasks_of = {split: sample_tasks(opts.data_dir, split, opts.limit, opts.seed)
                for split in sorted({c.split for c in cells if c.row.config != "@gam"})}
    gam_cases = {c.split: _gam_cases(opts, c.split) for c in cells if c.row.config == "@gam"}
    for c in cells:
        c.keys = ([case.key for case in gam_cases[c.split]] if c.row.config == "@gam"
                  else [f"{t.split}__{t.id}" for t in tasks_of[c.split]])
    return tasks_of, gam_cases


def run_cells(cells: list[Cell], opts: Options, *, quiet: bool = False) -> None:
    """Run every planner cell (tables II, IV, V) and Table III's evaluations, with a bar per
    cell and one overall."""
    tasks_of, gam_cases = assign_keys(cells, opts)
    total = sum(len(c.keys) for c in cells)
    overall = tqdm(total=total, desc="all tables", unit="ep", position=0, disable=quiet)
    try:
        for c in cells:
            bar = tqdm(total=len(c.keys), desc=f"{c.table} {c.row.label} / {c.split}", unit="ep", position=1,
                       leave=False, disable=quiet)
            last = {"n": 0}

            def progress(done: int, _total: int, _row) -> None:
                overall.update(done - last["n"])
                bar.update(done - last["n"])
                last["n"] = done

            if c.row.config == "@gam":
                _run_gam(c, gam_cases[c.split], opts, progress)
            else:
                s = row_settings(c.row, c.split, opts)
                evaluate(tasks_of[c.split], _lm_factory(s, c.dir, opts), s.planner_config(), c.dir,
                         dynamic_seed=s.seed if s.dynamic else None, concurrency=s.concurrency,
                         processes=opts.processes, progress=progress,
                         meta=s.as_dict(), env=s.env, augmentation_factory=s.augmentation_factory(), planner=s.planner,
                         dynamic_mode=s.dynamic_mode)
            bar.close()
    finally:
        overall.close()


def _gam_cases(opts: Options, split: str):
    if opts.vlm and opts.bank and split == "behavior":
        return bank_cases(opts.bank, opts.data_dir)
    return sample_cases(opts.data_dir, [split], opts.limit or GAM_FULL_PER_SPLIT, opts.seed)


def _run_gam(cell: Cell, cases, opts: Options, progress) -> None:
    images = opts.vlm and opts.bank and cell.split == "behavior"
    parser = CachedBackend(make_backend(opts.lm), cell.dir / "lm_cache.jsonl")
    describer = CachedBackend(make_backend(opts.vlm), cell.dir / "vlm_cache.jsonl") if images else None
    gam = GraphAugmentation("vlm" if images else "parser", describer=describer, parser=parser)
    meta = {"mode": gam.mode, "lm": opts.lm, "vlm": opts.vlm if images else None, "split": cell.split,
            "n": len(cases), "seed": opts.seed}
    evaluate_gam(cases, gam, cell.dir, progress=progress, meta=meta)


def run_injection(opts: Options, splits: list[str] | None = None, *, quiet: bool = False) -> Path:
    """Table V's error-injection curve (a scripted policy, no LM) on the sampled tasks of every
    split (or of ``splits``); kept in ``out/table5/injection/curve.csv`` and reused when its
    tasks are the same."""
    out = opts.out / "table5" / "injection"
    tasks = [t for split in (splits or ("virtualhome", "behavior", "office"))
             for t in sample_tasks(opts.data_dir, split, opts.limit, opts.seed)]
    meta = {"tasks": [f"{t.split}__{t.id}" for t in tasks], "rates": list(INJECTION_RATES), "seeds": INJECTION_SEEDS}
    meta_path = out / "meta.json"
    if (out / "curve.csv").exists() and meta_path.exists() and json.loads(meta_path.read_text()) == meta:
        return out
    bar = tqdm(total=len(tasks) * len(INJECTION_RATES) * 3 * INJECTION_SEEDS, desc="table5 injection curve",
               unit="ep", disable=quiet)

    def progress(done: int, _total: int, _row) -> None:
        bar.update(done - bar.n)

    rows = curve(tasks, list(INJECTION_RATES), seeds=INJECTION_SEEDS, progress=progress)
    bar.close()
    write_curve(rows, out)
    meta_path.write_text(json.dumps(meta) + "\n")
    return out
