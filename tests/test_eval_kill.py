"""Kill an evaluation with SIGKILL at random moments, resume it each time, and compare with an
uninterrupted run: the same task ids, none twice, none lost, no torn line, the same verdicts.

The evaluation is tests/eval_kill_driver.py: the office split, 4 workers, a SCRIPTED LM (the
ground-truth plans replayed; not a language model) through the reply cache."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DRIVER = Path(__file__).resolve().parent / "eval_kill_driver.py"
ROOT = DRIVER.parent.parent
VERDICT = ("task_id", "split", "success", "success_changed_only", "termination", "precision", "actions", "executed",
           "goal_not_met", "lm_calls")


def start(out: Path, processes: int = 1) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(out), str(processes)], stdout=subprocess.PIPE, env=env,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def children(pid: int) -> set[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def gone(pids: set[int], timeout: float = 10.0) -> bool:
    """Whether every process of ``pids`` has ended (zombies count as ended) within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.add(pid)
        if not alive:
            return True
        time.sleep(0.1)
    return False


def rows_of(out: Path) -> list[dict]:
    text = (out / "results.jsonl").read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]  # a torn line fails here


@pytest.mark.parametrize("processes", [1, 2], ids=["threads", "worker-processes"])
def test_sigkill_at_random_moments_then_resume_equals_an_uninterrupted_run(tmp_path, processes):
    """With worker processes the writer (the killed process) is the only one that appends rows;
    its workers must end with it, or they would go on writing traces into the resumed run."""
    reference = tmp_path / "reference"
    assert start(reference, processes).wait(timeout=90) == 0
    expected = {r["task_id"]: {k: r[k] for k in VERDICT} for r in rows_of(reference)}
    assert len(expected) == 29 and 0 < sum(v["success"] for v in expected.values()) < 29  # verdicts are mixed

    out = tmp_path / "killed"
    rng = random.Random(20261123)
    kills = partial_seen = 0
    for _ in range(12):
        proc = start(out, processes)
        time.sleep(rng.uniform(0.05, 0.6))
        if proc.poll() is not None:  # it finished first; the next run would have nothing left to do
            break
        workers = children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert gone(workers), "a worker process outlived the killed evaluation"
        kills += 1
        partial_seen += any((out / "traces").glob("*.partial")) if (out / "traces").exists() else 0
        if kills >= 6:
            break
    assert kills >= 5
    assert partial_seen >= 1  # at least one kill cut episodes short
    assert start(out, processes).wait(timeout=90) == 0

    rows = rows_of(out)
    ids = [r["task_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 29
    assert {r["task_id"]: {k: r[k] for k in VERDICT} for r in rows} == expected
    assert sorted(p.name for p in (out / "traces").iterdir()) == sorted(p.name for p in (reference / "traces").iterdir())
