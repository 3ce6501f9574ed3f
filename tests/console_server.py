"""A running operator console for tests: a trial of the example building's coffee task, driven
by SCRIPTED LMs (ScriptedBackend: fixed replies written for these tests, not language models),
served by uvicorn on a free port of 127.0.0.1 in a thread."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from grasif.task import load_task
from lookplangraph.lm import ScriptedBackend
from lookplangraph.apps.console.app import create_app
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.apps.trial import Trial, TrialSession
from sim_adapters.human import Desk
from vlm.gam import GraphAugmentation

ROOT = Path(__file__).resolve().parent.parent
COFFEE = ROOT / "examples" / "office_building" / "tasks" / "coffee_for_maria.json"


def J(fn, node=None, relation=None, destination=None, reason="scripted"):
    return json.dumps({"function_name": fn, "node": node, "relation": relation, "destination": destination,
                       "reason": reason})


def parsed(*rows):
    """A SCRIPTED parser reply: (name, relation, related_to[, states]) rows."""
    return json.dumps({"objects": [{"name": r[0], "relation": r[1], "related_to": r[2],
                                    "states": list(r[3]) if len(r) > 3 else []} for r in rows]})


#: the planner's SCRIPTED replies for the coffee task: look, fetch the cup, a close that the
#: operator reports failed (with the loop's close_at_once off, as the browser test runs it; with it
#: on the loop has closed the cupboard after the pick-up and the close is sent back), switch on, done
COFFEE_PLAN = [
    J("discover_objects", "cupboard-1", reason="the clean cups are in the cupboard"),
    J("rearrange", "cup-2", "inside", "coffee_machine-1", reason="the cup goes into the machine"),
    J("close", "cupboard-1", reason="I opened the cupboard"),
    J("turn_on", "coffee_machine-1", reason="make the coffee"),
    J("close", "cupboard-1", reason="try closing again"),
    J("done"),
]
DESCRIBER = ["A white cup stands inside the open cupboard, next to a box of tea."]
PARSER = [parsed(("cup", "inside", "cupboard-1"), ("tea_box", "inside", "cupboard-1"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Console:
    url: str
    trial: Trial
    session: TrialSession
    desk: Desk
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.desk.close()
        self.thread.join(timeout=10)


def start_console(directory: Path, *, plan=COFFEE_PLAN, vlm: bool = True, token: str | None = None,
                  max_upload_bytes: int = 15_000_000, resume: bool = False, planner=None) -> Console:
    """The console of a new trial in ``directory`` (or, ``resume``, of the trial there);
    ``planner``: the new trial's :class:`~lookplangraph.planners.config.PlannerConfig`."""
    if resume:
        trial = Trial(directory)
    else:
        trial = Trial.create(directory, load_task(COFFEE), lm="scripted", vlm="scripted-vlm" if vlm else None,
                             planner=planner)
    lm = CachedBackend(ScriptedBackend(plan, name="scripted"), trial.path("lm_cache.jsonl"))
    describer = ScriptedBackend(DESCRIBER, name="scripted-vlm") if vlm else None
    parser = ScriptedBackend(PARSER, name="scripted-parser")
    gam = GraphAugmentation("vlm" if vlm else "parser", describer=describer, parser=parser)
    desk = Desk()
    session = TrialSession(trial, desk, lm=lm, augmentation=gam)
    session.start()
    app = create_app(session, desk, token=token, max_upload_bytes=max_upload_bytes, answer_wait=2.0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    desk.wait_pending(5)
    return Console(f"http://127.0.0.1:{port}", trial, session, desk, server, thread)
