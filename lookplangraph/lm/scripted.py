"""Fixed replies replayed in order: for tests and demos, not a language model."""

from __future__ import annotations

import os
from typing import Any, Sequence

from lookplangraph.lm import structured
from lookplangraph.lm.base import Completion, Relaxed, Usage, checked_completion
from lookplangraph.lm.images import with_images


class ScriptedBackend:
    """Replays fixed reply texts in order (the last one repeats); not a language model. For tests
    of the planner loop, the parser and the graph augmentation. :meth:`complete` checks images
    (:func:`image_part`) and the schema as real backends do and records each request in
    ``requests``; it enforces no constraint (:attr:`constraints` is empty). Usage counts are rough
    (characters / 4)."""

    def __init__(self, replies: list[str], name: str = "scripted"):
        if not replies:
            raise ValueError("ScriptedBackend needs at least one reply")
        self.replies, self.name, self.calls = list(replies), name, 0
        #: every complete(): messages (with image parts), schema, relaxed, stop, max_tokens, grammar
        self.requests: list[dict[str, Any]] = []

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()

    def _next(self) -> str:
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return text

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None, relaxed: Relaxed | None = None, schema_name: str = "reply") -> Completion:
        sent = with_images(messages, images)
        self.requests.append({"messages": sent, "schema": structured.json_schema(schema), "relaxed": relaxed,
                              "stop": stop, "max_tokens": max_tokens, "grammar": grammar})
        text = self._next()
        prompt_chars = sum(len(m["content"]) if isinstance(m.get("content"), str) else
                           sum(len(part.get("text", "")) for part in m.get("content") or ()) for m in messages)
        usage = Usage(prompt_tokens=prompt_chars // 4, completion_tokens=len(text) // 4, cached_tokens=None)
        return checked_completion(text, schema, usage, 0.0)
