"""Human-in-the-loop trials: the planner in a real building, a person as its hands and eyes
(paper section VII-E).

A trial runs :func:`lookplangraph.planners.lookplangraph.run_episode` in a :class:`sim_adapters.human.HumanEnvironment`
and keeps everything on disk, in ``runs/<trial>/``::

    trial.json          what runs: the LM, the VLM, the parser, the augmentation mode, the planner settings
    task.json           the task (instruction, building graph, goal; a task file's format)
    operator.jsonl      every operator answer, appended as given: request id, step, LM action, done/failed
                        and the reason, photo, typed description, asked/answered time, operator seconds
    photos/NNN_node.ext every photo, NNN the request id
    lm_cache.jsonl      every planner LM reply (and the parser's, when the planner's LM parses)
    vlm_cache.jsonl     the describer's replies; parser_cache.jsonl a separate parser's
    trace.jsonl         one planner step per line (as ``lookplangraph run`` writes it)
    augmentations.jsonl per discover_objects: the photo, the VLM description or the typed one, the
                        parser's reply, the objects merged into memory, dropped entries, tokens, seconds
    events.jsonl        sessions started, pauses, the end of planning, the checklist
    episode.json        the planner's result when it stopped (before the checklist)
    checklist.json      the goal checklist with the operator's marks
    result.json         the trial's result: success and precision from the checklist (module doc)

**Resume.** Nothing lives only in memory: a trial is resumed (``lookplangraph trial --resume
DIR``, or after a crash) by running the planner again from the start; its LM replies come from
the caches and the operator's answers from ``operator.jsonl`` (each must match the request it
answered: the same request id and step), so the run reaches exactly the state it had, then goes
on live. Should a recorded answer no longer match (a different model), the rest of the log is
moved to ``operator.superseded.jsonl`` and the trial continues live from there.

**The checklist.** There is no ground truth in a building: when the planner stops, the operator
checks the task's goal by looking, one line per goal unit (:func:`checklist`): a node goal
("cup-1 is inside backpack-1", "coffee_machine-1 is on"), a count goal (weight: its count; met or
not met as a whole), each top-level conjunct of a formula goal (in BDDL, as written); a task
without a goal (``--graph`` with ``--instruction``) gets one line, the instruction itself. A goal
that keeps everything else unchanged adds a line "nothing else was changed" (weight 0). As in the
benchmark: **success** = every line met, **precision** = the met weight over the goal units'
weight, **success_changed_only** = the goal units met whatever else changed. The planner's own
verdict on the graph the operator reported (``HumanEnvironment.true_graph``) is kept beside it
as ``reported_success``/``reported_precision``/``reported_goal_not_met``, and each checklist
line shows it as a hint.
"""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from grasif.goals import GoalSpec, evaluate_goal
from grasif.task import Task, load_task, save_task
from sgs.io import graph_to_dict, load_graph
from sim_adapters.base import Observation
from sim_adapters.human import Answer, HumanEnvironment, Operator, Request, TrialPaused

from lookplangraph.planners.config import PlannerConfig

from lookplangraph.planners.episode import EpisodeResult, StepRecord

from lookplangraph.planners.lookplangraph import run_episode
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.evaluation.runner import read_results

#: largest photo accepted (bytes); ``--max-upload-mb`` changes it
DEFAULT_MAX_PHOTO_BYTES = 15_000_000
_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


class TrialError(ValueError):
    """A trial directory or input that cannot be used; the message names the problem."""


class PhotoError(ValueError):
    """An upload or photo file that is not a usable photo; the message is for the operator."""


def photo_type(data: bytes) -> str:
    """The file extension of a PNG, JPEG, GIF or WebP photo by its bytes; :class:`PhotoError` otherwise."""
    from lookplangraph.lm import image_mime

    if not data:
        raise PhotoError("the file is empty")
    mime = image_mime(data[:16])
    if mime is None:
        raise PhotoError("this file is not a photo: a PNG, JPEG, WebP or GIF image is needed "
                         "(an iPhone's HEIC photo: set Camera > Formats to 'Most Compatible')")
    return _EXT[mime]


def megabytes(n: int) -> str:
    return f"{n / 1e6:.3g} MB"


def check_photo_size(size: int, limit: int) -> None:
    if size > limit:
        raise PhotoError(f"the photo is {megabytes(size)}, over the limit of {megabytes(limit)} "
                         "(take it at a lower resolution)")


