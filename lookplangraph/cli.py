"""The ``lookplangraph`` command.

Exit codes: 0 success, 1 the plan fails (``validate``), 2 bad input (unreadable or invalid files).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grasif.goals import GoalSpec, goal_from_graphs
from grasif.task import TaskError, load_task
from grasif.validate import ValidationReport, validate_plan
from sgs.actions import ActionSyntaxError
from sgs.graph import GraphError
from sgs.io import graph_from_dict, load_graph
from sgs.render import render_tree


SPLITS = ["virtualhome", "behavior", "office"]


class InputError(Exception):
    """Bad command-line input; the message is printed and the command exits with 2."""


def _read_json(path: str):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None


def _read_goal(path: str, initial, by_class: bool) -> GoalSpec:
    """A goal file is either a goal graph (paper format) or a goal specification (grasif.goals)."""
    data = _read_json(path)
    if isinstance(data, dict) and any(k in data for k in ("node_goals", "count_goals", "formula")):
        try:
            spec = GoalSpec.model_validate(data)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from None
    else:
        try:
            spec = goal_from_graphs(initial, graph_from_dict(data), by_class=by_class)
        except (GraphError, ValueError) as exc:
            raise InputError(f"{path}: {exc}") from None
    problems = spec.check_names(initial)
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems))
    return spec


def _print_report(report: ValidationReport, out) -> None:
    steps = report.steps
    print(f"Plan: {len(steps)} steps -> {report.primitive_count} primitive actions", file=out)
    for s in steps:
        if not s.ok:
            print(f"  step {s.index:>3}  {s.action}\n            INFEASIBLE: {s.feedback}", file=out)
        elif s.corrections and any(not c.startswith("expanded") for c in s.corrections):
            print(f"  step {s.index:>3}  {s.action}  corrected: {'; '.join(s.corrections)}", file=out)
    goal = report.goal
    print(f"Goal: {goal.correct}/{goal.total} correct (precision {goal.precision:.3f})", file=out)
    for item in goal.items:
        if not item.ok:
            print(f"  not met: {item.label}: expected {item.expected}; found {item.actual}", file=out)
    if not goal.frame_checked:
        print("Side effects: not checked (the goal judges only its own conditions)", file=out)
    else:
        print(f"Side effects: {len(goal.side_effects) or 'none'} (all else must stay as in the initial graph)", file=out)
        for item in goal.side_effects:
            print(f"  side effect: {item.label}: expected {item.expected}; found {item.actual}", file=out)
    if report.success:
        print("SUCCESS", file=out)
        return
    failed = []  # the success rules that fail
    if report.infeasible:
        failed.append(f"{len(report.infeasible)} infeasible step(s)")
    if not goal.success_changed_only:
        failed.append("goal not reached")
    if goal.side_effects:
        failed.append(f"side effects on {', '.join(i.label for i in goal.side_effects)}")
    print(f"FAILURE: {', '.join(failed)}", file=out)
    if report.success_changed_only:
        print("  (changed-only verdict: success; the goal's own units are met and every step is feasible)", file=out)


def cmd_validate(args) -> int:
    if args.task:
        try:
            task = load_task(args.task)
        except TaskError as exc:
            raise InputError(str(exc)) from None
        initial, goal, plan = task.graph, task.goal, task.ground_truth_plan
        if args.initial or args.goal:
            raise InputError("give either --task or --initial/--goal")
    else:
        if not (args.initial and args.goal and args.plan):
            raise InputError("validate needs --initial, --goal and --plan (or --task)")
        try:
            initial = load_graph(args.initial)
        except (GraphError, ValueError) as exc:
            raise InputError(str(exc)) from None
        except FileNotFoundError:
            raise InputError(f"{args.initial}: no such file") from None
        goal = _read_goal(args.goal, initial, args.by_class)
        plan = None
    if args.plan:
        plan = _read_json(args.plan)
        if isinstance(plan, dict) and "plan" in plan:
            plan = plan["plan"]
        if not isinstance(plan, list):
            raise InputError(f"{args.plan}: a plan is a JSON list of actions")
    report = validate_plan(initial, plan, goal, correct=not args.no_correction)
    if args.json:
        print(json.dumps(report.summary(), indent=1))
    else:
        _print_report(report, sys.stdout)
    return 0 if report.success else 1


def cmd_show(args) -> int:
    try:
        graph = load_graph(args.graph)
    except (GraphError, ValueError) as exc:
        raise InputError(str(exc)) from None
    except FileNotFoundError:
        raise InputError(f"{args.graph}: no such file") from None
    print(render_tree(graph))
    return 0


def cmd_grasif(args) -> int:
    from grasif import dataset

    data_dir = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        if args.grasif_command == "build":
            out = dataset.build(Path(args.out) if args.out else data_dir, splits=args.split or None,
                                progress=lambda msg: print(msg, file=sys.stderr))
            print(f"GraSIF written to {out}", flush=True)
        elif args.grasif_command == "list":
            if args.selection:
                for task in dataset.load_split(data_dir, args.split):
                    if args.selection in task.provenance.get("selections", []):
                        print(task.id)
            else:
                for _, task_id in dataset.task_ids(data_dir, args.split):
                    print(task_id)
        else:
            print(dataset.stats_table(data_dir))
    except (dataset.SourceError, FileNotFoundError, KeyError) as exc:
        raise InputError(str(exc).strip("'\"")) from None
    return 0


# -- episodes and evaluation -------------------------------------------------------------------
def _settings(args):
    from lookplangraph.evaluation.settings import SettingsError, load_settings

    overrides = {
        "planner": args.planner, "lm": args.lm, "split": args.split, "dynamic": True if args.dynamic else None, "seed": args.seed,
        "env": args.env, "augmentation": args.augmentation, "vlm": args.vlm, "parser_lm": args.parser_lm,
        "max_actions": args.max_actions, "graph_style": args.graph_style,
        "priors": False if args.no_priors else None,
        "correction": "none" if args.no_correction else args.correction,
        "out": args.out, "cache": getattr(args, "cache", None),
        "tasks": getattr(args, "tasks", None) or ([args.task] if getattr(args, "task", None) else None),
        "limit": getattr(args, "limit", None), "concurrency": getattr(args, "concurrency", None),
        "selection": getattr(args, "selection", None), "vocabulary": args.vocabulary,
        "refuse_cycles": False if args.allow_cycles else None,
        "exclude_refused": False if args.no_exclude_refused else None,
        "exclude_inapplicable": False if args.no_exclude_inapplicable else None,
        "done_hint": True if args.done_hint else None,
    }
    try:
        return load_settings(args.config, overrides)
    except SettingsError as exc:
        raise InputError(str(exc)) from None


def _select_tasks(s, data_dir: str | None, task_file: str | None = None):
    """Tasks of the settings' split (built on demand when the split is missing)."""
    from grasif import dataset

    if task_file:
        try:
            return [load_task(task_file)]
        except TaskError as exc:
            raise InputError(str(exc)) from None
    if not s.split:
        raise InputError("give --split (virtualhome, behavior or office) or --task-file")
    root = Path(data_dir) if data_dir else dataset.default_data_dir()
    try:
        built = dataset.read_index(root)["splits"] if (root / "index.json").exists() else {}
        if s.split not in built:
            print(f"GraSIF split {s.split} is not built in {root}; building it now", file=sys.stderr)
            dataset.build(root, splits=[s.split], progress=lambda m: print(m, file=sys.stderr))
        tasks = dataset.load_split(root, s.split)
    except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
        raise InputError(str(exc).strip("'\"")) from None
    if s.selection:
        tasks = [t for t in tasks if s.selection in t.provenance.get("selections", [])]
        if not tasks:
            raise InputError(f"no task of split {s.split} is in selection {s.selection!r} (virtualhome has 'strict' and 'paper')")
    if s.tasks:
        by_id = {t.id: t for t in tasks}
        missing = [t for t in s.tasks if t not in by_id]
        if missing:
            raise InputError(f"no task {', '.join(missing)} in split {s.split}; see `lookplangraph grasif list --split {s.split}`")
        tasks = [by_id[t] for t in s.tasks]
    if s.limit:
        tasks = tasks[: s.limit]
    return tasks


