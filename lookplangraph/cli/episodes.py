"""``run``, ``eval``, ``report`` and ``inject``: episodes and batch evaluations under the run
settings (``--config`` and the flags that override its keys), their reports, and the
error-injection curve."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path

from lookplangraph.cli.conventions import (EXIT_FAILED, EXIT_OK, EXPERT_SPECS, Interrupted, Unavailable, UsageError,
                                           NATIVE_LOG, YesNo, add_command, check_spec_flags, deprecated, lm_failure,
                                           progress_bar, verbose_flag)
from lookplangraph.cli.tasks import DATA_DIR_HELP, SPLITS, select_tasks, split_flag
from lookplangraph.evaluation.settings import RunSettings
from lookplangraph.planners.config import CORRECTION_MODES


@dataclass(frozen=True)
class RunFlag:
    """How a run setting (a field of :class:`~lookplangraph.evaluation.settings.RunSettings`) is a
    flag of ``run`` and ``eval``; its help is the field's, its choices the field's, its type the
    field's (a yes/no key is ``--NAME/--no-NAME``)."""

    #: the commands that offer it
    commands: tuple[str, ...] = ("run", "eval")
    #: the help group: ``tasks`` (the task selection), ``settings`` or ``workers`` (eval's)
    group: str = "settings"
    #: the flag where it is not ``--KEY`` (``_`` written ``-``)
    flag: str = ""
    metavar: str | None = None
    #: the default the help shows where the field's help does not say it: True for the field's,
    #: a text, or a text per command
    default: bool | str | dict = False
    #: other keywords of ``add_argument``, for every command or (``per_command``) one
    extra: dict = field(default_factory=dict)
    per_command: dict = field(default_factory=dict)


#: the run settings that are flags, in the order of the help (each overrides ``--config``'s key)
RUN_FLAGS: dict[str, RunFlag] = {
    "split": RunFlag(group="tasks", metavar="S", extra={"choices": SPLITS}),
    "tasks": RunFlag(group="tasks", flag="--task", metavar="ID",
                     default={"run": "its first task", "eval": "all of the split"},
                     per_command={"eval": {"nargs": "+", "action": "extend"}}),
    "selection": RunFlag(commands=("eval",), group="tasks"),
    "limit": RunFlag(commands=("eval",), group="tasks", metavar="N"),
    "planner": RunFlag(),
    "lm": RunFlag(metavar="SPEC"),
    "env": RunFlag(),
    "augmentation": RunFlag(),
    "vlm": RunFlag(metavar="SPEC"),
    "parser_lm": RunFlag(metavar="SPEC"),
    "dynamic": RunFlag(),
    "seed": RunFlag(flag="--dynamic-seed", metavar="N", default=True),
    "dynamic_mode": RunFlag(metavar="MODE"),
    "failures": RunFlag(metavar="RATE"),
    "failure_seed": RunFlag(metavar="N", default=True),
    "out": RunFlag(metavar="DIR", default={"run": "runs/TIME_SPLIT_TASK",
                                           "eval": "runs/eval_TIME_SPLIT; rerun the same command to resume"}),
    "concurrency": RunFlag(commands=("eval",), group="workers", metavar="K", default=True),
    "processes": RunFlag(commands=("eval",), group="workers", metavar="P", default=True),
    "cache": RunFlag(commands=("eval",), group="workers", metavar="FILE", extra={"nargs": "?", "const": True}),
}

#: the run settings that are no flag, and why
CONFIG_ONLY = {
    "lm_options": "a table of the backend's options: written in --config",
    "vlm_options": "a table of the describer backend's options: written in --config",
    "config": "the planner's settings: a flag per top-level key (_planner_flags), the baselines' tables in --config",
}


def _field_type(f) -> type:
    """A config field's value type for its flag: the first of its annotation's types (``int | None``: int)."""
    return {"int": int, "float": float}.get(str(f.type).split("|")[0].strip(), str)


def _run_field(key: str):
    return next(f for f in fields(RunSettings) if f.name == key)


def _run_dest(key: str) -> str:
    """The namespace attribute of a run setting's flag (the flag's name: ``--dynamic-seed``, dynamic_seed)."""
    return (RUN_FLAGS[key].flag or "--" + key).removeprefix("--").replace("-", "_")


