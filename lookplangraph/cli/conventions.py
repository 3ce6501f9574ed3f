"""The conventions every ``lookplangraph`` command follows (the package doc lists them): the exit
codes and the errors that map to them, yes/no and deprecated flags, the help format, the backend
flags' check, progress bars, and :func:`run_main`, which runs a command under all of it."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from typing import Callable, Iterable

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
#: ``--lm expert``, ``--lm expert-oracle``, ``--lm expert-view`` and ``--lm expert-walk``: the
#: privileged expert (:mod:`lookplangraph.distill.teacher.expert`; its belief-space search, the older
#: room-by-room search, the belief-space search limited to what the planner's view shows, or that
#: search putting only in the room it stands in), a harness tool
EXPERT_SPECS = ("expert", "expert-oracle", "expert-view", "expert-walk")
WIDTH = 92


class UsageError(Exception):
    """Bad command-line input: ``error: MESSAGE`` on stderr, exit code 2."""


class Unavailable(Exception):
    """Something the command needs cannot be reached or used (an LM, a simulator, a database, an
    optional package): ``error: MESSAGE`` on stderr, exit code 3."""


def lm_failure(exc: Exception, message: str | None = None) -> Exception:
    """The command error for something a run needs and could not make or reach (an LM, a
    simulator, a sandbox): :class:`UsageError` for a LoRA adapter that does not fit
    (:class:`lookplangraph.lm.AdapterError`: bad input, 2), :class:`Unavailable` otherwise (3);
    ``message`` replaces the error's own text. Raise it ``from None``."""
    lm = sys.modules.get("lookplangraph.lm.base")
    kind = UsageError if lm is not None and isinstance(exc, lm.AdapterError) else Unavailable
    return kind(str(exc) if message is None else message)


#: the file of a run's output directory that holds llama.cpp's own log (loading, adapters, warnings)
NATIVE_LOG = "llama.log"


def verbose_flag(p) -> None:
    """``--verbose``: llama.cpp's own log on the terminal too (it always goes to the run's file)."""
    p.add_argument("--verbose", action=argparse.BooleanOptionalAction, default=False,
                   help=f"also print llama.cpp's own log (model loading, adapters, warnings) on the terminal; it "
                        f"always goes to {NATIVE_LOG} in the output directory (default: off)")


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
    (``extend=True``). Documented in ``docs/reference/conventions.md``."""

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
    :class:`UsageError` and :class:`lookplangraph.lm.AdapterError` (a LoRA file that does not fit)
    2; :class:`Unavailable`, :class:`lookplangraph.lm.LMError` and a store or simulator that cannot
    be reached 3."""
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    lm = sys.modules.get("lookplangraph.lm.base")
    if lm is not None and isinstance(exc, lm.AdapterError):
        return EXIT_USAGE
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


# -- what several commands share ---------------------------------------------------------------
def check_spec_flags(lm: str | None, vlm: str | None, parser_lm: str | None) -> None:
    """Refuse a backend spec that cannot be read (``--lm``, ``--vlm``, ``--parser-lm``; None: not
    given) as bad input (2), before any LM is made (an LM that then cannot be used is 3)."""
    from lookplangraph.lm import LMError, parse_spec

    for flag, spec in (("--lm", lm), ("--vlm", vlm), ("--parser-lm", parser_lm)):
        if spec and not (flag == "--lm" and spec in EXPERT_SPECS):
            try:
                parse_spec(spec)
            except LMError as exc:
                raise UsageError(f"{flag}: {exc}") from None


def progress_bar(desc: str = "episodes", unit: str = "ep"):
    """``progress(done, total, row=None)`` for :func:`lookplangraph.evaluation.runner.evaluate`, the
    injection curve and the other long loops, drawn by tqdm on stderr (the last episode's verdict
    in the postfix when a row is given)."""
    from tqdm import tqdm

    state: dict = {}

    def show(done: int, total: int, row=None) -> None:
        bar = state.get("bar")
        if bar is None:
            bar = state["bar"] = tqdm(total=total, initial=done, desc=desc, unit=unit, file=sys.stderr)
        bar.update(done - bar.n)
        if row is not None and "task_id" in row:
            bar.set_postfix_str(f"last: {row['task_id']} {'ok' if row.get('success') else 'fail'}", refresh=False)
        if done >= total:
            bar.close()

    return show
