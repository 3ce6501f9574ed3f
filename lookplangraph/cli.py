"""The ``lookplangraph`` command: one sub-command per job (``lookplangraph --help`` lists them;
each has ``--help`` with a description and examples), and the conventions every command follows,
here in one place (README, *Command line*; checked by ``tests/test_cli_conventions.py``):

* one vocabulary: ``--split S`` a GraSIF split (``--split S [S ...]`` where a command takes
  several), ``--task ID`` a task id of the split (``--task ID [ID ...]`` for ``eval``),
  ``--task-file FILE`` a task JSON file, ``--seed N`` the seed of random sampling (which tasks,
  items or observations), ``--dynamic-seed N`` the seed of dynamic mode, ``--correction
  rules|feedback|none``, ``--lm``/``--vlm``/``--parser-lm SPEC`` the planner's (or a command's
  one), the describer's and the parser's backends, ``--data-dir DIR`` the GraSIF build,
  ``--out`` where results go;
* yes/no flags are ``--NAME/--no-NAME`` (:class:`argparse.BooleanOptionalAction`), their
  default in the help; renamed flags keep their old spelling for one release as hidden aliases
  that print a one-line deprecation note (:class:`DeprecatedAlias`);
* a command is offered only the flags its handler reads; flags are not abbreviated;
* the exit codes of :data:`EXIT_CODES`, the same for every command::

    0    success
    1    the task failed: a plan fails validation (validate), an episode or trial did not succeed
         (run, trial), a question got no answer (ask), only weak isolation (sandbox)
    2    bad usage or input: argparse errors, unreadable or invalid files, unknown task ids
    3    unavailable: an LM that cannot be used (LMError, LMUnavailable), a VirtualHome or Unity
         simulator, Neo4j or LadybugDB not reachable, a missing optional package
    130  interrupted (Ctrl-C): one line on stderr, no traceback; finished work is kept
    141  stdout closed early (``lookplangraph grasif list | head -1``): output stops quietly

The commands that other modules define (``reproduce``, ``view``, ``sandbox``, ``ask``,
``cypher-eval``, ``cypher-build``) use only the standard library's argparse (the layers below
import nothing from here) and return these codes as numbers; :func:`build_parser` brings their
parsers under the same help format and adds their deprecated aliases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Callable, Iterable

from grasif.goals import GoalSpec, goal_from_graphs
from grasif.task import TaskError, load_task
from grasif.validate import ValidationReport, validate_plan
from sgs.actions import ActionSyntaxError
from sgs.graph import GraphError
from sgs.io import graph_from_dict, load_graph
from sgs.render import render_tree

from lookplangraph.planners.config import CORRECTION_MODES


# -- conventions of every command ----------------------------------------------------------------
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: ``(code, meaning)``: the one table of exit codes (module doc)
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success"),
    (EXIT_FAILED, "the task failed: a plan fails validation (validate), an episode or trial did not succeed "
                  "(run, trial), a question got no answer (ask), only weak isolation (sandbox)"),
    (EXIT_USAGE, "bad usage or input: unknown flags, unreadable or invalid files, unknown task ids"),
    (EXIT_UNAVAILABLE, "unavailable: an LM that cannot be used, a VirtualHome/Unity simulator or Neo4j not "
                       "reachable, a missing optional package"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); finished work is kept, rerunning resumes where the command says so"),
    (EXIT_BROKEN_PIPE, "stdout closed early (e.g. `| head`); output stops quietly"),
)

PROG = "lookplangraph"
#: ``--lm expert``: the privileged expert (:mod:`lookplangraph.evaluation.expert`), a harness tool
EXPERT_SPEC = "expert"
WIDTH = 92


class UsageError(Exception):
    """Bad command-line input: ``error: MESSAGE`` on stderr, exit code 2."""


class Unavailable(Exception):
    """Something the command needs cannot be reached or used (an LM, a simulator, a database, an
    optional package): ``error: MESSAGE`` on stderr, exit code 3."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C with a message (what is kept, how to go on): printed as one line, exit code 130
    (any ``KeyboardInterrupt(message)`` is; this one says so where it is raised)."""


def exit_codes_text(indent: str = "  ") -> str:
    """The exit-code table as help text."""
    lines = ["exit codes:"]
    for code, meaning in EXIT_CODES:
        wrapped = textwrap.wrap(meaning, WIDTH - len(indent) - 6)
        lines.append(f"{indent}{code:<4}  {wrapped[0]}")
        lines += [f"{indent}{'':<4}  {more}" for more in wrapped[1:]]
    return "\n".join(lines)


def version() -> str:
    """The installed package's version (importlib.metadata)."""
    from importlib.metadata import PackageNotFoundError, version as _version

    try:
        return _version("lookplangraph")
    except PackageNotFoundError:  # pragma: no cover - a checkout that is not installed
        return "unknown (not installed)"


# -- flags -------------------------------------------------------------------------------------
class YesNo(argparse.BooleanOptionalAction):
    """``--NAME/--no-NAME`` (:class:`argparse.BooleanOptionalAction`), its default in the help
    (``default_text`` where the default is None: decided later, e.g. by a config file)."""

    def __init__(self, option_strings, dest, default=None, help=None, default_text=None, **kwargs):
        super().__init__(option_strings, dest, default=default, help=None, **kwargs)
        shown = default_text if default_text is not None else ("on" if default else "off")
        self.help = f"{help} (default: {shown})" if help else f"default: {shown}"


class DeprecatedAlias(argparse.Action):
    """A hidden old spelling of a renamed flag, kept for one release: it prints one line to stderr
    (``lookplangraph: --OLD is deprecated; use NEW``) and then does what ``NEW`` does: stores its
    value (or ``const`` when it takes none) in ``dest``, or extends the list there
    (``extend=True``). Documented in README's *Command line* section."""

    def __init__(self, option_strings, dest, *, use: str, nargs=None, const=None, extend: bool = False,
                 default=argparse.SUPPRESS, type=None, choices=None, metavar=None, help=argparse.SUPPRESS,
                 required=False):
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, type=type,
                         choices=choices, metavar=metavar, help=help, required=required)
        self.use, self.extend = use, extend

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{PROG}: {option_string} is deprecated and goes in the next release; use {self.use}", file=sys.stderr)
        if self.nargs == 0:
            values = self.const
        if self.extend:
            values = list(getattr(namespace, self.dest, None) or []) + list(values)
        setattr(namespace, self.dest, values)


def deprecated(parser, old: str, dest: str, use: str, **kwargs) -> argparse.Action:
    """Add the hidden alias ``old`` of the flag whose value is ``dest`` (see :class:`DeprecatedAlias`)."""
    return parser.add_argument(old, dest=dest, action=DeprecatedAlias, use=use, **kwargs)


def required(parser: argparse.ArgumentParser, dest: str, flag: str, func: Callable) -> Callable:
    """``func``, refusing to run (argparse's message, exit code 2) when neither ``flag`` nor its
    deprecated alias gave ``dest`` a value: argparse's ``required=True`` knows nothing of aliases."""
    import functools

    @functools.wraps(func)
    def run(args) -> int:
        if getattr(args, dest, None) is None:
            parser.print_usage(sys.stderr)
            print(f"{parser.prog}: error: the following arguments are required: {flag}", file=sys.stderr)
            return EXIT_USAGE
        return func(args)

    return run


# -- commands and their help -------------------------------------------------------------------
class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's help, except for descriptions and epilogs: a paragraph (blank-line separated) is
    filled to the width unless it is a block (its first line ends with ``:``, or a line is
    indented), which is kept as written: ``examples:`` and the exit codes."""

    def _fill_text(self, text, width, indent):
        out = []
        for para in textwrap.dedent(text).strip("\n").split("\n\n"):
            lines = para.splitlines()
            if lines and (lines[0].rstrip().endswith(":") or any(line[:1].isspace() for line in lines)):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(para.split()), width, initial_indent=indent,
                                         subsequent_indent=indent))
        return "\n\n".join(out)


def examples_text(examples: Iterable[str]) -> str:
    """An epilog: ``examples:`` and one command per line."""
    return "examples:\n" + "\n".join(f"  {e}" for e in examples)


def add_command(sub, name: str, *, help: str, description: str, examples: Iterable[str],
                epilog_extra: str = "", **kwargs) -> argparse.ArgumentParser:
    """A sub-command with a one-line ``help`` (the parent's list), a ``description`` and an epilog
    of ``examples`` (each ``lookplangraph ...``); abbreviated flags are not accepted."""
    epilog = examples_text(examples) + (f"\n\n{epilog_extra}" if epilog_extra else "")
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=HelpFormatter,
                          allow_abbrev=False, **kwargs)


def conform(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Bring a parser and its sub-commands, wherever they were defined, under the conventions'
    form: :class:`HelpFormatter`, no abbreviated flags, a yes/no flag's default said once (the
    help text says it; Python 3.10's argparse would append it again)."""
    parser.formatter_class = HelpFormatter
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse.BooleanOptionalAction) and action.help:
            action.help = action.help.replace(" (default: %(default)s)", "")
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                conform(sub)
    return parser


