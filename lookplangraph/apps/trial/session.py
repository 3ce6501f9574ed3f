"""A session of a trial: :class:`TrialSession` runs the planner over an operator, first replaying
what the trial directory records, then asking live and recording each answer, so that a trial
resumes exactly where it was (:mod:`lookplangraph.apps.trial`); :func:`backends_for` builds its
LMs behind the trial's reply caches."""

from __future__ import annotations

import json
import threading
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Callable

from sim_adapters.base import Observation
from sim_adapters.human import Answer, HumanEnvironment, Operator, Request, TrialPaused
from vlm.gam import GraphAugmentation

from lookplangraph.planners.episode import EpisodeResult, StepRecord
from lookplangraph.planners.lookplangraph import checked, run_episode
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.apps.trial.scoring import ChecklistItem, checklist, score
from lookplangraph.evaluation.runner import format_step
import lookplangraph.lm
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.lm.specs import with_native_log
from lookplangraph.apps.trial.photos import DEFAULT_MAX_PHOTO_BYTES
from lookplangraph.apps.trial.record import Trial, TrialError


# -- a session: the planner running over an operator -------------------------------------------
class TrialSession:
    """One run of a trial's planner (a session of the trial): replays what is recorded, then
    asks ``operator`` live (module doc). :meth:`run` blocks (terminal); :meth:`start` runs it in
    a thread (web console). ``lm`` is the planner's backend, ``augmentation`` a
    :class:`vlm.gam.GraphAugmentation` in ``vlm`` or ``parser`` mode; both should replay from the
    trial's caches (:func:`backends_for`).

    ``state``: ``starting``, ``thinking`` (an LM is working or recorded steps are replayed),
    ``waiting`` (a request is pending), ``paused`` (the operator paused), ``checklist`` (planning
    ended, the goal checklist waits), ``finished``, ``stopped`` (the operator stopped the session;
    resume later) or ``error`` (``error`` says what)."""

    def __init__(self, trial: Trial, operator: Operator, *, lm, augmentation,
                 max_photo_bytes: int = DEFAULT_MAX_PHOTO_BYTES, echo: Callable[[str], None] | None = None):
        self.trial, self.operator, self.augmentation = trial, operator, augmentation
        self.cfg = trial.planner_config()
        if (self.cfg.actions_per_answer or 1) > 1:
            raise ValueError(f"a trial shows the operator each action before its steps run: actions_per_answer 1, "
                             f"not {self.cfg.actions_per_answer}")
        # one action an answer, whatever the adapter was trained with (the console shows one at a time)
        self.cfg = replace(self.cfg, actions_per_answer=1)
        self.max_photo_bytes = max_photo_bytes
        self.echo = echo
        self.lm = _Watched(lm, self)
        priors = self.cfg.priors  # the environment's belief is built as the planner builds its memory
        self.env = HumanEnvironment(trial.task.graph, _Recorder(operator, self),
                                    belief=lambda graph: MemoryGraph(graph, priors=priors), on_request=self._asked)
        self.state = "starting"
        self.error: str | None = None
        self.records: list[StepRecord] = []
        self.perceived: list[dict] = []  # augmentations of this session, in order
        self.episode: EpisodeResult | None = None
        self.pending: Request | None = None
        self.replaying = True
        self.paused_since: float | None = None
        self.pauses: list[tuple[float, float]] = []
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # the planner's side
    def _decided(self, reply, memory) -> None:
        """Tell the environment which action the next steps belong to and its SGS expansion on
        the planner's memory (what the console shows)."""
        action, expansion = reply.action, []
        if action is not None and action.function_name != "done":
            outcome = checked(action, memory, self.cfg)
            if outcome.ok:
                expansion = [str(a) for a in outcome.actions]
            elif self.cfg.correction == "none" and memory.hallucination(action) is None:
                expansion = [str(a) for a in memory.expand_unchecked(action)]
        self.env.set_action(str(action) if action is not None else None, reply.reason, expansion)

    def run(self) -> EpisodeResult | None:
        """Run (replay, then live) until the planner stops; then the state is ``checklist`` (or
        ``finished`` when the checklist was filled in before). None when stopped or failed."""
        trial = self.trial
        if trial.result() is not None:
            self.state = "finished"
            return None
        trial.event("session", replay=len(trial.answers()))
        self.state = "thinking"
        aug = _WatchedAugmentation(self.augmentation, self)
        try:
            with open(trial.path("trace.jsonl"), "w") as trace, open(trial.path("augmentations.jsonl"), "w") as augs:
                self._augs = augs

                def on_step(rec: StepRecord) -> None:
                    self.records.append(rec)
                    trace.write(json.dumps(asdict(rec)) + "\n")
                    trace.flush()
                    if self.echo and not self.replaying:
                        self.echo(format_step(rec))

                self.episode = run_episode(trial.task, self.env, self.lm, self.cfg, on_step=on_step, augmentation=aug,
                                           on_reply=self._decided)
        except TrialPaused as exc:
            self.state = "stopped"
            trial.event("stopped", why=str(exc))
            return None
        except Exception as exc:  # an unusable LM, a broken server: shown in the console, resumable
            self.state, self.error = "error", f"{type(exc).__name__}: {exc}"
            trial.event("error", error=self.error, trace=traceback.format_exc(limit=5))
            return None
        self.replaying = False
        trial.path("episode.json").write_text(json.dumps(asdict(self.episode), indent=1) + "\n")
        trial.event("planner_stopped", termination=self.episode.termination)
        self.state = "checklist"
        return self.episode

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, name=f"trial-{self.trial.name}", daemon=True)
        self._thread.start()
        return self._thread

    def join(self, timeout: float | None = None) -> None:
        """Wait for :meth:`start`'s thread (after the desk was closed, it stops at once)."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _asked(self, request: Request) -> None:
        self.pending = request

    # what the console shows
    @property
    def memory(self):
        return self.env.memory

    def checklist(self) -> list[ChecklistItem]:
        final = self.env.true_graph() if self.episode is not None else None
        return checklist(self.trial.task, final, self.trial.task.graph)

    def operator_seconds(self) -> float:
        return round(sum(a.get("seconds", 0.0) for a in self.trial.answers()), 1)

    # the operator's side
    def pause(self) -> None:
        with self._lock:
            if self.paused_since is None:
                self.paused_since = time.time()
                self.trial.event("pause")

    def unpause(self) -> None:
        with self._lock:
            if self.paused_since is not None:
                self.pauses.append((self.paused_since, time.time()))
                self.paused_since = None
                self.trial.event("unpause")

    def active_seconds(self, start: float, end: float) -> float:
        """``end - start`` minus the paused time in between."""
        spans = self.pauses + ([(self.paused_since, end)] if self.paused_since is not None else [])
        paused = sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans)
        return max(0.0, end - start - paused)

    def finish(self, marks: list[bool], note: str = "") -> dict:
        """Record the operator's checklist ``marks`` and write ``result.json``; the result. A
        second call returns the recorded result unchanged (a double-submitted form)."""
        with self._lock:
            done_before = self.trial.result()
            if done_before is not None:
                return done_before
            if self.episode is None:
                raise TrialError("the planner has not finished yet: the checklist comes at the end")
            items = self.checklist()
            verdict = score(items, marks)
            answers = self.trial.answers()
            ep = self.episode
            failures = [{"request": a["request"], "step": a["step"], "action": a.get("action"), "reason": a.get("reason")}
                        for a in answers if not a.get("ok")]
            operator_s = round(sum(a.get("seconds", 0.0) for a in answers), 1)
            result = asdict(ep) | verdict | {
                "reported_success": ep.success, "reported_success_changed_only": ep.success_changed_only,
                "reported_precision": ep.precision, "reported_goal_not_met": ep.goal_not_met,
                "goal_not_met": [i.text for i, m in zip(items, marks) if not m],
                "trial": self.trial.name, "instruction": self.trial.task.instruction,
                "operator_requests": len(answers), "operator_seconds": operator_s,
                "failed_steps": failures, "photos": sum(1 for a in answers if a.get("photo")),
                "wall_s": round(operator_s + ep.lm_seconds + ep.augmentation_seconds, 1),
                "gt_actions": len(self.trial.task.ground_truth_plan) or None,
                "no_change": False, "note": note.strip() or None,
                "checklist": [asdict(i) | {"met": m} for i, m in zip(items, marks)],
                "lm": self.trial.settings.get("lm"), "vlm": self.trial.settings.get("vlm"),
            }
            self.trial.path("checklist.json").write_text(json.dumps(result["checklist"], indent=1) + "\n")
            tmp = self.trial.path("result.json.part")
            tmp.write_text(json.dumps(result, indent=1) + "\n")
            tmp.replace(self.trial.path("result.json"))
            self.trial.event("checklist", success=result["success"], precision=result["precision"])
            self.state = "finished"
            return result


class _Recorder:
    """Between the environment and the operator: answers recorded requests from
    ``operator.jsonl`` (replay), asks the operator the others and appends each answer."""

    def __init__(self, operator: Operator, session: TrialSession):
        self.operator, self.session = operator, session
        self.replay = session.trial.answers()
        self.matched = 0

    def _recorded(self, request: Request) -> Answer | None:
        if not self.replay:
            return None
        rec = self.replay[0]
        if rec.get("request") == request.id and rec.get("step") == str(request.step):
            self.replay.pop(0)
            self.matched += 1
            return Answer(rec["ok"], rec.get("reason"), _abs(self.session.trial, rec.get("photo")), rec.get("description"))
        self._supersede()
        return None

    def _supersede(self) -> None:
        """The log no longer matches the run: keep the matching prefix, move the rest aside."""
        trial = self.session.trial
        lines = trial.path("operator.jsonl").read_text().splitlines(keepends=True)
        keep, rest = lines[: self.matched], lines[self.matched:]
        with open(trial.path("operator.superseded.jsonl"), "a") as f:
            f.writelines(rest)
        trial.path("operator.jsonl").write_text("".join(keep))
        trial.event("superseded", kept=self.matched, moved=len(rest))
        self.replay = []

    def _ask(self, request: Request, ask: Callable[[Request], Answer]) -> Answer:
        recorded = self._recorded(request)
        session = self.session
        if recorded is not None:
            session.pending = None
            return recorded
        session.replaying = False
        session.state = "paused" if session.paused_since is not None else "waiting"
        answer = ask(request)
        answered = time.time()
        session.pending = None
        session.state = "thinking"
        if answer.photo:
            answer = Answer(answer.ok, answer.reason, str(self._keep_photo(request, answer.photo)), answer.description)
        row = {"request": request.id, "kind": request.kind, "step": str(request.step), "action": request.action,
               "ok": answer.ok, "reason": answer.reason, "photo": _rel(session.trial, answer.photo),
               "description": answer.description, "asked_at": round(request.asked_at, 3),
               "answered_at": round(answered, 3),
               "seconds": round(session.active_seconds(request.asked_at, answered), 2)}
        with open(session.trial.path("operator.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        self.matched += 1
        return answer

    def _keep_photo(self, request: Request, photo: str) -> Path:
        path = Path(photo)
        photos = self.session.trial.dir / "photos"
        if path.resolve().parent == photos.resolve():
            return path
        return self.session.trial.store_photo(request.id, request.step.node or "node", path.read_bytes(),
                                              self.session.max_photo_bytes)

    def perform(self, request: Request) -> Answer:
        return self._ask(request, self.operator.perform)

    def observe(self, request: Request) -> Answer:
        return self._ask(request, self.operator.observe)


def _rel(trial: Trial, path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(trial.dir.resolve()))
    except ValueError:
        return str(path)


def _abs(trial: Trial, path: str | None) -> str | None:
    return None if path is None else str(trial.dir / path) if not Path(path).is_absolute() else path


class _Watched:
    """The planner's LM, watched: while it completes, the console says the planner is thinking."""

    def __init__(self, inner, session: TrialSession):
        self.inner, self.session, self.name = inner, session, inner.name

    @property
    def constraints(self) -> frozenset[str]:
        return self.inner.constraints

    def complete(self, messages, **request):
        s = self.session
        if s.state not in ("stopped", "error"):
            s.state = "thinking"
        return self.inner.complete(messages, **request)


