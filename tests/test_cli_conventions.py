"""The command line's conventions (lookplangraph/cli/__init__.py's module doc), checked on the real parser:
every command and sub-command has help with a description and an example, rejects an unknown flag
with exit code 2, offers yes/no flags as --NAME/--no-NAME, keeps renamed flags as documented
deprecated aliases, and offers only flags its handler reads; --version; the exit-code table; a
closed stdout and Ctrl-C end quietly (141, 130) without a traceback."""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import inspect
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lookplangraph.cli import episodes as cli_episodes
from lookplangraph.cli import EXIT_CODES, DeprecatedAlias, build_parser, main

ROOT = Path(__file__).resolve().parent.parent
# The conventions page of the documentation (it was README's "Command line" section).
COMMAND_LINE = (ROOT / "docs" / "reference" / "conventions.md").read_text()
EXE = [sys.executable, "-m", "lookplangraph.cli"]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser, handler) of the top level and every command and sub-command, depth first;
    the handler is the nearest ``func`` default (None at the top)."""
    handler = parser._defaults.get("func")
    yield path, parser, handler
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for p, sp, h in commands(sub, path + (name,)):
                    yield p, sp, h or handler


PARSER = build_parser()
ALL = list(commands(PARSER))
LEAVES = [(p, sp, h) for p, sp, h in ALL if not any(isinstance(a, argparse._SubParsersAction) for a in sp._actions)]
IDS = [" ".join(p) or "lookplangraph" for p, _, _ in ALL]
LEAF_IDS = [" ".join(p) for p, _, _ in LEAVES]


def test_the_walk_finds_every_command():
    names = {" ".join(p) for p, _, _ in ALL}
    assert {"validate", "show", "grasif", "grasif build", "grasif list", "grasif stats", "run", "eval", "report",
            "trial", "inject", "gam-eval", "reproduce", "view", "sandbox", "ask", "cypher-eval",
            "cypher-build"} <= names
    assert all(h is not None for _, _, h in LEAVES)


@pytest.mark.parametrize("path, parser, handler", ALL, ids=IDS)
def test_help_has_a_description_and_an_example(path, parser, handler, capsys):
    assert main([*path, "--help"]) == 0
    shown = capsys.readouterr().out
    assert parser.description and len(parser.description.split()) >= 5, path
    assert parser.description.split()[0] in shown
    examples = [line.strip() for line in (parser.epilog or "").splitlines()]
    assert any(line.startswith("lookplangraph ") for line in examples), f"{path}: no example in the epilog"
    assert "examples:" in shown


def test_top_level_help_lists_the_exit_codes(capsys):
    assert main(["--help"]) == 0
    shown = capsys.readouterr().out
    table = shown[shown.index("exit codes:"):]
    for code, _ in EXIT_CODES:
        assert re.search(rf"^\s+{code}\s+\S", table, re.M), code
    assert {code for code, _ in EXIT_CODES} >= {0, 1, 2, 3, 130}
    for code, _ in EXIT_CODES:  # and the conventions page's table is the same
        assert f"| {code} |" in COMMAND_LINE


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"lookplangraph {importlib.metadata.version('lookplangraph')}\n"


def _minimal_argv(parser: argparse.ArgumentParser) -> list[str]:
    """Values for the required positionals and options, so that only what is added is wrong."""
    argv = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction, DeprecatedAlias)):
            continue
        value = str(list(a.choices)[0]) if a.choices else "x"
        if not a.option_strings and a.nargs not in ("?", "*"):
            argv.append(value)
        elif a.option_strings and a.required:
            argv += [a.option_strings[0], value]
    return argv


@pytest.mark.parametrize("path, parser, handler", LEAVES, ids=LEAF_IDS)
def test_an_unknown_flag_is_refused_with_exit_code_2(path, parser, handler, capsys):
    assert main([*path, *_minimal_argv(parser), "--no-such-flag"]) == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_flags_are_not_abbreviated(capsys):
    assert main(["grasif", "list", "--spl", "office"]) == 2
    assert main(["report", "runs", "--per"]) == 2
    capsys.readouterr()


@pytest.mark.parametrize("path, parser, handler", ALL, ids=IDS)
def test_yes_no_flags_are_boolean_optional(path, parser, handler):
    for a in parser._actions:
        if isinstance(a, DeprecatedAlias):
            continue
        assert not isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction,
                                  argparse._StoreConstAction)), f"{path}: {a.option_strings} is a store_true/false flag"
        if any(o.startswith("--no-") for o in a.option_strings):
            assert isinstance(a, argparse.BooleanOptionalAction), f"{path}: {a.option_strings}"
        if isinstance(a, argparse.BooleanOptionalAction):
            assert a.help.count("(default: ") == 1, f"{path}: {a.option_strings} shows no default, or two"


#: every deprecated alias: (command, old flag, argv with the old spelling, argv with the new one)
ALIASES = [
    ("eval", "--tasks", ["--split", "office", "--tasks", "office-01", "office-02"],
     ["--split", "office", "--task", "office-01", "office-02"]),
    ("run", "--seed", ["--seed", "4"], ["--dynamic-seed", "4"]),
    ("eval", "--seed", ["--seed", "4"], ["--dynamic-seed", "4"]),
    ("run", "--no-correction", ["--no-correction"], ["--correction", "none"]),
    ("eval", "--no-correction", ["--no-correction"], ["--correction", "none"]),
    ("inject", "--no-correction", ["--no-correction"], ["--correction", "none"]),
    ("validate", "--no-correction", ["--no-correction"], ["--correction", "none"]),
    ("run", "--allow-cycles", ["--allow-cycles"], ["--no-refuse-cycles"]),
    ("eval", "--allow-cycles", ["--allow-cycles"], ["--no-refuse-cycles"]),
    ("inject", "--splits", ["--splits", "office", "behavior"], ["--split", "office", "behavior"]),
    ("gam-eval", "--splits", ["--splits", "behavior"], ["--split", "behavior"]),
    ("reproduce", "--splits", ["table4", "--splits", "office"], ["table4", "--split", "office"]),
    ("report", "--splits", ["runs", "--splits"], ["runs", "--per-split"]),
    ("validate", "--task", ["--task", "T.json"], ["--task-file", "T.json"]),
    ("cypher-eval", "--task", ["--task", "qa"], ["--benchmark", "qa"]),
    ("gam-eval", "--mode", ["--mode", "vlm"], ["--augmentation", "vlm"]),
    ("gam-eval", "--lm", ["--lm", "scripted:x"], ["--parser-lm", "scripted:x"]),
    ("ask", "--goal", ["--graph", "G.json", "Pack the bag", "--goal"], ["--graph", "G.json", "Pack the bag", "--ground"]),
]


@pytest.mark.parametrize("command, flag, old, new", ALIASES, ids=[f"{c} {f}" for c, f, _, _ in ALIASES])
def test_a_deprecated_alias_does_what_the_new_flag_does_and_says_so(command, flag, old, new, capsys):
    parser = build_parser()
    got = parser.parse_args([command, *old])
    err = capsys.readouterr().err
    assert err.startswith(f"lookplangraph: {flag} is deprecated and goes in the next release; use --")
    assert err.count("\n") == 1 and err.endswith("\n")
    assert vars(got) == vars(parser.parse_args([command, *new]))
    assert capsys.readouterr().err == ""


def test_every_deprecated_alias_is_tested_documented_and_hidden(capsys):
    found = {(" ".join(p), o) for p, sp, _ in ALL for a in sp._actions if isinstance(a, DeprecatedAlias)
             for o in a.option_strings}
    assert found == {(c, f) for c, f, _, _ in ALIASES}
    for _, old in found:
        assert f"| `{old}" in COMMAND_LINE, f"{old} is not in the table of docs/reference/conventions.md"
    for path, old in found:
        assert main([*path.split(), "--help"]) == 0
        shown = capsys.readouterr().out
        assert not re.search(rf"{re.escape(old)}\b(?!-)", shown), (path, old)


def test_a_flag_is_a_yes_no_flag_everywhere_or_nowhere():
    """One vocabulary: a flag name that is a switch in one command is a switch in all (``ask
    --goal`` was one while ``validate --goal`` takes a file)."""
    kinds: dict[str, set] = {}
    for path, parser, _ in ALL:
        for a in parser._actions:
            if a.option_strings and not isinstance(a, (DeprecatedAlias, argparse._HelpAction, argparse._VersionAction)):
                kinds.setdefault(a.option_strings[0], set()).add(a.nargs == 0)
    assert {flag for flag, k in kinds.items() if len(k) > 1} == set()


# -- each command's flags are read by its handler ------------------------------------------------
def _reads(func, param: str | None = None, seen: set | None = None) -> set[str]:
    """Attributes read from the handler's argument namespace: ``args.X`` and ``getattr(args, "X")``
    in its source (nested functions included) and in the module's functions it passes ``args`` to;
    a function that reads computed names declares them in its ``reads_args`` attribute."""
    seen = set() if seen is None else seen
    func = inspect.unwrap(func)
    if func in seen:
        return set()
    seen.add(func)
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    node = tree.body[0]
    params = [a.arg for a in node.args.args]
    name = param or params[0]
    reads: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name:
            reads.add(n.attr)
        elif isinstance(n, ast.Call):
            if (isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) >= 2
                    and isinstance(n.args[0], ast.Name) and n.args[0].id == name
                    and isinstance(n.args[1], ast.Constant)):
                reads.add(n.args[1].value)
            callee = func.__globals__.get(n.func.id) if isinstance(n.func, ast.Name) else None
            if not inspect.isfunction(callee):
                continue
            if any(isinstance(x, ast.Name) and x.id == name for x in [*n.args, *(k.value for k in n.keywords)]):
                reads |= set(getattr(callee, "reads_args", ()))  # what a helper reads by computed names
            declared = getattr(callee, "reads_args", None)  # a helper that reads flags it derives, by name
            if declared is not None and any(isinstance(a, ast.Name) and a.id == name for a in n.args):
                reads |= set(declared)
            callee_params = list(inspect.signature(inspect.unwrap(callee)).parameters)
            for i, arg in enumerate(n.args):
                if isinstance(arg, ast.Name) and arg.id == name and i < len(callee_params):
                    reads |= _reads(callee, callee_params[i], seen)
            for kw in n.keywords:
                if isinstance(kw.value, ast.Name) and kw.value.id == name and kw.arg:
                    reads |= _reads(callee, kw.arg, seen)
    return reads


def _unread_flags(parser: argparse.ArgumentParser, handler) -> set[str]:
    reads = _reads(handler)
    return {a.option_strings[0] if a.option_strings else a.dest for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._VersionAction))
            and a.dest != argparse.SUPPRESS and a.dest not in reads}


@pytest.mark.parametrize("path, parser, handler", LEAVES, ids=LEAF_IDS)
def test_every_flag_of_a_command_is_read_by_its_handler(path, parser, handler):
    assert _unread_flags(parser, handler) == set(), f"{' '.join(path)} offers flags its handler never reads"


def _helper(value, ns):
    return value, getattr(ns, "read_by_helper", None)


def _handler(args):
    return _helper(args.used, args)


def test_the_planner_flags_are_derived_from_the_config_and_all_read():
    """Every top-level planner key is a flag of run and eval, with the field's help, and the
    settings read every one of them."""
    from dataclasses import fields

    from lookplangraph.planners.config import SECTIONS, PlannerConfig

    keys = {f.name for f in fields(PlannerConfig)} - set(SECTIONS)
    assert set(cli_episodes._planner_overrides.reads_args) == keys
    for command in ("run", "eval"):
        sub = next(p for path, p, _ in ALL if list(path[-1:]) == [command])
        dests = {a.dest for a in sub._actions if a.option_strings and a.help != argparse.SUPPRESS}
        assert keys <= dests, (command, keys - dests)
    got = build_parser().parse_args(["run", "--demonstration-file", "d.jsonl.gz", "--reason-max-length", "0"])
    assert (got.demonstration_file, got.reason_max_length) == ("d.jsonl.gz", 0)  # typed as the field, not all int


def test_every_run_setting_is_a_flag_of_run_or_eval_or_config_only_with_a_reason():
    """A new field of RunSettings cannot be forgotten: it is in RUN_FLAGS (a flag of the commands
    it names, with the field's help, read into the overrides) or in CONFIG_ONLY with the reason."""
    from dataclasses import fields

    from lookplangraph.cli.tasks import SPLITS
    from lookplangraph.evaluation.settings import RunSettings

    keys = {f.name for f in fields(RunSettings)}
    flags, config_only = set(cli_episodes.RUN_FLAGS), set(cli_episodes.CONFIG_ONLY)
    assert not flags & config_only and flags | config_only == keys, (keys - flags - config_only, flags & config_only)
    assert all(reason.strip() for reason in cli_episodes.CONFIG_ONLY.values())
    assert set(cli_episodes._run_overrides.reads_args) == {cli_episodes._run_dest(k) for k in flags}
    helps = {f.name: f.metadata["help"] for f in fields(RunSettings)}
    for command in ("run", "eval"):
        sub = next(p for path, p, _ in ALL if list(path[-1:]) == [command])
        offered = {a.dest: a for a in sub._actions if a.option_strings and a.help != argparse.SUPPRESS}
        for key, spec in cli_episodes.RUN_FLAGS.items():
            a = offered.get(cli_episodes._run_dest(key))
            assert (a is not None) == (command in spec.commands), (command, key)
            if a is not None:
                assert a.option_strings == [spec.flag or "--" + key.replace("_", "-")] + (
                    ["--no-" + key.replace("_", "-")] if a.nargs == 0 else []), (command, key)
                assert a.help.startswith(helps[key]), (command, key)
    assert all(s in helps["split"] for s in SPLITS)  # the split flag's choices, said in the field's help


def test_the_run_flags_are_read_by_key():
    parser = build_parser()
    got = cli_episodes._run_overrides(parser.parse_args(["run", "--task", "t1", "--dynamic-seed", "3", "--no-dynamic"]))
    assert (got["tasks"], got["seed"], got["dynamic"], got["planner"]) == (["t1"], 3, False, None)
    got = cli_episodes._run_overrides(parser.parse_args(["eval", "--task", "a", "b", "--cache", "--failures", "0.1",
                                                         "--concurrency", "4"]))
    assert (got["tasks"], got["cache"], got["failures"], got["concurrency"]) == (["a", "b"], True, 0.1, 4)
    got = cli_episodes._run_overrides(parser.parse_args(["eval", "--cache", "C.jsonl", "--augmentation", "parser"]))
    assert (got["cache"], got["augmentation"], got["tasks"]) == ("C.jsonl", "parser", None)


def test_the_flag_check_finds_an_unread_flag():
    p = argparse.ArgumentParser()
    p.add_argument("--used")
    p.add_argument("--read-by-helper")
    p.add_argument("--ignored")
    assert _unread_flags(p, _handler) == {"--ignored"}


def test_inject_no_longer_offers_the_flags_it_ignored(capsys):
    assert main(["inject", "--lm", "openai:x"]) == 2
    assert main(["inject", "--planner", "react"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


# -- exit codes of errors ----------------------------------------------------------------------------
def test_bad_input_is_2_and_an_unavailable_lm_is_3(tmp_path, capsys):
    task = ROOT / "examples" / "gift_basket" / "task.json"
    assert main(["run", "--task-file", str(task), "--lm", "nokind", "--out", str(tmp_path / "a")]) == 2
    assert "--lm: backend spec 'nokind' has no kind" in capsys.readouterr().err
    assert main(["run", "--task-file", str(task), "--lm", "llamacpp:" + str(tmp_path / "missing.gguf"),
                 "--out", str(tmp_path / "b")]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert main(["validate", "--task-file", str(tmp_path / "none.json")]) == 2


# -- a closed stdout, Ctrl-C ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def office_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("grasif")
    assert main(["grasif", "build", "--out", str(out), "--split", "office"]) == 0
    return out


def test_a_closed_stdout_ends_quietly_with_141(office_data):
    r, w = os.pipe()
    os.close(r)  # nobody will read: the first write fails with EPIPE
    try:
        proc = subprocess.run([*EXE, "grasif", "list", "--data-dir", str(office_data)], stdout=w,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120)
    finally:
        os.close(w)
    assert proc.stderr == "" and proc.returncode == 141


def test_piped_into_head_there_is_no_traceback(office_data):
    proc = subprocess.run(f"{' '.join(EXE)} grasif list --data-dir {office_data} | head -1", shell=True,
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout == "office-01\n" and proc.stderr == ""


def _sigint_as_from_a_terminal() -> None:
    """Run in the child before it starts: SIGINT back to its default. A shell starts a background
    job (``pytest &``, ``nohup``) with SIGINT ignored, the child inherits that, and Python then
    installs no KeyboardInterrupt handler: the test's signal would never reach the command."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_eval_is_one_line_and_130_then_the_rerun_resumes(office_data, tmp_path):
    """A real ``eval`` against a SCRIPTED OpenAI-style server (ground-truth plans replayed, not a
    language model) that answers slowly; SIGINT once it has been asked, then the same command
    again with quick answers."""
    from grasif import office
    from lookplangraph.evaluation.scripted_server import ScriptedServer

    out = tmp_path / "eval"
    with ScriptedServer(office.build_tasks(), delay=0.5) as server:
        cmd = [*EXE, "eval", "--split", "office", "--data-dir", str(office_data), "--limit", "3", "--concurrency", "2",
               "--lm", f"openai:scripted@{server.url}", "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                preexec_fn=_sigint_as_from_a_terminal)
        deadline = time.monotonic() + 120
        while server.requests < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests >= 1 and proc.poll() is None
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        assert "Traceback" not in stderr and "Exception" not in stderr
        lines = [line for line in re.split(r"[\r\n]", stderr) if line.strip()]
        ours = [line for line in lines if line.startswith("lookplangraph:")]
        assert ours == [lines[-1]] and lines[-1].startswith("lookplangraph: interrupted; finished episodes are kept in")
        assert "rerun the same command to resume" in lines[-1]
        server.delay = 0
        again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 0, again.stderr
    rows = (out / "results.jsonl").read_text()
    assert rows.endswith("\n")
    ids = [line.split('"task_id": "')[1].split('"')[0] for line in rows.splitlines()]
    assert sorted(ids) == ["office-01", "office-02", "office-03"]
