"""The documentation: the site builds with ``mkdocs build --strict`` (broken links and anchors are
errors), its generated references cover every command of ``lookplangraph.cli.build_parser()`` and
every config key of the run and planner settings, its adapter table is the adapter registry's, and
README stays a short page whose set-up commands are the ones CI runs. Nothing in README or docs/
points outside the repository or names tracker issues."""

from __future__ import annotations

import html
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()

MAIN_JOB = ("python3 -m venv .venv && .venv/bin/pip install -e '.[llm]' && .venv/bin/lookplangraph run "
            "--split office --task office-01 --max-actions 12")
TESTS = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pip install --no-deps "
         "virtualhome-eval==0.1.1 bddl==3.6.0 && .venv/bin/python -m pytest")


def _command_paths():
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from reference import commands
    finally:
        sys.path.pop(0)
    from lookplangraph.cli import build_parser

    return [" ".join(path) for path, _ in commands(build_parser()) if path]


def _config_keys():
    from lookplangraph.evaluation.settings import RunSettings
    from lookplangraph.planners.config import SECTIONS, PlannerConfig

    keys = [f.name for f in fields(RunSettings) if f.name != "config"]
    keys += [f.name for f in fields(PlannerConfig) if f.name not in SECTIONS]
    for name, cls in SECTIONS.items():
        keys += [f"{name}.{f.name}" for f in fields(cls)]
    return keys


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_site_builds_strict_and_the_cli_reference_has_every_command_and_flag(site):
    from lookplangraph.cli import build_parser
    import argparse

    text = _text(site / "reference" / "cli" / "index.html")
    paths = _command_paths()
    assert {"eval", "grasif build", "distill train", "cypher-eval"} <= set(paths)
    for path in paths:
        assert f"lookplangraph {path}" in text, f"command {path!r} is not in the CLI reference"
    # every flag of every command (the hidden deprecated spellings aside)
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        from reference import commands
    finally:
        sys.path.pop(0)
    for path, parser in commands(build_parser()):
        for a in parser._actions:
            if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction):
                for flag in a.option_strings:
                    assert flag in text, f"{' '.join(path)} {flag} is not in the CLI reference"


def test_the_config_reference_has_every_key(site):
    text = _text(site / "reference" / "config" / "index.html")
    for key in _config_keys():
        assert re.search(rf"(?<![\w.]){re.escape(key)}(?![\w])", text), f"config key {key!r} is not in the config reference"


def test_results_pages_and_the_pages_a_person_reads_first_are_built(site):
    for page in ("index.html", "results/log/index.html", "results/table4/index.html", "guides/evaluation/index.html",
                 "reference/api/index.html"):
        assert (site / page).exists(), page
    log = _text(site / "results" / "log" / "index.html")
    assert log.count("commit") >= 10 and "machine" in log and "command" in log


def test_readme_is_short_and_ci_walks_its_two_set_up_commands_in_order():
    lines = README.splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"
    first = "\n".join(lines[:60])
    assert MAIN_JOB in first and TESTS in first, "both set-up commands belong on README's first screen (60 lines)"
    section = README.split("## Set-up commands", 1)[1].split("\n## ", 1)[0]
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, re.S)]
    assert blocks[:2] == [MAIN_JOB, TESTS], "README's set-up section: the main job's block, then the tests'"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert MAIN_JOB in ci and TESTS in ci, ".ci/run runs README's two commands as README writes them"
    assert ci.index(MAIN_JOB) < ci.index(TESTS), ".ci/run runs the main job first, as README orders them"
    fresh = next(i for i, line in enumerate(ci) if line.startswith('export HOME="$FRESH/home" XDG_CACHE_HOME='))
    assert fresh < ci.index(MAIN_JOB), ".ci/run points home and caches at an empty directory before the main job"


def _doc_files():
    yield ROOT / "README.md"
    for p in sorted((ROOT / "docs").rglob("*")):
        if p.is_file() and p.suffix in {".md", ".py", ".svg", ".yml", ".html", ".txt"}:
            yield p


def test_nothing_points_outside_the_repository_or_names_tracker_issues():
    issue = re.compile(r"\bissues? #?\d+|\(#\d+\)|\bthe issue's\b", re.I)
    for p in _doc_files():
        text = p.read_text()
        rel = p.relative_to(ROOT)
        assert "../shared" not in text, f"{rel} points outside the repository"
        assert not issue.search(text), f"{rel}: {issue.search(text).group(0)!r}"


def test_the_generated_pages_name_no_tracker_issues_either(site):
    """The CLI and config references come from help texts in the code: those are checked too."""
    issue = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.I)
    for page in ("reference/cli/index.html", "reference/config/index.html"):
        found = issue.search(_text(site / page))
        assert not found, f"{page}: {found.group(0)!r}"


ADAPTER_PAGE = ROOT / "docs" / "models" / "index.md"


def _registry():
    import json

    from lookplangraph.lm.embedded import REGISTRY_FILE

    return json.loads(REGISTRY_FILE.read_text())


def test_the_adapter_table_is_not_written_by_hand():
    """docs/models/index.md holds the marker the docs hook replaces with the registry's table, and no
    copy of the registry's rows."""
    text = ADAPTER_PAGE.read_text()
    assert text.count("<!-- adapter-registry -->") == 1, "docs/models/index.md: the table's marker, once"
    for e in _registry()["adapters"]:
        assert e["sha256"][:12] not in text, f"docs/models/index.md copies {e['name']}'s row of the registry"
    assert not [line for line in text.splitlines() if line.lstrip().startswith("|")], \
        "docs/models/index.md has a hand-written table"


def test_the_built_adapter_table_is_the_registry(site):
    """One row per registry adapter, in its order, with its card, shipped and default flags, parent,
    data, device and SHA-256 prefix, as the registry says."""
    page = (site / "models" / "index.html").read_text()
    table = re.search(r"<table>.*?<th>adapter</th>.*?</table>", page, re.S)
    assert table, "models/index.html has no adapter table"
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S)[1:]
    cells = [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)]
             for r in rows]
    links = [re.search(r'href="([^"]*)"', r) for r in rows]
    doc = _registry()
    want = []
    for e in doc["adapters"]:
        shipped = "yes" if e["shipped"] else "no: restored on demand"
        cypher = doc.get("cypher_default", {}).get(e["model"])
        if doc["default"].get(e["model"]) == e["name"]:
            shipped += " (the planner's default)" if cypher and cypher != e["name"] else " (the default)"
        elif cypher == e["name"]:
            shipped += " (the Cypher agent's default)"
        want.append([e["name"], shipped, e["trained_from"] or "the base", e["data"], e["device"], e["sha256"][:12] + "…"])
    assert cells == want
    for e, link in zip(doc["adapters"], links):
        card = Path(e["card"]).relative_to("docs")
        assert link and link.group(1).rstrip("/") == card.stem, f"{e['name']}: its card {card} is not linked"
        assert (ROOT / e["card"]).is_file(), e["card"]
