"""A person as the environment: human-in-the-loop trials (paper section VII-E).

A human operator carries out every primitive step the planner sends and, for
``discover_objects(node)``, looks at the node and answers with a photo and/or a typed description.
The environment talks to the operator through :class:`Operator`: ``perform(request) -> Answer``
(:func:`done` or :func:`failed` with a reason) and ``observe(request) -> Answer`` (:func:`seen` with
a photo path and/or a description, or :func:`failed`). Implementations: :class:`TerminalOperator`
and :class:`Desk` (answered from another thread: the web console, :mod:`lookplangraph.apps.console`).

:class:`HumanEnvironment` implements the environment protocol (:mod:`sim_adapters.base`) over an
operator: a failed step is ``StepResult(ok=False)`` with the operator's reason (a reason starting
with ``grasp``, ``navigation`` or ``device`` is reported in the words of
:mod:`sim_adapters.failures`); ``discover_objects`` returns an observation with no objects and the
photo as its image, for the planner's graph augmentation to read (a typed description through
:meth:`HumanEnvironment.describe`, ``typed_descriptions = True``). There is no ground truth:
:meth:`HumanEnvironment.true_graph` is what the operator reported, the caller's :class:`Belief` of
the task's graph (a trial passes the planner's memory graph) with every confirmed step applied and
every augmentation merged (:meth:`HumanEnvironment.merge`). A trial's success comes from the
operator's checklist (:mod:`lookplangraph.apps.trial`). Concepts: ``docs/guides/trials.md``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from sgs.actions import Action
from sgs.graph import SceneGraph
from sgs.simulator import Infeasible
from sim_adapters.base import Observation, StepResult, check_options, graph_copy
from sim_adapters.failures import NO_EFFECT, failure_feedback


# -- the protocol ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """An operator's answer. ``ok`` false: the step could not be done and ``reason`` says why.
    For ``observe``: ``photo`` (a path) and/or ``description`` (typed text)."""

    ok: bool
    reason: str | None = None
    photo: str | None = None
    description: str | None = None


def done() -> Answer:
    return Answer(True)


def failed(reason: str) -> Answer:
    return Answer(False, reason=(reason or "").strip() or "no reason given")


def seen(photo: str | None = None, description: str | None = None) -> Answer:
    description = (description or "").strip() or None
    if photo is None and description is None:
        raise ValueError("an observation needs a photo or a typed description")
    return Answer(True, photo=str(photo) if photo is not None else None, description=description)


@dataclass
class Request:
    """One step for the operator. ``id`` counts the trial's requests from 1 (stable when a trial
    is replayed); ``kind`` is ``observe`` for ``discover_objects``, else ``perform``.
    ``action``/``reason`` are the LM's action this step belongs to and why it chose it;
    ``expansion`` the SGS's primitive steps of that action and ``index`` this step's place in
    them (-1 when unknown); ``holding`` what the operator holds before the step."""

    id: int
    kind: str
    step: Action
    action: str | None = None
    reason: str | None = None
    expansion: list[str] = field(default_factory=list)
    index: int = -1
    holding: str | None = None
    asked_at: float = field(default_factory=time.time)

    @property
    def text(self) -> str:
        return step_words(self.step, self.holding)


def step_words(step: Action, holding: str | None = None) -> str:
    """A primitive step as an instruction for a person."""
    fn, node, dest = step.function_name, step.node, step.destination
    held = holding or "what you hold"
    return {
        "go_to": f"Go to {node}",
        "pick_up": f"Pick up {node}",
        "put_on": f"Put {held} on top of {dest}",
        "put_inside": f"Put {held} inside {dest}",
        "open": f"Open {node}",
        "close": f"Close {node}",
        "turn_on": f"Switch on {node}",
        "turn_off": f"Switch off {node}",
        "discover_objects": f"Look at {node}: photograph (or describe) everything on and inside it",
        "done": "Nothing to do",
    }.get(fn, str(step))


@runtime_checkable
class Operator(Protocol):
    def perform(self, request: Request) -> Answer:
        """Carry out ``request.step``; :func:`done` or :func:`failed` (reason). May block."""

    def observe(self, request: Request) -> Answer:
        """Look at ``request.step.node``; :func:`seen` (photo path and/or description) or
        :func:`failed`. May block."""


@runtime_checkable
class Belief(Protocol):
    """What the environment believes the scene is, kept in step with the operator's reports."""

    graph: SceneGraph

    def apply(self, action: Action) -> None:
        """Mirror a step the operator confirmed (raises :class:`~sgs.simulator.Infeasible` when
        the belief cannot follow)."""

    def discover(self, observation: Observation) -> Any:
        """Merge what augmentation made of an observation."""


