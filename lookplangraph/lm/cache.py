"""A reply cache for exact replay of evaluations: a wrapper of :meth:`LMBackend.complete`.

Each call is stored as one JSON line ``{"key", "backend", "kind": "complete", "reply"}`` in an
append-only file, keyed by the SHA-256 of the backend name, the messages, the SHA-256 of each
image's bytes, the JSON schema, ``stop``, ``max_tokens`` and, when given, the grammar and the
:class:`Relaxed` alternative; so the same request to the same backend gets the same reply back,
including its text, usage and seconds. A replayed completion is validated against the request's
schema again, so its ``parsed`` is a fresh model instance. (Caches written before decisions went
through ``complete()`` also hold lines keyed by the old per-decision key: they are kept and
ignored.)
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
from lookplangraph.lm.base import Completion, ImageError, LMBackend, LMError, Relaxed, Usage
from lookplangraph.lm.json_reply import check_reply


def completion_key(backend_name: str, messages: list[dict[str, Any]], images: Sequence[str | os.PathLike] | None,
                   schema: Any, stop: Sequence[str] | None, max_tokens: int | None, grammar: str | None = None,
                   relaxed: Relaxed | None = None) -> str:
    """SHA-256 hex digest of a :meth:`complete` request; images count by their bytes, not their
    paths (a missing image raises :class:`ImageError`). ``grammar`` and ``relaxed`` join the key
    only when given, so the keys of requests without them are those of earlier caches."""
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
    if relaxed is not None:
        request.append({"relaxed": [structured.json_schema(relaxed.schema), relaxed.seed_offset]})
    blob = json.dumps(request, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CachedBackend:
    """Wraps a backend: answers known requests from ``path``, asks ``inner`` otherwise and
    appends its reply. With ``replay=True`` (or ``inner=None``) a request that is not in the file
    raises :class:`LMError` instead. ``name`` is the inner backend's name (or the given one), so
    logs and keys are the same with and without the cache. ``hits``/``misses`` count lookups.
    :attr:`constraints` are the inner backend's (without one, the given ``constraints``: those of
    the backend that recorded the file, since callers choose their schema by them)."""

    def __init__(self, inner: LMBackend | None, path: str | os.PathLike, replay: bool = False, name: str | None = None,
                 constraints: frozenset[str] = frozenset()):
        if inner is None and name is None:
            raise ValueError("CachedBackend without an inner backend needs the backend name")
        self.inner, self.path, self.replay = inner, Path(path), replay or inner is None
        self.name = name or inner.name  # type: ignore[union-attr]
        self._constraints = frozenset(constraints)
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

    @property
    def constraints(self) -> frozenset[str]:
        return self._constraints if self.inner is None else self.inner.constraints

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

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None, relaxed: Relaxed | None = None, schema_name: str = "reply") -> Completion:
        """:meth:`LMBackend.complete` through the cache (see the module doc)."""
        key = completion_key(self.name, messages, images, schema, stop, max_tokens, grammar, relaxed)
        stored = self._lookup(key)
        if stored is not None:
            parsed, error = check_reply(stored["text"], schema)
            return Completion(text=stored["text"], parsed=parsed, usage=Usage(**(stored.get("usage") or {})),
                              seconds=float(stored.get("seconds", 0.0)), error=error)
        complete = getattr(self.inner, "complete", None)
        if complete is None:
            raise LMError(f"backend {self.name} has no complete()")
        result = complete(messages, images=images, schema=schema, stop=stop, max_tokens=max_tokens, grammar=grammar,
                          relaxed=relaxed, schema_name=schema_name)
        self._store({"key": key, "backend": self.name, "kind": "complete", "reply": result.to_dict()})
        return result
