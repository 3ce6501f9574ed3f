"""The LM layer's contract: errors, token usage, :class:`Completion`, :class:`Relaxed` and the
:class:`LMBackend` protocol (one ``complete()`` and the constrained-decoding modes a backend
enforces), and :func:`checked_completion`, which every backend uses to turn a reply text into a
:class:`Completion`. Nothing here knows what a reply means."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from lookplangraph.lm.json_reply import check_reply


class LMError(RuntimeError):
    """The LM cannot be used at all (unreachable server, unknown model, bad key, missing package).
    A reply that is merely unreadable is not an LMError but :attr:`LMReply.error`."""


class ContextOverflow(LMError):
    """The prompt does not fit the model's context (llama.cpp's ``n_ctx``, a server's limit): a
    property of the prompt, so a planner may record it as the task's failure and go on."""


class LMUnavailable(LMError):
    """A server did not serve a request after all its retries: unreachable, timed out, or HTTP 408,
    429 or 5xx each time. Unlike other LM errors, it says nothing against the request
    itself, so the same request may succeed at another endpoint (:mod:`lookplangraph.lm.pool`).
    ``refused``: every attempt failed to connect (the server is gone rather than slow);
    ``status``: the last HTTP status, None for connection failures and timeouts."""

    def __init__(self, message: str, *, refused: bool = False, status: int | None = None):
        super().__init__(message)
        self.refused, self.status = refused, status


class AdapterError(LMError):
    """A LoRA adapter that cannot be used with its base: missing, not a GGUF LoRA, cut short, made
    for another base model (tensor shapes, the base's SHA-256 it records), or run with a prompt
    other than its own without saying so. Bad input, not an unavailable LM: the CLI exits 2."""


class ImageError(LMError):
    """An image given to :meth:`LMBackend.complete` cannot be sent: missing file, not an image of a
    type servers accept, too large, or a backend without vision."""


@dataclass
class Usage:
    """Token counts of one request. ``cached_tokens`` is the prompt prefix served from a KV/prefix
    cache, or None when the backend does not report it."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None


@dataclass
class Completion:
    """One :meth:`LMBackend.complete` call. ``parsed`` is set only when a ``schema`` was given and
    the reply conforms to it (a model instance for a pydantic schema, the decoded JSON for a dict
    schema); otherwise ``error`` says what was wrong (no JSON, or the first failing field).
    ``seconds``: wall time including retries."""

    text: str
    parsed: Any = None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        parsed = self.parsed.model_dump() if hasattr(self.parsed, "model_dump") else self.parsed
        return {"text": self.text, "parsed": parsed, "usage": asdict(self.usage), "seconds": self.seconds,
                "error": self.error}


@dataclass(frozen=True)
class Relaxed:
    """What a caller accepts instead of an exact ``schema`` from a backend that cannot enforce that
    schema (see :attr:`LMBackend.constraints`): the looser ``schema``, sampled at the backend's
    retry temperature with its seed moved by ``seed_offset`` (so that a request repeated with a
    different offset can give another reply). Backends that enforce the exact schema ignore it."""

    schema: dict[str, Any] | None
    seed_offset: int


#: :attr:`LMBackend.constraints` values: ``grammar``, any JSON schema (an ``anyOf`` of variants
#: included) and GBNF text are compiled into a grammar and enforced token by token;
#: ``json_schema``, a strict JSON schema with an object root is enforced by the server.
CONSTRAINT_MODES = ("grammar", "json_schema")


@runtime_checkable
class LMBackend(Protocol):
    """A language model. ``name`` identifies model and endpoint (``llamacpp:qwen2.5-coder-0.5b``,
    ``openai:gpt-4o@https://...``) and keys the reply cache."""

    name: str

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None,
                 max_tokens: int | None = None, grammar: str | None = None,
                 relaxed: Relaxed | None = None, schema_name: str = "reply") -> Completion:
        """One chat completion. ``messages`` are OpenAI chat messages; ``images`` (file paths) are
        attached to the last user message; ``schema`` (pydantic model class or JSON-schema dict)
        asks for a structured reply and is validated client-side; ``grammar`` (GBNF text, not
        with ``schema``) constrains a free-text reply where the backend can enforce one (llama.cpp
        in process and llama.cpp servers; elsewhere it is not sent and the reply is free);
        ``relaxed`` is what to send instead of ``schema`` where it cannot be enforced exactly
        (:class:`Relaxed`); ``schema_name`` names the schema for servers that want a name;
        ``max_tokens`` None is the backend's default. Raises :class:`LMError` only when the LM cannot be used (or
        :class:`ImageError` for an image that cannot be sent), never for a bad reply."""

    @property
    def constraints(self) -> frozenset[str]:
        """The constrained-decoding modes the backend enforces now (:data:`CONSTRAINT_MODES`; empty:
        none, the reply is only checked after the fact)."""


def checked_completion(text: str, schema: Any, usage: Usage, seconds: float) -> Completion:
    """The :class:`Completion` of a reply text, its structure checked against ``schema`` here."""
    parsed, error = check_reply(text, schema)
    return Completion(text=text, parsed=parsed, usage=usage, seconds=seconds, error=error)