# -- the environment ---------------------------------------------------------------------------
class HumanEnvironment:
    """The environment protocol over an :class:`Operator` (module doc).

    ``belief(graph)`` makes a :class:`Belief` of ``graph`` for each episode (at every
    ``reset``): ``memory``. The environment keeps it in step with what the operator confirmed and
    what augmentation made of each observation (:meth:`merge`); ``true_graph()`` returns a copy of
    its graph. A trial passes the planner's memory graph with the planner's settings, so that
    ``memory`` equals the planner's memory at every decision. ``on_request(request)`` is called
    before each question (the console shows it). Nothing is random: ``reset``'s ``seed`` is
    ignored."""

    typed_descriptions = True  # an observation without a photo is described by the operator's text

    def __init__(self, graph: SceneGraph, operator: Operator, *, belief: Callable[[SceneGraph], Belief],
                 on_request: Callable[[Request], None] | None = None):
        self.graph, self.belief = graph, belief
        self.operator = operator
        self.on_request = on_request
        self.reset()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        check_options(options)
        self.memory = self.belief(self.graph)
        self.requests = 0
        self.typed: dict[str, str] = {}  # node -> the operator's description of its last observation
        self.answers: list[tuple[Request, Answer, float]] = []  # (request, answer, answered_at)
        self.current: tuple[str | None, str | None, list[str]] = (None, None, [])  # LM action, reason, expansion
        self._done_in_action = 0

    def set_action(self, action: str | None, reason: str | None, expansion: list[str]) -> None:
        """The LM action the next steps belong to and its SGS expansion (shown to the operator)."""
        self.current = (action, reason, list(expansion))
        self._done_in_action = 0

    def _request(self, step: Action) -> Request:
        self.requests += 1
        action, reason, expansion = self.current
        index = self._done_in_action if self._done_in_action < len(expansion) and expansion[self._done_in_action] == str(step) else -1
        if index < 0 and str(step) in expansion:
            index = expansion.index(str(step))
        kind = "observe" if step.function_name == "discover_objects" else "perform"
        return Request(self.requests, kind, step, action, reason, expansion, index, self.memory.graph.agent.holding)

    def _failed(self, action: Action, request: Request, reason: str) -> StepResult:
        """The refused step of an operator's ``failed(reason)``. A reason that starts with a
        low-level failure kind that changes nothing (``grasp``, ``navigation``, ``device``:
        :data:`sim_adapters.failures.NO_EFFECT`) is reported in the words of
        :mod:`sim_adapters.failures`, as the failure wrapper reports it, with ``info["failure"]``;
        any other reason is passed on as the operator wrote it."""
        kind, _, rest = (reason or "").strip().partition(" ")
        if kind.lower() in NO_EFFECT:
            text = failure_feedback(kind.lower(), action, here=self.memory.graph.agent.location or "")
            if rest.strip():
                text += f"; the operator adds: {rest.strip()}"
            return StepResult(False, text, info={"request": request.id, "failure": kind.lower()})
        return StepResult(False, f"{action} failed: the operator reports: {reason}", info={"request": request.id})

    def step(self, action: Action) -> StepResult:
        request = self._request(action)
        if self.on_request is not None:
            self.on_request(request)
        answer = (self.operator.observe if request.kind == "observe" else self.operator.perform)(request)
        if request.kind == "observe" and answer.ok and not (answer.photo or answer.description):
            answer = failed("the operator sent neither a photo nor a description")
        self.answers.append((request, answer, time.time()))
        self._done_in_action += 1
        if not answer.ok:
            return self._failed(action, request, answer.reason)
        try:
            self.memory.apply(action)
        except Infeasible:
            pass  # the planner's memory refuses it the same way and reports it
        if request.kind != "observe":
            return StepResult(True, info={"request": request.id})
        node = action.node
        if answer.description:
            self.typed[node] = answer.description
        else:
            self.typed.pop(node, None)
        # a typed description goes to the parser alone (lookplangraph.agent.perception): no image then
        image = None if answer.description else answer.photo
        return StepResult(True, observation=Observation(node, (), image=image),
                          info={"request": request.id, "photo": answer.photo})

    def describe(self, node: str) -> str:
        """The operator's typed description of ``node``'s last observation (``ValueError`` when
        the operator sent only a photo)."""
        text = self.typed.get(node)
        if text is None:
            raise ValueError(f"the operator typed no description of {node} (send a photo with a VLM, or type one)")
        return text

    def merge(self, observation: Observation) -> None:
        """What the graph augmentation made of an observation, as the planner's memory merges it."""
        self.memory.discover(observation)

    def note_seen(self, name: str, parent: str) -> None:
        """A person needs no name binding: names are the planner's own."""

    def true_graph(self) -> SceneGraph:
        """What the operator reported (module doc): not ground truth."""
        return graph_copy(self.memory.graph)


# -- operators ---------------------------------------------------------------------------------
class TrialPaused(Exception):
    """The operator stopped the trial (terminal ``q``, a closed console); its state is on disk."""