def _run_flags(group, command: str, where: str) -> None:
    """The flags of the run settings of help group ``where`` that ``command`` offers (:data:`RUN_FLAGS`)."""
    for key, spec in RUN_FLAGS.items():
        if spec.group != where or command not in spec.commands:
            continue
        f = _run_field(key)
        flag, help = spec.flag or "--" + key.replace("_", "-"), f.metadata["help"]
        kwargs = {"dest": _run_dest(key), **spec.extra, **spec.per_command.get(command, {})}
        if isinstance(f.default, bool) and "nargs" not in kwargs:
            group.add_argument(flag, action=YesNo, help=help, default_text=f"{'on' if f.default else 'off'}, or the config's",
                               **kwargs)
            continue
        if _field_type(f) is not str and "nargs" not in kwargs:
            kwargs["type"] = _field_type(f)
        if f.metadata.get("choices"):
            kwargs["choices"] = list(f.metadata["choices"])
        if spec.metavar:
            kwargs["metavar"] = spec.metavar
        shown = spec.default.get(command) if isinstance(spec.default, dict) else spec.default
        if shown is True:
            shown = f"{f.default}, or the config's"
        group.add_argument(flag, help=f"{help} (default: {shown})" if shown else help, **kwargs)


def _run_overrides(args) -> dict:
    """The run settings given as flags (None: not given), by key; a list key given one value (run's
    ``--task``) is a list of one."""
    out = {}
    for key in RUN_FLAGS:
        value = getattr(args, _run_dest(key), None)
        out[key] = [value] if isinstance(value, str) and str(_run_field(key).type).startswith("list") else value
    return out


#: what :func:`_run_overrides` reads of the namespace (the flags :func:`_run_flags` makes)
_run_overrides.reads_args = tuple(_run_dest(key) for key in RUN_FLAGS)


