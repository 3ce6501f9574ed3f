"""The test session's own home: no test reads or writes the user's home or caches.

:func:`isolate` runs once, from ``conftest.py``, before any test module is imported. It points
``HOME``, the XDG directories and the project's variables (``LOOKPLANGRAPH_DATA`` for the GraSIF
build, ``LOOKPLANGRAPH_MODELS`` for assembled models) at one empty temporary directory, so that
every command a test runs, in process or as a child, builds and assembles what it needs there on
first use. It then installs an audit hook (:func:`sys.addaudithook`) that refuses, with
:class:`HermeticViolation`, any file operation of this process on a path inside the user's real
caches and configuration (``~/.cache``, ``~/.config``, ``~/.local/share``, the XDG directories and
the project's variables as they were set before). ``tests/test_hermetic.py`` checks both parts.

Only Python-level operations are seen (``open``, listings, renames, removals, copies); native
code is not, but every path the project hands to native code is computed from these variables.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: audit events that name paths, and which of their arguments are paths
_EVENTS = {
    "open": (0,), "os.listdir": (0,), "os.scandir": (0,), "os.mkdir": (0,), "os.remove": (0,),
    "os.rmdir": (0,), "os.rename": (0, 1), "os.chmod": (0,), "os.utime": (0,), "os.truncate": (0,),
    "os.link": (0, 1), "os.symlink": (0, 1), "shutil.copyfile": (0, 1), "shutil.copytree": (0, 1),
    "shutil.rmtree": (0,), "shutil.move": (0, 1), "glob.glob": (0,),
}
#: the variables the session points at its own directory (name -> path inside it)
VARIABLES = {
    "HOME": "home", "XDG_CACHE_HOME": "home/.cache", "XDG_CONFIG_HOME": "home/.config",
    "XDG_DATA_HOME": "home/.local/share", "LOOKPLANGRAPH_DATA": "grasif", "LOOKPLANGRAPH_MODELS": "models",
}


class HermeticViolation(RuntimeError):
    """A test touched the user's real home or cache."""


@dataclass
class Guard:
    """What the session protects and what it has refused."""

    root: Path
    protected: tuple[Path, ...]
    violations: list[str] = field(default_factory=list)
    _probe: threading.local = field(default_factory=threading.local)

    def protects(self, path) -> Path | None:
        """The protected directory ``path`` lies in, else None."""
        if isinstance(path, int) or path is None:
            return None
        try:
            text = os.fsdecode(path)
        except TypeError:
            return None
        if not text:
            return None
        p = Path(os.path.abspath(os.path.expanduser(text) if text.startswith("~") else text))
        for root in self.protected:
            if p == root or root in p.parents:
                return root
        return None

    def hook(self, event: str, args: tuple) -> None:
        where = _EVENTS.get(event)
        if where is None:
            return
        for i in where:
            if i < len(args) and (root := self.protects(args[i])) is not None:
                what = f"{event} {os.fsdecode(args[i])!s} (inside the user's {root})"
                if not getattr(self._probe, "on", False):
                    self.violations.append(what)
                raise HermeticViolation(f"a test touched the user's home or cache: {what}; "
                                        "tests use the session's own directories (tests/hermetic.py)")

    @contextmanager
    def probe(self):
        """While a test checks the guard on purpose: refusals raise but are not recorded."""
        self._probe.on = True
        try:
            yield
        finally:
            self._probe.on = False


def _real_directories() -> tuple[Path, ...]:
    home = Path(os.path.expanduser("~"))
    found = [Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache"),
             Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config"),
             Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")]
    found += [Path(os.environ[v]).expanduser() for v in ("LOOKPLANGRAPH_DATA", "LOOKPLANGRAPH_MODELS") if os.environ.get(v)]
    # never protect what the session runs from (a checkout or a Python under one of these)
    running = [Path(p).resolve() for p in (sys.prefix, sys.base_prefix, Path(__file__).parent.parent)]
    kept = []
    for d in found:
        d = Path(os.path.abspath(d))
        if any(r == d or d in r.parents for r in running):
            continue
        kept.append(d)
    return tuple(dict.fromkeys(kept))


_GUARD: Guard | None = None


def isolate() -> Guard:
    """Point the session at its own directory and guard the user's (once per process)."""
    global _GUARD
    if _GUARD is not None:
        return _GUARD
    protected = _real_directories()
    root = Path(tempfile.mkdtemp(prefix="lookplangraph-tests-"))
    for name, rel in VARIABLES.items():
        (root / rel).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(root / rel)
    _GUARD = Guard(root, protected)
    sys.addaudithook(_GUARD.hook)
    return _GUARD


def current() -> Guard:
    """The session's guard (:func:`isolate` must have run)."""
    if _GUARD is None:
        raise RuntimeError("hermetic.isolate() has not run (conftest.py runs it first)")
    return _GUARD


def remove(guard: Guard) -> None:
    """Delete the session's directory (the audit hook stays: hooks cannot be removed)."""
    shutil.rmtree(guard.root, ignore_errors=True)
