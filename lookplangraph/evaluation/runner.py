"""Episodes and batch evaluation on GraSIF tasks, with traces and resumable results.

Output of one episode (``run_episode_to_dir``) in ``OUT/``::

    trace.jsonl     # one StepRecord per LM call
    result.json     # the EpisodeResult

A batch evaluation (:func:`evaluate`) writes into ``OUT/``::

    config.json     # what was run, and the GraSIF build of each split run ("grasif_build")
    results.jsonl   # one EpisodeResult per finished episode, appended as each finishes
    traces/<split>__<task>.jsonl
    summary.json, summary.csv   # SR, APP, TPA, mean actions, wall time per task

Resuming: rerunning with the same ``OUT`` skips every (split, task) already in ``results.jsonl``;
a line cut short by an interruption is dropped and that episode runs again. Nothing finished is
lost or run twice. A row is appended only when its episode has ended, by one writer; the trace
of an episode under way is ``traces/<split>__<task>.jsonl.partial`` until then (an interrupted
or failed attempt's partial trace is replaced, never appended to).

Builds: ``config.json`` records, under ``grasif_build``, the build of each split whose tasks came
from a GraSIF build (:func:`grasif.dataset.build_of`: ``fingerprint``, ``builder_version``,
``project_version``), and so does a single episode's. Resuming into an ``OUT`` whose finished
episodes of a split were run on another build of it raises ``ValueError`` (the results would mix
two builds). :func:`recorded_builds` reads the record back and :func:`build_warnings` words the
warning ``lookplangraph report`` and ``benchmarks/lm_eval_table.py --compare`` print when they put
side by side runs made on different builds of the same split.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from grasif import dataset
from grasif.metrics import EpisodeRecord, Summary, summarize, summary_table
from grasif.task import Task, save_task

from lookplangraph.lm import LMError
from lookplangraph.lm.pool import EndpointDown
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeResult, StepRecord
from lookplangraph.planners import get_planner
from lookplangraph.evaluation.workers import WorkerProcesses, WorkerThreads
from sim_adapters.failures import LowLevelFailures, parse_rates
from sim_adapters.graph_env import GraphEnvironment
from sim_adapters.omnigibson import ImageBank, ImageBankEnvironment
from sim_adapters.unity import DEFAULT_URL, UnityBackend
from sim_adapters.virtualhome import VirtualHomeEnvironment
from sim_adapters.dynamic import DEFAULT_MODE, perturb
from sim_adapters.dynamic import dynamic_mode as dynamic_mode_of
from sim_adapters.wrappers import DynamicPerturbation, StepRecorder
from vlm.descriptions import describe_truth

#: ``--env`` kinds and the split each runs (None: any): the SGS on the true graph, VirtualHome's
#: evolving graph, its Unity simulator, the SGS with images from an OmniGibson image bank.
ENVIRONMENTS = {"graph": None, "virtualhome": "virtualhome", "virtualhome-unity": "virtualhome",
                "omnigibson-bank": "behavior"}
#: environments whose ``discover_objects`` brings an image (what ``vlm`` augmentation needs)
WITH_IMAGES = ("virtualhome-unity", "omnigibson-bank")


def check_env(env: str, tasks: list[Task], augmentation: str = "ground_truth") -> None:
    """``ValueError`` with the reason when ``env`` (``graph``, ``virtualhome``,
    ``virtualhome-unity[@URL]``, ``omnigibson-bank@DIR``) cannot run ``tasks`` with
    ``augmentation``: a simulator runs only its own split, ``vlm`` augmentation needs images."""
    kind, at, where = env.partition("@")
    if kind not in ENVIRONMENTS or (at and kind not in ("virtualhome-unity", "omnigibson-bank")):
        raise ValueError(f"unknown environment {env!r}; use graph, virtualhome, virtualhome-unity[@URL] "
                         "or omnigibson-bank@BANK_DIR")
    if kind == "omnigibson-bank" and not where:
        raise ValueError("--env omnigibson-bank needs the image bank: omnigibson-bank@BANK_DIR")
    split = ENVIRONMENTS[kind]
    other = sorted({t.split for t in tasks if split is not None and t.split != split})
    if other:
        raise ValueError(f"--env {kind} runs only the {split} split, not {', '.join(other)}")
    if augmentation == "vlm" and kind not in WITH_IMAGES:
        raise ValueError(f"--augmentation vlm needs images; --env {kind} renders none "
                         f"(use {' or '.join(WITH_IMAGES)}, or --augmentation parser)")


def make_env(task: Task, dynamic_seed: int | None = None, env: str = "graph", failures=None, failure_seed: int = 0,
             dynamic_mode: str = DEFAULT_MODE):
    """The environment of an episode: ``env`` (see :func:`check_env`), wrapped for dynamic mode
    when ``dynamic_seed`` is given (``dynamic_mode``, :mod:`sim_adapters.dynamic`; the moves are
    drawn at its first ``reset``) and, with ``failures`` (a rate, or a table of
    rates per kind), for low-level execution failures drawn with ``failure_seed`` and the task's
    id (:class:`sim_adapters.failures.LowLevelFailures`). The SGS environments write ``describe``
    text with :func:`vlm.descriptions.describe_truth`, for ``parser`` augmentation."""
    check_env(env, [task])
    kind, _, where = env.partition("@")
    if kind == "graph":
        environment = GraphEnvironment(task.graph, describer=describe_truth)
    elif kind == "omnigibson-bank":
        environment = ImageBankEnvironment(task, _bank(where), describer=describe_truth)
    else:
        backend = None
        if kind == "virtualhome-unity":
            backend = UnityBackend(where or DEFAULT_URL)
        environment = VirtualHomeEnvironment(task, backend)
    if dynamic_seed is not None:
        environment = DynamicPerturbation(environment, task.goal, dynamic_seed, dynamic_mode, dynamic_key(task))
    if failures:
        environment = LowLevelFailures(environment, failures, f"{failure_seed}:{task.split}/{task.id}")
    return environment


def dynamic_key(task: Task) -> str:
    """The key dynamic mode draws a task's moves with (``split/id``: :mod:`sim_adapters.dynamic`)."""
    return f"{task.split}/{task.id}"


