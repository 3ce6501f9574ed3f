"""A reply cache for exact replay of evaluations.

Each decision is stored as one JSON line ``{"key", "backend", "reply"}`` in an append-only file.
The key is the SHA-256 of ``[backend name, static, dynamic, names]`` (plus the excluded actions
when there are any), so the same prompt to the
same backend gets the same reply back, including its text, parsed action, usage and seconds.
:meth:`CachedBackend.complete` stores its calls in the same file (``"kind": "complete"``), keyed
by the messages, the SHA-256 of each image's bytes, the JSON schema, ``stop`` and
``max_tokens``; a replayed completion is validated against the request's schema again, so its
``parsed`` is a fresh model instance.
The first stored reply of a key wins (the file may hold several when runs overlapped); a torn
last line (an interrupted write) is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Sequence

from lookplangraph.lm import structured
from lookplangraph.lm import ActionKey, Completion, ImageError, LMBackend, LMError, LMReply, Usage, check_reply


def reply_key(backend_name: str, static: str, dynamic: str, names: list[str] | None,
              excluded: Sequence[ActionKey] = ()) -> str:
    """SHA-256 hex digest of the request (names in the given order; None differs from []).
    ``excluded`` joins the key only when non-empty, so keys of requests without it are unchanged."""
    request = [backend_name, static, dynamic, names]
    if excluded:
        request.append(sorted(map(list, excluded), key=str))
    blob = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def completion_key(backend_name: str, messages: list[dict[str, Any]], images: Sequence[str | os.PathLike] | None,
                   schema: Any, stop: Sequence[str] | None, max_tokens: int | None, grammar: str | None = None) -> str:
    """SHA-256 hex digest of a :meth:`complete` request; images count by their bytes, not their
    paths (a missing image raises :class:`ImageError`). A ``grammar`` joins the key only when
    given, so the keys of requests without one are those of earlier caches."""
    digests = []
    for path in images or ():
        try:
            digests.append(hashlib.sha256(Path(path).expanduser().read_bytes()).hexdigest())
        except OSError as exc:
            raise ImageError(f"image {path}: {exc.strerror or exc}") from None
    request = ["complete", backend_name, messages, digests, structured.json_schema(schema),
               list(stop) if stop else None, max_tokens]
    if grammar is not None:
        request.append({"grammar": grammar})
    blob = json.dumps(request, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
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

    def _lookup(self, key: str) -> dict | None:
        stored = self._replies.get(key)
        if stored is not None:
            self.hits += 1
            return stored
        self.misses += 1
        if self.replay:
            raise LMError(f"replay: no stored reply of {self.name} for this prompt in {self.path} (key {key[:12]})")
        return None

    def _store(self, rec: dict) -> None:
        line = json.dumps(rec, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
            self._replies.setdefault(rec["key"], rec["reply"])

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        key = reply_key(self.name, static, dynamic, names, excluded)
        stored = self._lookup(key)
        if stored is not None:
            return LMReply.from_dict(stored)
        reply = self.inner.decide(static, dynamic, names, excluded)  # type: ignore[union-attr]
        self._store({"key": key, "backend": self.name, "reply": reply.to_dict()})
        return reply

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None) -> Completion:
        """:meth:`LMBackend.complete` through the cache (see the module doc)."""
        key = completion_key(self.name, messages, images, schema, stop, max_tokens, grammar)
        stored = self._lookup(key)
        if stored is not None:
            parsed, error = check_reply(stored["text"], schema)
            return Completion(text=stored["text"], parsed=parsed, usage=Usage(**(stored.get("usage") or {})),
                              seconds=float(stored.get("seconds", 0.0)), error=error)
        complete = getattr(self.inner, "complete", None)
        if complete is None:
            raise LMError(f"backend {self.name} has no complete()")
        extra = {"grammar": grammar} if grammar is not None else {}
        result = complete(messages, images=images, schema=schema, stop=stop, max_tokens=max_tokens, **extra)
        self._store({"key": key, "backend": self.name, "kind": "complete", "reply": result.to_dict()})
        return result
