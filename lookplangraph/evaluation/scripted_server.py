"""A **scripted** stand-in for an OpenAI-compatible LM server (it is not a language model), for
measuring and testing the evaluation harness without a GPU (``benchmarks/bench_eval_throughput.py``,
the endpoint-pool tests).

:class:`ScriptedServer` answers ``POST /v1/chat/completions`` after a fixed ``delay`` with the
next step of the task's script, so LookPlanGraph episodes run to their end on real GraSIF tasks:
the task is found by the instruction in the planner's prompt, its script is
:func:`lookplangraph.evaluation.injection.script_for` (ending in ``done``), and the step is the
number of accepted actions under ``Previous steps:``. A prompt of no known task gets ``done()``.
Replies are JSON in the planner's action format (``"reason": "scripted step"``); usage is
characters / 4. ``GET /v1/models`` lists ``model``; ``GET /v1/stats`` gives ``requests``,
``busy_s`` (request body read to reply sent, summed) and ``max_in_flight``.

Invariant: the server keeps no per-episode state, so any number of episodes can run at once and
be restarted. :meth:`ScriptedServer.kill` stops listening and drops open connections;
``fail_after`` makes it die by itself after that many requests. Run one in its own process with
``python -m lookplangraph.evaluation.scripted_server``. Docs: ``docs/guides/evaluation.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable

from grasif import dataset, office
from grasif.task import Task

from lookplangraph.evaluation.injection import script_for

_INSTRUCTION = re.compile(r"Instruction: (.*?)\nScene:", re.S)
_HISTORY = re.compile(r"\nPrevious steps: (.*?)(?:\nFeedback on your last answer:|\nAnswer:)", re.S)

DONE = {"function_name": "done", "node": None, "relation": None, "destination": None, "reason": "scripted step"}


class PlanScripts:
    """Instruction -> scripted actions of each task (tasks whose instruction is shared by another
    one are left out: the prompt could not tell them apart; see :attr:`ambiguous`)."""

    def __init__(self, tasks: Iterable[Task]):
        tasks = list(tasks)
        counts: dict[str, int] = {}
        for t in tasks:
            counts[t.instruction] = counts.get(t.instruction, 0) + 1
        self.ambiguous = sorted(t.id for t in tasks if counts[t.instruction] > 1)
        self.scripts: dict[str, list[dict]] = {}
        for t in tasks:
            if counts[t.instruction] == 1:
                self.scripts[t.instruction] = [
                    {"function_name": a.function_name, "node": a.node, "relation": a.relation,
                     "destination": a.destination, "reason": "scripted step"} for a in script_for(t)]

    def reply(self, dynamic: str) -> dict:
        """The next scripted action (a reply object) for the planner's dynamic prompt."""
        m = _INSTRUCTION.search(dynamic)
        script = self.scripts.get(m.group(1)) if m else None
        if not script:
            return DONE
        steps = steps_taken(dynamic)
        return script[steps] if steps < len(script) else DONE


def steps_taken(dynamic: str) -> int:
    """Accepted actions listed under ``Previous steps:`` in the planner's dynamic prompt."""
    h = _HISTORY.search(dynamic)
    return _history_steps(h.group(1)) if h else 0


def _history_steps(text: str) -> int:
    """Accepted actions in the ``Previous steps:`` part: ``none.`` or one ``\\n- `` line each."""
    return 0 if text.startswith("none.") else text.count("\n- ")