def add_parsers(sub) -> None:
    """The commands of this module, under the top parser's ``sub``."""
    p = add_command(sub, "run", help="run one episode and print its trace",
                    description="Run one episode of a planner on one task and print its trace as it goes; the trace "
                                "and the result are written to --out. Exit code 1 when the episode does not succeed.",
                    examples=["lookplangraph run --split office --task office-01 --max-actions 12",
                              "lookplangraph run --task-file T.json --lm openai:gpt-4o --dynamic --dynamic-seed 3",
                              "lookplangraph run --split virtualhome --task file647_2 --env virtualhome --augmentation parser"])
    t = p.add_argument_group("the task")
    _run_flags(t, "run", "tasks")
    t.add_argument("--task-file", metavar="FILE", help="a task JSON file instead of --split/--task")
    t.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    _episode_flags(p, command="run")
    p.set_defaults(func=cmd_run)

    p = add_command(sub, "eval", help="evaluate on many tasks (resumable)",
                    description="Evaluate a planner on the tasks of a split: one row per episode in OUT/results.jsonl, "
                                "summaries in OUT/summary.csv and .json. Resumable: rerun the same command after a stop "
                                "(Ctrl-C, a crash) and only unfinished episodes run. Exit code 0 whatever the verdicts; "
                                "they are in the summary.",
                    examples=["lookplangraph eval --split office --max-actions 12 --out runs/office",
                              "lookplangraph eval --config configs/table5_no_correction.toml --split behavior --limit 6",
                              "lookplangraph eval --generated runs/dev_lab --max-actions 12 --out runs/dev_lab_eval",
                              "lookplangraph eval --split virtualhome --task file120_1 file27_2 --lm openai:MODEL@URL "
                              "--concurrency 8 --cache"])
    t = p.add_argument_group("the tasks")
    _run_flags(t, "eval", "tasks")
    deprecated(t, "--tasks", "task", "--task", nargs="+", extend=True)
    t.add_argument("--generated", metavar="DIR", help="the tasks of a `grasif generate` directory instead of a split "
                                                     "(e.g. generated labs, dev material)")
    t.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    _episode_flags(p, command="eval")
    w = p.add_argument_group("workers and LM servers")
    _run_flags(w, "eval", "workers")
    w.add_argument("--endpoints", metavar="URL,URL", help="with --lm openai:MODEL: servers of that model used "
                                                          "round-robin by the workers (a failed one is taken out, its "
                                                          "episodes rerun elsewhere)")
    w.add_argument("--endpoint-concurrency", type=int, metavar="N", help="with --endpoints: requests in flight per endpoint")
    w.add_argument("--endpoint-rate", type=float, metavar="R", help="with --endpoints: request starts per second per endpoint")
    p.set_defaults(func=cmd_eval)

    p = add_command(sub, "report", help="compare the summaries of evaluation directories in one table (and trials)",
                    description="One table comparing the summaries of evaluation directories (success rates, "
                                "action precision, LM calls), the failure kinds of each, and one table of the "
                                "human-in-the-loop trials among them.",
                    examples=["lookplangraph report runs/eval_virtualhome runs/eval_behavior runs/eval_office --per-split",
                              "lookplangraph report runs/trial_*"])
    p.add_argument("dirs", nargs="+", metavar="DIR", help="evaluation output directories (with summary.json), trial "
                                                          "directories or directories of trials")
    p.add_argument("--per-split", action=YesNo, default=False, help="also show the per-split rows")
    deprecated(p, "--splits", "per_split", "--per-split", nargs=0, const=True)
    p.set_defaults(func=cmd_report)

    p = add_command(sub, "explain", help="the LM's reasons for the steps of a recorded LookPlanGraph episode",
                    description="Rebuild each decision's prompt of a recorded LookPlanGraph episode (the run replayed "
                                "with its recorded replies; no model runs for that) and ask an LM, by default the "
                                "run's own, for the reason of each chosen step: the action is fixed, only the reason "
                                "is decoded. For runs without reasons in their answers (reason_max_length 0). The "
                                "reasons are printed and saved in DIR/reasons.jsonl, where lookplangraph view finds "
                                "them. Exit code 2 when the run cannot be replayed or its replay proposes other "
                                "actions.",
                    examples=["lookplangraph explain runs/20261129-094338_office_office-01",
                              "lookplangraph explain runs/dev_eval --task dev/clinic-07 --call 3 4",
                              "lookplangraph explain runs/office --task office-02 --lm openai:gpt-4o"])
    p.add_argument("run_dir", metavar="DIR", help="a run directory (lookplangraph run) or an eval directory")
    p.add_argument("--task", metavar="SPLIT/ID", help="in an eval directory: the episode (SPLIT/ID or ID)")
    p.add_argument("--task-file", metavar="FILE", help="the task JSON file (default: the run's task.json, or the "
                                                       "task of the data build)")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--call", nargs="+", type=int, metavar="N", help="only these decisions (default: all)")
    p.add_argument("--lm", metavar="SPEC", help="the LM that gives the reasons (default: the run's)")
    p.set_defaults(func=cmd_explain)

    p = add_command(sub, "inject", help="error-injection curve: SR against injected error rate in each correction mode",
                    description="The error-injection curve (Table V's study): a scripted policy (no LM) follows each "
                                "task's ground-truth plan with errors injected at each rate, in each correction mode "
                                "(or the one of --correction); SR and APP per rate and mode, written as CSV and a plot.",
                    examples=["lookplangraph inject --split office --rates 0,0.3,1.0 --seeds 2",
                              "lookplangraph inject --correction none --out runs/injection_none"])
    split_flag(p, several=True, help="splits (default: all three)", alias=True)
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--rates", default="0,0.1,0.2,0.3,0.5,0.7,1.0",
                   help="comma-separated error rates (default 0,0.1,0.2,0.3,0.5,0.7,1.0)")
    p.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds per rate: 0 to N-1 (default 3)")
    p.add_argument("--correction", choices=CORRECTION_MODES, help="only this correction mode (default: all three)")
    deprecated(p, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/error_injection)")
    p.set_defaults(func=cmd_inject)


