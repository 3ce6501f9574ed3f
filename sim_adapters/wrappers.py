"""Behaviour around any environment, as wrappers (Gymnasium's pattern): each wraps an
:class:`sim_adapters.base.Environment`, is one itself, and leaves every call it does not change to
the environment inside. The planner never asks what it talks to.

* :class:`DynamicPerturbation` — dynamic mode: at ``reset`` the task-relevant objects are moved
  (:func:`sim_adapters.dynamic.perturb`, in the paper's mode or ``anywhere``) and the environment
  starts from that graph (:meth:`~sim_adapters.base.EditableEnvironment.set_initial`); ``moves``
  lists them.
* :class:`StepRecorder` — every step's action and result appended to ``RUN/steps.jsonl``; an
  observation's image is copied to ``RUN/images/`` and the observation points at the copy.
* :class:`StepLimit` — the step that reaches ``max_steps`` is ``truncated``; every further step
  of the episode is refused, ``truncated`` too.

As in Gymnasium, a constructor only stores its arguments (and checks them); the work happens at
``reset``, which must come before the first ``step``. Attributes are not looked up on the
environment inside implicitly: a wrapper passes on exactly the protocol's optional members
(:data:`Wrapper.FORWARDED`: ``describe``, ``note_seen``, ``typed_descriptions``, ``set_initial``;
``close``) and ``moves`` (what episode results report), each only where the environment inside
has it. Anything else is reached with :meth:`Wrapper.get_wrapper_attr` (Gymnasium's name), or on
:attr:`Wrapper.unwrapped`.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from grasif.goals import GoalSpec
from sgs.actions import Action
from sgs.graph import SceneGraph
from sim_adapters.base import Environment, StepResult
from sim_adapters.dynamic import DEFAULT_MODE, DynamicMode, dynamic_mode, perturb


class _Forwarded:
    """A member read from the environment inside (``AttributeError`` where it has none, so that
    ``getattr(wrapper, name, default)`` answers as the environment would). An instance attribute
    of the same name on the wrapper takes precedence (``DynamicPerturbation.moves``)."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, wrapper, owner=None):
        if wrapper is None:
            return self
        return getattr(wrapper.env, self.name)


class Wrapper:
    """Passes ``reset``, ``step``, ``true_graph`` and ``close`` to ``env``, and the members of
    :data:`FORWARDED` (module doc); subclasses change what they add."""

    #: the members read from the environment inside; nothing else is
    FORWARDED = ("describe", "note_seen", "typed_descriptions", "set_initial", "moves")

    describe = _Forwarded()
    note_seen = _Forwarded()
    typed_descriptions = _Forwarded()
    set_initial = _Forwarded()
    moves = _Forwarded()

    def __init__(self, env: Environment):
        self.env = env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)

    def step(self, action: Action) -> StepResult:
        return self.env.step(action)

    def true_graph(self) -> SceneGraph:
        return self.env.true_graph()

    def close(self) -> None:
        """Close the environment inside, where it can be closed."""
        close = getattr(self.env, "close", None)
        if close is not None:
            close()

    @property
    def unwrapped(self) -> Environment:
        """The innermost environment."""
        env = self.env
        while isinstance(env, Wrapper):
            env = env.env
        return env

    def has_wrapper_attr(self, name: str) -> bool:
        """Whether :meth:`get_wrapper_attr` finds ``name``."""
        try:
            self.get_wrapper_attr(name)
        except AttributeError:
            return False
        return True

    def get_wrapper_attr(self, name: str) -> Any:
        """``name`` of this wrapper or, where it has none, of the first environment inside that
        has it (Gymnasium's ``get_wrapper_attr``): the explicit way to reach, say, the
        environment's ``binding`` or a recorder's ``records`` through other wrappers."""
        try:
            return getattr(self, name)
        except AttributeError:
            pass
        env = self.env
        if isinstance(env, Wrapper):
            return env.get_wrapper_attr(name)
        try:
            return getattr(env, name)
        except AttributeError:
            raise AttributeError(f"neither {type(self).__name__} nor the environments inside it "
                                 f"have an attribute {name!r}") from None

    def __repr__(self) -> str:
        return f"<{type(self).__name__}{self.env!r}>"