def photo_file_check(limit: int = DEFAULT_MAX_PHOTO_BYTES) -> Callable[[str], None]:
    """A check of a photo file for the terminal operator: :class:`PhotoError` when it is too
    large or not a photo."""
    def check_file(path: str) -> None:
        check_photo_size(Path(path).stat().st_size, limit)
        with open(path, "rb") as f:
            photo_type(f.read(16))

    return check_file


def _slug(text: str, n: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:n] or "task"


# -- the checklist -----------------------------------------------------------------------------
@dataclass
class ChecklistItem:
    """One line the operator marks met / not met. ``weight`` counts toward precision (0: the
    "nothing else changed" line, which counts toward success only); ``reported`` is what the
    planner's graph of the operator's reports says (a hint, None when unknown)."""

    text: str
    weight: int = 1
    kind: str = "goal"  # goal | frame | instruction
    reported: bool | None = None


_REL_WORDS = {"ontop": "on top of", "inside": "inside"}


def _states_words(states: list[str], absent: list[str]) -> str:
    words = list(states) + [f"not {s}" for s in absent]
    return " and ".join(words)


def checklist(task: Task, final=None, initial=None) -> list[ChecklistItem]:
    """The goal checklist of ``task`` (module doc); with the reported ``final`` graph (and the
    ``initial`` one) each line carries the planner's own verdict as a hint."""
    goal: GoalSpec = task.goal
    verdict = None
    if final is not None:
        try:
            verdict = evaluate_goal(goal, final, initial if initial is not None else task.graph)
        except ValueError:
            verdict = None
    reported = [i.ok for i in verdict.items] if verdict is not None else []
    items: list[ChecklistItem] = []
    for g in goal.node_goals:
        parts = []
        if g.relation == "held":
            parts.append("is in your hand")
        elif g.relation is not None:
            parts.append(f"is {_REL_WORDS[g.relation]} {g.destination}")
        if g.states or g.absent_states:
            parts.append("is " + _states_words(g.states, g.absent_states))
        items.append(ChecklistItem(f"{g.node} {' and '.join(parts)}"))
    for g in goal.count_goals:
        extra = f", {' and '.join(g.states)}" if g.states else ""
        items.append(ChecklistItem(f"at least {g.count} {g.cls.replace('_', ' ')} objects are "
                                   f"{_REL_WORDS[g.relation]} {g.destination}{extra}", weight=g.count))
    if goal.formula:
        from grasif.formula import Formula

        for conjunct in Formula.parse(goal.formula).conjuncts():
            items.append(ChecklistItem(f"holds: {conjunct}"))
    for item, ok in zip(items, reported):
        item.reported = ok
    if not items:
        items.append(ChecklistItem(f"the instruction is carried out: “{task.instruction}”", kind="instruction"))
    if goal.unchanged_elsewhere or goal.is_empty():
        ok = None
        if verdict is not None and verdict.frame_checked:
            ok = not verdict.side_effects
        items.append(ChecklistItem("nothing else was changed (what was opened is closed again, devices as found, "
                                   "hands empty)",
                                   weight=0, kind="frame", reported=ok))
    return items


def score(items: list[ChecklistItem], marks: list[bool]) -> dict:
    """Success, changed-only success and precision of checklist ``marks`` (module doc)."""
    if len(marks) != len(items):
        raise TrialError(f"the checklist has {len(items)} lines; {len(marks)} marks were given")
    units = [(i, m) for i, m in zip(items, marks) if i.kind != "frame"]
    total = sum(i.weight for i, _ in units)
    met = sum(i.weight for i, m in units if m)
    return {"success": all(marks), "success_changed_only": all(m for _, m in units),
            "precision": met / total if total else 1.0}


