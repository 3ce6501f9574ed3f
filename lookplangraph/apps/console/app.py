"""The operator console: a local web page for a human-in-the-loop trial (FastAPI + Jinja2, plain
HTML forms, no JavaScript needed).

One page (``GET /``) shows what the trial needs now: the instruction, the action to perform with
the SGS's expansion into steps (Done / Failed with a reason), for ``discover_objects`` a photo
(the phone's camera opens: ``accept="image/*" capture="environment"``) and/or a typed
description, what the last photo made of the memory graph, the memory graph itself (rooms,
what is known where, what is held), the steps so far, and at the end the goal checklist. While
the planner thinks the page reloads itself every 2 seconds.

Everything the operator answers is on disk the moment it is answered (:mod:`lookplangraph.apps.trial`):
a reload re-renders the pending step, a closed tab loses nothing, a restarted server replays the
trial. Each form carries the id of the request it answers; an answer to a request that is no
longer pending (a double-submitted Done) is refused with a message and has no effect.

Bound to 127.0.0.1 by default. Exposed on a network (``--host``), every request must carry the
session's token (``?token=...`` once: it is then kept in a cookie); :func:`serve` prints the URL.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from sgs.graph import Layer
from sim_adapters.human import Answer, Desk, failed, seen
from lookplangraph.apps.trial import (DEFAULT_MAX_PHOTO_BYTES, PhotoError, TrialError, TrialSession, check_photo_size,
                                 megabytes)

HERE = Path(__file__).resolve().parent
TOKEN_COOKIE = "lookplangraph_token"
_templates = Jinja2Templates(directory=str(HERE / "templates"))


def memory_view(memory) -> dict:
    """The memory graph for the page: rooms (the agent's first), each with its assets and their
    states, and the objects on and inside them (nested), each marked seen or remembered."""
    g = memory.graph

    def objects(parent: str) -> list[dict]:
        out = []
        for child in g.children(parent):
            node = g.nodes.get(child)
            if node is None or node.layer is not Layer.OBJECT or child == g.agent.holding:
                continue
            out.append({"name": child, "relation": g.parent[child][1].value, "states": list(node.states or ()),
                        "seen": child not in memory.unseen, "children": objects(child)})
        return out

    rooms = []
    for room in g.places:
        assets = [{"name": a, "states": list(g.nodes[a].states or ()), "inspected": a in g.inspected,
                   "objects": objects(a)} for a in g.children(room) if g.nodes[a].layer is Layer.ASSET]
        rooms.append({"name": room, "here": room == g.agent.location, "assets": assets,
                      "known": sum(1 for a in assets for _ in a["objects"])})
    rooms.sort(key=lambda r: not r["here"])
    return {"rooms": rooms, "location": g.agent.location, "holding": g.agent.holding}


def _history(session: TrialSession) -> list[dict]:
    out = []
    for r in session.records:
        out.append({"call": r.call, "proposed": r.proposed or "(unreadable reply)", "accepted": r.accepted,
                    "executed": r.executed if r.executed != ([r.proposed] if r.proposed else []) else [],
                    "feedback": r.feedback, "reason": r.reason})
    return list(reversed(out))


def create_app(session: TrialSession, desk: Desk, *, token: str | None = None,
               max_upload_bytes: int = DEFAULT_MAX_PHOTO_BYTES, answer_wait: float = 2.0) -> FastAPI:
    """The console of ``session``, whose operator is ``desk``. ``token``: every request must
    carry it (exposed on a network). ``answer_wait``: after an answer, how long to wait for the
    planner's next request before showing the page (so the next step usually shows at once)."""
    app = FastAPI(title="LookPlanGraph operator console", docs_url=None, redoc_url=None, openapi_url=None)
    trial = session.trial

    def render(request: Request, name: str, status: int = 200, **context) -> HTMLResponse:
        base = {"trial": trial.name, "instruction": trial.task.instruction}
        return _templates.TemplateResponse(request, name, base | context, status_code=status)

    def message(request: Request, title: str, text: str, status: int) -> HTMLResponse:
        return render(request, "message.html", status, title=title, text=text)

    if token:
        @app.middleware("http")
        async def require_token(request: Request, call_next):
            given = request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE) or ""
            if not secrets.compare_digest(given.encode(), token.encode()):
                return message(request, "Token needed",
                               "This console is open to the network, so it needs the token printed in the terminal "
                               "where the trial was started. Open the full URL shown there (it ends in ?token=...).", 403)
            response = await call_next(request)
            if request.query_params.get("token"):
                response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response

    def page(request: Request, notice: str | None = None, status: int = 200, error: str | None = None) -> HTMLResponse:
        pending = desk.pending if session.state in ("waiting", "paused") else None
        state = session.state
        if state == "paused" and session.paused_since is None:
            state = "waiting"
        if session.paused_since is not None and state in ("waiting", "thinking"):
            state = "paused"
        if state == "waiting" and pending is None:  # the question is on its way to the desk
            state = "thinking"
        result = trial.result()
        if result is not None:
            state = "finished"
        items = session.checklist() if state == "checklist" else []
        answers = trial.answers()
        return render(request, "console.html", status, state=state, pending=pending, notice=notice, error=error,
                      memory=memory_view(session.memory), history=_history(session),
                      perceived=session.perceived[-1] if session.perceived else None,
                      mode=trial.augmentation_mode, items=items, result=result, session_error=session.error,
                      answered=len(answers), failures=[a for a in answers if not a.get("ok")],
                      operator_minutes=round(sum(a.get("seconds", 0.0) for a in answers) / 60, 1),
                      max_size=megabytes(max_upload_bytes), refresh=state in ("starting", "thinking"))

    def stale(request: Request, rid: int) -> HTMLResponse:
        """The answer to a request that is not pending (double submit, an old tab)."""
        before = desk.answered.get(rid)
        if before is not None or (desk.pending is not None and rid < desk.pending.id) or rid <= len(trial.answers()):
            what = "" if before is None else (" (Done)" if before.ok else f" (Failed: {before.reason})")
            return page(request, status=409, notice=f"Step {rid} was already answered{what}; it counts once. "
                                                      "Nothing more was recorded. This is the step now:")
        return page(request, status=409, notice=f"Step {rid} is not waiting for an answer; nothing was recorded.")

    async def after_answer(rid: int) -> RedirectResponse:
        """Redirect to the page once the planner has asked its next question or stopped (at
        most ``answer_wait`` s later), without blocking the server meanwhile."""
        deadline = time.monotonic() + answer_wait
        while time.monotonic() < deadline:
            p = desk.pending
            if (p is not None and p.id > rid) or session.state in ("checklist", "finished", "error", "stopped"):
                break
            await asyncio.sleep(0.05)
        return RedirectResponse(f"/?answered={rid}", status_code=303)

    @app.get("/", response_class=HTMLResponse)
    async def index(request: Request, answered: int | None = None):
        notice = None
        if answered is not None:
            a = desk.answered.get(answered)
            if a is not None:
                what = "photo received." if a.photo else "description received." if a.description else "done."
                notice = f"Step {answered} recorded: " + (what if a.ok else f"failed ({a.reason}).")
        return page(request, notice)

    @app.get("/status.json")
    async def status():
        p = desk.pending
        return JSONResponse({"state": session.state, "pending": p.id if p else None, "answered": len(trial.answers()),
                             "finished": trial.result() is not None})

    async def _field(form, name: str) -> str:
        value = form.get(name)
        return value.strip() if isinstance(value, str) else ""

    @app.post("/answer")
    async def answer(request: Request):
        form = await request.form(max_files=0, max_fields=10)
        try:
            rid = int(await _field(form, "request"))
        except ValueError:
            return message(request, "Bad form", "The form did not say which step it answers; reload the page.", 400)
        outcome, reason = await _field(form, "outcome"), await _field(form, "reason")
        if session.paused_since is not None:
            return page(request, status=409, notice="The trial is paused: resume it first. Nothing was recorded.")
        if desk.pending is None or desk.pending.id != rid:
            return stale(request, rid)
        if outcome == "failed" and not reason:
            return page(request, status=400, error="Say why the step failed (the planner is told the reason). "
                                                   "Nothing was recorded; the step still waits.")
        if outcome not in ("done", "failed"):
            return message(request, "Bad form", "Unknown answer; reload the page.", 400)
        if not desk.answer(rid, Answer(True) if outcome == "done" else failed(reason)):
            return stale(request, rid)
        return await after_answer(rid)

    @app.post("/observe")
    async def observe(request: Request):
        length = int(request.headers.get("content-length") or 0)
        if length > max_upload_bytes + 256 * 1024:
            async for _ in request.stream():  # read it all, so the browser gets this page, not a reset
                pass
            return page(request, status=413, error=f"The photo is {megabytes(length)}, over the limit of "
                                                   f"{megabytes(max_upload_bytes)}: take it at a lower resolution. "
                                                   "Nothing was recorded; the step still waits.")
        try:
            form = await request.form(max_files=1, max_fields=10)
        except Exception as exc:  # a torn upload (closed tab), a malformed body
            return message(request, "Upload incomplete", f"The upload did not arrive complete ({exc}). Nothing was "
                                                          "recorded; the step still waits.", 400)
        try:
            rid = int(await _field(form, "request"))
        except ValueError:
            return message(request, "Bad form", "The form did not say which step it answers; reload the page.", 400)
        if session.paused_since is not None:
            return page(request, status=409, notice="The trial is paused: resume it first. Nothing was recorded.")
        pending = desk.pending
        if pending is None or pending.id != rid:
            return stale(request, rid)
        if await _field(form, "outcome") == "failed":
            reason = await _field(form, "reason")
            if not reason:
                return page(request, status=400, error="Say why you cannot look (the planner is told the reason). "
                                                       "Nothing was recorded; the step still waits.")
            ok = desk.answer(rid, failed(reason))
            return await after_answer(rid) if ok else stale(request, rid)
        description = await _field(form, "description")
        upload = form.get("photo")
        data, size = b"", 0
        if upload is not None and not isinstance(upload, str):
            data = await upload.read(max_upload_bytes + 1)
            size = max(len(data), getattr(upload, "size", None) or 0)
        if not data and not description:
            return page(request, status=400, error="Take a photo or type what you see. Nothing was recorded; "
                                                   "the step still waits.")
        if trial.augmentation_mode != "vlm" and not description:
            return page(request, status=400, error="This trial has no VLM to read photos: type what you see on and "
                                                   "inside the node (a photo is kept with the records when you add "
                                                   "one). Nothing was recorded; the step still waits.")
        photo = None
        if data:
            try:
                check_photo_size(size, max_upload_bytes)
                photo = str(trial.store_photo(rid, pending.step.node or "node", data, max_upload_bytes))
            except PhotoError as exc:
                return page(request, status=413 if "limit" in str(exc) else 415,
                            error=f"{str(exc)[0].upper()}{str(exc)[1:]}. Nothing was recorded; the step still waits.")
        if not desk.answer(rid, seen(photo, description)):
            return stale(request, rid)
        return await after_answer(rid)

    @app.post("/checklist")
    async def submit_checklist(request: Request):
        form = await request.form(max_files=0, max_fields=200)
        if trial.result() is not None:
            return page(request, status=409, notice="The checklist was already recorded; it counts once.")
        if session.episode is None:
            return page(request, status=409, notice="The planner has not finished yet; the checklist comes at the end.")
        items = session.checklist()
        marks = []
        for k in range(len(items)):
            v = await _field(form, f"mark_{k}")
            if v not in ("met", "not_met"):
                return page(request, status=400, error=f"Mark every line met or not met (line {k + 1} is not marked). "
                                                       "Nothing was recorded.")
            marks.append(v == "met")
        try:
            session.finish(marks, await _field(form, "note"))
        except TrialError as exc:
            return page(request, status=400, error=str(exc))
        return RedirectResponse("/", status_code=303)

    @app.post("/pause")
    async def pause():
        session.pause()
        return RedirectResponse("/", status_code=303)

    @app.post("/unpause")
    async def unpause():
        session.unpause()
        return RedirectResponse("/", status_code=303)

    @app.get("/photos/{name}")
    async def photo(name: str):
        path = trial.dir / "photos" / Path(name).name
        if Path(name).name != name or not path.is_file():
            return Response("no such photo", status_code=404)
        return FileResponse(path)

    @app.get("/console.css")
    async def css():
        return FileResponse(HERE / "static" / "console.css", media_type="text/css")

    return app