def dynamic_moves(task: Task, seed: int, dynamic_mode: str = DEFAULT_MODE) -> bool:
    """Whether dynamic mode moves anything in ``task`` with ``seed``, as :func:`make_env`'s
    environment will (without it, the episode is the static one)."""
    return bool(perturb(task.graph, task.goal, seed, dynamic_mode, dynamic_key(task))[1])


@lru_cache(maxsize=4)
def _bank(path: str):
    return ImageBank.load(Path(path))


def format_step(rec: StepRecord) -> str:
    """A readable trace entry for the terminal: the action with the decision's time and tokens,
    then one indented line per thing that happened (reason, corrections, what was seen...)."""
    cached = f", {rec.cached_tokens} cached" if rec.cached_tokens else ""
    lines = [f"[{rec.call:>2}] {rec.proposed or '(unreadable)'}" + ("" if rec.accepted else "  REJECTED")
             + (f"  ROBOT FAILED ({rec.failure})" if rec.failure else "")
             + f"   ({rec.seconds:.1f} s; {rec.prompt_tokens} prompt tokens{cached}, {rec.completion_tokens} generated)"]
    if rec.reason:
        lines.append(f"     reason: {rec.reason}")
    if rec.corrections:
        lines.append(f"     corrected: {'; '.join(rec.corrections)}")
    if rec.executed and (len(rec.executed) > 1 or rec.executed[0] != rec.proposed):
        lines.append(f"     executed: {', '.join(rec.executed)}")
    for p in rec.perceived:
        lines.append(f"     {p['mode']} augmentation of {p['node']}: {p['prompt_tokens']} + {p['completion_tokens']} "
                     f"tokens, {p['seconds']:.1f} s" + (f"; dropped: {'; '.join(p['notes'])}" if p['notes'] else ""))
    if rec.observed:
        lines.append(f"     saw: {', '.join(rec.observed)}")
    if rec.feedback:
        lines.append(f"     feedback: {rec.feedback}")
    if rec.infeasible:
        lines.append(f"     INFEASIBLE (not told to the LM): {rec.infeasible}")
    return "\n".join(lines)