# -- the trial directory -----------------------------------------------------------------------
class Trial:
    """A trial directory (module doc). :meth:`create` starts one, ``Trial(dir)`` opens one."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        if not (self.dir / "trial.json").is_file():
            raise TrialError(f"{self.dir}: not a trial directory (no trial.json)")
        try:
            self.settings = json.loads((self.dir / "trial.json").read_text())
        except json.JSONDecodeError as exc:
            raise TrialError(f"{self.dir / 'trial.json'}: not valid JSON ({exc})") from None
        try:
            self.task = load_task(self.dir / "task.json")
        except ValueError as exc:
            raise TrialError(str(exc)) from None

    @classmethod
    def create(cls, directory: str | Path, task: Task, *, lm: str, vlm: str | None = None, parser_lm: str | None = None,
               planner: PlannerConfig | None = None, lm_options: dict | None = None,
               vlm_options: dict | None = None) -> "Trial":
        """A new trial of ``task`` in ``directory`` (which must not hold one yet). The
        augmentation mode is ``vlm`` with a describer (``vlm``), else ``parser``."""
        directory = Path(directory)
        if (directory / "trial.json").exists():
            raise TrialError(f"{directory} already holds a trial; resume it with --resume {directory}")
        (directory / "photos").mkdir(parents=True, exist_ok=True)
        save_task(task, directory / "task.json")
        settings = {"name": directory.name, "created": time.strftime("%Y-%m-%d %H:%M:%S"), "lm": lm,
                    "lm_options": lm_options or {}, "vlm": vlm, "vlm_options": vlm_options or {},
                    "parser_lm": parser_lm, "augmentation": "vlm" if vlm else "parser",
                    "planner": asdict(planner or PlannerConfig())}
        (directory / "trial.json").write_text(json.dumps(settings, indent=1) + "\n")
        return cls(directory)

    @property
    def name(self) -> str:
        return self.settings.get("name") or self.dir.name

    @property
    def augmentation_mode(self) -> str:
        return self.settings.get("augmentation", "parser")

    def planner_config(self) -> PlannerConfig:
        return PlannerConfig.from_dict(self.settings.get("planner", {}), where=str(self.path("trial.json")))

    def path(self, name: str) -> Path:
        return self.dir / name

    def answers(self) -> list[dict]:
        """The recorded operator answers (a torn last line is skipped)."""
        return read_results(self.path("operator.jsonl"))

    def result(self) -> dict | None:
        p = self.path("result.json")
        return json.loads(p.read_text()) if p.exists() else None

    def event(self, kind: str, **info: Any) -> None:
        with open(self.path("events.jsonl"), "a") as f:
            f.write(json.dumps({"event": kind, "at": round(time.time(), 3), **info}) + "\n")

    def store_photo(self, request_id: int, node: str, data: bytes, limit: int = DEFAULT_MAX_PHOTO_BYTES) -> Path:
        """Check ``data`` (a real photo, at most ``limit`` bytes) and save it as
        ``photos/NNN_node.ext``; :class:`PhotoError` otherwise (nothing is saved)."""
        check_photo_size(len(data), limit)
        ext = photo_type(data)
        (self.dir / "photos").mkdir(exist_ok=True)
        path = self.dir / "photos" / f"{request_id:03d}_{_slug(node, 60)}.{ext}"
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
        return path


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
            mode = self.cfg.correction
            outcome = memory.check(action, correct=mode == "rules")
            if outcome.ok:
                expansion = [str(a) for a in outcome.actions]
            elif mode == "none" and memory.hallucination(action) is None:
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
                        from lookplangraph.evaluation.runner import format_step

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
def backends_for(trial: Trial, make: Callable[..., Any] | None = None):
    """``(planner_lm, augmentation)`` of ``trial``'s settings, each LM behind a reply cache in the
    trial directory (what makes a trial resumable). ``make(spec, **options)`` builds a backend
    (default :func:`lookplangraph.lm.make_backend`)."""
    from lookplangraph.lm.cache import CachedBackend
    from vlm.gam import GraphAugmentation

    if make is None:
        from lookplangraph.lm import make_backend as make
    s = trial.settings
    lm = CachedBackend(make(s["lm"], **s.get("lm_options", {})), trial.path("lm_cache.jsonl"))
    describer = CachedBackend(make(s["vlm"], **s.get("vlm_options", {})), trial.path("vlm_cache.jsonl")) if s.get("vlm") else None
    parser = CachedBackend(make(s["parser_lm"]), trial.path("parser_cache.jsonl")) if s.get("parser_lm") else None
    if parser is None:
        parser = describer if describer is not None else lm
    return lm, GraphAugmentation(trial.augmentation_mode, describer=describer, parser=parser)


def new_trial_dir(task: Task, root: Path = Path("runs")) -> Path:
    return root / f"trial_{time.strftime('%Y%m%d-%H%M%S')}_{_slug(task.id, 40)}"


def task_from_graph(graph_path: str | Path, instruction: str, goal: GoalSpec | None = None,
                    task_id: str | None = None) -> Task:
    """A task for a researcher's own building: a graph in the paper's JSON format and an
    instruction (and a goal, when given; else the checklist asks about the instruction itself)."""
    path = Path(graph_path)
    try:
        graph = load_graph(path)  # errors name the file
    except FileNotFoundError:
        raise TrialError(f"{path}: no such graph file") from None
    except ValueError as exc:  # bad JSON, or a GraphError
        raise TrialError(str(exc)) from None
    task = Task(id=task_id or _slug(instruction), split="trial", instruction=instruction,
                initial_graph=graph_to_dict(graph), goal=goal or GoalSpec(), provenance={"source": str(path)})
    if goal is not None:
        problems = goal.check_names(task.graph)
        if problems:
            raise TrialError("; ".join(problems))
    return task


# -- the terminal --------------------------------------------------------------------------------
def ask_checklist(items: list[ChecklistItem], read: Callable[[str], str] | None = None,
                  write: Callable[[str], None] = print) -> list[bool]:
    """The checklist in a terminal: each line ``y`` (met) or ``n`` (not met)."""
    read = read or (lambda prompt: input(prompt))
    write("\nThe planner has stopped. Check the goal by looking: is each line true now?")
    marks = []
    for k, item in enumerate(items, 1):
        hint = "" if item.reported is None else f"  [the planner believes: {'met' if item.reported else 'not met'}]"
        while True:
            try:
                line = read(f"  {k}/{len(items)} {item.text}{hint} — met? y/n > ").strip().lower()
            except EOFError:
                raise TrialPaused("input ended before the checklist was complete") from None
            if line in ("y", "yes", "n", "no"):
                marks.append(line.startswith("y"))
                break
            if line in ("q", "quit"):
                raise TrialPaused("the operator stopped at the checklist")
            write("  answer y or n (q to stop; the checklist is asked again on --resume)")
    return marks


# -- reports --------------------------------------------------------------------------------------
def trial_dirs(paths: list[str | Path]) -> list[Path]:
    """Trial directories among ``paths``: each path that is one, or the trial directories right
    inside it."""
    out = []
    for p in map(Path, paths):
        if (p / "trial.json").is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(c for c in p.iterdir() if (c / "trial.json").is_file())
    return out


def report_table(dirs: list[Path]) -> str:
    """One line per trial and the totals as a benchmark reports them (SR, APP, actions), plus
    primitive steps, failed steps, photos and operator time. Unfinished trials are listed and
    left out of the totals."""
    from grasif.metrics import summarize
    from lookplangraph.evaluation.runner import to_record

    head = f"{'trial':<44}{'task':<22}{'success':>8}{'prec.':>7}{'actions':>8}{'steps':>7}{'failed':>7}{'photos':>7}{'op. min':>8}{'LM calls':>9}"
    lines = [head, "-" * len(head)]
    rows = []
    for d in dirs:
        try:
            trial = Trial(d)
        except TrialError as exc:
            lines.append(f"{d.name:<44}{'(unreadable: ' + str(exc)[:60] + ')'}")
            continue
        r = trial.result()
        if r is None:
            n = len(trial.answers())
            lines.append(f"{trial.name[:43]:<44}{trial.task.id[:21]:<22}{'unfinished':>8}   ({n} operator answers so far)")
            continue
        rows.append(r)
        lines.append(f"{trial.name[:43]:<44}{trial.task.id[:21]:<22}{'yes' if r['success'] else 'no':>8}{r['precision']:>7.3f}"
                     f"{len(r['actions']):>8}{len(r['executed']):>7}{len(r['failed_steps']):>7}{r['photos']:>7}"
                     f"{r['operator_seconds'] / 60:>8.1f}{r['lm_calls']:>9}")
    if rows:
        s = summarize([to_record(r) for r in rows])
        lines.append("-" * len(head))
        steps = sum(len(r["executed"]) for r in rows) / len(rows)
        op = sum(r["operator_seconds"] for r in rows) / len(rows) / 60
        lines.append(f"{len(rows)} finished trial(s): SR {s.sr:.3f}, SR chg. {s.sr_changed_only:.3f}, APP {s.app:.3f}, "
                     f"actions {s.mean_actions:.2f}, primitive steps {steps:.2f}, "
                     f"failed steps {sum(len(r['failed_steps']) for r in rows)}, operator {op:.1f} min per trial"
                     + (f", TPA {s.tpa:.1f}" if s.tpa is not None else ""))
    return "\n".join(lines)