def console_url(host: str, port: int, token: str | None) -> str:
    shown = host if host not in ("0.0.0.0", "::") else _lan_address()
    return f"http://{shown}:{port}/" + (f"?token={quote(token)}" if token else "")


def _lan_address() -> str:
    """This machine's address on the local network (for the printed URL)."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; picks the outgoing interface
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def needs_token(host: str) -> bool:
    return host not in ("127.0.0.1", "localhost", "::1")


def serve(session: TrialSession, desk: Desk, *, host: str = "127.0.0.1", port: int = 8765,
          max_upload_bytes: int = DEFAULT_MAX_PHOTO_BYTES, echo=print) -> None:
    """Run the console until Ctrl-C (the trial's state is on disk; ``--resume`` continues it).
    Exposed beyond this machine, a fresh one-time token protects it."""
    import uvicorn

    token = secrets.token_urlsafe(16) if needs_token(host) else None
    app = create_app(session, desk, token=token, max_upload_bytes=max_upload_bytes)
    echo(f"Operator console: {console_url(host, port, token)}")
    if token:
        echo("  (open to the network: every request needs this token; it changes with every start)")
    echo(f"  trial directory: {session.trial.dir}   stop: Ctrl-C   resume: lookplangraph trial --resume {session.trial.dir}")
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        desk.close()
