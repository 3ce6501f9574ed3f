"""Run LM-written Python in a separate, locked-down process; never in the host.

Every :meth:`Sandbox.run` starts a fresh ``python -I -B`` (the host's own interpreter, so the
venv's networkx imports) with an empty environment, no inherited descriptors, its own session
and process group, and the trusted bootstrap :mod:`lookplangraph.sandbox.child`, which limits
and locks the process down before the snippet runs (see its docstring for the order). The data
(e.g. a networkx node-link dict of the scene graph) goes in as JSON on stdin, so the child never
holds a host object. Output comes back through a pipe the host reads up to
``SandboxLimits.output_bytes``; past the cap, or past the wall-clock limit, the host kills the
whole process group.

The host-side AST policy (:func:`~lookplangraph.sandbox.policy.check_code`) runs first and turns
most bad snippets into readable errors without starting a process; it is not the boundary.
"""

from __future__ import annotations

import json
import math
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lookplangraph.sandbox.child import missing_protections
from lookplangraph.sandbox.policy import check_code

CHILD = Path(__file__).resolve().with_name("child.py")
DEFAULT_IMPORTS = frozenset({"math", "collections", "itertools", "functools", "re", "json",
                             "networkx", "statistics"})
#: bytes of the status channel (fd 2) the host keeps; more is a misbehaving child
STATUS_CAP = 64_000
KINDS = ("ok", "policy", "exception", "timeout", "memory", "output", "crash")


