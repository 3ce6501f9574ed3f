"""Driver of the kill-and-resume test (tests/test_eval_kill.py): ``python eval_kill_driver.py OUT``
evaluates the office split into OUT with 4 workers, resuming whatever OUT holds, and prints
``ready`` when the episodes start.

The LM is SCRIPTED (not a language model): it replays each task's ground-truth plan
(lookplangraph.evaluation.scripted_server.PlanScripts) after a short sleep, and gives up with ``done()``
after two steps on every third task so that the verdicts are mixed. Its replies go through the
reply cache (OUT/lm_cache.jsonl), as ``eval --cache`` does.
"""

from __future__ import annotations

import json
import sys
import time
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


def main() -> None:
    out = Path(sys.argv[1])
    tasks = office.build_tasks()
    plans = PlanScripts(tasks)
    short = {t.instruction for i, t in enumerate(tasks) if i % 3 == 0}
    print("ready", flush=True)
    evaluate(tasks, lambda: CachedBackend(ScriptedPlanLM(plans, short), out / "lm_cache.jsonl"), PlannerConfig(), out,
             concurrency=4, log=lambda line: None)


if __name__ == "__main__":
    main()