# -- running a command -------------------------------------------------------------------------
def _quiet_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so that the interpreter's last flush is silent
    (https://docs.python.org/3/library/signal.html#note-on-sigpipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _close_progress_bars() -> None:
    """End any tqdm bar on stderr with its line, so that a message printed next starts a line."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is None:
        return
    for bar in list(getattr(tqdm.tqdm, "_instances", ()) or ()):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar that cannot be closed is left as it is
            pass


def error_code(exc: BaseException) -> int | None:
    """The exit code of an error that the commands report without a traceback (None for others):
    :class:`UsageError` 2; :class:`Unavailable`, :class:`lookplangraph.lm.LMError` and a store
    or simulator that cannot be reached 3."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    lm = sys.modules.get("lookplangraph.lm.base")
    if lm is not None and isinstance(exc, lm.LMError):
        return EXIT_UNAVAILABLE
    return None


def run_main(parser: argparse.ArgumentParser | Callable[[], argparse.ArgumentParser], argv: list[str] | None,
             dispatch: Callable[[argparse.Namespace], int] | None = None) -> int:
    """Parse ``argv`` and run the command (``args.func(args)``, or ``dispatch(args)``), returning
    its exit code: argparse's own (2 on bad usage, 0 after ``--help``), the handler's, 2 or 3 for
    the errors of :func:`error_code` (one ``error:`` line on stderr), 130 after Ctrl-C (one line
    on stderr), 141 when stdout was closed early (nothing more is printed). ``parser`` may be a
    function that builds it (then Ctrl-C while it imports is handled too)."""
    try:
        if not isinstance(parser, argparse.ArgumentParser):
            parser = parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (EXIT_OK if exc.code is None else EXIT_USAGE)
        try:
            code = dispatch(args) if dispatch is not None else args.func(args)
        except Exception as exc:  # noqa: BLE001 - only the known kinds are reported; the rest re-raised
            code = error_code(exc)
            if code is None:
                raise
            _close_progress_bars()
            print(f"error: {exc}", file=sys.stderr)
            return code
        sys.stdout.flush()  # a closed pipe shows here rather than at the interpreter's exit
        return EXIT_OK if code is None else code
    except KeyboardInterrupt as exc:
        _close_progress_bars()
        message = str(exc) or "interrupted"  # KeyboardInterrupt("...") says what is kept
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


SPLITS = ["virtualhome", "behavior", "office"]
DATA_DIR_HELP = "GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)"


def _read_json(path: str):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None


def _read_goal(path: str, initial, by_class: bool) -> GoalSpec:
    """A goal file is either a goal graph (paper format) or a goal specification (grasif.goals)."""
    data = _read_json(path)
    if isinstance(data, dict) and any(k in data for k in ("node_goals", "count_goals", "formula")):
        try:
            spec = GoalSpec.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"{path}: {exc}") from None
    else:
        try:
            spec = goal_from_graphs(initial, graph_from_dict(data), by_class=by_class)
        except (GraphError, ValueError) as exc:
            raise UsageError(f"{path}: {exc}") from None
    problems = spec.check_names(initial)
    if problems:
        raise UsageError(f"{path}: " + "; ".join(problems))
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
    if args.task_file:
        try:
            task = load_task(args.task_file)
        except TaskError as exc:
            raise UsageError(str(exc)) from None
        initial, goal, plan = task.graph, task.goal, task.ground_truth_plan
        if args.initial or args.goal:
            raise UsageError("give either --task-file or --initial/--goal")
    else:
        if not (args.initial and args.goal and args.plan):
            raise UsageError("validate needs --initial, --goal and --plan (or --task-file)")
        try:
            initial = load_graph(args.initial)
        except (GraphError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        except FileNotFoundError:
            raise UsageError(f"{args.initial}: no such file") from None
        goal = _read_goal(args.goal, initial, args.by_class)
        plan = None
    if args.plan:
        plan = _read_json(args.plan)
        if isinstance(plan, dict) and "plan" in plan:
            plan = plan["plan"]
        if not isinstance(plan, list):
            raise UsageError(f"{args.plan}: a plan is a JSON list of actions")
    try:
        report = validate_plan(initial, plan, goal, correct=args.correction != "none")
    except ActionSyntaxError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.summary(), indent=1))
    else:
        _print_report(report, sys.stdout)
    return EXIT_OK if report.success else EXIT_FAILED