class ScriptedServer:
    """A threaded OpenAI-style HTTP server on ``host`` (module doc). ``tasks``: the tasks whose
    plans it replays; ``delay``: seconds before each reply; ``fail_after``: die (like
    :meth:`kill`) on that request instead of answering it. Counters: ``requests`` (received),
    ``answered`` (completions sent), ``max_in_flight`` (requests between their arrival and the
    moment their reply is written: a client that waited for a reply comes after), ``busy_s``,
    ``starts`` (monotonic time each request arrived)."""

    def __init__(self, tasks: Iterable[Task] = (), delay: float = 0.0, host: str = "127.0.0.1", port: int = 0,
                 model: str = "scripted", fail_after: int | None = None):
        self.plans = PlanScripts(tasks)
        self.delay, self.model, self.fail_after = float(delay), model, fail_after
        self.requests = self.in_flight = self.max_in_flight = self.answered = 0
        self.busy_s = 0.0  # request bodies read to replies sent, summed (the delay included)
        self.starts: list[float] = []
        self.dead = False
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers
            disable_nagle_algorithm = True  # else headers and body wait for a delayed ACK (40 ms)

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with server._lock:
                    server._conns.add(self.connection)

            def finish(self):
                with server._lock:
                    server._conns.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass

            def _send(self, status: int, body: dict) -> bool:
                data = json.dumps(body).encode()
                try:  # status line, headers and body in one write
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self._headers_buffer.append(b"\r\n")
                    self._headers_buffer.append(data)
                    self.flush_headers()
                    return True
                except OSError:
                    return False

            def do_GET(self):
                if self.path.rstrip("/").endswith("/stats"):  # not OpenAI's: what the benchmark reads
                    with server._lock:
                        self._send(200, {"requests": server.requests, "busy_s": server.busy_s,
                                         "max_in_flight": server.max_in_flight})
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model", "created": 0,
                                                                 "owned_by": "scripted"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                t0 = time.perf_counter()
                with server._lock:
                    server.requests += 1
                    n = server.requests
                    server.starts.append(time.monotonic())
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                counted = [True]

                def leave() -> None:  # out of flight before the reply leaves: a client freed by it comes after
                    if counted:
                        counted.clear()
                        with server._lock:
                            server.in_flight -= 1
                            server.busy_s += time.perf_counter() - t0

                try:
                    if server.fail_after is not None and n >= server.fail_after:
                        server.kill()
                        return
                    if not self.path.rstrip("/").endswith("/chat/completions"):
                        self._send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                    messages = body.get("messages") or []
                    dynamic = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
                    reply = json.dumps(server.plans.reply(dynamic if isinstance(dynamic, str) else ""))
                    prompt_chars = sum(len(m.get("content") or "") for m in messages if isinstance(m.get("content"), str))
                    if server.delay:
                        time.sleep(server.delay)
                    if server.dead:  # killed meanwhile: this reply never leaves
                        return
                    leave()
                    sent = self._send(200, {
                        "id": f"scripted-{n}", "object": "chat.completion", "created": 0, "model": server.model,
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(reply) // 4,
                                  "total_tokens": (prompt_chars + len(reply)) // 4}})
                    if sent:
                        with server._lock:
                            server.answered += 1
                finally:
                    leave()

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.httpd.request_queue_size = 256
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-server", daemon=True)

    def start(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()

    def kill(self) -> None:
        """Stop listening and cut every open connection (new connections are refused)."""
        with self._lock:
            if self.dead:
                return
            self.dead = True
            conns = list(self._conns)
        self.httpd.socket.close()  # refuse new connections at once
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        threading.Thread(target=self.httpd.shutdown, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Serve until Ctrl-C (then one line on stderr and exit code 130, as every command; the table
    is in :mod:`lookplangraph.cli`); the URL is the first line on stdout."""
    p = argparse.ArgumentParser(prog="python -m lookplangraph.evaluation.scripted_server", allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="A scripted OpenAI-compatible server replaying GraSIF ground-truth plans "
                                            "(not a language model), for measuring and testing the evaluation "
                                            "harness; prints its base URL, serves until Ctrl-C.",
                                epilog="examples:\n"
                                       "  python -m lookplangraph.evaluation.scripted_server --split office --delay 0.5\n"
                                       "  lookplangraph eval --split office --lm openai:scripted@URL   # URL: the line it printed")
    p.add_argument("--split", nargs="+", action="extend", default=[], choices=["virtualhome", "behavior", "office"],
                   metavar="S", help="tasks of these splits (several, or the flag repeated; office needs no data)")
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory for virtualhome/behavior")
    p.add_argument("--delay", type=float, default=0.2, metavar="S", help="seconds before each reply (default 0.2)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free one)")
    p.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    args = p.parse_args(argv)
    tasks: list[Task] = []
    for split in args.split:
        if split == "office":
            tasks += office.build_tasks()
        else:
            from pathlib import Path

            root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
            tasks += dataset.load_split(root, split)
    server = ScriptedServer(tasks, delay=args.delay, host=args.host, port=args.port).start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        server.kill()


if __name__ == "__main__":
    raise SystemExit(main())