class _WatchedAugmentation:
    """The trial's graph augmentation, recorded: each result goes to ``augmentations.jsonl``, to
    the console and into the environment's copy of the memory."""

    def __init__(self, gam, session: TrialSession):
        self.gam, self.session = gam, session

    @property
    def mode(self) -> str:
        return self.gam.mode

    def augment(self, node, **kwargs):
        s = self.session
        aug = self.gam.augment(node, **kwargs)
        s.env.merge(Observation(node, aug.observation.objects, kwargs.get("image")))
        last = s.env.answers[-1][0] if s.env.answers else None
        entry = {"request": last.id if last else None, "node": node,
                 "photo": _rel(s.trial, kwargs.get("image") or (s.env.answers[-1][1].photo if s.env.answers else None)),
                 "typed": kwargs.get("image") is None, "description": aug.description, "parser_reply": aug.parser_text,
                 "objects": [{"name": o.name, "relation": o.relation, "parent": o.parent, "states": list(o.states)}
                             for o in aug.observation.objects],
                 "notes": aug.notes, "stages": {k: asdict(v) for k, v in aug.stages.items()},
                 "seconds": round(aug.seconds, 3)}
        s.perceived.append(entry)
        s._augs.write(json.dumps(entry) + "\n")
        s._augs.flush()
        return aug