def _lm_factory(s, out: Path, args=None):
    """One LM per call (per worker); with ``--endpoints`` (or ``lm_options.endpoints``) each is a
    client of one shared endpoint pool (:func:`lookplangraph.lm.pool.lm_factory`)."""
    from lookplangraph.lm import LMError
    from lookplangraph.lm.pool import lm_factory

    cache = None if not s.cache else (out / "lm_cache.jsonl" if s.cache is True else Path(s.cache))
    try:
        make = lm_factory(s.lm, s.lm_options, endpoints=getattr(args, "endpoints", None),
                          concurrency=getattr(args, "endpoint_concurrency", None),
                          rate=getattr(args, "endpoint_rate", None), cache=cache)
    except (ValueError, LMError) as exc:
        raise InputError(str(exc)) from None

    def factory():
        try:
            return make()
        except LMError as exc:
            raise InputError(str(exc)) from None

    return factory


def _augmentation_factory(s):
    """``None`` for ground-truth augmentation, else ``factory(planner_lm) -> GraphAugmentation``:
    the describer is ``s.vlm``; the parser ``s.parser_lm``, else the describer (vlm mode), else the
    planner's LM (parser mode)."""
    if s.augmentation == "ground_truth":
        return None
    from lookplangraph.lm import LMError, make_backend
    from vlm.gam import GraphAugmentation

    def factory(lm):
        try:
            describer = make_backend(s.vlm, **s.vlm_options) if s.vlm else None
            parser = make_backend(s.parser_lm) if s.parser_lm else (describer if describer is not None else lm)
            return GraphAugmentation(s.augmentation, describer=describer, parser=parser)
        except (LMError, ValueError) as exc:
            raise InputError(str(exc)) from None

    return factory


