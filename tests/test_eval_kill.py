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

DRIVER = Path(__file__).resolve().parent / "eval_kill_driver.py"
ROOT = DRIVER.parent.parent
VERDICT = ("task_id", "split", "success", "success_changed_only", "termination", "precision", "actions", "executed",
           "goal_not_met", "lm_calls")


def start(out: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(out)], stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def rows_of(out: Path) -> list[dict]:
    text = (out / "results.jsonl").read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]  # a torn line fails here


def test_sigkill_at_random_moments_then_resume_equals_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "reference"
    assert start(reference).wait(timeout=60) == 0
    expected = {r["task_id"]: {k: r[k] for k in VERDICT} for r in rows_of(reference)}
    assert len(expected) == 29 and 0 < sum(v["success"] for v in expected.values()) < 29  # verdicts are mixed

    out = tmp_path / "killed"
    rng = random.Random(20261123)
    kills = partial_seen = 0
    for _ in range(12):
        proc = start(out)
        time.sleep(rng.uniform(0.05, 0.6))
        if proc.poll() is not None:  # it finished first; the next run would have nothing left to do
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        kills += 1
        partial_seen += any((out / "traces").glob("*.partial")) if (out / "traces").exists() else 0
        if kills >= 6:
            break
    assert kills >= 5
    assert partial_seen >= 1  # at least one kill cut episodes short
    assert start(out).wait(timeout=60) == 0

    rows = rows_of(out)
    ids = [r["task_id"] for r in rows]
    assert len(ids) == len(set(ids)) == 29
    assert {r["task_id"]: {k: r[k] for k in VERDICT} for r in rows} == expected
    assert sorted(p.name for p in (out / "traces").iterdir()) == sorted(p.name for p in (reference / "traces").iterdir())