def cmd_show(args) -> int:
    try:
        graph = load_graph(args.graph)
    except (GraphError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except FileNotFoundError:
        raise UsageError(f"{args.graph}: no such file") from None
    print(render_tree(graph))
    return EXIT_OK


def _source_error(exc: Exception) -> Exception:
    """A GraSIF build's error as the command's: a source package that is not installed (or cannot
    be imported) is unavailable (3), anything else bad input (2)."""
    from grasif.dataset import SourceError

    text = str(exc).strip("'\"")
    if isinstance(exc, SourceError) and ("not installed" in text or "cannot be imported" in text):
        return Unavailable(text)
    return UsageError(text)


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
        raise _source_error(exc) from None
    return EXIT_OK


# -- episodes and evaluation -------------------------------------------------------------------
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
        choices = f.metadata.get("choices")
        kind = {"choices": list(choices), "metavar": "|".join(choices)} if choices else \
            {"type": type(f.default) if f.default is not None else int, "metavar": "N"}
        group.add_argument(flag, dest=f.name, help=f"{f.metadata['help']} (default: {shown}, or the config's)", **kind)


def _planner_overrides(args) -> dict:
    """The planner keys given as flags (None: not given)."""
    return {f.name: getattr(args, f.name, None) for f in _planner_fields()}


#: what :func:`_planner_overrides` reads of the namespace (the flags :func:`_planner_flags` makes)
_planner_overrides.reads_args = tuple(f.name for f in _planner_fields())


def _settings(args):
    """Run settings from ``--config`` and the flags of ``run``/``eval`` (None: not given)."""
    from lookplangraph.evaluation.settings import SettingsError, load_settings

    task = getattr(args, "task", None)
    overrides = {
        "planner": args.planner, "lm": args.lm, "split": args.split, "dynamic": args.dynamic, "seed": args.dynamic_seed,
        "env": args.env, "augmentation": args.augmentation, "vlm": args.vlm, "parser_lm": args.parser_lm,
        "out": args.out, "cache": getattr(args, "cache", None),
        "tasks": [task] if isinstance(task, str) else (task or None),
        "limit": getattr(args, "limit", None), "concurrency": getattr(args, "concurrency", None),
        "processes": getattr(args, "processes", None), "failures": getattr(args, "failures", None),
        "failure_seed": getattr(args, "failure_seed", None),
        "selection": getattr(args, "selection", None), **_planner_overrides(args),
    }
    try:
        s = load_settings(args.config, overrides)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    _check_specs(s)
    return s


def _check_specs(s) -> None:
    """A backend spec that cannot be read is bad input (2), before any LM is made (an LM that then
    cannot be used is 3)."""
    _check_spec_flags(s.lm, s.vlm, s.parser_lm)


def _check_spec_flags(lm: str | None, vlm: str | None, parser_lm: str | None) -> None:
    """:func:`_check_specs` of the three backend flags' values (None: not given)."""
    from lookplangraph.lm import LMError, parse_spec

    for flag, spec in (("--lm", lm), ("--vlm", vlm), ("--parser-lm", parser_lm)):
        if spec and not (flag == "--lm" and spec == EXPERT_SPEC):
            try:
                parse_spec(spec)
            except LMError as exc:
                raise UsageError(f"{flag}: {exc}") from None


def _select_tasks(s, data_dir: str | None, task_file: str | None = None):
    """Tasks of the settings' split (built on demand when the split is missing)."""
    from grasif import dataset

    if task_file:
        try:
            return [load_task(task_file)]
        except TaskError as exc:
            raise UsageError(str(exc)) from None
    if not s.split:
        raise UsageError("give --split (virtualhome, behavior or office) or --task-file")
    root = Path(data_dir) if data_dir else dataset.default_data_dir()
    try:
        built = dataset.read_index(root)["splits"] if (root / "index.json").exists() else {}
        if s.split not in built:
            print(f"GraSIF split {s.split} is not built in {root}; building it now", file=sys.stderr)
            dataset.build(root, splits=[s.split], progress=lambda m: print(m, file=sys.stderr))
        tasks = dataset.load_split(root, s.split)
    except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
        raise _source_error(exc) from None
    if s.selection:
        tasks = [t for t in tasks if s.selection in t.provenance.get("selections", [])]
        if not tasks:
            raise UsageError(f"no task of split {s.split} is in selection {s.selection!r} (virtualhome has 'strict' and 'paper')")
    if s.tasks:
        by_id = {t.id: t for t in tasks}
        missing = [t for t in s.tasks if t not in by_id]
        if missing:
            raise UsageError(f"no task {', '.join(missing)} in split {s.split}; see `lookplangraph grasif list --split {s.split}`")
        tasks = [by_id[t] for t in s.tasks]
    if s.limit:
        tasks = tasks[: s.limit]
    return tasks


def _lm_factory(s, out: Path, args=None):
    """One LM per call (per worker); with ``--endpoints`` (or ``lm_options.endpoints``) each is a
    client of one shared endpoint pool (:func:`lookplangraph.lm.pool.lm_factory`). Picklable, for
    worker processes. A bad endpoint list is bad input (2); an LM that cannot be made raises
    :class:`~lookplangraph.lm.LMError` when it is made (unavailable, 3)."""
    from lookplangraph.lm import LMError
    from lookplangraph.lm.pool import lm_factory

    if s.lm == EXPERT_SPEC:  # the privileged harness tool, never a default (evaluation.expert)
        from lookplangraph.evaluation.expert import Expert

        if s.cache or getattr(args, "endpoints", None):
            raise UsageError("--lm expert answers from the episode itself: it takes no --cache and no --endpoints")
        return Expert
    cache = None if not s.cache else (out / "lm_cache.jsonl" if s.cache is True else Path(s.cache))
    try:
        return lm_factory(s.lm, s.lm_options, endpoints=getattr(args, "endpoints", None),
                          concurrency=getattr(args, "endpoint_concurrency", None),
                          rate=getattr(args, "endpoint_rate", None), cache=cache)
    except (ValueError, LMError) as exc:
        raise UsageError(str(exc)) from None


def _made(factory, *args):
    """``factory(*args)`` for a single episode: an LM (or augmentation) that cannot be made is
    unavailable (3), a mode without its backend is bad input (2)."""
    from lookplangraph.lm import LMError

    try:
        return factory(*args)
    except LMError as exc:
        raise Unavailable(str(exc)) from None
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
    task = _select_tasks(s, args.data_dir, args.task_file)[0]
    _check_env(s, [task])
    out = Path(s.out) if s.out else Path("runs") / f"{now_stamp()}_{task.split}_{task.id}"
    lm = _made(_lm_factory(s, out))
    make_augmentation = s.augmentation_factory()
    augmentation = _made(make_augmentation, lm) if make_augmentation else None
    print(f"Task {task.split}/{task.id}: {task.instruction}")
    c = s.config
    loop = (f"graph {c.graph_style}; priors {'on' if c.priors else 'off'}; correction {c.correction}; "
            if s.planner == "lookplangraph" else "")  # the LookPlanGraph loop's own switches
    print(f"planner {s.planner}; LM {lm.name}; {loop}dynamic {'seed ' + str(s.seed) if s.dynamic else 'off'}; "
          f"environment {s.env}; augmentation {s.augmentation}")
    try:
        result = run_episode_to_dir(task, lm, s.planner_config(), out, dynamic_seed=s.seed if s.dynamic else None,
                                    failures=s.failures, failure_seed=s.failure_seed,
                                    echo=lambda text: print(text, flush=True), env=s.env, augmentation=augmentation,
                                    planner=s.planner)
    except _unavailable_kinds() as exc:
        raise Unavailable(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(format_result(result))
    print(f"trace: {out / 'trace.jsonl'}; result: {out / 'result.json'}")
    return EXIT_OK if result.success else EXIT_FAILED


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
    from lookplangraph.evaluation.runner import evaluate, now_stamp, summary_text

    s = _settings(args)
    tasks = _select_tasks(s, args.data_dir)
    _check_env(s, tasks)
    out = Path(s.out) if s.out else Path("runs") / f"eval_{now_stamp()}_{s.split}"
    kept = f"finished episodes are kept in {out / 'results.jsonl'}; rerun the same command to resume"
    try:
        evaluate(tasks, _lm_factory(s, out, args), s.planner_config(), out,
                 dynamic_seed=s.seed if s.dynamic else None, concurrency=s.concurrency, processes=s.processes,
                 failures=s.failures, failure_seed=s.failure_seed, progress=_progress_bar(),
                 meta=s.as_dict() | ({"endpoints": args.endpoints} if args.endpoints else {}),
                 env=s.env, augmentation_factory=s.augmentation_factory(), planner=s.planner)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {kept}") from None
    except (Unavailable, UsageError):
        raise
    except _unavailable_kinds() as exc:
        raise Unavailable(f"{exc} ({kept})") from None
    except ValueError as exc:
        raise UsageError(f"{exc} ({kept})") from None
    print(summary_text(json.loads((out / "summary.json").read_text())))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return EXIT_OK


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
    for d in args.dirs:  # baselines: why plans failed, one count per failure kind
        results = read_results(Path(d) / "results.jsonl")
        kinds = Counter(r["failure"] for r in results if r.get("failure"))
        planners = sorted({r.get("planner", "lookplangraph") for r in results})
        if kinds:
            print(f"{Path(d).name} ({', '.join(planners)}): " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
    return EXIT_OK


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
                raise UsageError(f"--resume continues a trial as it was set up (its trial.json); drop --{given[0].replace('_', '-')}")
            trial = Trial(args.resume)
        else:
            if args.task_file:
                try:
                    task = load_task(args.task_file)
                except TaskError as exc:
                    raise UsageError(str(exc)) from None
            elif args.graph and args.instruction:
                goal = None
                if args.goal:
                    try:
                        goal = _read_goal(args.goal, load_graph(args.graph), False)
                    except (GraphError, ValueError) as exc:
                        raise UsageError(f"{args.graph}: {exc}") from None
                task = task_from_graph(args.graph, args.instruction, goal)
            else:
                raise UsageError("give --task-file T.json, or --graph G.json with --instruction TEXT, or --resume DIR")
            _check_spec_flags(args.lm, args.vlm, args.parser_lm)
            given = {"max_actions": args.max_actions, "correction": args.correction}
            cfg = PlannerConfig.from_dict({k: v for k, v in given.items() if v is not None})
            trial = Trial.create(Path(args.out) if args.out else new_trial_dir(task), task, lm=args.lm or DEFAULT_LM,
                                 vlm=args.vlm, parser_lm=args.parser_lm, planner=cfg)
        lm, augmentation = backends_for(trial)
    except TrialError as exc:
        raise UsageError(str(exc)) from None
    except LMError as exc:
        raise Unavailable(str(exc)) from None
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
        except TrialPaused:
            session.state = "stopped"
        except KeyboardInterrupt:
            session.state = "stopped"
            raise Interrupted(f"stopped; everything so far is in {trial.dir}; continue with: "
                              f"lookplangraph trial --resume {trial.dir}") from None
        if session.state == "error":
            raise UsageError(f"{session.error} (nothing is lost: lookplangraph trial --resume {trial.dir})")
        if session.state == "stopped":
            print(f"\nStopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
            return EXIT_OK
        result = trial.result()
        print(f"\n{'SUCCESS' if result['success'] else 'FAILURE'}: precision {result['precision']:.3f}, "
              f"{len(result['actions'])} actions, {len(result['executed'])} steps, {len(result['failed_steps'])} failed, "
              f"operator {result['operator_seconds'] / 60:.1f} min; result: {trial.path('result.json')}")
        return EXIT_OK if result["success"] else EXIT_FAILED
    from lookplangraph.apps.console.app import serve

    desk = Desk()
    session = TrialSession(trial, desk, lm=lm, augmentation=augmentation, max_photo_bytes=limit)
    session.start()
    try:
        serve(session, desk, host=args.host, port=args.port, max_upload_bytes=limit)
    except KeyboardInterrupt:
        session.join(timeout=5)  # the planner's thread records that it stopped
        raise Interrupted(f"console stopped; everything so far is in {trial.dir}; continue with: "
                          f"lookplangraph trial --resume {trial.dir}") from None
    except SystemExit:  # the server could not start (it says why on stderr)
        session.join(timeout=5)
        raise Unavailable(f"the console could not listen on {args.host}:{args.port}") from None
    session.join(timeout=5)  # the planner's thread records that it stopped
    print(f"Console stopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
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
        tasks += _select_tasks(SimpleNamespace(split=split, selection=None, tasks=None, limit=None), args.data_dir)
    modes = (args.correction,) if args.correction else None
    rows = curve(tasks, rates, seeds=args.seeds, progress=_progress_bar(), **({"modes": modes} if modes else {}))
    out = Path(args.out) if args.out else Path("runs") / "error_injection"
    write_curve(rows, out)
    print(curve_table(rows))
    print(f"written: {out / 'curve.csv'}, {out / 'curve.png'}")
    return EXIT_OK


def cmd_expert_proof(args) -> int:
    """The harness proof: the privileged expert in each planner's loop (evaluation.expert_proof)."""
    from types import SimpleNamespace

    from lookplangraph.evaluation.expert import PLANNERS
    from lookplangraph.evaluation.expert_proof import proof_table, run_proof, write_proof

    pairs = []
    for name in (args.planner or ["lookplangraph"]):
        if name not in PLANNERS:
            raise UsageError(f"--planner {name}: the expert answers {', '.join(PLANNERS)}")
        modes = args.correction or (list(CORRECTION_MODES) if name == "lookplangraph" else ["rules"])
        if name != "lookplangraph":
            modes = ["rules"]  # the correction modes are LookPlanGraph's
        pairs += [(name, m) for m in modes]
    seeds = _seed_list(args.seeds)
    rows = []
    for split in args.split or SPLITS:
        tasks = _select_tasks(SimpleNamespace(split=split, selection=None, tasks=None, limit=args.limit), args.data_dir)
        for env in args.env or ["graph"]:
            if env.startswith("virtualhome"):
                if split != "virtualhome":
                    continue
                from sim_adapters.virtualhome import UNPLUGGED_TASKS

                left_out = sorted(t.id for t in tasks if t.id in UNPLUGGED_TASKS)
                if left_out:
                    print(f"left out in {env} ([PlugIn] programs): {', '.join(left_out)}", file=sys.stderr)
                run_tasks = [t for t in tasks if t.id not in UNPLUGGED_TASKS]
            else:
                run_tasks = tasks
            rows += run_proof(run_tasks, planners=pairs, seeds=seeds, env=env, max_actions=args.max_actions,
                              progress=_progress_bar(f"{split} {env}"))
    out = Path(args.out) if args.out else Path("runs") / "expert_proof"
    write_proof(rows, out)
    print(proof_table(rows))
    failures = [f for r in rows for f in r.failures]
    for f in failures[:40]:
        print(f"FAIL {f['planner']}/{f['correction']} {f['env']} seed={f['seed']} {f['task']}: "
              f"{f['termination']}: {f['why']}")
    print(f"written: {out / 'proof.csv'}, {out / 'failures.csv'} ({len(failures)} failures)")
    return EXIT_OK


def _seed_list(text: str) -> list[int | None]:
    """``static,0,1`` as ``[None, 0, 1]`` (None: the static episode)."""
    try:
        return [None if x == "static" else int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--seeds takes 'static' and integers, comma-separated, not {text!r}") from None


def cmd_distill(args) -> int:
    """Distillation: training data from the expert (evaluation.trajectories: ``distill data``,
    ``distill validate``), LoRA training and export (training: ``distill train``, ``distill
    export``), and checked chunks for carrying files to a GPU machine (``distill split``, ``distill join``)."""
    if args.distill_command in ("train", "export", "split", "join"):
        return _distill_training(args)
    from grasif import dataset
    from grasif.heldout import in_train_pool

    from lookplangraph.evaluation import trajectories

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        tasks = [t for split in ("virtualhome", "behavior") for t in dataset.load_split(root, split)]
    except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
        raise _source_error(exc) from None
    out = Path(args.out)
    if args.distill_command == "validate":
        if not (out / "episodes.jsonl").exists() or not (out / "sft.jsonl").exists():
            raise UsageError(f"{out} holds no training data (episodes.jsonl, sft.jsonl); write it with "
                             f"`lookplangraph distill data --out {out}`")
        report = trajectories.validate_data(out, {(t.split, t.id): t for t in tasks}, progress=_progress_bar("replay"))
        print(f"replayed {report.episodes} successful episodes and read {report.examples} examples: "
              f"{len(report.problems)} problem(s)")
        for line in report.problems[:30]:
            print("  " + line)
        return EXIT_OK if report.ok else EXIT_FAILED
    pool = [t for t in tasks if in_train_pool(t.split, t.id)]
    if args.limit:
        pool = pool[: args.limit]
    seeds = _seed_list(args.seeds)
    kinds = tuple(k for k in args.augment.split(",") if k) if args.augment != "none" else ()
    bad = sorted(set(kinds) - set(trajectories.AUGMENTATIONS))
    if bad:
        raise UsageError(f"--augment: unknown kind(s) {', '.join(bad)}; use {', '.join(trajectories.AUGMENTATIONS)} or none")
    counts = trajectories.build_data(pool, out, seeds=seeds, augmentations=kinds, correction=args.correction,
                                     max_actions=args.max_actions, progress=_progress_bar("expert episodes"))
    print(f"{len(pool)} train-pool tasks; {counts.episodes} episodes ({counts.successful} reached the goal; "
          f"by augmentation {counts.by_kind}; {counts.augmentations_left_out} augmented copies left out as unsolvable)")
    print(f"{counts.examples} examples; prompt tokens {counts.prompt_tokens}, answer tokens {counts.answer_tokens} "
          f"({counts.tokenizer})")
    print(f"written: {out / 'sft.jsonl'}, {out / 'episodes.jsonl'}, {out / 'demonstrations.jsonl.gz'}, "
          f"{out / 'counts.json'}")
    return EXIT_OK


def _base_model_file(spec: str) -> Path:
    """A ``--base``: the name of an embedded model (assembled on first use) or a GGUF path."""
    from lookplangraph.lm import embedded

    try:
        return embedded.model_file(spec)
    except embedded.ModelError as exc:
        raise UsageError(f"--base: {exc}") from None


def _distill_training(args) -> int:
    from lookplangraph.lm.training import chunks

    if args.distill_command == "split":
        try:
            manifest = chunks.split_file(args.file, args.out, int(args.chunk_mib * (1 << 20)))
        except chunks.ChunkError as exc:
            raise UsageError(str(exc)) from None
        m = json.loads(manifest.read_text())
        print(f"{len(m['chunks'])} chunks of {args.file} in {args.out}; manifest {manifest} (sha256 {m['sha256'][:16]}...)")
        return EXIT_OK
    if args.distill_command == "join":
        try:
            path = chunks.join_file(args.manifest, args.out)
        except chunks.ChunkError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"joined and checked: {path}")
        return EXIT_OK
    from lookplangraph.lm.training import gguf_lora, sft
    from lookplangraph.prompts import compact_prompt

    base = _base_model_file(args.base)
    if args.distill_command == "export":
        try:
            r = gguf_lora.export_lora(args.adapter, base, args.out, dtype=args.dtype)
        except gguf_lora.ExportError as exc:
            raise UsageError(str(exc)) from None
        print(f"{r.path}: {r.pairs} LoRA pairs, rank {r.rank}, alpha {r.alpha:g}, {r.architecture}, "
              f"{r.bytes / 2**20:.1f} MiB; use it as --lm llamacpp:{args.base}+{r.path}")
        return EXIT_OK
    config = sft.TrainConfig(rank=args.rank, alpha=args.alpha, learning_rate=args.lr, epochs=args.epochs,
                             max_steps=args.max_steps, batch_size=args.batch_size, grad_accum=args.grad_accum,
                             max_length=args.max_length, examples=args.examples, seed=args.seed,
                             save_steps=args.save_steps, max_minutes=args.max_minutes, dtype=args.dtype,
                             system=compact_prompt() if args.system_prompt == "compact" else None)
    try:
        r = sft.train(args.data, base, args.out, config, resume=not args.restart)
    except sft.TrainError as exc:
        raise UsageError(str(exc)) from None
    state = "stopped by --max-minutes (run the same command to go on)" if r.stopped_by_time else "done"
    print(f"{state}: {r.steps} steps on {r.examples} examples ({r.left_out_too_long} too long), "
          f"final loss {r.final_loss if r.final_loss is None else round(r.final_loss, 4)}, {r.seconds:.0f} s")
    print(f"written: {r.adapter_gguf}, {r.out / 'adapter'}/, {r.out / 'loss.csv'}, {r.out / 'loss.png'}, "
          f"{r.out / 'train.json'}; use it as --lm llamacpp:{args.base}+{r.adapter_gguf}")
    return EXIT_OK


def cmd_gam_eval(args) -> int:
    """Table III: the graph augmentation scored against true subgraphs, on GraSIF (the parser
    stage on written descriptions) or on an image bank (``--bank``: its pictures and descriptions)."""
    from grasif import dataset
    from lookplangraph.lm import LMError, make_backend
    from lookplangraph.evaluation.gam_eval import bank_cases, evaluate, sample_cases, table
    from vlm.gam import GraphAugmentation

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    mode, splits = args.augmentation, args.split or ["virtualhome", "behavior"]
    if mode == "vlm" and not args.bank:
        raise UsageError("--augmentation vlm needs pictures: give --bank DIR (GraSIF has graphs, not images)")
    if mode == "vlm" and not args.vlm:
        raise UsageError("--augmentation vlm needs --vlm SPEC: the describer, a model that sees images "
                         "(e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1)")
    parser_spec = args.parser_lm or ("llamacpp:qwen2.5-coder-1.5b" if mode == "parser" else None)
    if args.bank:
        from sim_adapters.omnigibson import BankError

        try:
            cases = bank_cases(args.bank, root)
        except (BankError, dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None
        if mode == "parser":
            missing = [c.key for c in cases if not c.description]
            if missing:
                raise UsageError(f"--augmentation parser reads the bank's descriptions, and {len(missing)} entries have none "
                                 f"(first: {missing[0]}); use --augmentation vlm --vlm SPEC")
        label = f"bank {args.bank}"
    else:
        try:
            cases = sample_cases(root, splits, args.n, args.seed)
        except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None
        label = f"{', '.join(splits)}, seed {args.seed}"
    default_out = (f"gam_eval_bank_{Path(args.bank).resolve().name}_{mode}" if args.bank
                   else f"gam_eval_{mode}_n{args.n}_seed{args.seed}")
    out = Path(args.out) if args.out else Path("runs") / default_out
    meta = {"mode": mode, "lm": parser_spec if mode != "ground_truth" else None, "n": args.n, "seed": args.seed,
            "splits": splits}
    if args.bank:
        meta = {"mode": mode, "lm": meta["lm"], "bank": str(Path(args.bank).resolve())}
    if mode == "vlm":
        meta["vlm"] = args.vlm

    if mode != "ground_truth":
        _check_spec_flags(None, args.vlm, parser_spec)

    def backend(spec: str, cache_name: str):
        try:
            lm = make_backend(spec)
        except LMError as exc:
            raise Unavailable(str(exc)) from None
        if args.cache:
            from lookplangraph.lm.cache import CachedBackend

            path = out / cache_name if args.cache is True else Path(args.cache)
            if cache_name != "lm_cache.jsonl" and args.cache is not True:
                path = path.with_name(f"{path.stem}_{Path(cache_name).stem}{path.suffix}")
            lm = CachedBackend(lm, path)
        return lm

    if mode == "ground_truth":
        gam = GraphAugmentation("ground_truth")
    else:
        describer = backend(args.vlm, "vlm_cache.jsonl") if mode == "vlm" else None
        parser = backend(parser_spec, "lm_cache.jsonl") if parser_spec else describer
        gam = GraphAugmentation(mode, describer=describer, parser=parser)
    using = {"parser": f" with {parser_spec}", "vlm": f" with {args.vlm} (parser {parser_spec or args.vlm})"}
    print(f"GAM {mode}{using.get(mode, '')}: {len(cases)} observations ({label})")
    try:
        summary = evaluate(cases, gam, out, progress=_progress_bar(), meta=meta)
    except LMError as exc:
        raise Unavailable(f"{exc} (finished observations are kept in {out / 'results.jsonl'}; rerun to resume)") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(table(summary))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return EXIT_OK


# -- the parser ------------------------------------------------------------------------------------
def _split_flag(p, *, several: bool, choices=SPLITS, help: str | None = None, alias: bool = False) -> None:
    """``--split S`` (one split) or ``--split S [S ...]`` (several; also repeatable); ``alias``:
    the old ``--splits S [S ...]`` as a deprecated alias."""
    if several:
        p.add_argument("--split", nargs="+", action="extend", choices=choices, metavar="S",
                       help=f"{help or 'only these splits'}: one or more of {', '.join(choices)} (or the flag repeated)")
        if alias:
            deprecated(p, "--splits", "split", "--split", nargs="+", extend=True, choices=choices)
    else:
        p.add_argument("--split", choices=choices, metavar="S", help=f"{help or 'the split'}: {', '.join(choices)}")


def _episode_flags(p, *, command: str) -> None:
    """The settings flags of ``run`` and ``eval`` (:mod:`lookplangraph.evaluation.settings`):
    each overrides ``--config``'s key of the same name."""
    g = p.add_argument_group("settings (each overrides the key of the same name in --config)")
    g.add_argument("--config", metavar="FILE", help="TOML settings file (configs/*.toml)")
    g.add_argument("--planner", help="lookplangraph (default), a baseline of the paper (llm-as-p, llm+p, sayplan, "
                                     "sayplan-lite, react) or sg-rwr; see lookplangraph.planners")
    g.add_argument("--lm", metavar="SPEC", help="the planner's LM backend: llamacpp:qwen2.5-coder-1.5b (default), "
                                                "llamacpp:PATH.gguf, openai:MODEL[@BASE_URL]")
    g.add_argument("--env", help="environment: graph (default; the SGS on the true graph), virtualhome "
                                 "(VirtualHome's evolving graph; virtualhome split only), virtualhome-unity[@URL] "
                                 "(a running VirtualHome Unity simulator, default http://127.0.0.1:8080), "
                                 "omnigibson-bank@DIR (the SGS with images captured in OmniGibson; behavior split)")
    g.add_argument("--augmentation", choices=["ground_truth", "parser", "vlm"],
                   help="what discover_objects adds to memory: ground_truth (default; the true objects), parser "
                        "(the environment's text description, parsed by an LM), vlm (the image, described by --vlm, then parsed)")
    g.add_argument("--vlm", metavar="SPEC", help="describer backend for --augmentation vlm, a model that sees images "
                                                 "(openai:MODEL@BASE_URL, openai:gpt-4o, llamacpp:PATH.gguf with mmproj in vlm_options)")
    g.add_argument("--parser-lm", metavar="SPEC", help="parser backend (default: --vlm in vlm mode, --lm in parser mode)")
    g.add_argument("--dynamic", action=YesNo, default_text="off, or the config's",
                   help="dynamic mode: move task-relevant objects before the episode (seeded by --dynamic-seed)")
    g.add_argument("--dynamic-seed", type=int, metavar="N", help="the seed of dynamic mode (default 0)")
    deprecated(g, "--seed", "dynamic_seed", "--dynamic-seed", type=int)
    g.add_argument("--failures", type=float, metavar="RATE",
                   help="low-level execution failures: each kind (a grasp that fails, a blocked door, a device that "
                        "does not switch, an object that slips, a placement on top instead of inside) at this rate "
                        "(default 0; a table per kind in the config, sim_adapters.failures)")
    g.add_argument("--failure-seed", type=int, metavar="N", help="the seed of the failures' draws (default 0)")
    loop = p.add_argument_group("the planner's settings (the config's top-level keys; the loop's switches are "
                                "LookPlanGraph's, the baselines ignore them; the baselines' own are [tables] of --config)")
    _planner_flags(loop)
    deprecated(loop, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    deprecated(loop, "--allow-cycles", "refuse_cycles", "--no-refuse-cycles", nargs=0, const=False)
    default_out = ("runs/TIME_SPLIT_TASK" if command == "run" else "runs/eval_TIME_SPLIT; rerun the same command to resume")
    g.add_argument("--out", metavar="DIR", help=f"output directory (default {default_out})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=HelpFormatter, allow_abbrev=False,
        description="LookPlanGraph: an LM plans robot actions over a scene graph that it keeps up to date, checked "
                    "by the Scene Graph Simulator; GraSIF tasks, the paper's baselines, evaluation, trials with "
                    "people, and the tools around them. Every command has --help with examples.",
        epilog=examples_text(["lookplangraph run --split office --task office-01 --max-actions 12",
                              "lookplangraph eval --split office --limit 5 --out runs/office5",
                              "lookplangraph report runs/office5",
                              "lookplangraph grasif list --split office | head -1",
                              "lookplangraph validate --task-file examples/gift_basket/task.json"])
        + "\n\n" + exit_codes_text() + "\n\nYes/no flags are --NAME/--no-NAME. Renamed flags keep their old spelling "
        "for one release, with a note on stderr (README, Command line).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")

    p = add_command(sub, "validate", help="validate a plan against a goal by graph simulation",
                    description="Validate a plan against a goal by graph simulation: the plan runs in the Scene "
                                "Graph Simulator from the initial graph, and the final graph is judged against the goal "
                                "(its units, and side effects on everything else). Exit code 1 when the plan fails.",
                    examples=["lookplangraph validate --initial examples/gift_basket/initial.json "
                              "--goal examples/gift_basket/goal.json --plan examples/gift_basket/plan.json",
                              "lookplangraph validate --task-file examples/gift_basket/task.json --json"])
    p.add_argument("--initial", metavar="FILE", help="initial scene graph (paper JSON format)")
    p.add_argument("--goal", metavar="FILE", help="goal scene graph, or a goal specification JSON")
    p.add_argument("--plan", metavar="FILE", help="JSON list of actions (strings like 'pick_up(apple-1)' or objects)")
    p.add_argument("--task-file", metavar="FILE",
                   help="a GraSIF task file (initial graph, goal; its ground-truth plan unless --plan)")
    deprecated(p, "--task", "task_file", "--task-file")
    p.add_argument("--correction", choices=["rules", "none"], default="rules",
                   help="rules (default): correct what the rules can (open a container first ...); "
                        "none: report infeasible actions instead")
    deprecated(p, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    p.add_argument("--by-class", action=YesNo, default=False, help="check moved objects by class and count, not by id")
    p.add_argument("--json", action=YesNo, default=False, help="print the verdict as JSON")
    p.set_defaults(func=cmd_validate)

    p = add_command(sub, "show", help="print a scene graph as a tree",
                    description="Print a scene graph file (paper JSON format) as a tree: rooms, assets, objects "
                                "with their relations and states.",
                    examples=["lookplangraph show examples/gift_basket/initial.json"])
    p.add_argument("graph", metavar="GRAPH", help="scene graph file (paper JSON format)")
    p.set_defaults(func=cmd_show)

    p = add_command(sub, "grasif", help="build, list and describe the GraSIF benchmark",
                    description="The GraSIF benchmark's data directory: build the task files from their source "
                                "packages, list task ids, print Table I.",
                    examples=["lookplangraph grasif build --split office",
                              "lookplangraph grasif list --split virtualhome --selection strict",
                              "lookplangraph grasif stats"])
    gsub = p.add_subparsers(dest="grasif_command", required=True, metavar="COMMAND", title="commands")
    b = add_command(gsub, "build", help="build task files from the source packages (atomic, deterministic)",
                    description="Build the task files of the splits from their source packages (virtualhome-eval, "
                                "bddl, the office building), atomically and deterministically.",
                    examples=["lookplangraph grasif build", "lookplangraph grasif build --split office --out data/grasif"])
    b.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    b.add_argument("--out", metavar="DIR", help="output directory (default: the data directory)")
    _split_flag(b, several=True, help="build only these splits (default: all three)")
    lst = add_command(gsub, "list", help="task ids, one per line",
                      description="Print the task ids of a build, one per line.",
                      examples=["lookplangraph grasif list --split office",
                                "lookplangraph grasif list --split virtualhome --selection paper | wc -l"])
    lst.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    _split_flag(lst, several=False, help="only the tasks of this split (default: all)")
    lst.add_argument("--selection", help="only tasks of this selection (virtualhome: strict = appendix H1 as written, "
                                         "paper = 308 tasks)")
    st = add_command(gsub, "stats", help="Table I of the paper for the build",
                     description="Table I of the paper (tasks, places, nodes, ground-truth actions per split) for the "
                                 "build, beside the paper's figures.",
                     examples=["lookplangraph grasif stats --data-dir data/grasif"])
    st.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.set_defaults(func=cmd_grasif)

    p = add_command(sub, "run", help="run one episode and print its trace",
                    description="Run one episode of a planner on one task and print its trace as it goes; the trace "
                                "and the result are written to --out. Exit code 1 when the episode does not succeed.",
                    examples=["lookplangraph run --split office --task office-01 --max-actions 12",
                              "lookplangraph run --task-file T.json --lm openai:gpt-4o --dynamic --dynamic-seed 3",
                              "lookplangraph run --split virtualhome --task file647_2 --env virtualhome --augmentation parser"])
    t = p.add_argument_group("the task")
    _split_flag(t, several=False)
    t.add_argument("--task", metavar="ID", help="task id in the split (default: its first task)")
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
                              "lookplangraph eval --split virtualhome --task file120_1 file27_2 --lm openai:MODEL@URL "
                              "--concurrency 8 --cache"])
    t = p.add_argument_group("the tasks")
    _split_flag(t, several=False)
    t.add_argument("--task", nargs="+", action="extend", metavar="ID", help="task ids (default: all of the split)")
    deprecated(t, "--tasks", "task", "--task", nargs="+", extend=True)
    t.add_argument("--selection", help="only tasks of this selection (virtualhome: strict or paper)")
    t.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    t.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    _episode_flags(p, command="eval")
    w = p.add_argument_group("workers and LM servers")
    w.add_argument("--concurrency", type=int, metavar="K", help="episodes in parallel (default 1)")
    w.add_argument("--processes", type=int, metavar="P", help="worker processes the K episodes are spread over "
                                                             "(default 1: threads of this process; for many "
                                                             "episodes in flight against LM servers)")
    w.add_argument("--endpoints", metavar="URL,URL", help="with --lm openai:MODEL: servers of that model used "
                                                          "round-robin by the workers (a failed one is taken out, its "
                                                          "episodes rerun elsewhere)")
    w.add_argument("--endpoint-concurrency", type=int, metavar="N", help="with --endpoints: requests in flight per endpoint")
    w.add_argument("--endpoint-rate", type=float, metavar="R", help="with --endpoints: request starts per second per endpoint")
    w.add_argument("--cache", nargs="?", const=True, default=None, metavar="FILE",
                   help="record LM replies in OUT/lm_cache.jsonl (or FILE, e.g. another run's cache) and replay identical calls")
    p.set_defaults(func=cmd_eval)

    p = add_command(sub, "report", help="compare the summaries of evaluation directories in one table (and trials)",
                    description="One table comparing the summaries of evaluation directories (success rates, "
                                "action precision, LM calls), the failure kinds of each, and one table of the "
                                "human-in-the-loop trials among them.",
                    examples=["lookplangraph report runs/lm47_vh runs/lm47_bh runs/lm47_office --per-split",
                              "lookplangraph report runs/trial_*"])
    p.add_argument("dirs", nargs="+", metavar="DIR", help="evaluation output directories (with summary.json), trial "
                                                          "directories or directories of trials")
    p.add_argument("--per-split", action=YesNo, default=False, help="also show the per-split rows")
    deprecated(p, "--splits", "per_split", "--per-split", nargs=0, const=True)
    p.set_defaults(func=cmd_report)

    p = add_command(sub, "trial", help="a human-in-the-loop trial: a person performs each step (web console or terminal)",
                    description="A human-in-the-loop trial: the planner decides, a person performs each step and "
                                "answers (a web console, also on a phone, or this terminal), and a checklist judges "
                                "the result. Everything is recorded as it happens; --resume continues after a stop. "
                                "Exit code 1 when the checklist says the task failed.",
                    examples=["lookplangraph trial --task-file examples/office_building/tasks/coffee_for_maria.json",
                              "lookplangraph trial --task-file T.json --operator terminal",
                              "lookplangraph trial --graph my_office.json --instruction \"Pack Andrew's backpack\"",
                              "lookplangraph trial --resume runs/trial_20260101-101500_coffee_for_maria"])
    p.add_argument("--task-file", metavar="FILE", help="a task file (instruction, graph, goal)")
    p.add_argument("--graph", metavar="FILE", help="your own building: a scene graph in the paper's JSON format (with --instruction)")
    p.add_argument("--instruction", metavar="TEXT", help="what to do in --graph")
    p.add_argument("--goal", metavar="FILE", help="with --graph: a goal graph or goal specification for the checklist "
                                                  "(default: the checklist asks about the instruction itself)")
    p.add_argument("--resume", metavar="DIR", help="continue the trial in DIR (replays what is recorded, then goes on)")
    p.add_argument("--operator", choices=["web", "terminal"], default="web",
                   help="web (default): a console page, also on a phone; terminal: the same questions in this terminal")
    p.add_argument("--lm", metavar="SPEC", help="the planner's LM (default llamacpp:qwen2.5-coder-1.5b)")
    p.add_argument("--vlm", metavar="SPEC", help="the describer of photos, a model that sees images, e.g. "
                                                 "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 "
                                                 "(without it the operator types descriptions)")
    p.add_argument("--parser-lm", metavar="SPEC", help="the parser of descriptions (default: --vlm, else --lm)")
    p.add_argument("--max-actions", type=int, metavar="N", help="action limit (default 30)")
    p.add_argument("--correction", choices=CORRECTION_MODES, help="correction mode (default rules)")
    p.add_argument("--out", metavar="DIR", help="trial directory (default runs/trial_<time>_<task>)")
    p.add_argument("--host", default="127.0.0.1", help="console address (default 127.0.0.1, this machine only); "
                                                       "0.0.0.0 opens it to the network with a one-time token")
    p.add_argument("--port", type=int, default=8765, help="console port (default 8765)")
    p.add_argument("--max-upload-mb", type=float, default=15.0, metavar="MB", help="largest photo accepted, in MB (default 15)")
    p.set_defaults(func=cmd_trial)

    p = add_command(sub, "inject", help="error-injection curve: SR against injected error rate in each correction mode",
                    description="The error-injection curve (Table V's study): a scripted policy (no LM) follows each "
                                "task's ground-truth plan with errors injected at each rate, in each correction mode "
                                "(or the one of --correction); SR and APP per rate and mode, written as CSV and a plot.",
                    examples=["lookplangraph inject --split office --rates 0,0.3,1.0 --seeds 2",
                              "lookplangraph inject --correction none --out runs/injection_none"])
    _split_flag(p, several=True, help="splits (default: all three)", alias=True)
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--rates", default="0,0.1,0.2,0.3,0.5,0.7,1.0",
                   help="comma-separated error rates (default 0,0.1,0.2,0.3,0.5,0.7,1.0)")
    p.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds per rate: 0 to N-1 (default 3)")
    p.add_argument("--correction", choices=CORRECTION_MODES, help="only this correction mode (default: all three)")
    deprecated(p, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/error_injection)")
    p.set_defaults(func=cmd_inject)

    p = add_command(sub, "expert-proof", help="harness proof: the privileged expert in each planner's loop (SR should be 1.0)",
                    description="The harness proof: the expert policy (privileged: it reads the true graph "
                                "and the ground-truth plan; a harness tool, never a model) answers the planner's "
                                "prompts through the same reply path as an LM, over whole splits, static and dynamic "
                                "seeds, in the graph environment and the VirtualHome adapter. Every failure is listed.",
                    examples=["lookplangraph expert-proof",
                              "lookplangraph expert-proof --split virtualhome --env graph --env virtualhome "
                              "--seeds static,0,1",
                              "lookplangraph expert-proof --planner llm-as-p --seeds static,0"])
    _split_flag(p, several=True, help="splits (default: all three)")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--planner", action="append", metavar="NAME",
                   help="lookplangraph (default), react, sayplan, sayplan-lite or llm-as-p; repeat for several")
    p.add_argument("--correction", action="append", choices=CORRECTION_MODES,
                   help="correction modes of lookplangraph (default: all three); repeat for several")
    p.add_argument("--env", action="append", choices=["graph", "virtualhome"],
                   help="environments (default graph); virtualhome runs the virtualhome split only, "
                        "without the 7 [PlugIn] programs")
    p.add_argument("--seeds", default="static,0,1", help="comma-separated: static and dynamic seeds (default static,0,1)")
    p.add_argument("--max-actions", type=int, default=200, metavar="N", help="action limit (default 200: a search of a whole home in dynamic mode)")
    p.add_argument("--limit", type=int, metavar="N", help="first N tasks of each split")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/expert_proof)")
    p.set_defaults(func=cmd_expert_proof)

    p = add_command(sub, "distill", help="distil the privileged expert into an embedded model: data, LoRA training, export",
                    description="Supervised fine-tuning data: the expert's episodes on the train pool of the pinned "
                                "held-out split (grasif/data/heldout_v1.json), with label-preserving augmentation; "
                                "every example is exactly what LookPlanGraph sends at a step and the expert's answer. "
                                "Then a LoRA trained on it (the distill extra) and exported as a GGUF LoRA for llama.cpp.",
                    examples=["lookplangraph distill data --out runs/distill",
                              "lookplangraph distill data --out runs/distill_small --limit 20 --augment none",
                              "lookplangraph distill validate --out runs/distill",
                              "lookplangraph distill train --data runs/distill --base qwen2.5-coder-1.5b --out runs/lora15"])
    dsub = p.add_subparsers(dest="distill_command", required=True, metavar="COMMAND", title="commands")
    d = add_command(dsub, "data", help="write sft.jsonl, episodes.jsonl, demonstrations.jsonl.gz and counts.json",
                    description="Run the expert in LookPlanGraph's loop on every train-pool task, static and dynamic "
                                "seeds, as it is and augmented (renamed instances, shuffled listing order, "
                                "distractors), and write chat-format examples of the accepted answers.",
                    examples=["lookplangraph distill data --out runs/distill --seeds static,0,1,2,3"])
    d.add_argument("--out", required=True, metavar="DIR", help="output directory")
    d.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    d.add_argument("--seeds", default="static,0,1,2,3", help="static and dynamic seeds (default: the manifest's "
                                                           "train seeds static,0,1,2,3)")
    d.add_argument("--augment", default="rename,shuffle,distract",
                   help="augmentation kinds, comma-separated, or none (default rename,shuffle,distract)")
    d.add_argument("--correction", choices=CORRECTION_MODES, default="rules", help="correction mode (default rules)")
    d.add_argument("--max-actions", type=int, default=200, metavar="N", help="action limit (default 200)")
    d.add_argument("--limit", type=int, metavar="N", help="only the first N train-pool tasks")
    v = add_command(dsub, "validate", help="replay every episode through the SGS and read back every example",
                    description="Replay each successful episode from its true initial graph through the SGS (every "
                                "action feasible, the goal holds at the end) and read every example's answer back "
                                "as an action whose names stand in its prompt. Exit 1 on any problem.",
                    examples=["lookplangraph distill validate --out runs/distill"])
    v.add_argument("--out", required=True, metavar="DIR", help="the directory distill data wrote")
    v.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    t = add_command(dsub, "train", help="LoRA fine-tuning of a GGUF model on sft.jsonl (the distill extra)",
                    description="Read the base model and its tokenizer from its GGUF file, fine-tune a LoRA on the chat "
                                "examples with the loss on the answers only, and write OUT/adapter/, OUT/adapter.gguf "
                                "(for --lm llamacpp:BASE+OUT/adapter.gguf), loss.csv, loss.png and train.json. Seeded; "
                                "checkpoints every --save-steps; the same command resumes an interrupted run.",
                    examples=["lookplangraph distill train --data runs/distill --base qwen2.5-coder-1.5b --out runs/lora15",
                              "lookplangraph distill train --data runs/distill --base qwen2.5-coder-0.5b --out runs/lora05 "
                              "--examples 4000 --max-minutes 8"])
    t.add_argument("--data", required=True, metavar="PATH", help="sft.jsonl (or .jsonl.gz), or the directory distill data wrote")
    t.add_argument("--base", default="qwen2.5-coder-1.5b", metavar="MODEL",
                   help="an embedded model's name or a GGUF path (default qwen2.5-coder-1.5b)")
    t.add_argument("--out", required=True, metavar="DIR", help="output directory (checkpoints, adapter, loss)")
    t.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    t.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (default 32)")
    t.add_argument("--lr", type=float, default=2e-4, help="learning rate (default 2e-4, cosine, 3%% warm-up)")
    t.add_argument("--epochs", type=float, default=1.0, help="passes over the data (default 1)")
    t.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (wins over --epochs)")
    t.add_argument("--batch-size", type=int, default=4, help="examples per device batch (default 4)")
    t.add_argument("--grad-accum", type=int, default=4, help="batches per optimizer step (default 4)")
    t.add_argument("--max-length", type=int, default=4096, help="leave out longer examples, in tokens (default 4096)")
    t.add_argument("--examples", type=int, metavar="N", help="use N examples of the seeded shuffle (default all)")
    t.add_argument("--seed", type=int, default=0, help="seed of the shuffle, LoRA init and dropout (default 0)")
    t.add_argument("--save-steps", type=int, default=100, help="checkpoint every N steps (default 100)")
    t.add_argument("--max-minutes", type=float, metavar="M", help="stop with a checkpoint after M minutes of training")
    t.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"], default="auto",
                   help="weights and compute (default auto: bfloat16 on a GPU that has it, else float32)")
    t.add_argument("--system-prompt", choices=["as-built", "compact"], default="as-built",
                   help="the examples' system message: as built (the planner's full prompt) or compact (then run the "
                        "adapter with --system-prompt compact; a fifth of the prompt tokens)")
    t.add_argument("--restart", action=YesNo, default=False,
                   help="ignore the checkpoints in OUT and start over (off: go on from the last one)")
    e = add_command(dsub, "export", help="a PEFT adapter directory as a GGUF LoRA for llama.cpp",
                    description="Write a PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors) as the GGUF "
                                "LoRA file llama.cpp applies to the unchanged base; checked against the base's tensors.",
                    examples=["lookplangraph distill export --adapter runs/lora15/adapter --base qwen2.5-coder-1.5b "
                              "--out runs/lora15/adapter.gguf"])
    e.add_argument("--adapter", required=True, metavar="DIR", help="the PEFT adapter directory")
    e.add_argument("--base", default="qwen2.5-coder-1.5b", metavar="MODEL", help="the base: embedded name or GGUF path")
    e.add_argument("--out", required=True, metavar="FILE", help="the GGUF LoRA to write")
    e.add_argument("--dtype", choices=["f16", "f32"], default="f16", help="tensor type (default f16)")
    sp = add_command(dsub, "split", help="cut a file into checked chunks (to carry it to a GPU machine)",
                     description="Cut FILE into chunks of at most --chunk-mib MiB with a manifest of SHA-256 sums; "
                                 "`distill join` checks and puts them back together.",
                     examples=["lookplangraph distill split ~/.cache/lookplangraph/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "
                               "--out carry/base"])
    sp.add_argument("file", metavar="FILE", help="the file to cut")
    sp.add_argument("--out", required=True, metavar="DIR", help="directory of the chunks and the manifest")
    sp.add_argument("--chunk-mib", type=float, default=60.0, help="chunk size in MiB (default 60)")
    j = add_command(dsub, "join", help="check the chunks of a manifest and put the file back together",
                    description="Check every chunk's size and SHA-256 against the manifest, then write the whole file "
                                "(OUT.part, renamed when the whole file's SHA-256 matches). Exit 1 naming a bad chunk.",
                    examples=["lookplangraph distill join carry/base/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf.manifest.json"])
    j.add_argument("manifest", metavar="MANIFEST", help="the manifest split wrote")
    j.add_argument("--out", metavar="FILE", help="where to write the file (default: its name beside the manifest)")
    p.set_defaults(func=cmd_distill)

    p = add_command(sub, "gam-eval", help="graph augmentation (Table III): parser stage on GraSIF's written "
                                          "descriptions, or an image bank's pictures (--bank)",
                    description="Table III: the graph augmentation scored against the true subgraphs, on observations "
                                "sampled from GraSIF (the parser stage on written descriptions) or on an OmniGibson "
                                "image bank (--bank: its pictures, described by --vlm, or its descriptions). Resumable.",
                    examples=["lookplangraph gam-eval --n 40 --seed 1",
                              "lookplangraph gam-eval --augmentation ground_truth --split behavior",
                              "lookplangraph gam-eval --bank BANK_DIR --augmentation vlm "
                              "--vlm openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1"])
    p.add_argument("--augmentation", choices=["parser", "ground_truth", "vlm"], default="parser",
                   help="parser (default; text to graph), vlm (picture to text to graph; needs --bank and --vlm) "
                        "or ground_truth (checks the pipeline: every score 1)")
    deprecated(p, "--mode", "augmentation", "--augmentation", choices=["parser", "ground_truth", "vlm"])
    p.add_argument("--parser-lm", metavar="SPEC", help="the parser's LM backend (default llamacpp:qwen2.5-coder-1.5b; "
                                                       "with --augmentation vlm the --vlm model)")
    deprecated(p, "--lm", "parser_lm", "--parser-lm")
    p.add_argument("--vlm", metavar="SPEC", help="the describer's backend, a model that sees images (augmentation vlm), "
                                                 "e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1")
    p.add_argument("--bank", metavar="DIR", help="evaluate the observations of this OmniGibson image bank "
                                                 "(sim_adapters/omnigibson.py) instead of sampled GraSIF ones")
    p.add_argument("--n", type=int, default=200, metavar="N", help="observations, split evenly between the splits (default 200)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling and description seed (default 0)")
    _split_flag(p, several=True, choices=["virtualhome", "behavior"], help="splits to sample from (default: both)",
                alias=True)
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/gam_eval_AUGMENTATION_nN_seedS, with "
                                                "--bank runs/gam_eval_bank_NAME_AUGMENTATION); rerun to resume")
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
    _old_spellings_of_other_modules(sub.choices)
    return conform(parser)


def _old_spellings_of_other_modules(commands: dict[str, argparse.ArgumentParser]) -> None:
    """The deprecated aliases of the commands defined outside this module (which cannot import
    :class:`DeprecatedAlias`: it is a layer above them)."""
    deprecated(commands["reproduce"], "--splits", "split", "--split", nargs="+", extend=True,
               choices=["office", "behavior", "virtualhome"])
    deprecated(commands["ask"], "--goal", "goal", "--ground", nargs=0, const=True)
    cypher_eval = commands["cypher-eval"]
    deprecated(cypher_eval, "--task", "task", "--benchmark", choices=["qa", "grounding"])
    benchmark = next(a for a in cypher_eval._actions if "--benchmark" in a.option_strings)
    benchmark.required = False  # --benchmark or --task: checked when the command runs
    cypher_eval.set_defaults(func=required(cypher_eval, "task", "--benchmark", cypher_eval._defaults["func"]))


def main(argv: list[str] | None = None) -> int:
    """Run the command of ``argv`` (default ``sys.argv[1:]``) and return its exit code (module doc)."""
    return run_main(build_parser, argv)


if __name__ == "__main__":
    sys.exit(main())
