"""Real run directories for the viewer's tests, made by the project's own runner with SCRIPTED
policies (no language model): the graph environment's error-injection policy
(:class:`lookplangraph.evaluation.injection.ErrorInjectionPolicy`, the ground-truth plan with injected
mistakes) and :class:`lookplangraph.lm.ScriptedBackend` replies."""

from __future__ import annotations

import json
from pathlib import Path

from grasif import dataset
from lookplangraph.lm import ScriptedBackend
from lookplangraph.evaluation.injection import ErrorInjectionPolicy
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.evaluation.runner import evaluate


def J(fn, node=None, relation=None, destination=None, reason="scripted"):
    """One SCRIPTED planner reply."""
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": reason})


#: SCRIPTED replies of an episode that gives up early: a step, a refused name, done
GIVE_UP = [J("go_to", "kitchen-1", reason="scripted: look in the kitchen"), J("pick_up", "unicorn-1"), J("done")]


class ScriptedPerTask:
    """SCRIPTED stand-in for an LM over several tasks (not a language model): the episode whose
    instruction is in the prompt is answered by that task's error-injection policy, or, for the
    tasks in ``give_up``, by :data:`GIVE_UP` replies."""

    name = "scripted"

    def __init__(self, tasks, rate: float = 0.4, give_up: set[str] = frozenset(), seed: int = 1):
        self.tasks, self.rate, self.give_up, self.seed = tasks, rate, set(give_up), seed
        self.current, self.policy = None, None

    constraints = frozenset()

    def complete(self, messages, **request):
        dynamic = messages[-1]["content"]
        task = next(t for t in self.tasks if t.instruction in dynamic)
        if task is not self.current:
            self.current = task
            self.policy = (ScriptedBackend(list(GIVE_UP)) if task.id in self.give_up
                           else ErrorInjectionPolicy(task, self.rate, seed=self.seed))
        return self.policy.complete(messages, **request)


def office_data(root: Path) -> Path:
    """The office split built into ``root`` (once)."""
    if not (root / "index.json").exists():
        dataset.build(root, splits=["office"], progress=lambda _: None)
    return root


def scripted_eval(out: Path, data: Path, n: int = 6, give_up: set[str] = frozenset(), *, dynamic_seed=None,
                  config: PlannerConfig | None = None) -> list[dict]:
    """An evaluation directory of the first ``n`` office tasks (``lookplangraph eval`` layout)."""
    tasks = dataset.load_split(data, "office")[:n]
    meta = {"planner": "lookplangraph", "lm": "scripted (error injection)", "split": "office",
            "dynamic": dynamic_seed is not None}
    return evaluate(tasks, lambda: ScriptedPerTask(tasks, give_up=give_up), config or PlannerConfig(), out,
                    meta=meta, dynamic_seed=dynamic_seed)
