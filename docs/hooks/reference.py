"""MkDocs hook: the pages generated from the code.

* ``reference/cli.md``: every command and sub-command of ``lookplangraph.cli.build_parser()``
  (its one-line help, description, usage, every flag with its default and help, and examples);
* ``reference/config.md``: every config key of the run settings
  (``lookplangraph.evaluation.settings.RunSettings``) and of the planner's settings
  (``lookplangraph.planners.config.PlannerConfig`` and its sections), from the dataclass fields;
* ``<!-- paper-figures:tableN -->`` in any page: the paper's figures of that table, from
  ``lookplangraph.evaluation.reproduce.tables``;
* ``<!-- adapter-registry -->`` in any page (``models/index.md``): the table of every adapter of the
  registry ``lookplangraph/lm/adapters/registry.json`` (``lookplangraph.lm.embedded.REGISTRY_FILE``).

A page holds a marker (``<!-- cli-reference -->``, ``<!-- config-reference -->``) that is replaced
when the site is built, so the reference cannot drift from the code; ``tests/test_docs.py`` checks
that every command and key is in the built pages.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import MISSING, fields

CLI_MARKER = "<!-- cli-reference -->"
CONFIG_MARKER = "<!-- config-reference -->"
PAPER_MARKER = re.compile(r"<!-- paper-figures:(table\d) -->")
ADAPTER_MARKER = "<!-- adapter-registry -->"


def _escape(text: str) -> str:
    """Plain text for a Markdown paragraph or table cell."""
    for ch in "\\`*_[]<>|#":
        text = text.replace(ch, "\\" + ch)
    return " ".join(text.split())


def _code(text: str) -> str:
    """Inline code for a table cell (pipes escaped)."""
    return "`" + text.replace("|", "\\|") + "`"


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser, one-line help) of the top level and every command and sub-command, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, path + (name,))


def _subcommand_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                out[choice.dest] = choice.help or ""
    return out


def _text_block(text: str) -> list[str]:
    """A description or epilog: filled paragraphs as text, blocks (a first line ending with ``:``,
    or indented lines) as preformatted text, as ``HelpFormatter`` prints them."""
    import textwrap

    out: list[str] = []
    for para in textwrap.dedent(text).strip("\n").split("\n\n"):
        lines = para.splitlines()
        if not lines:
            continue
        if lines[0].rstrip().endswith(":") or any(line[:1].isspace() for line in lines):
            out += ["```text", *lines, "```", ""]
        else:
            out += [_escape(para), ""]
    return out


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
            continue
        if a.option_strings:
            names = ", ".join(a.option_strings)
            if a.nargs != 0 and not isinstance(a, argparse.BooleanOptionalAction):
                metavar = a.metavar or (("{" + ",".join(map(str, a.choices)) + "}") if a.choices else a.dest.upper())
                if isinstance(metavar, tuple):
                    metavar = " ".join(metavar)
                names += f" {metavar}"
        else:
            names = a.metavar or a.dest
            if a.nargs in ("*", "+"):
                names += " ..."
        default = a.default
        shown = "" if default in (None, argparse.SUPPRESS, False) or a.nargs == 0 and default is False else _code(repr(default) if not isinstance(default, str) else default)
        if isinstance(a, argparse._HelpAction):
            shown = ""
        choices = ", ".join(_code(str(c)) for c in a.choices) if a.choices and not isinstance(a, argparse._SubParsersAction) else ""
        help_text = (a.help or "").replace("%(default)s", str(default)).replace("%%", "%")
        rows.append(f"| {_code(names)} | {_escape(help_text)} | {choices} | {shown} |")
    return rows


def cli_reference() -> str:
    from lookplangraph.cli import build_parser

    parser = build_parser()
    helps: dict[tuple[str, ...], str] = {}
    out: list[str] = []
    for path, sub in commands(parser):
        for name, h in _subcommand_help(sub).items():
            helps[path + (name,)] = h
    for path, sub in commands(parser):
        title = " ".join(("lookplangraph",) + path)
        level = "#" * min(2 + max(len(path) - 1, 0), 4)
        anchor = "-".join(path) or "lookplangraph"
        out += [f"{level} `{title}` {{ #{anchor} }}", ""]
        if path in helps and helps[path]:
            out += [f"*{_escape(helps[path])}*", ""]
        if sub.description:
            out += _text_block(sub.description)
        usage = sub.format_usage().strip()
        out += ["```text", usage, "```", ""]
        subs = _subcommand_help(sub)
        if subs:
            out += ["| command | what it does |", "|---|---|"]
            out += [f"| [`{' '.join(path + (n,))}`](#{'-'.join(path + (n,))}) | {_escape(h)} |" for n, h in subs.items()]
            out.append("")
        rows = _flag_rows(sub)
        if rows:
            out += ["| argument | meaning | choices | default |", "|---|---|---|---|", *rows, ""]
        if sub.epilog:
            out += _text_block(sub.epilog)
    return "\n".join(out)


def _default(f):
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _key_rows(cls, prefix: str = "", skip=()) -> list[str]:
    rows = []
    for f in fields(cls):
        if f.name in skip:
            continue
        value = _default(f)
        shown = "(none)" if value is None else _code(repr(value) if not isinstance(value, str) else f'"{value}"')
        if isinstance(value, bool):
            shown = _code("true" if value else "false")
        choices = ", ".join(_code(str(c)) for c in (f.metadata.get("choices") or ()))
        rows.append(f"| {_code(prefix + f.name)} | {shown} | {choices} | {_escape(f.metadata.get('help', ''))} |")
    return rows


def config_reference() -> str:
    from lookplangraph.evaluation.settings import RunSettings
    from lookplangraph.planners.config import SECTIONS, PlannerConfig

    head = ["| key | default | choices | meaning |", "|---|---|---|---|"]
    out = ["## Run settings", "",
           "What to run (`lookplangraph.evaluation.settings.RunSettings`): top-level keys of a config file.", "",
           *head, *_key_rows(RunSettings, skip=("config",)), "",
           "## Planner settings", "",
           "LookPlanGraph's loop limits and ablation switches, shared by every planner's episode "
           "(`lookplangraph.planners.config.PlannerConfig`): top-level keys of a config file; `run` and `eval` "
           "have a flag for each (`max_actions` is `--max-actions`, a yes/no key `--NAME/--no-NAME`).", "",
           *head, *_key_rows(PlannerConfig, skip=tuple(SECTIONS)), ""]
    for name, cls in SECTIONS.items():
        doc = _escape((cls.__doc__ or "").strip().split("\n\n")[0])
        out += [f"## `[{name}]`", "", f"{doc} (`{cls.__module__}.{cls.__name__}`). In a config file, the table "
                f"`[{name}]`; written `{name}.KEY` in these pages.", "", *head, *_key_rows(cls, prefix=f"{name}."), ""]
    return "\n".join(out)


def paper_figures(name: str) -> str:
    from lookplangraph.evaluation.reproduce.tables import TABLES

    table = TABLES[name]
    cols = [(s, m) for s in table.splits for m in table.paper_models]
    head = "| row | " + " | ".join(f"{table.columns.get(s, s)}{' ' + m if m else ''}" for s, m in cols) + " |"
    lines = [f"*{_escape(table.title)}*, the paper's figures ({', '.join(table.metrics)}):", "", head,
             "|---|" + "---|" * len(cols)]
    for row in table.rows:
        cells = []
        for s, m in cols:
            fig = row.paper.get(f"{s}/{m}" if m else s) or row.paper.get(s) or {}
            cells.append(" / ".join(f"{fig[k]:g}" for k in table.metrics if k in fig) or "–")
        lines.append(f"| {_escape(row.label)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _registry() -> dict:
    import json

    from lookplangraph.lm.embedded import REGISTRY_FILE

    return json.loads(REGISTRY_FILE.read_text())


def adapter_table(page_dir: str = "models") -> str:
    """The registry's adapters, one row each in the registry's order: the name (a link to its model
    card, relative to ``page_dir`` of docs/), whether the package ships it and whether it is its
    model's default, what it was trained from, its data, its device and its SHA-256's first 12 digits.
    The name is written ``MODEL+NAME`` when the registry holds adapters of more than one model."""
    import posixpath

    doc = _registry()
    entries = doc["adapters"]
    several = len({e["model"] for e in entries}) > 1
    lines = ["| adapter | shipped | trained from | data | device | SHA-256 |", "|---|---|---|---|---|---|"]
    for e in entries:
        name = f"`{e['model']}+{e['name']}`" if several else f"`{e['name']}`"
        card = e.get("card")
        if card:
            target = posixpath.relpath(card.removeprefix("docs/"), page_dir or ".")
            name = f"[{name}]({target})"
        shipped = "**yes**" if e["shipped"] else "no: restored on demand"
        shipped += default_flag(e["model"], e["name"])
        source = f"`{e['trained_from']}`" if e.get("trained_from") else "the base"
        lines.append(f"| {name} | {shipped} | {source} | {_escape(e['data'])} | {_escape(e['device'])} | "
                     f"`{e['sha256'][:12]}…` |")
    return "\n".join(lines)


def default_flag(model: str, name: str) -> str:
    """What adapter ``name`` of ``model`` is the default of, as the adapter table says it: the
    planner's ("the default" when it serves the Cypher agent too) and the Cypher agent's
    (:func:`lookplangraph.lm.embedded.default_adapter` of each job)."""
    from lookplangraph.lm.embedded import default_adapter

    planner, cypher = default_adapter(model), default_adapter(model, "cypher")
    if name == planner:
        return " (the default)" if cypher == planner else " (the planner's default)"
    return " (the Cypher agent's default)" if name == cypher else ""


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs hook signature
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if CONFIG_MARKER in markdown:
        markdown = markdown.replace(CONFIG_MARKER, config_reference())
    if ADAPTER_MARKER in markdown:
        import posixpath

        markdown = markdown.replace(ADAPTER_MARKER, adapter_table(posixpath.dirname(page.file.src_uri)))
    return PAPER_MARKER.sub(lambda m: paper_figures(m.group(1)), markdown)