def _check_env(s, tasks) -> None:
    from lookplangraph.evaluation.runner import check_env

    try:
        check_env(s.env, tasks, s.augmentation)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def cmd_run(args) -> int:
    from lookplangraph.lm import LMError
    from lookplangraph.evaluation.runner import format_result, now_stamp, run_episode_to_dir
    from sim_adapters.virtualhome import VirtualHomeError

    s = _settings(args)
    task = _select_tasks(s, args.data_dir, args.task_file)[0]
    _check_env(s, [task])
    out = Path(s.out) if s.out else Path("runs") / f"{now_stamp()}_{task.split}_{task.id}"
    lm = _lm_factory(s, out)()
    make_augmentation = _augmentation_factory(s)
    augmentation = make_augmentation(lm) if make_augmentation else None
    print(f"Task {task.split}/{task.id}: {task.instruction}")
    loop = (f"graph {s.graph_style}; priors {'on' if s.priors else 'off'}; correction {s.correction}; "
            if s.planner == "lookplangraph" else "")  # the LookPlanGraph loop's own switches
    print(f"planner {s.planner}; LM {lm.name}; {loop}dynamic {'seed ' + str(s.seed) if s.dynamic else 'off'}; "
          f"environment {s.env}; augmentation {s.augmentation}")
    try:
        result = run_episode_to_dir(task, lm, s.planner_config(), out, dynamic_seed=s.seed if s.dynamic else None,
                                    echo=lambda text: print(text, flush=True), env=s.env, augmentation=augmentation,
                                    planner=s.planner)
    except (LMError, VirtualHomeError, ValueError) as exc:
        raise InputError(str(exc)) from None
    print(format_result(result))
    print(f"trace: {out / 'trace.jsonl'}; result: {out / 'result.json'}")
    return 0 if result.success else 1


def _progress_bar(desc: str = "episodes"):
    """``progress(done, total, row)`` for :func:`lookplangraph.evaluation.runner.evaluate` and the injection
    curve, drawn by tqdm on stderr (the last episode's verdict in the postfix)."""
    from tqdm import tqdm

    state: dict = {}

    def show(done: int, total: int, row) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = tqdm(total=total, initial=done, desc=desc, unit="ep", file=sys.stderr)
        bar.update(done - bar.n)
        if row is not None and "task_id" in row:
            bar.set_postfix_str(f"last: {row['task_id']} {'ok' if row.get('success') else 'fail'}", refresh=False)
        if done >= total:
            bar.close()

    return show


