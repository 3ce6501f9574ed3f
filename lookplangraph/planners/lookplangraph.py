"""LookPlanGraph under the planner protocol: the loop of :mod:`lookplangraph.agent.loop`."""

from __future__ import annotations

from lookplangraph.agent.loop import run_episode


class LookPlanGraph:
    """One LM call per action over the memory graph, checked and corrected by the SGS."""

    name = "lookplangraph"

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        return run_episode(task, env, lm, config, on_step=on_step, augmentation=augmentation)
