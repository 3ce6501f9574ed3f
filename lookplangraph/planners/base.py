"""One protocol for every planner, and the registry of ``--planner`` names.

A planner runs one task in one environment with one LM and returns the same
:class:`~lookplangraph.planners.episode.EpisodeResult` LookPlanGraph does, judged on the environment's
final graph by the same goal evaluation, so one results file, summary and report covers them all.
Every LM call is a :class:`~lookplangraph.planners.episode.StepRecord` (or a planner's own subclass
of it) emitted through an :class:`~lookplangraph.planners.episode.EpisodeLog` to the ``on_step``
callbacks, registered once per episode (the runner writes the trace with one).

Names: ``lookplangraph`` (:mod:`lookplangraph.planners.lookplangraph`), ``llm-as-p`` (:mod:`.llm_as_p`),
``llm+p`` (:mod:`.llm_plus_p`), ``sayplan`` and ``sayplan-lite`` (:mod:`.sayplan`), ``react``
(:mod:`.react`), ``sg-rwr`` (:mod:`.sgrwr`). A name mapped to None would be listed but not built (:func:`get_planner` says so).
"""

from __future__ import annotations

from importlib import import_module
from typing import Protocol, runtime_checkable

from grasif.task import Task

from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeResult, StepCallback

#: ``--planner`` names → module and class; None: named by the paper, not built yet
_REGISTRY: dict[str, tuple[str, str] | None] = {
    "lookplangraph": ("lookplangraph.planners.lookplangraph", "LookPlanGraph"),
    "llm-as-p": ("lookplangraph.planners.llm_as_p", "LLMAsPlanner"),
    "llm+p": ("lookplangraph.planners.llm_plus_p", "LLMPlusP"),
    "sayplan": ("lookplangraph.planners.sayplan", "SayPlan"),
    "sayplan-lite": ("lookplangraph.planners.sayplan", "SayPlanLite"),
    "react": ("lookplangraph.planners.react", "ReAct"),
    "sg-rwr": ("lookplangraph.planners.sgrwr", "SGRwR"),
}
PLANNER_NAMES = tuple(_REGISTRY)


@runtime_checkable
class Planner(Protocol):
    name: str

    def run(self, task: Task, env, lm, config: PlannerConfig, *,
            on_step: StepCallback | list[StepCallback] | None = None, augmentation=None) -> EpisodeResult:
        """Plan and act on ``task`` in ``env`` (a :class:`sim_adapters.base.Environment`) with
        ``lm`` (a :class:`~lookplangraph.lm.LMBackend`); ``on_step`` (one callback or several) sees
        every completed record once; ``augmentation`` is for planners that call ``discover_objects``."""


def get_planner(name: str) -> Planner:
    """The planner called ``name``; ``ValueError`` for an unknown or not yet built one."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown planner {name!r}; one of {', '.join(PLANNER_NAMES)}")
    where = _REGISTRY[name]
    if where is None:
        built = ", ".join(n for n, w in _REGISTRY.items() if w is not None)
        raise ValueError(f"planner {name} is not built yet; built: {built}")
    module, cls = where
    return getattr(import_module(module), cls)()