def cmd_eval(args) -> int:
    from lookplangraph.lm import LMError
    from lookplangraph.evaluation.runner import evaluate, now_stamp, summary_text
    from sim_adapters.virtualhome import VirtualHomeError

    s = _settings(args)
    tasks = _select_tasks(s, args.data_dir)
    _check_env(s, tasks)
    out = Path(s.out) if s.out else Path("runs") / f"eval_{now_stamp()}_{s.split}"
    try:
        evaluate(tasks, _lm_factory(s, out, args), s.planner_config(), out,
                 dynamic_seed=s.seed if s.dynamic else None, concurrency=s.concurrency,
                 progress=_progress_bar(), meta=s.as_dict() | ({"endpoints": args.endpoints} if args.endpoints else {}),
                 env=s.env,
                 augmentation_factory=_augmentation_factory(s), planner=s.planner)
    except (LMError, VirtualHomeError, ValueError) as exc:
        raise InputError(f"{exc} (finished episodes are kept in {out / 'results.jsonl'}; rerun to resume)") from None
    print(summary_text(json.loads((out / "summary.json").read_text())))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return 0


def cmd_report(args) -> int:
    """One table comparing the summaries of several evaluation directories (and one of the
    human-in-the-loop trials among them: trial directories, or directories holding them)."""
    from collections import Counter

    from lookplangraph.evaluation.runner import read_results, summary_text
    from lookplangraph.apps.trial import report_table, trial_dirs

    trials = trial_dirs(args.dirs)
    if trials:
        print(report_table(trials))
        args.dirs = [d for d in args.dirs if (Path(d) / "summary.json").exists() or not trial_dirs([d])]
        if not args.dirs:
            return 0
    rows = {}
    for d in args.dirs:
        path = Path(d) / "summary.json"
        if not path.exists():
            raise InputError(f"{d}: no summary.json (not an evaluation directory, or nothing finished yet)")
        summary = json.loads(path.read_text())
        for label, row in summary.items():
            if label == "all" or args.splits:
                rows[f"{Path(d).name}" + ("" if label == "all" else f" [{label}]")] = row
    print(summary_text(rows))
    for d in args.dirs:  # baselines: why plans failed, one count per failure kind
        results = read_results(Path(d) / "results.jsonl")
        kinds = Counter(r["failure"] for r in results if r.get("failure"))
        planners = sorted({r.get("planner", "lookplangraph") for r in results})
        if kinds:
            print(f"{Path(d).name} ({', '.join(planners)}): " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    return 0


def cmd_trial(args) -> int:
    """A human-in-the-loop trial (lookplangraph/apps/trial.py): the web console or the terminal."""
    from lookplangraph.lm import LMError
    from lookplangraph.planners.config import PlannerConfig
    from lookplangraph.evaluation.settings import DEFAULT_LM
    from lookplangraph.apps.trial import (Trial, TrialError, TrialSession, ask_checklist, backends_for, new_trial_dir,
                                     photo_file_check, task_from_graph)
    from sim_adapters.human import Desk, TerminalOperator, TrialPaused

    limit = int(args.max_upload_mb * 1_000_000)
    try:
        if args.resume:
            given = [f for f in ("task_file", "graph", "instruction", "lm", "vlm", "parser_lm", "max_actions", "correction")
                     if getattr(args, f)]
            if given:
                raise InputError(f"--resume continues a trial as it was set up (its trial.json); drop --{given[0].replace('_', '-')}")
            trial = Trial(args.resume)
        else:
            if args.task_file:
                try:
                    task = load_task(args.task_file)
                except TaskError as exc:
                    raise InputError(str(exc)) from None
            elif args.graph and args.instruction:
                goal = None
                if args.goal:
                    try:
                        goal = _read_goal(args.goal, load_graph(args.graph), False)
                    except (GraphError, ValueError) as exc:
                        raise InputError(f"{args.graph}: {exc}") from None
                task = task_from_graph(args.graph, args.instruction, goal)
            else:
                raise InputError("give --task-file T.json, or --graph G.json with --instruction TEXT, or --resume DIR")
            cfg = PlannerConfig(max_actions=args.max_actions or 30, correction=args.correction or "rules")
            trial = Trial.create(Path(args.out) if args.out else new_trial_dir(task), task, lm=args.lm or DEFAULT_LM,
                                 vlm=args.vlm, parser_lm=args.parser_lm, planner=cfg)
        lm, augmentation = backends_for(trial)
    except (TrialError, LMError) as exc:
        raise InputError(str(exc)) from None
    s = trial.settings
    print(f"Trial {trial.dir}: {trial.task.instruction}")
    print(f"LM {s['lm']}; photos {'described by ' + s['vlm'] if s.get('vlm') else 'kept, not read (no --vlm): type descriptions'}; "
          f"parser {s.get('parser_lm') or s.get('vlm') or s['lm']}; {len(trial.answers())} recorded answers to replay")
    if args.operator == "terminal":
        operator = TerminalOperator(needs_description=trial.augmentation_mode != "vlm", check_photo=photo_file_check(limit))
        session = TrialSession(trial, operator, lm=lm, augmentation=augmentation, max_photo_bytes=limit,
                               echo=lambda text: print(text, flush=True))
        try:
            session.run()
            if session.state == "checklist":
                session.finish(ask_checklist(session.checklist()))
        except (TrialPaused, KeyboardInterrupt):
            session.state = "stopped"
        if session.state == "error":
            raise InputError(f"{session.error} (nothing is lost: lookplangraph trial --resume {trial.dir})")
        if session.state == "stopped":
            print(f"\nStopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
            return 0
        result = trial.result()
        print(f"\n{'SUCCESS' if result['success'] else 'FAILURE'}: precision {result['precision']:.3f}, "
              f"{len(result['actions'])} actions, {len(result['executed'])} steps, {len(result['failed_steps'])} failed, "
              f"operator {result['operator_seconds'] / 60:.1f} min; result: {trial.path('result.json')}")
        return 0 if result["success"] else 1
    from lookplangraph.apps.console.app import serve

    desk = Desk()
    session = TrialSession(trial, desk, lm=lm, augmentation=augmentation, max_photo_bytes=limit)
    session.start()
    try:
        serve(session, desk, host=args.host, port=args.port, max_upload_bytes=limit)
    except KeyboardInterrupt:
        pass
    session.join(timeout=5)  # the planner's thread records that it stopped
    print(f"Console stopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
    return 0


def cmd_inject(args) -> int:
    from lookplangraph.evaluation.injection_curve import curve, curve_table, write_curve

    s = _settings(args)
    tasks = []
    for split in (args.splits or ["virtualhome", "behavior", "office"]):
        s.split = split
        tasks += _select_tasks(s, args.data_dir)
    rates = [float(r) for r in args.rates.split(",")]
    modes = ("none",) if args.no_correction else (args.correction,) if args.correction else None
    rows = curve(tasks, rates, seeds=args.seeds, progress=_progress_bar(), **({"modes": modes} if modes else {}))
    out = Path(s.out) if s.out else Path("runs") / "error_injection"
    write_curve(rows, out)
    print(curve_table(rows))
    print(f"written: {out / 'curve.csv'}, {out / 'curve.png'}")
    return 0


def cmd_gam_eval(args) -> int:
    """Table III: the graph augmentation scored against true subgraphs, on GraSIF (the parser
    stage on written descriptions) or on an image bank (``--bank``: its pictures and descriptions)."""
    from grasif import dataset
    from lookplangraph.lm import LMError, make_backend
    from vlm.evaluate import bank_cases, evaluate, sample_cases, table
    from vlm.gam import GraphAugmentation

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    if args.mode == "vlm" and not args.bank:
        raise InputError("--mode vlm needs pictures: give --bank DIR (GraSIF has graphs, not images)")
    if args.mode == "vlm" and not args.vlm:
        raise InputError("--mode vlm needs --vlm SPEC: the describer, a model that sees images "
                         "(e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1)")
    parser_spec = args.lm or ("llamacpp:qwen2.5-coder-1.5b" if args.mode == "parser" else None)
    if args.bank:
        from sim_adapters.omnigibson import BankError

        try:
            cases = bank_cases(args.bank, root)
        except (BankError, dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise InputError(str(exc).strip("'\"")) from None
        if args.mode == "parser":
            missing = [c.key for c in cases if not c.description]
            if missing:
                raise InputError(f"--mode parser reads the bank's descriptions, and {len(missing)} entries have none "
                                 f"(first: {missing[0]}); use --mode vlm --vlm SPEC")
        label = f"bank {args.bank}"
    else:
        try:
            cases = sample_cases(root, args.splits, args.n, args.seed)
        except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise InputError(str(exc).strip("'\"")) from None
        label = f"{', '.join(args.splits)}, seed {args.seed}"
    default_out = (f"gam_eval_bank_{Path(args.bank).resolve().name}_{args.mode}" if args.bank
                   else f"gam_eval_{args.mode}_n{args.n}_seed{args.seed}")
    out = Path(args.out) if args.out else Path("runs") / default_out
    meta = {"mode": args.mode, "lm": parser_spec if args.mode != "ground_truth" else None, "n": args.n, "seed": args.seed,
            "splits": args.splits}
    if args.bank:
        meta = {"mode": args.mode, "lm": meta["lm"], "bank": str(Path(args.bank).resolve())}
    if args.mode == "vlm":
        meta["vlm"] = args.vlm

    def backend(spec: str, cache_name: str):
        try:
            lm = make_backend(spec)
        except LMError as exc:
            raise InputError(str(exc)) from None
        if args.cache:
            from lookplangraph.lm.cache import CachedBackend

            path = out / cache_name if args.cache is True else Path(args.cache)
            if cache_name != "lm_cache.jsonl" and args.cache is not True:
                path = path.with_name(f"{path.stem}_{Path(cache_name).stem}{path.suffix}")
            lm = CachedBackend(lm, path)
        return lm

    if args.mode == "ground_truth":
        gam = GraphAugmentation("ground_truth")
    else:
        describer = backend(args.vlm, "vlm_cache.jsonl") if args.mode == "vlm" else None
        parser = backend(parser_spec, "lm_cache.jsonl") if parser_spec else describer
        gam = GraphAugmentation(args.mode, describer=describer, parser=parser)
    using = {"parser": f" with {parser_spec}", "vlm": f" with {args.vlm} (parser {parser_spec or args.vlm})"}
    print(f"GAM {args.mode}{using.get(args.mode, '')}: {len(cases)} observations ({label})")
    try:
        summary = evaluate(cases, gam, out, progress=_progress_bar(), meta=meta)
    except LMError as exc:
        raise InputError(f"{exc} (finished observations are kept in {out / 'results.jsonl'}; rerun to resume)") from None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print(table(summary))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lookplangraph", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate a plan against a goal by graph simulation")
    p.add_argument("--initial", help="initial scene graph (paper JSON format)")
    p.add_argument("--goal", help="goal scene graph, or a goal specification JSON")
    p.add_argument("--plan", help="JSON list of actions (strings like 'pick_up(apple-1)' or objects)")
    p.add_argument("--task", help="a GraSIF task file (initial graph, goal; its ground-truth plan unless --plan)")
    p.add_argument("--no-correction", action="store_true", help="report infeasible actions instead of correcting them")
    p.add_argument("--by-class", action="store_true", help="check moved objects by class and count, not by id")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("show", help="print a scene graph as a tree")
    p.add_argument("graph", help="scene graph file (paper JSON format)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("grasif", help="build, list and describe the GraSIF benchmark")
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    gsub = p.add_subparsers(dest="grasif_command", required=True)
    b = gsub.add_parser("build", parents=[data_dir], help="build task files from the source packages (atomic, deterministic)")
    b.add_argument("--out", help="output directory (default: the data directory)")
    b.add_argument("--split", action="append", choices=SPLITS, help="build only these splits (repeatable)")
    lst = gsub.add_parser("list", parents=[data_dir], help="task ids, one per line")
    lst.add_argument("--split", choices=SPLITS)
    lst.add_argument("--selection", help="only tasks of this selection (virtualhome: strict = appendix H1 as written, paper = 308 tasks)")
    gsub.add_parser("stats", parents=[data_dir], help="Table I of the paper for the build")
    p.set_defaults(func=cmd_grasif)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="TOML settings file (configs/*.toml); flags override it")
    common.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    common.add_argument("--planner", help="lookplangraph (default), a baseline of the paper (llm-as-p, llm+p, sayplan, "
                                          "sayplan-lite, react) or sg-rwr; see lookplangraph.planners")
    common.add_argument("--lm", help="LM backend: llamacpp:qwen2.5-coder-1.5b (default), llamacpp:PATH.gguf, openai:MODEL[@BASE_URL]")
    common.add_argument("--split", choices=SPLITS)
    common.add_argument("--dynamic", action="store_true", help="move task-relevant objects before the episode (seeded)")
    common.add_argument("--seed", type=int, help="dynamic-mode seed (default 0)")
    common.add_argument("--env", help="environment: graph (default; the SGS on the true graph), virtualhome "
                                      "(VirtualHome's evolving graph; virtualhome split only), virtualhome-unity[@URL] "
                                      "(a running VirtualHome Unity simulator, default http://127.0.0.1:8080), "
                                      "omnigibson-bank@DIR (the SGS with images captured in OmniGibson; behavior split)")
    common.add_argument("--augmentation", choices=["ground_truth", "parser", "vlm"],
                        help="what discover_objects adds to memory: ground_truth (default; the true objects), parser "
                             "(the environment's text description, parsed by an LM), vlm (the image, described by --vlm, then parsed)")
    common.add_argument("--vlm", help="describer backend for --augmentation vlm, a model that sees images "
                                      "(openai:MODEL@BASE_URL, openai:gpt-4o, llamacpp:PATH.gguf with mmproj in vlm_options)")
    common.add_argument("--parser-lm", help="parser backend (default: --vlm in vlm mode, --lm in parser mode)")
    common.add_argument("--max-actions", type=int, help="action limit (default 30)")
    common.add_argument("--graph-style", choices=["text", "json", "full"], help="memory-graph serialization (ablations)")
    common.add_argument("--no-priors", action="store_true", help="ablation: the memory graph starts without objects")
    common.add_argument("--correction", choices=["rules", "feedback", "none"],
                        help="rules (default): feedback and rule-based correction; feedback: feedback only; "
                             "none: the paper's No-Correction ablation (execution errors go to the environment and fail the plan)")
    common.add_argument("--no-correction", action="store_true", help="same as --correction none")
    common.add_argument("--vocabulary", choices=["flat", "typed"], help="constrained decoding: all visible names (flat, default) or names per function (typed)")
    common.add_argument("--allow-cycles", action="store_true", help="accept actions that bring the memory back to an earlier state")
    common.add_argument("--no-exclude-refused", action="store_true",
                        help="let the decode repeat an action already refused in the same memory state")
    common.add_argument("--no-exclude-inapplicable", action="store_true",
                        help="let the decode propose actions that are never accepted in the current state (go_to the current room ...)")
    common.add_argument("--done-hint", action="store_true",
                        help="feedback on an action already in effect suggests done() (measured worse with the 1.5B model)")
    common.add_argument("--out", help="output directory (default under runs/)")

    p = sub.add_parser("run", parents=[common], help="run one episode and print its trace")
    p.add_argument("--task", help="task id in the split")
    p.add_argument("--task-file", help="a task JSON file instead of --split/--task")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("eval", parents=[common], help="evaluate on many tasks (resumable)")
    p.add_argument("--tasks", nargs="+", help="task ids (default: all of the split)")
    p.add_argument("--limit", type=int, help="only the first N tasks")
    p.add_argument("--selection", help="only tasks of this selection (virtualhome: strict or paper)")
    p.add_argument("--concurrency", type=int, help="episodes in parallel (default 1)")
    p.add_argument("--endpoints", metavar="URL,URL", help="with --lm openai:MODEL: servers of that model used round-robin "
                                                         "by the workers (a failed one is taken out, its episodes rerun elsewhere)")
    p.add_argument("--endpoint-concurrency", type=int, metavar="N", help="with --endpoints: requests in flight per endpoint")
    p.add_argument("--endpoint-rate", type=float, metavar="R", help="with --endpoints: request starts per second per endpoint")
    p.add_argument("--cache", nargs="?", const=True, default=None, metavar="FILE",
                   help="record LM replies in OUT/lm_cache.jsonl (or FILE, e.g. another run's cache) and replay identical calls")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="compare the summaries of evaluation directories in one table (and trials)")
    p.add_argument("dirs", nargs="+", help="evaluation output directories (with summary.json), trial directories "
                                           "or directories of trials")
    p.add_argument("--splits", action="store_true", help="also show the per-split rows")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("trial", help="a human-in-the-loop trial: a person performs each step (web console or terminal)")
    p.add_argument("--task-file", help="a task file (instruction, graph, goal)")
    p.add_argument("--graph", help="your own building: a scene graph in the paper's JSON format (with --instruction)")
    p.add_argument("--instruction", help="what to do in --graph")
    p.add_argument("--goal", help="with --graph: a goal graph or goal specification for the checklist "
                                  "(default: the checklist asks about the instruction itself)")
    p.add_argument("--resume", metavar="DIR", help="continue the trial in DIR (replays what is recorded, then goes on)")
    p.add_argument("--operator", choices=["web", "terminal"], default="web",
                   help="web (default): a console page, also on a phone; terminal: the same questions in this terminal")
    p.add_argument("--lm", help="the planner's LM (default llamacpp:qwen2.5-coder-1.5b)")
    p.add_argument("--vlm", metavar="SPEC", help="the describer of photos, a model that sees images, e.g. "
                                                 "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 "
                                                 "(without it the operator types descriptions)")
    p.add_argument("--parser-lm", metavar="SPEC", help="the parser of descriptions (default: --vlm, else --lm)")
    p.add_argument("--max-actions", type=int, help="action limit (default 30)")
    p.add_argument("--correction", choices=["rules", "feedback", "none"], help="correction mode (default rules)")
    p.add_argument("--out", help="trial directory (default runs/trial_<time>_<task>)")
    p.add_argument("--host", default="127.0.0.1", help="console address (default 127.0.0.1, this machine only); "
                                                       "0.0.0.0 opens it to the network with a one-time token")
    p.add_argument("--port", type=int, default=8765, help="console port (default 8765)")
    p.add_argument("--max-upload-mb", type=float, default=15.0, help="largest photo accepted, in MB (default 15)")
    p.set_defaults(func=cmd_trial)

    p = sub.add_parser("inject", parents=[common], help="error-injection curve: SR against injected error rate in each correction mode (or the one of --correction)")
    p.add_argument("--rates", default="0,0.1,0.2,0.3,0.5,0.7,1.0", help="comma-separated error rates")
    p.add_argument("--seeds", type=int, default=3, help="seeds per rate")
    p.add_argument("--splits", nargs="+", choices=SPLITS, help="splits (default: all three)")
    p.set_defaults(func=cmd_inject)

    p = sub.add_parser("gam-eval", help="graph augmentation (Table III): parser stage on GraSIF's written descriptions, "
                                        "or an image bank's pictures (--bank)")
    p.add_argument("--mode", choices=["parser", "ground_truth", "vlm"], default="parser",
                   help="parser (default; text to graph), vlm (picture to text to graph; needs --bank and --vlm) "
                        "or ground_truth (checks the pipeline: every score 1)")
    p.add_argument("--lm", help="the parser's LM backend (as for run/eval; default llamacpp:qwen2.5-coder-1.5b, "
                                "in mode vlm the --vlm model)")
    p.add_argument("--vlm", metavar="SPEC", help="the describer's backend, a model that sees images (mode vlm), "
                                                 "e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1")
    p.add_argument("--bank", metavar="DIR", help="evaluate the observations of this OmniGibson image bank "
                                                 "(sim_adapters/omnigibson.py) instead of sampled GraSIF ones")
    p.add_argument("--n", type=int, default=200, help="observations, split evenly between the splits (default 200)")
    p.add_argument("--seed", type=int, default=0, help="sampling and description seed (default 0)")
    p.add_argument("--splits", nargs="+", choices=["virtualhome", "behavior"], default=["virtualhome", "behavior"])
    p.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    p.add_argument("--out", help="output directory (default runs/gam_eval_MODE_nN_seedS, with --bank "
                                 "runs/gam_eval_bank_NAME_MODE); rerun to resume")
    p.add_argument("--cache", nargs="?", const=True, default=None, metavar="FILE",
                   help="record LM replies in OUT/lm_cache.jsonl (or FILE; the describer's in OUT/vlm_cache.jsonl "
                        "or FILE_vlm_cache) and replay identical calls")
    p.set_defaults(func=cmd_gam_eval)

    from lookplangraph.evaluation.reproduce.command import add_parser as add_reproduce

    add_reproduce(sub)
    from lookplangraph.apps.viewer import add_parser as add_view

    add_view(sub)
    from lookplangraph.sandbox import cli as sandbox_cli

    sandbox_cli.add_parser(sub)
    from lookplangraph.cypher import commands as cypher_commands

    cypher_commands.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ActionSyntaxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
