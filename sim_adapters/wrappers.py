"""Behaviour around any environment, as wrappers (Gymnasium's pattern): each wraps an
:class:`sim_adapters.base.Environment`, is one itself, and leaves every call it does not change to
the environment inside. The planner never asks what it talks to.

* :class:`DynamicPerturbation` — dynamic mode: before the episode the task-relevant objects are
  moved (:func:`sim_adapters.graph_env.perturb`) and the environment starts from that graph
  (:meth:`~sim_adapters.base.EditableEnvironment.set_initial`); ``moves`` lists them.
* :class:`StepRecorder` — every step's action and result appended to ``RUN/steps.jsonl``; an
  observation's image is copied to ``RUN/images/`` and the observation points at the copy.
* :class:`StepLimit` — after ``max_steps`` steps in an episode every further step is refused.

Attributes a wrapper does not have are looked up on the environment inside, so
``DynamicPerturbation(env, ...).moves`` is seen through any wrappers put around it.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

from grasif.goals import GoalSpec
from sgs.actions import Action
from sgs.graph import SceneGraph
from sim_adapters.base import Environment, StepResult
from sim_adapters.graph_env import perturb


class Wrapper:
    """Passes ``reset``, ``step`` and ``true_graph`` to ``env``; subclasses change what they add."""

    def __init__(self, env: Environment):
        self.env = env

    def reset(self) -> None:
        self.env.reset()

    def step(self, action: Action) -> StepResult:
        return self.env.step(action)

    def true_graph(self) -> SceneGraph:
        return self.env.true_graph()

    @property
    def unwrapped(self) -> Environment:
        """The innermost environment."""
        env = self.env
        while isinstance(env, Wrapper):
            env = env.env
        return env

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "env":  # never recurse on a half-built wrapper
            raise AttributeError(name)
        return getattr(self.env, name)


class DynamicPerturbation(Wrapper):
    """Dynamic mode (paper Table II): the environment's initial graph with each task-relevant
    object moved to another plausible holder, drawn with ``seed`` (see
    :func:`sim_adapters.graph_env.perturb`). The same seed gives the same moves in every
    environment that starts from the same graph. ``moves`` has one note per move
    (``apple-1: ontop table-1 -> inside fridge-1``)."""

    def __init__(self, env: Environment, goal: GoalSpec, seed: int):
        super().__init__(env)
        set_initial = getattr(env, "set_initial", None)
        if set_initial is None:
            raise TypeError(f"{type(env).__name__} cannot start from an edited graph (no set_initial); "
                            "dynamic mode needs it")
        env.reset()
        perturbed, self.moves = perturb(env.true_graph(), goal, seed)
        set_initial(perturbed)
        env.reset()


class StepRecorder(Wrapper):
    """Appends one JSON line per step to ``run_dir/steps.jsonl`` (``reset`` starts the file anew):
    ``step`` (1-based), ``action``, ``ok``, ``feedback``, ``observed`` (``name relation parent``),
    ``image`` (path of the copy under ``run_dir/images/``) and ``info``. ``records`` holds the
    same dictionaries."""

    def __init__(self, env: Environment, run_dir: Path):
        super().__init__(env)
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "steps.jsonl"
        self.records: list[dict] = []

    def reset(self) -> None:
        self.env.reset()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self.records = []

    def step(self, action: Action) -> StepResult:
        result = self.env.step(action)
        n = len(self.records) + 1
        obs = result.observation
        image = None
        if obs is not None and obs.image:
            image = self._copy_image(Path(obs.image), n, obs.node)
            result = replace(result, observation=replace(obs, image=str(image)))
        record = {"step": n, "action": str(action), "ok": result.ok, "feedback": result.feedback,
                  "observed": [f"{o.name} {o.relation} {o.parent}" for o in obs.objects] if obs else None,
                  "image": str(image) if image else None, "info": result.info}
        self.records.append(record)
        with open(self.path, "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        return result

    def _copy_image(self, source: Path, n: int, node: str) -> Path:
        folder = self.run_dir / "images"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{n:03d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', node)}{source.suffix or '.png'}"
        shutil.copyfile(source, target)
        return target


class StepLimit(Wrapper):
    """Refuses every step after ``max_steps`` steps of an episode (counted from ``reset``), with
    feedback saying so and ``info["truncated"]``; the environment is not called then."""

    def __init__(self, env: Environment, max_steps: int):
        super().__init__(env)
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, not {max_steps}")
        self.max_steps = max_steps
        self.steps = 0

    def reset(self) -> None:
        self.env.reset()
        self.steps = 0

    def step(self, action: Action) -> StepResult:
        if self.steps >= self.max_steps:
            return StepResult(False, f"{action} was not executed: the step limit of {self.max_steps} "
                                     "environment steps is reached", info={"truncated": True})
        self.steps += 1
        return self.env.step(action)