class TerminalOperator:
    """The operator protocol in a terminal: the step is printed; ``d`` (done), ``f REASON``
    (failed), ``q`` (stop: the trial is resumed later). For ``discover_objects``: a photo path,
    or a typed description, or both as ``PATH | DESCRIPTION``."""

    def __init__(self, read: Callable[[str], str] | None = None, write: Callable[[str], None] | None = None, *,
                 needs_description: bool = False, check_photo: Callable[[str], None] | None = None):
        self.read = read or (lambda prompt: input(prompt))
        self.write = write or (lambda text: print(text, file=sys.stdout, flush=True))
        self.needs_description = needs_description  # no VLM: a photo alone cannot be read
        self.check_photo = check_photo  # raises ValueError for a file that is no usable photo

    def _show(self, request: Request) -> None:
        self.write("")
        if request.action:
            where = f" (step {request.index + 1} of {len(request.expansion)})" if request.index >= 0 and len(request.expansion) > 1 else ""
            self.write(f"Action: {request.action}{where}" + (f" — {request.reason}" if request.reason else ""))
            if len(request.expansion) > 1:
                self.write("  steps: " + ", ".join(request.expansion))
        self.write(f"[{request.id}] {request.text}" + (f"  (holding {request.holding})" if request.holding else ""))

    def _ask(self, prompt: str) -> str:
        try:
            line = self.read(prompt)
        except EOFError:
            raise TrialPaused("input ended") from None
        line = line.strip()
        if line in ("q", "quit", "pause"):
            raise TrialPaused("the operator stopped the trial")
        return line

    def perform(self, request: Request) -> Answer:
        self._show(request)
        while True:
            line = self._ask("  d = done, f REASON = failed (f grasp / f navigation / f device: the robot's hands or "
                             "wheels failed, nothing changed), q = stop for now > ")
            if line in ("d", "done"):
                return done()
            if line[:1] == "f" and (line == "f" or line[1:2] == " " or line.startswith("failed")):
                reason = line.split(None, 1)[1] if " " in line else ""
                if reason:
                    return failed(reason)
                self.write("  say why it failed: f REASON")
                continue
            self.write("  answer d, f REASON or q")

    def observe(self, request: Request) -> Answer:
        self._show(request)
        while True:
            line = self._ask("  photo path and/or description (PATH | TEXT), f REASON = cannot look, q = stop > ")
            if line[:2] == "f ":
                return failed(line[2:])
            if not line:
                self.write("  give a photo path or type what you see")
                continue
            path, bar, text = line.partition("|")
            path, text = path.strip(), text.strip()
            if not bar and not _looks_like_path(path):
                return seen(description=line)
            if path and not Path(path).expanduser().is_file():
                self.write(f"  no such file: {path}")
                continue
            if path and self.check_photo is not None:
                try:
                    self.check_photo(str(Path(path).expanduser()))
                except ValueError as exc:
                    self.write(f"  {exc}")
                    continue
            if self.needs_description and not text:
                self.write("  this trial has no VLM: type what you see (PATH | TEXT keeps the photo too)")
                continue
            return seen(photo=str(Path(path).expanduser()) if path else None, description=text or None)


def _looks_like_path(text: str) -> bool:
    return "/" in text or text.lower().endswith((".png", ".jpg", ".jpeg", ".webp", ".gif"))


class Desk:
    """An operator answered from another thread (the web console): :meth:`perform` and
    :meth:`observe` post the request and block until :meth:`answer` is called with its id.
    ``pending`` is the request waiting now (None when the planner is thinking); answering a
    request that is not pending changes nothing (a double-submitted form).
    :meth:`close` makes the waiting call raise :class:`TrialPaused` (the server stops)."""

    def __init__(self):
        self._cond = threading.Condition()
        self.pending: Request | None = None
        self._answer: Answer | None = None
        self._closed = False
        self.answered: dict[int, Answer] = {}

    def _wait(self, request: Request) -> Answer:
        with self._cond:
            if self._closed:
                raise TrialPaused("the console was closed")
            self.pending, self._answer = request, None
            self._cond.notify_all()
            while self._answer is None and not self._closed:
                self._cond.wait()
            answer, self.pending, self._answer = self._answer, None, None
            if answer is None:
                raise TrialPaused("the console was closed")
            self._cond.notify_all()
            return answer

    perform = _wait
    observe = _wait

    def answer(self, request_id: int, answer: Answer) -> bool:
        """Answer the pending request ``request_id``; False (nothing happens) when it is not
        the pending one."""
        with self._cond:
            if self.pending is None or self.pending.id != request_id or self._answer is not None:
                return False
            self._answer = answer
            self.answered[request_id] = answer
            self._cond.notify_all()
            return True

    def wait_pending(self, timeout: float, after: int | None = None) -> Request | None:
        """Wait up to ``timeout`` s for a pending request (with an id above ``after``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                p = self.pending
                if p is not None and self._answer is None and (after is None or p.id > after):
                    return p
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                self._cond.wait(left)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