def format_result(r: EpisodeResult) -> str:
    lines = [
        f"{'SUCCESS' if r.success else 'FAILURE'} ({r.termination}"
        f"{'; goal units met, but side effects' if r.success_changed_only and not r.success else ''}"
        f"): precision {r.precision:.3f}, "
        f"{len(r.actions)} actions, {len(r.executed)} primitive steps, {r.lm_calls} LM calls",
        f"tokens: {r.prompt_tokens} prompt ({r.cached_tokens} cached) + {r.completion_tokens} completion; "
        f"LM {r.lm_seconds:.1f} s of {r.wall_s:.1f} s",
    ]
    if r.augmentation_calls:
        lines.append(f"{r.augmentation} augmentation: {r.augmentation_calls} calls, {r.augmentation_prompt_tokens} "
                     f"prompt + {r.augmentation_completion_tokens} completion tokens, {r.augmentation_seconds:.1f} s "
                     "(not in the tokens above)")
    if r.failure:
        lines.append(f"{r.planner} failure: {r.failure}")
    if r.success_with_correction is not None:
        lines.append(f"with the SGS's corrections the plan would {'succeed' if r.success_with_correction else 'fail too'}")
    lines += [f"  not met: {g}" for g in r.goal_not_met]
    lines += [f"  infeasible action in the plan: {a}" for a in r.infeasible]
    return "\n".join(lines)


def traced_episode(task: Task, lm, cfg: PlannerConfig, trace_path: Path, *, dynamic_seed: int | None = None,
                   echo: Callable[[str], None] | None = None, env: str = "graph",
                   record_dir: Path | None = None, augmentation=None, planner: str = "lookplangraph",
                   failures=None, failure_seed: int = 0, dynamic_mode: str = DEFAULT_MODE) -> EpisodeResult:
    """Run one episode, appending each :class:`StepRecord` to ``trace_path`` as it happens (and
    echoing it readably when ``echo`` is given). ``record_dir``: also record every environment
    step there (``steps.jsonl``, ``images/``). ``augmentation``: a
    :class:`vlm.gam.GraphAugmentation` (default ground truth); ``planner``: a
    :mod:`lookplangraph.planners` name; ``failures``, ``failure_seed``: low-level failures
    (:func:`make_env`), as is ``dynamic_mode``."""
    plan = get_planner(planner)
    env = make_env(task, dynamic_seed, env, failures, failure_seed, dynamic_mode)
    if record_dir is not None:
        env = StepRecorder(env, record_dir)
    told = []
    with open(trace_path, "w") as trace:
        def on_step(rec: StepRecord) -> None:
            trace.write(json.dumps(asdict(rec)) + "\n")
            trace.flush()
            if echo:
                if not told:  # dynamic mode draws its moves when the planner resets the environment
                    told.append(True)
                    moves = getattr(env, "moves", [])
                    if moves:
                        echo("dynamic mode moved: " + "; ".join(moves))
                echo(format_step(rec))

        begin = getattr(lm, "begin_episode", None)
        if begin is not None:  # a policy that answers from the episode itself (the expert)
            begin(task, env, planner, cfg)
        return plan.run(task, env, lm, cfg, on_step=on_step, augmentation=augmentation)


def run_episode_to_dir(task: Task, lm, cfg: PlannerConfig, out: Path, *, dynamic_seed: int | None = None,
                       echo: Callable[[str], None] | None = None, env: str = "graph",
                       augmentation=None, planner: str = "lookplangraph", failures=None,
                       failure_seed: int = 0, dynamic_mode: str = DEFAULT_MODE, meta: dict | None = None) -> EpisodeResult:
    """Run one episode, writing ``task.json`` (the task, so the run can be viewed without the
    data directory), ``config.json`` (``meta``: what was run, as :func:`evaluate` writes it),
    ``trace.jsonl`` as it goes, ``result.json`` at the end and the environment's steps in
    ``steps.jsonl`` (images, when the environment renders them, in ``images/``)."""
    out.mkdir(parents=True, exist_ok=True)
    save_task(task, out / "task.json")
    if meta is not None:
        _write_config(out, meta | _builds_meta([task]))
    result = traced_episode(task, lm, cfg, out / "trace.jsonl", dynamic_seed=dynamic_seed, echo=echo, env=env,
                            record_dir=out, augmentation=augmentation, planner=planner, failures=failures,
                            failure_seed=failure_seed, dynamic_mode=dynamic_mode)
    (out / "result.json").write_text(json.dumps(asdict(result), indent=1) + "\n")
    return result


def _key(split: str, task_id: str) -> str:
    return f"{split}__{task_id}"


#: the key of ``config.json`` that records the GraSIF build of each split run (module doc)
BUILD_KEY = "grasif_build"


def _builds_meta(tasks: list[Task]) -> dict:
    builds = dataset.builds_of(tasks)
    return {BUILD_KEY: builds} if builds else {}


def _write_config(out: Path, meta: dict) -> None:
    tmp = out / "config.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, out / "config.json")