@dataclass(frozen=True)
class SandboxLimits:
    """Per-snippet limits. ``cpu_seconds`` is rounded up to whole seconds (RLIMIT_CPU);
    ``memory_mb`` bounds the address space; ``open_files`` bounds descriptors while the trusted
    bootstrap and prelude run; the snippet itself can open none (the descriptor freeze)."""

    cpu_seconds: float = 5.0
    wall_seconds: float = 10.0
    memory_mb: int = 512
    output_bytes: int = 64_000
    open_files: int = 32

    def __post_init__(self):
        for name in ("cpu_seconds", "wall_seconds", "memory_mb", "output_bytes", "open_files"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"SandboxLimits.{name} must be a positive number, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(f"SandboxLimits.memory_mb must be at least 64 (the interpreter "
                             f"needs it), got {self.memory_mb}")
        if self.open_files < 8:
            raise ValueError(f"SandboxLimits.open_files must be at least 8, got {self.open_files}")


@dataclass
class SandboxResult:
    """What one snippet did. ``ok``: it ran to its end without an exception or a limit.
    ``kind``: one of ``ok``, ``policy``, ``exception``, ``timeout``, ``memory``, ``output``,
    ``crash``. ``error``: a short message for the LM (None when ok). ``isolation``: what the
    process that ran it achieved (``'none'`` when no process was started)."""

    ok: bool
    stdout: str
    error: str | None
    kind: str
    isolation: str
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


class SandboxUnavailable(RuntimeError):
    """Strong isolation was required but this machine offers only weak isolation."""


def _isolation_text(report: dict) -> str:
    parts = list(report.get("files", ()))
    parts += [n for n in report.get("network", ()) if n not in ("fdfreeze", "seccomp-net")]
    parts += list(report.get("signals", ()))
    if report.get("userns"):
        parts.append("userns" + ("-nocaps" if report.get("caps_dropped") else ""))
    if report.get("nproc0"):
        parts.append("nproc0")
    if report.get("no_new_privs"):
        parts.append("no_new_privs")
    if report.get("fdfreeze"):
        parts.append("fdfreeze")
    parts.append("rlimits")
    text = "+".join(dict.fromkeys(parts))
    return text if not missing_protections(report) else f"weak:{text}"


class Sandbox:
    """Runs snippets, one fresh locked-down process each.

    The constructor starts one probe process that locks itself down and tries to open a file,
    create a socket, fork and signal its parent; ``isolation`` (and ``probe``, the full report)
    say what this machine achieved. With ``require_strong`` (the default) weak isolation raises
    :class:`SandboxUnavailable`, and each run's child refuses to start the snippet if its own
    lockdown came out weak.

    ``_check_policy`` and ``_disable`` are TEST-ONLY switches: the first turns the host-side AST
    policy off (the attack tests prove the process boundary holds by itself), the second skips
    lockdown features (``landlock``, ``netns``, ``chroot``, ...) to exercise the fallbacks.
    """

    def __init__(self, limits: SandboxLimits = SandboxLimits(), *,
                 allowed_imports=DEFAULT_IMPORTS, require_strong: bool = True,
                 python: str | None = None, _check_policy: bool = True,
                 _disable: frozenset[str] = frozenset()):
        if not isinstance(limits, SandboxLimits):
            raise TypeError(f"limits must be SandboxLimits, not {type(limits).__name__}")
        if sys.platform != "linux":
            raise SandboxUnavailable(f"the sandbox needs Linux (rlimits, Landlock, namespaces); "
                                     f"this is {sys.platform}")
        self.limits = limits
        self.allowed_imports = frozenset(allowed_imports)
        self.require_strong = require_strong
        self.python = python or sys.executable
        self._check_policy = _check_policy
        self._disable = frozenset(_disable)
        probe = self._spawn(None, probe=True)
        report = probe.get("report")
        if report is None:
            raise SandboxUnavailable(f"the sandbox probe process failed: {probe['error']}")
        self.probe: dict = report
        self.isolation: str = _isolation_text(report)
        missing = missing_protections(report)
        if require_strong and missing:
            raise SandboxUnavailable(
                "only weak isolation is available for LM-written code on this machine; missing: "
                + "; ".join(missing) + f" (achieved: {self.isolation}; notes: "
                + "; ".join(report.get("notes", [])) + "). To run LM code with weak isolation "
                "anyway, pass require_strong=False (the planner's sandbox_require_strong setting).")

    def run(self, code: str, *, data=None, prelude: str = "") -> SandboxResult:
        """Run ``code`` (untrusted) after ``prelude`` (trusted, ours) in a fresh child whose
        namespace has ``DATA`` bound to a JSON copy of ``data``. Never raises for what the code
        does; ``TypeError`` when ``data`` is not JSON-serialisable."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        started = time.monotonic()
        try:
            payload = json.dumps({"code": code, "data": data, "prelude": prelude}).encode()
        except (TypeError, ValueError) as e:
            raise TypeError(f"sandbox data must be JSON-serialisable: {e}") from e
        problems = check_code(code, self.allowed_imports) if self._check_policy else []
        if problems:
            syntax = len(problems) == 1 and "SyntaxError" in problems[0]
            return SandboxResult(False, "", ("" if syntax else "refused by the sandbox policy:\n")
                                 + "\n".join(problems[:20]), "exception" if syntax else "policy",
                                 "none", time.monotonic() - started)
        got = self._spawn(payload)
        return SandboxResult(got["kind"] == "ok", got["stdout"], got["error"], got["kind"],
                             got["isolation"], time.monotonic() - started)

    # -- the process ------------------------------------------------------------------------

    def _spawn(self, payload: bytes | None, prelude: str = "", probe: bool = False) -> dict:
        limits = self.limits
        config = {"limits": asdict(limits), "allowed_imports": sorted(self.allowed_imports),
                  "disable": sorted(self._disable), "require_strong": self.require_strong,
                  "probe": probe}
        if payload is None:
            payload = json.dumps({"code": "", "data": None, "prelude": prelude}).encode()
        proc = subprocess.Popen([self.python, "-I", "-B", str(CHILD), json.dumps(config)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={}, cwd="/", close_fds=True, start_new_session=True)
        out, err, why = self._talk(proc, payload)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the leader is unreaped, so the group id is ours
        except (ProcessLookupError, PermissionError):
            pass
        try:
            _, wait_status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(wait_status)
            cpu = usage.ru_utime + usage.ru_stime
        except ChildProcessError:  # reaped elsewhere (a host that ignores SIGCHLD)
            proc.returncode, cpu = (0 if b"\nRESULT " in b"\n" + err else -signal.SIGKILL), 0.0
        return self._judge(proc.returncode, out, err, why, cpu)

    def _talk(self, proc: subprocess.Popen, payload: bytes) -> tuple[bytes, bytes, str | None]:
        """Feed stdin, read stdout (capped) and the status channel until both close, the cap
        is passed or the wall clock runs out; ``why`` is ``'output'``, ``'timeout'`` or None."""
        limits = self.limits
        deadline = time.monotonic() + limits.wall_seconds
        out, err = bytearray(), bytearray()
        sel = selectors.DefaultSelector()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(stream.fileno(), False)
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        sel.register(proc.stdin, selectors.EVENT_WRITE, None)
        view, why = memoryview(payload), None
        try:
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    why = "timeout"
                    break
                for key, _ in sel.select(min(left, 0.5)):
                    if key.data is None:  # stdin
                        try:
                            sent = os.write(key.fd, view[:65536])
                            view = view[sent:]
                        except (BrokenPipeError, OSError):
                            view = view[:0]
                        if not view:
                            sel.unregister(key.fileobj)
                            proc.stdin.close()
                        continue
                    try:
                        chunk = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.extend(chunk)
                    if key.data is out and len(out) > limits.output_bytes:
                        why = "output"
                    elif key.data is err and len(err) > STATUS_CAP:
                        why = "output"
                if why:
                    break
        finally:
            sel.close()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    stream.close()
                except OSError:
                    pass
        return bytes(out), bytes(err), why

    def _judge(self, returncode: int, out: bytes, err: bytes, why: str | None, cpu: float) -> dict:
        limits = self.limits
        report, result = None, None
        for line in err.splitlines():
            if line.startswith(b"ISOLATION ") and report is None:
                try:
                    report = json.loads(line[10:])
                except ValueError:
                    report = {}
            elif line.startswith(b"RESULT "):
                try:
                    result = json.loads(line[7:])
                except ValueError:
                    result = None
        isolation = _isolation_text(report) if report and "error" not in report else "none"
        stdout = out[:limits.output_bytes].decode("utf-8", "replace")
        if why == "output" or len(out) > limits.output_bytes:
            stdout += f"\n[output truncated at {limits.output_bytes} bytes]"
            kind, error = "output", (f"output limit of {limits.output_bytes} bytes exceeded; the "
                                     "snippet was stopped (print less: counts, the first items)")
        elif why == "timeout":
            kind, error = "timeout", f"time limit of {limits.wall_seconds:g} s (wall clock) exceeded"
        elif returncode == -signal.SIGXCPU or (returncode == -signal.SIGKILL
                                               and cpu >= math.ceil(limits.cpu_seconds)):
            kind, error = "timeout", f"time limit of {math.ceil(limits.cpu_seconds)} s (CPU) exceeded"
        elif (isinstance(result, dict) and result.get("kind") in KINDS and returncode == 0):
            kind = result["kind"]
            error = result.get("error")
            error = str(error)[:2000] if error is not None else None
            if kind == "memory":
                error = f"memory limit of {limits.memory_mb} MB exceeded\n{error}"
        else:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
            how = (f"signal {signal.Signals(-returncode).name}" if returncode < 0
                   and -returncode in signal.valid_signals() else f"exit status {returncode}")
            kind = "crash"
            error = f"the sandbox process ended unexpectedly ({how})" + (
                ": " + " | ".join(tail)[:500] if tail else "")
            if report is not None and returncode >= 0:
                error = (f"the snippet ended the sandbox process ({how}) before it finished")
        if kind == "ok":
            error = None
        return {"kind": kind, "error": error, "stdout": stdout, "isolation": isolation,
                "report": report if report and "error" not in report else None}
