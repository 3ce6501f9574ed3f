"""The ``lookplangraph`` command: one sub-command per job (``lookplangraph --help`` lists them;
each has ``--help`` with a description and examples). :func:`build_parser` gathers them from one
module per group of commands, each with ``add_parsers(sub)`` and its handlers:

* :mod:`~lookplangraph.cli.graphs`: ``validate``, ``show``, ``grasif``;
* :mod:`~lookplangraph.cli.episodes`: ``run``, ``eval``, ``report``, ``explain``, ``inject`` (and the run
  settings the first two read);
* :mod:`~lookplangraph.cli.trial`: ``trial``;
* :mod:`~lookplangraph.cli.onboard`: ``expert-proof``, ``distill``;
* :mod:`~lookplangraph.cli.augmentation`: ``gam-eval``;

with what they share in :mod:`~lookplangraph.cli.conventions` (exit codes :data:`EXIT_CODES`,
errors, flags, help format, :func:`run_main`) and :mod:`~lookplangraph.cli.tasks` (tasks, graphs
and goals as commands read them). The commands other modules define (``reproduce``, ``view``,
``sandbox``, ``ask``, ``cypher-eval``, ``cypher-build``, ``cypher-examples``; ``cypher-data`` and
``cypher-mistakes`` of :mod:`lookplangraph.distill.cypher.commands`) use only argparse (the layers below
import nothing from here); :func:`build_parser` brings them under the same help format and adds
their deprecated aliases. Every command follows one flag vocabulary, ``--NAME/--no-NAME``
yes/no flags, no abbreviations and the same exit codes (checked by
``tests/test_cli_conventions.py``): ``docs/reference/conventions.md``.
"""

from __future__ import annotations

import argparse

from lookplangraph.cli import augmentation, episodes, graphs, onboard, trial
from lookplangraph.cli.conventions import (EXIT_BROKEN_PIPE, EXIT_CODES, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK,
                                           EXIT_UNAVAILABLE, EXIT_USAGE, PROG, DeprecatedAlias, HelpFormatter,
                                           Interrupted, Unavailable, UsageError, YesNo, add_command, conform,
                                           deprecated, error_code, examples_text, exit_codes_text, required,
                                           run_main, version)

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_CODES", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_UNAVAILABLE",
           "EXIT_USAGE", "PROG", "DeprecatedAlias", "HelpFormatter", "Interrupted", "Unavailable", "UsageError",
           "YesNo", "add_command", "build_parser", "conform", "deprecated", "error_code", "examples_text",
           "exit_codes_text", "main", "required", "run_main", "version"]


def build_parser() -> argparse.ArgumentParser:
    """The ``lookplangraph`` parser: every command, each with its handler as ``func``."""
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
        "for one release, with a note on stderr (docs/reference/conventions.md).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for commands in (graphs, episodes, trial, onboard, augmentation):  # this package's commands
        commands.add_parsers(sub)
    # the commands that other modules define (module doc)
    from lookplangraph.apps.viewer import add_parser as add_view
    from lookplangraph.cypher import commands as cypher_commands
    from lookplangraph.distill.cypher import commands as cypher_data_commands
    from lookplangraph.evaluation.reproduce.command import add_parser as add_reproduce
    from lookplangraph.sandbox import cli as sandbox_cli

    for add in (add_reproduce, add_view, sandbox_cli.add_parser, cypher_commands.add_parser,
                cypher_data_commands.add_parser):
        add(sub)
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
