"""A reply cache for exact replay of evaluations.

Each decision is stored as one JSON line ``{"key", "backend", "reply"}`` in an append-only file.
The key is the SHA-256 of ``[backend name, static, dynamic, names]`` (plus the excluded actions
when there are any), so the same prompt to the
same backend gets the same reply back, including its text, parsed action, usage and seconds.
The first stored reply of a key wins (the file may hold several when runs overlapped); a torn
last line (an interrupted write) is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Sequence

from lookplangraph.backends import ActionKey, LMBackend, LMError, LMReply


def reply_key(backend_name: str, static: str, dynamic: str, names: list[str] | None,
              excluded: Sequence[ActionKey] = ()) -> str:
    """SHA-256 hex digest of the request (names in the given order; None differs from []).
    ``excluded`` joins the key only when non-empty, so keys of requests without it are unchanged."""
    request = [backend_name, static, dynamic, names]
    if excluded:
        request.append(sorted(map(list, excluded), key=str))
    blob = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedBackend:
    """Wraps a backend: answers known requests from ``path``, asks ``inner`` otherwise and
    appends its reply. With ``replay=True`` (or ``inner=None``) a request that is not in the file
    raises :class:`LMError` instead. ``name`` is the inner backend's name (or the given one), so
    logs and keys are the same with and without the cache. ``hits``/``misses`` count lookups."""

    def __init__(self, inner: LMBackend | None, path: str | os.PathLike, replay: bool = False, name: str | None = None):
        if inner is None and name is None:
            raise ValueError("CachedBackend without an inner backend needs the backend name")
        self.inner, self.path, self.replay = inner, Path(path), replay or inner is None
        self.name = name or inner.name  # type: ignore[union-attr]
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._replies: dict[str, dict] = {}
        if self.path.exists():
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                        self._replies.setdefault(rec["key"], rec["reply"])
                    except (ValueError, KeyError, TypeError):
                        continue

    def __len__(self) -> int:
        return len(self._replies)

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        key = reply_key(self.name, static, dynamic, names, excluded)
        stored = self._replies.get(key)
        if stored is not None:
            self.hits += 1
            return LMReply.from_dict(stored)
        self.misses += 1
        if self.replay:
            raise LMError(f"replay: no stored reply of {self.name} for this prompt in {self.path} (key {key[:12]})")
        reply = self.inner.decide(static, dynamic, names, excluded)  # type: ignore[union-attr]
        rec = {"key": key, "backend": self.name, "reply": reply.to_dict()}
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
            self._replies.setdefault(key, rec["reply"])
        return reply