# -- building backends for a trial -------------------------------------------------------------
def backends_for(trial: Trial, make: Callable[..., Any] | None = None, verbose: bool = False):
    """``(planner_lm, augmentation)`` of ``trial``'s settings, each LM behind a reply cache in the
    trial directory (what makes a trial resumable). ``make(spec, **options)`` builds a backend
    (default :func:`lookplangraph.lm.make_backend`). An in-process llama.cpp keeps its own log in
    the trial's ``llama.log``, and shows it on the terminal too with ``verbose``."""
    if make is None:
        make = lookplangraph.lm.make_backend  # looked up per call: tests replace it

    def built(spec: str, options: dict[str, Any]):
        return make(spec, **with_native_log(spec, options, trial.path("llama.log"), verbose))

    s = trial.settings
    lm = CachedBackend(built(s["lm"], s.get("lm_options", {})), trial.path("lm_cache.jsonl"))
    describer = CachedBackend(built(s["vlm"], s.get("vlm_options", {})), trial.path("vlm_cache.jsonl")) if s.get("vlm") else None
    parser = CachedBackend(built(s["parser_lm"], {}), trial.path("parser_cache.jsonl")) if s.get("parser_lm") else None
    if parser is None:
        parser = describer if describer is not None else lm
    return lm, GraphAugmentation(trial.augmentation_mode, describer=describer, parser=parser)
