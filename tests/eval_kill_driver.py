"""Driver of the kill-and-resume test (tests/test_eval_kill.py): ``python eval_kill_driver.py OUT
[PROCESSES]`` evaluates the office split into OUT with 4 workers (threads, or spread over
PROCESSES worker processes), resuming whatever OUT holds, and prints ``ready`` when the episodes
start (with worker processes: when the first episode of this run has ended).

The LM is SCRIPTED (not a language model): it replays each task's ground-truth plan
(lookplangraph.evaluation.scripted_server.PlanScripts) after a short sleep, and gives up with ``done()``
after two steps on every third task so that the verdicts are mixed. Its replies go through the
reply cache (OUT/lm_cache.jsonl), as ``eval --cache`` does.
"""

from __future__ import annotations

import json
import sys
import time
from functools import lru_cache
from pathlib import Path

from grasif import office
from lookplangraph.lm import Completion, Usage
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.evaluation.runner import evaluate
from lookplangraph.evaluation.scripted_server import DONE, PlanScripts, steps_taken

SLEEP_S = 0.05


class ScriptedPlanLM:
    """Scripted replies (module doc); ``name`` says so."""

    name = "scripted-plans"

    def __init__(self, plans: PlanScripts, short: set[str]):
        self.plans, self.short = plans, short

    constraints = frozenset()

    def complete(self, messages, **request):
        time.sleep(SLEEP_S)
        dynamic = messages[-1]["content"]
        reply = self.plans.reply(dynamic)
        if any(f"Instruction: {i}\n" in dynamic for i in self.short) and steps_taken(dynamic) >= 2:
            reply = DONE
        return Completion(text=json.dumps(reply), usage=Usage(100, 20, None), seconds=SLEEP_S)


class ScriptedPlanLMs:
    """One cached :class:`ScriptedPlanLM` per worker; picklable, so worker processes make theirs."""

    def __init__(self, out: Path):
        self.out = out

    def __call__(self):
        return CachedBackend(ScriptedPlanLM(*_scripts()), self.out / "lm_cache.jsonl")


@lru_cache(maxsize=1)
def _scripts() -> tuple[PlanScripts, set[str]]:
    """The plans and the short tasks, made once per process (the writer's, and each worker process's)."""
    tasks = office.build_tasks()
    return PlanScripts(tasks), {t.instruction for i, t in enumerate(tasks) if i % 3 == 0}


def _quiet(line: str) -> None:
    pass


def main() -> None:
    out = Path(sys.argv[1])
    processes = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    tasks = office.build_tasks()
    _scripts()
    told = []

    def progress(done, total, row) -> None:
        # threads start at once; worker processes take a while (imports), so with them "ready"
        # waits for the first row of this run: a kill then always falls among running episodes
        if not told and (processes == 1 or row is not None):
            told.append(True)
            print("ready", flush=True)

    evaluate(tasks, ScriptedPlanLMs(out), PlannerConfig(), out, concurrency=4, processes=processes, log=_quiet,
             progress=progress)
    if not told:  # nothing was left to run
        print("ready", flush=True)


if __name__ == "__main__":
    main()