def _episode_flags(p, *, command: str) -> None:
    """The settings flags of ``run`` and ``eval`` (:mod:`lookplangraph.evaluation.settings`; the
    run settings' of :data:`RUN_FLAGS`, the planner's of :func:`_planner_flags`): each overrides
    ``--config``'s key of the same name."""
    g = p.add_argument_group("settings (each overrides the key of the same name in --config)")
    g.add_argument("--config", metavar="FILE", help="TOML settings file (configs/*.toml)")
    _run_flags(g, command, "settings")
    deprecated(g, "--seed", "dynamic_seed", "--dynamic-seed", type=int)
    loop = p.add_argument_group("the planner's settings (the config's top-level keys; the loop's switches are "
                                "LookPlanGraph's, the baselines ignore them; the baselines' own are [tables] of --config)")
    _planner_flags(loop)
    deprecated(loop, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    deprecated(loop, "--allow-cycles", "refuse_cycles", "--no-refuse-cycles", nargs=0, const=False)
    verbose_flag(p)


def _planner_fields():
    from dataclasses import fields

    from lookplangraph.planners.config import SECTIONS, PlannerConfig

    return [f for f in fields(PlannerConfig) if f.name not in SECTIONS]


def _planner_flags(group) -> None:
    """One flag per top-level key of :class:`~lookplangraph.planners.config.PlannerConfig`, derived
    from the field (its help, its choices, its default): ``--NAME/--no-NAME`` for yes/no keys."""
    for f in _planner_fields():
        flag, shown = "--" + f.name.replace("_", "-"), "none" if f.default is None else f.default
        if isinstance(f.default, bool):
            group.add_argument(flag, dest=f.name, action=YesNo, help=f.metadata["help"],
                               default_text=f"{'on' if f.default else 'off'}, or the config's")
            continue
        choices, kind = f.metadata.get("choices"), _field_type(f)
        kind = {"choices": list(choices), "metavar": "|".join(choices)} if choices else \
            {"type": kind, "metavar": "N" if kind is not str else "FILE" if f.name.endswith("_file") else "TEXT"}
        help = f.metadata["help"]  # a key without a default whose help says what happens unset says it once
        group.add_argument(flag, dest=f.name, help=help if f.default is None and "(default" in help else
                           f"{help} (default: {shown}, or the config's)", **kind)


def _planner_overrides(args) -> dict:
    """The planner keys given as flags (None: not given)."""
    return {f.name: getattr(args, f.name, None) for f in _planner_fields()}


#: what :func:`_planner_overrides` reads of the namespace (the flags :func:`_planner_flags` makes)
_planner_overrides.reads_args = tuple(f.name for f in _planner_fields())


def _settings(args):
    """Run settings from ``--config`` and the flags of ``run``/``eval`` (None: not given)."""
    from lookplangraph.evaluation.settings import SettingsError, load_settings

    overrides = {**_run_overrides(args), **_planner_overrides(args)}
    try:
        s = load_settings(args.config, overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    check_spec_flags(s.lm, s.vlm, s.parser_lm)
    return s


def _lm_factory(s, out: Path, args=None):
    """One LM per call (per worker); with ``--endpoints`` (or ``lm_options.endpoints``) each is a
    client of one shared endpoint pool (:func:`lookplangraph.lm.pool.lm_factory`). Picklable, for
    worker processes. A bad endpoint list is bad input (2); an LM that cannot be made raises
    :class:`~lookplangraph.lm.LMError` when it is made (unavailable, 3)."""
    from lookplangraph.lm import LMError
    from lookplangraph.lm.pool import lm_factory
    from lookplangraph.lm.specs import with_native_log

    if s.lm in EXPERT_SPECS:  # the privileged harness tool, never a default (distill.teacher.expert)
        from functools import partial

        from lookplangraph.distill.teacher.expert import expert_for

        if s.cache or getattr(args, "endpoints", None):
            raise UsageError(f"--lm {s.lm} answers from the episode itself: it takes no --cache and no --endpoints")
        return partial(expert_for, s.lm)
    cache = None if not s.cache else (out / "lm_cache.jsonl" if s.cache is True else Path(s.cache))
    try:
        return lm_factory(s.lm, with_native_log(s.lm, s.lm_options, out / NATIVE_LOG, getattr(args, "verbose", False)),
                          endpoints=getattr(args, "endpoints", None),
                          concurrency=getattr(args, "endpoint_concurrency", None),
                          rate=getattr(args, "endpoint_rate", None), cache=cache)
    except (ValueError, LMError) as exc:
        raise UsageError(str(exc)) from None


def _made(factory, *args):
    """``factory(*args)`` for a single episode: an LM (or augmentation) that cannot be made is
    unavailable (3), a mode without its backend or a LoRA adapter that does not fit is bad input
    (2; :func:`lm_failure`)."""
    from lookplangraph.lm import LMError

    try:
        return factory(*args)
    except LMError as exc:
        raise lm_failure(exc) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _check_env(s, tasks) -> None:
    from lookplangraph.evaluation.runner import check_env

    try:
        check_env(s.env, tasks, s.augmentation)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _unavailable_kinds() -> tuple[type[BaseException], ...]:
    """Errors of a run that say something it needs is not there: the LM, a simulator, a sandbox."""
    from lookplangraph.lm import LMError
    from lookplangraph.sandbox.runner import SandboxUnavailable
    from sim_adapters.virtualhome import VirtualHomeError

    return LMError, VirtualHomeError, SandboxUnavailable


def cmd_run(args) -> int:
    from lookplangraph.evaluation.runner import format_result, now_stamp, run_episode_to_dir

    s = _settings(args)
    task = select_tasks(s, args.data_dir, args.task_file)[0]
    _check_env(s, [task])
    out = Path(s.out) if s.out else Path("runs") / f"{now_stamp()}_{task.split}_{task.id}"
    lm = _made(_lm_factory(s, out, args))
    make_augmentation = s.augmentation_factory()
    augmentation = _made(make_augmentation, lm) if make_augmentation else None
    print(f"Task {task.split}/{task.id}: {task.instruction}")
    c = s.config
    loop = (f"graph {c.graph_style}; priors {'on' if c.priors else 'off'}; correction {c.correction}; "
            if s.planner == "lookplangraph" else "")  # the LookPlanGraph loop's own switches
    print(f"planner {s.planner}; LM {lm.name}; {loop}dynamic {f'{s.dynamic_mode} seed {s.seed}' if s.dynamic else 'off'}; "
          f"environment {s.env}; augmentation {s.augmentation}")
    try:
        result = run_episode_to_dir(task, lm, s.planner_config(), out, dynamic_seed=s.seed if s.dynamic else None,
                                    failures=s.failures, failure_seed=s.failure_seed,
                                    echo=lambda text: print(text, flush=True), env=s.env, augmentation=augmentation,
                                    planner=s.planner, dynamic_mode=s.dynamic_mode, meta=s.as_dict())
    except _unavailable_kinds() as exc:
        raise lm_failure(exc) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(format_result(result))
    print(f"trace: {out / 'trace.jsonl'}; result: {out / 'result.json'}")
    return EXIT_OK if result.success else EXIT_FAILED


def cmd_eval(args) -> int:
    from lookplangraph.evaluation.runner import evaluate, failure_text, now_stamp, summary_text

    s = _settings(args)
    tasks = select_tasks(s, args.data_dir, generated=args.generated)
    _check_env(s, tasks)
    out = Path(s.out) if s.out else Path("runs") / f"eval_{now_stamp()}_{s.split or 'generated'}"
    kept = f"finished episodes are kept in {out / 'results.jsonl'}; rerun the same command to resume"
    try:
        rows = evaluate(tasks, _lm_factory(s, out, args), s.planner_config(), out,
                 dynamic_seed=s.seed if s.dynamic else None, concurrency=s.concurrency, processes=s.processes,
                 failures=s.failures, failure_seed=s.failure_seed, progress=progress_bar(),
                 meta=s.as_dict() | ({"endpoints": args.endpoints} if args.endpoints else {}),
                 env=s.env, augmentation_factory=s.augmentation_factory(), planner=s.planner,
                 dynamic_mode=s.dynamic_mode)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {kept}") from None
    except (Unavailable, UsageError):
        raise
    except _unavailable_kinds() as exc:
        raise lm_failure(exc, f"{exc} ({kept})") from None
    except ValueError as exc:
        raise UsageError(f"{exc} ({kept})") from None
    print(summary_text(json.loads((out / "summary.json").read_text())))
    failures = failure_text(rows)
    if failures:
        print(failures)
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return EXIT_OK


def cmd_report(args) -> int:
    """One table comparing the summaries of several evaluation directories (and one of the
    human-in-the-loop trials among them: trial directories, or directories holding them)."""
    from collections import Counter

    from lookplangraph.evaluation.runner import build_warnings, read_results, recorded_builds, summary_text
    from lookplangraph.apps.trial import report_table, trial_dirs

    trials = trial_dirs(args.dirs)
    if trials:
        print(report_table(trials))
        args.dirs = [d for d in args.dirs if (Path(d) / "summary.json").exists() or not trial_dirs([d])]
        if not args.dirs:
            return EXIT_OK
    rows = {}
    for d in args.dirs:
        path = Path(d) / "summary.json"
        if not path.exists():
            raise UsageError(f"{d}: no summary.json (not an evaluation directory, or nothing finished yet)")
        summary = json.loads(path.read_text())
        for label, row in summary.items():
            if label == "all" or args.per_split:
                rows[f"{Path(d).name}" + ("" if label == "all" else f" [{label}]")] = row
    print(summary_text(rows))
    for line in build_warnings({Path(d).name: recorded_builds(Path(d)) for d in args.dirs}):
        print(line)  # runs on different GraSIF builds of a split: not the same tasks
    for d in args.dirs:  # baselines: why plans failed, one count per failure kind
        results = read_results(Path(d) / "results.jsonl")
        kinds = Counter(r["failure"] for r in results if r.get("failure"))
        planners = sorted({r.get("planner", "lookplangraph") for r in results})
        if kinds:
            print(f"{Path(d).name} ({', '.join(planners)}): " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    return EXIT_OK


def cmd_explain(args) -> int:
    """The reasons of a recorded episode's decisions (:mod:`lookplangraph.evaluation.explain`),
    printed and saved in the run directory's ``reasons.jsonl`` (each as soon as it is given: an
    interrupted command keeps the ones before), where the viewer finds them."""
    from lookplangraph.evaluation.explain import REASONS_FILE, ReplayError, ask_and_save, chosen_prompts, load_episode, replay_prompts
    from lookplangraph.lm import make_backend

    try:
        task, s, trace = load_episode(Path(args.run_dir), args.task, Path(args.data_dir) if args.data_dir else None,
                                      Path(args.task_file) if args.task_file else None)
        prompts = chosen_prompts(replay_prompts(task, s, trace), args.call)
    except ReplayError as exc:
        raise UsageError(str(exc)) from None
    spec = args.lm or s.lm
    print(f"Task {task.split}/{task.id}: {task.instruction}")
    print(f"replayed {len(trace)} decisions of {args.run_dir}; reasons from {spec}")
    lm = _made(lambda: make_backend(spec, **(s.lm_options if not args.lm else {})))
    saved = 0
    try:
        for p, said, n in ask_and_save(lm, task, trace, prompts, Path(args.run_dir), spec):  # each saved as given
            print(f"[{p.call}] {trace[p.call - 1].get('proposed')}: {said.reason or said.error}", flush=True)
            saved += n
    except _unavailable_kinds() as exc:
        raise lm_failure(exc) from None
    finally:
        if saved:
            print(f"{saved} reason(s) saved in {Path(args.run_dir) / REASONS_FILE} (lookplangraph view shows them)")
    return EXIT_OK


def cmd_inject(args) -> int:
    from types import SimpleNamespace

    from lookplangraph.evaluation.injection_curve import curve, curve_table, write_curve

    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        raise UsageError(f"--rates takes comma-separated numbers, not {args.rates!r}") from None
    tasks = []
    for split in args.split or SPLITS:
        tasks += select_tasks(SimpleNamespace(split=split, selection=None, tasks=None, limit=None), args.data_dir)
    modes = (args.correction,) if args.correction else None
    rows = curve(tasks, rates, seeds=args.seeds, progress=progress_bar(), **({"modes": modes} if modes else {}))
    out = Path(args.out) if args.out else Path("runs") / "error_injection"
    write_curve(rows, out)
    print(curve_table(rows))
    print(f"written: {out / 'curve.csv'}, {out / 'curve.png'}")
    return EXIT_OK