class DynamicPerturbation(Wrapper):
    """Dynamic mode (paper Table II): the environment's initial graph with task-relevant objects
    moved, drawn with ``seed`` in ``mode`` (:mod:`sim_adapters.dynamic`: ``paper`` perturbs a seeded
    half of the tasks, chosen by ``key``, the task's ``split/id``; ``anywhere`` every task). The
    same seed, mode and key give the same moves in every environment that starts from the same
    graph. ``moves`` has one note per move (``apple-1: ontop table-1 -> inside fridge-1``); it is
    empty until the first ``reset``, and stays empty for a task the mode leaves as it was.

    ``reset(seed=s)`` draws the moves with ``s`` (from the environment's own initial graph) and
    keeps ``s`` for later resets; ``reset()`` starts from the same moved graph again. ``ValueError``
    for an unknown mode, or for ``paper`` without a key."""

    def __init__(self, env: Environment, goal: GoalSpec, seed: int, mode: str | DynamicMode = DEFAULT_MODE,
                 key: str | None = None):
        super().__init__(env)
        if getattr(env, "set_initial", None) is None:
            raise TypeError(f"{type(env).__name__} cannot start from an edited graph (no set_initial); "
                            "dynamic mode needs it")
        self.mode = dynamic_mode(mode)
        if self.mode.fraction < 1.0 and key is None:
            raise ValueError(f"dynamic mode {self.mode.name!r} chooses the tasks it perturbs by their key: pass "
                             "key='split/id'")
        self.goal, self.seed, self.key = goal, seed, key
        self.moves: list[str] = []
        self._base: SceneGraph | None = None  # the environment's initial graph before any move
        self._drawn: int | None = None  # the seed of the moves the environment starts from

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self.seed = seed
        if self._base is None:
            self.env.reset(seed=seed, options=options)
            self._base = self.env.true_graph()
        if self._drawn != self.seed:
            perturbed, moves = perturb(self._base, self.goal, self.seed, self.mode, self.key)
            self.env.set_initial(perturbed)
            self.moves, self._drawn = moves, self.seed
        self.env.reset(seed=seed, options=options)


class StepRecorder(Wrapper):
    """Appends one JSON line per step to ``run_dir/steps.jsonl`` (``reset`` starts the file anew):
    ``step`` (1-based), ``action``, ``ok``, ``feedback``, ``observed`` (``name relation parent``),
    ``image`` (path of the copy under ``run_dir/images/``), ``info`` and ``truncated``.
    ``records`` holds the same dictionaries."""

    def __init__(self, env: Environment, run_dir: Path):
        super().__init__(env)
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "steps.jsonl"
        self.records: list[dict] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
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
                  "image": str(image) if image else None, "info": result.info, "truncated": result.truncated}
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
    """At most ``max_steps`` steps of an episode (counted from ``reset``) reach the environment.
    The step that reaches the limit runs and comes back ``truncated``; every later step is
    refused without calling the environment: ``ok`` false, feedback naming the limit,
    ``truncated`` (and, for older readers, ``info["truncated"]``)."""

    def __init__(self, env: Environment, max_steps: int):
        super().__init__(env)
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0, not {max_steps}")
        self.max_steps = max_steps
        self.steps = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self.env.reset(seed=seed, options=options)
        self.steps = 0

    def step(self, action: Action) -> StepResult:
        if self.steps >= self.max_steps:
            return StepResult(False, f"{action} was not executed: the step limit of {self.max_steps} "
                                     "environment steps is reached", info={"truncated": True}, truncated=True)
        self.steps += 1
        result = self.env.step(action)
        if self.steps >= self.max_steps and not result.truncated:
            result = replace(result, truncated=True)
        return result