def recorded_config(run_dir: Path) -> dict:
    """``run_dir/config.json`` ({} when there is none or it is not a JSON object)."""
    try:
        config = json.loads((Path(run_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def recorded_builds(run_dir: Path) -> dict[str, dict]:
    """Split -> the GraSIF build record a run's ``config.json`` holds ({} for a run that recorded
    none: made before builds were recorded, or on tasks from elsewhere)."""
    builds = recorded_config(run_dir).get(BUILD_KEY)
    return {s: b for s, b in builds.items() if isinstance(b, dict) and b.get("fingerprint")} \
        if isinstance(builds, dict) else {}


def _short(build: dict) -> str:
    return str(build.get("fingerprint"))[:12]


def _check_same_builds(out: Path, builds: dict[str, dict], rows: list[dict]) -> None:
    """``ValueError`` when ``out`` holds finished episodes of a split run on another build of it."""
    before = recorded_builds(out)
    done = {r.get("split") for r in rows}
    for split, build in builds.items():
        old = before.get(split)
        if old is not None and split in done and old.get("fingerprint") != build.get("fingerprint"):
            raise ValueError(f"{out} holds episodes of split {split} run on another GraSIF build (build {_short(old)}; "
                             f"the tasks now come from build {_short(build)}): resuming would mix the two; use another "
                             f"output directory, or remove {out / 'results.jsonl'} to run them all again")


def build_warnings(runs: dict[str, dict[str, dict]]) -> list[str]:
    """One warning line per split that ``runs`` (name -> :func:`recorded_builds`) ran on more than
    one GraSIF build; [] when every split was run on one build (or no run recorded one)."""
    lines = []
    splits = sorted({s for builds in runs.values() for s in builds})
    for split in splits:
        by_build: dict[str, list[str]] = {}
        for name, builds in runs.items():
            if split in builds:
                by_build.setdefault(_short(builds[split]), []).append(name)
        if len(by_build) > 1:
            which = "; ".join(f"{', '.join(names)}: build {fp}" for fp, names in by_build.items())
            lines.append(f"warning: these runs were made on different GraSIF builds of split {split} ({which}); "
                         "its tasks differ between them, so their scores are not comparable")
    return lines


def read_results(path: Path) -> list[dict]:
    """Complete lines of a results file (a torn last line is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def to_record(row: dict) -> EpisodeRecord:
    """The metrics' view of a results row."""
    return EpisodeRecord(
        task_id=row["task_id"], split=row["split"], success=row["success"],
        success_changed_only=row.get("success_changed_only"), precision=row["precision"],
        actions=len(row["actions"]), tokens=row["prompt_tokens"] + row["completion_tokens"],
        gt_actions=row.get("gt_actions"), no_change=row.get("no_change", False), wall_s=row["wall_s"],
        lm_calls=row["lm_calls"], lm_seconds=row["lm_seconds"],
    )


@dataclass(frozen=True)
class _EpisodeJob:
    """What every worker needs to run an episode of an evaluation, the same in threads and in
    worker processes (picklable)."""

    cfg: PlannerConfig
    traces: Path
    dynamic_seed: int | None
    env: str
    planner: str
    attempts: int
    failures: Any = None
    failure_seed: int = 0
    dynamic_mode: str = DEFAULT_MODE

    def run(self, task: Task, lm, augmentation, log: Callable[[str], None]) -> dict:
        """The result row of ``task`` (``evaluate``'s doc: reruns on a lost endpoint, the trace
        renamed from ``.partial`` when the episode ends)."""
        key = _key(task.split, task.id)
        partial, final = self.traces / f"{key}.jsonl.partial", self.traces / f"{key}.jsonl"
        for attempt in range(1, self.attempts + 1):
            try:
                result = traced_episode(task, lm, self.cfg, partial, dynamic_seed=self.dynamic_seed, env=self.env,
                                        augmentation=augmentation, planner=self.planner, failures=self.failures,
                                        failure_seed=self.failure_seed, dynamic_mode=self.dynamic_mode)
            except EndpointDown as exc:
                if attempt == self.attempts:
                    raise EpisodeFailed(f"episode {key} lost its LM endpoint {attempt} times; the last: {exc}") from exc
                log(f"episode {key}: {exc}; running it again from the start (attempt {attempt + 1} "
                    f"of {self.attempts})")
                continue
            os.replace(partial, final)
            row = asdict(result) | {"gt_actions": len(task.ground_truth_plan), "no_change": task.goal.is_empty()}
            if attempt > 1:
                row["attempts"] = attempt
            return row
        raise AssertionError("unreachable")


def evaluate(tasks: list[Task], lm_factory: Callable[[], object], cfg: PlannerConfig, out: Path, *,
             dynamic_seed: int | None = None, concurrency: int = 1, processes: int = 1, progress=None,
             meta: dict | None = None, env: str = "graph",
             augmentation_factory: Callable[[object], object] | None = None,
             planner: str = "lookplangraph", episode_attempts: int = 3,
             log: Callable[[str], None] | None = None, failures=None, failure_seed: int = 0,
             dynamic_mode: str = DEFAULT_MODE) -> list[dict]:
    """Run every task not yet in ``out/results.jsonl``; write the summary of ``tasks`` and return
    their result rows (module doc).

    ``concurrency`` workers take tasks from a bounded queue: threads of this process, or, with
    ``processes`` P > 1, threads spread over P worker processes (``spawn``; K workers give each
    process K // P or one more). Either way this process is the one writer of
    ``results.jsonl``: the workers hand it each finished row. ``lm_factory`` is called once per
    worker, and so is ``augmentation_factory(lm)`` (given that worker's planner LM; it returns a
    :class:`vlm.gam.GraphAugmentation`, default ground truth); with processes both must be
    picklable (module-level functions or classes, e.g. :class:`lookplangraph.lm.pool.LMFactory`,
    whose endpoint pool is shared across the processes; :mod:`lookplangraph.evaluation.workers`).
    ``env`` names the environment, ``dynamic_mode`` the dynamic mode of a ``dynamic_seed``, and
    ``failures``/``failure_seed`` its low-level failures (:func:`make_env`). ``progress(done, total, row)`` is called after each episode (the CLI draws
    a bar with it).

    An episode whose LM endpoint fails (:class:`lookplangraph.lm.pool.EndpointDown`) runs again
    from the start, up to ``episode_attempts`` times in all (``log`` gets a line each time;
    default stderr): its trace is written to ``traces/KEY.jsonl.partial`` and renamed to
    ``KEY.jsonl`` only when the episode ends, and its row is appended only then, so a failed
    attempt leaves nothing behind. Any other exception, or an episode out of attempts, stops the
    evaluation: no new episode starts, those under way finish and are written, then the exception
    is raised (a worker process that dies raises
    :class:`~lookplangraph.evaluation.workers.WorkerDied`). Rows already written stay; rerunning
    resumes. A worker process whose parent dies (SIGKILL) exits at once, so nothing
    runs on after the writer."""
    check_env(env, tasks)
    get_planner(planner)  # an unknown planner fails before any episode
    if episode_attempts < 1:
        raise ValueError(f"episode_attempts must be at least 1, not {episode_attempts}")
    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    log = log or (lambda line: print(f"\n{line}", file=sys.stderr, flush=True))
    out.mkdir(parents=True, exist_ok=True)
    traces = out / "traces"
    traces.mkdir(exist_ok=True)
    for stale in traces.glob("*.partial"):  # attempts cut short by an earlier interruption
        stale.unlink()
    results = out / "results.jsonl"
    trim_torn_line(results)
    builds = _builds_meta(tasks)
    finished_rows = read_results(results)
    _check_same_builds(out, builds.get(BUILD_KEY, {}), finished_rows)
    if finished_rows and recorded_builds(out):  # the builds of episodes run before stay recorded
        builds = {BUILD_KEY: recorded_builds(out) | builds.get(BUILD_KEY, {})}
    if meta is not None:
        _write_config(out, meta | builds)
    elif builds:  # no settings to record: keep what config.json holds, with the builds
        _write_config(out, recorded_config(out) | builds)
    done = {_key(r["split"], r["task_id"]) for r in read_results(results)}
    todo = [t for t in tasks if _key(t.split, t.id) not in done]
    total, finished = len(tasks), len(tasks) - len(todo)
    if progress:
        progress(finished, total, None)
    if failures:
        parse_rates(failures)  # a bad rate is bad input before any episode
    dynamic_mode_of(dynamic_mode)  # an unknown mode fails before any episode
    job = _EpisodeJob(cfg, traces, dynamic_seed, env, planner, episode_attempts, failures, failure_seed, dynamic_mode)
    workers = max(1, min(concurrency, len(todo)))
    processes = min(processes, workers)
    if todo and processes > 1:
        pool = WorkerProcesses(job, lm_factory, augmentation_factory, workers, processes)
    else:
        pool = WorkerThreads(job, lm_factory, augmentation_factory, workers, log)
    error: BaseException | None = None
    try:
        if todo:
            pool.start(todo)
        with open(results, "a") as f:  # the one writer of results.jsonl
            for kind, value in pool.messages() if todo else ():
                if kind == "log":
                    log(value)
                elif kind == "error":
                    error = error or value
                else:
                    f.write(json.dumps(value) + "\n")
                    f.flush()
                    finished += 1
                    if progress:
                        progress(finished, total, value)
    finally:
        pool.close()
    if error is not None:
        raise error
    keys = {_key(t.split, t.id) for t in tasks}
    rows = [r for r in read_results(results) if _key(r["split"], r["task_id"]) in keys]
    write_summary(rows, out)
    return rows


def _stderr(line: str) -> None:
    print(f"\n{line}", file=sys.stderr, flush=True)


class EpisodeFailed(LMError):
    """An episode could not be run to its end (its LM endpoint failed on every attempt)."""


def trim_torn_line(path: Path) -> None:
    """Drop an incomplete last line left by an interruption, so appends start on a fresh line."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def write_summary(rows: list[dict], out: Path) -> dict:
    """``summary.json`` and ``summary.csv``: overall and per-split metrics, plus one CSV row per task."""
    records = [to_record(r) for r in rows]
    groups = {"all": records}
    for r in records:
        groups.setdefault(r.split, []).append(r)
    changing = [r for r in records if not r.no_change]
    if len(changing) != len(records):
        groups["all (changing goals)"] = changing
    summary = {label: summarize(recs).model_dump() for label, recs in groups.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["split", "task_id", "success", "success_changed_only", "precision", "actions", "gt_actions",
                    "tokens", "lm_calls", "termination", "wall_s", "lm_s_per_call", "no_change",
                    "low_level_failures", "low_level_repaired"])
        for r in sorted(rows, key=lambda r: (r["split"], r["task_id"])):
            per = r["lm_seconds"] / r["lm_calls"] if r["lm_calls"] else 0.0
            lenient = r.get("success_changed_only")
            w.writerow([r["split"], r["task_id"], int(r["success"]), "" if lenient is None else int(lenient),
                        f"{r['precision']:.3f}", len(r["actions"]),
                        r.get("gt_actions"), r["prompt_tokens"] + r["completion_tokens"], r["lm_calls"],
                        r["termination"], f"{r['wall_s']:.2f}", f"{per:.2f}", int(r.get("no_change", False)),
                        len(r.get("low_level_failures", [])), r.get("low_level_repaired", "")])
    return summary


def failure_counts(rows: list[dict]) -> dict:
    """The low-level failures (:mod:`sim_adapters.failures`) of results ``rows``: ``drawn``,
    ``repaired`` (their attempt later went through; ``None`` when a row with failures predates
    the count), ``recovered`` (in episodes that still succeeded) and ``kinds`` (kind → number)."""
    with_failures = [r for r in rows if r.get("low_level_failures")]
    kinds: dict[str, int] = {}
    for r in with_failures:
        for failure in r["low_level_failures"]:
            kind = failure.partition(":")[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    repaired = (None if any("low_level_repaired" not in r for r in with_failures)
                else sum(r["low_level_repaired"] for r in with_failures))
    return {"drawn": sum(kinds.values()), "repaired": repaired,
            "recovered": sum(len(r["low_level_failures"]) for r in with_failures if r["success"]), "kinds": kinds}


def failure_text(rows: list[dict]) -> str | None:
    """One line on the low-level failures of ``rows`` (:func:`failure_counts`); ``None`` without any."""
    c = failure_counts(rows)
    if not c["drawn"]:
        return None

    def share(n: int | None) -> str:
        return "unknown" if n is None else f"{n} ({n / c['drawn']:.0%})"

    kinds = ", ".join(f"{k} {n}" for k, n in sorted(c["kinds"].items()))
    return (f"low-level failures: {c['drawn']} ({kinds}); repaired (the same attempt later went through): "
            f"{share(c['repaired'])}; in episodes that succeeded: {share(c['recovered'])}")


def summary_text(summary: dict) -> str:
    """The table of a ``summary.json`` (label → :class:`grasif.metrics.Summary` fields)."""
    return summary_table({label: Summary.model_validate(row) for label, row in summary.items()})


def now_stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")
