"""The backends' shared interface: errors, usage, replies, completions and the :class:`LMBackend`
protocol (the module doc of :mod:`lookplangraph.lm` states the contract), and the helpers
every backend uses to turn a reply text into an :class:`LMReply` or :class:`Completion`."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from sgs.actions import Action

from lookplangraph.agent.decoding import ActionKey
from lookplangraph.agent.replies import check_reply, parse_reply


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
class LMReply:
    """One decision. ``action`` is None exactly when ``error`` is set; ``error`` is a short
    sentence meant to be shown to the LM on the next step. ``seconds``: wall time of
    :meth:`LMBackend.decide` including retries."""

    text: str
    action: Action | None
    reason: str | None
    error: str | None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["action"] = self.action.model_dump() if self.action is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LMReply":
        action = Action.model_validate(d["action"]) if d.get("action") else None
        return cls(text=d["text"], action=action, reason=d.get("reason"), error=d.get("error"),
                   usage=Usage(**(d.get("usage") or {})), seconds=float(d.get("seconds", 0.0)))


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
    """What :meth:`OpenAIBackend.complete` sends instead of ``schema`` in structured modes that do
    not compile a schema to a grammar (``json_schema``: OpenAI's strict mode wants an object root,
    no ``anyOf`` of variants; ``none``; ``auto`` before it falls back): a looser ``schema``,
    sampled at ``temperature`` with ``seed``. :meth:`decide` uses it for excluded actions."""

    schema: dict[str, Any] | None
    temperature: float
    seed: int


@runtime_checkable
class LMBackend(Protocol):
    """A language model. ``name`` identifies model and endpoint (``llamacpp:qwen2.5-coder-0.5b``,
    ``openai:gpt-4o@https://...``) and keys the reply cache."""

    name: str

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None,
                 max_tokens: int | None = None, grammar: str | None = None) -> Completion:
        """One chat completion. ``messages`` are OpenAI chat messages; ``images`` (file paths) are
        attached to the last user message; ``schema`` (pydantic model class or JSON-schema dict)
        asks for a structured reply and is validated client-side; ``grammar`` (GBNF text, not
        with ``schema``) constrains a free-text reply where the backend can enforce one (llama.cpp
        in process and llama.cpp servers; elsewhere it is not sent and the reply is free);
        ``max_tokens`` None is the backend's default. Raises :class:`LMError` only when the LM cannot be used (or
        :class:`ImageError` for an image that cannot be sent), never for a bad reply."""

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        """The next action for the planner's prompt (see the module doc)."""


def action_reply(text: str, usage: Usage, seconds: float) -> LMReply:
    """The :class:`LMReply` of a ``decide`` reply text, read tolerantly (:func:`parse_reply`)."""
    action, reason, error = parse_reply(text)
    return LMReply(text=text, action=action, reason=reason, error=error, usage=usage, seconds=seconds)


def decide_messages(static: str, dynamic: str) -> list[dict[str, str]]:
    """``decide``'s prompt as chat messages: ``static`` the system message, ``dynamic`` the user's."""
    return [{"role": "system", "content": static}, {"role": "user", "content": dynamic}]


def checked_completion(text: str, schema: Any, usage: Usage, seconds: float) -> Completion:
    """The :class:`Completion` of a reply text, its structure checked against ``schema`` here."""
    parsed, error = check_reply(text, schema)
    return Completion(text=text, parsed=parsed, usage=usage, seconds=seconds, error=error)
