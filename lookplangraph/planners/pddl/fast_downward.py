"""Fast Downward as a separate program (it is GPL: called, never vendored or imported).

The planner comes from PyPI: ``up-fast-downward`` ships the compiled search binary and the
driver script, ``fast-downward.translate`` the translator (``pip install -e '.[pddl]'``).
:func:`solve` runs ``fast-downward.py --alias lama-first`` on a domain and a problem in a
temporary directory, under an overall time and memory limit, and classifies the outcome by the
driver's exit code (:data:`KINDS`): a plan, a problem that does not parse or names an undefined
predicate/object/type, an unsolvable problem, a timeout, out of memory, or a planner failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

#: outcome kinds (:attr:`Solution.kind`)
KINDS = ("solved", "parse_error", "undefined", "unsolvable", "timeout", "out_of_memory", "planner_error")


class PlannerMissing(RuntimeError):
    """Fast Downward is not installed; the message says how to install it."""


@dataclass
class Solution:
    """What Fast Downward made of one problem. ``plan``: the plan's lines without parentheses,
    lower case as Fast Downward writes them (``pick_up apple-1 table-1 kitchen-1``); ``message``:
    the reason when there is no plan (the translator's error line, or the exit code's meaning)."""

    kind: str
    plan: list[str] = field(default_factory=list)
    exit_code: int | None = None
    seconds: float = 0.0
    message: str = ""
    log: str = ""

    @property
    def solved(self) -> bool:
        return self.kind == "solved"


def driver() -> Path:
    """The path of ``fast-downward.py`` in the installed ``up-fast-downward``."""
    spec = importlib.util.find_spec("up_fast_downward")
    if spec is None or not spec.submodule_search_locations:
        raise PlannerMissing("Fast Downward is not installed: pip install -e '.[pddl]' "
                             "(up-fast-downward and fast-downward.translate from PyPI)")
    path = Path(list(spec.submodule_search_locations)[0]) / "downward" / "fast-downward.py"
    if not path.exists():
        raise PlannerMissing(f"up-fast-downward has no driver at {path}; reinstall it")
    return path


_EXIT_KINDS = {0: "solved", 1: "solved", 2: "solved", 3: "solved",
               10: "unsolvable", 11: "unsolvable", 12: "unsolvable", 13: "unsolvable",
               20: "out_of_memory", 22: "out_of_memory", 24: "out_of_memory",
               21: "timeout", 23: "timeout",
               30: "parse_error", 31: "parse_error", 33: "parse_error"}
#: the translator's words for a name the domain or problem does not declare
_UNDEFINED = re.compile(r"Undefined (?:object|type|constant|predicate)|Expected logical operator or predicate name"
                        r"|unknown (?:predicate|object|type)", re.I)
_NOISE = ("INFO", "translate exit code", "search exit code", "Driver aborting", "Parsing", "->", "Traceback", "File ")


def _reason(log: str, code: int) -> str:
    """The translator's complaint (``Undefined object Got: pear-1``), else the exit code."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.strip().startswith(_NOISE)]
    for i, ln in enumerate(lines):
        if re.search(r"error|undefined|expected|does not match|unsolvable|could not|mismatch", ln, re.I):
            got = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("Got:") else ""
            return f"{ln} {got}".strip()[:300]
    return f"Fast Downward exit code {code}"


def solve(domain: str, problem: str, *, time_limit_s: int = 60, memory_limit_mb: int = 4096,
          alias: str = "lama-first") -> Solution:
    """Run Fast Downward on ``domain`` and ``problem`` (PDDL text) and classify the outcome (module doc)."""
    fd = driver()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lookplangraph_fd_") as tmp:
        d, p, plan = Path(tmp, "domain.pddl"), Path(tmp, "problem.pddl"), Path(tmp, "plan.txt")
        d.write_text(domain)
        p.write_text(problem)
        cmd = [sys.executable, str(fd), "--alias", alias, "--overall-time-limit", f"{int(time_limit_s)}s",
               "--overall-memory-limit", f"{int(memory_limit_mb)}M", "--plan-file", str(plan), str(d), str(p)]
        try:
            run = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=time_limit_s + 30,
                                 env={**os.environ, "PYTHONHASHSEED": "0"})
        except subprocess.TimeoutExpired:
            return Solution("timeout", seconds=time.perf_counter() - t0,
                            message=f"no answer within {time_limit_s + 30} s")
        log = run.stdout + run.stderr
        kind = _EXIT_KINDS.get(run.returncode, "planner_error")
        if kind == "planner_error" and re.search(r"exit code: -24\b", log):  # SIGXCPU: the time limit
            kind = "timeout"
        if kind == "parse_error" and _UNDEFINED.search(log):
            kind = "undefined"
        steps: list[str] = []
        if kind == "solved":
            text = plan.read_text() if plan.exists() else ""
            steps = [ln.strip()[1:-1].strip() for ln in text.splitlines() if ln.strip().startswith("(")]
            if not plan.exists():
                kind = "planner_error"
    return Solution(kind, steps, run.returncode, time.perf_counter() - t0,
                    "" if kind == "solved" else _reason(log, run.returncode), log[-4000:])
