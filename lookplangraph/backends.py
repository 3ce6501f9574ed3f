"""Language-model backends behind one interface.

* :meth:`LMBackend.complete` is the general call: chat ``messages`` (optionally with ``images``
  and a ``schema`` for a structured reply) give a :class:`Completion` (text, the parsed and
  validated structure, token usage, seconds). Images go to servers as OpenAI content parts
  (``image_url`` with a base64 data URL; :func:`image_part` checks the file first). A structured
  reply is always validated here (:mod:`lookplangraph.structured`), whatever the server claims to
  enforce: a reply that does not conform has ``parsed=None`` and ``error`` set, it never raises.
* :meth:`LMBackend.decide` turns the planner's prompt into the next action; it is a thin use of
  ``complete`` with the action schema of :mod:`lookplangraph.decoding` and tolerant parsing
  (:func:`parse_reply`).

For ``decide``:

* ``static`` is the system message. Keep it byte-identical across the steps of an episode: the
  backends (llama.cpp in process, ``llama_cpp.server``, vLLM with ``--enable-prefix-caching``,
  OpenAI) then reuse its KV cache and only the ``dynamic`` user message is evaluated anew.
* ``names`` are the node names the LM may use: a list, or a per-function :data:`Vocabulary`
  (``{"go_to": {"node": rooms}, "pick_up": {"node": seen objects}, ...}``). Backends with
  constrained decoding restrict ``node``/``destination`` to them (JSON-schema ``enum``),
  ``function_name`` to :data:`sgs.actions.FUNCTIONS` (or the vocabulary's functions) and
  ``relation`` to ``ontop``/``inside``/null. In process, llama.cpp ties each function to its own
  names (:func:`typed_action_schema`); servers get the flat schema over all names.
* ``excluded`` are actions (:data:`lookplangraph.decoding.ActionKey`) the decode must not produce:
  replies already refused in the current memory state and actions that cannot be accepted in it.
  llama.cpp in process removes them from the grammar (:func:`constrained_schema`); servers do so
  when the structured mode is grammar-based (``json_object``, ``guided_json``,
  ``structured_outputs``); with ``json_schema`` (OpenAI's strict mode needs an object at the
  root, so no ``anyOf`` of variants) and ``none`` the fallback is sampling at
  ``retry_temperature`` with a seed that changes with each exclusion, and the planner refuses a
  reply that repeats an excluded action without trying it.

Reply format (see :func:`action_schema`)::

    {"function_name": "pick_up", "node": "apple-1", "relation": null, "destination": null,
     "reason": "the apple is on the table"}

The action comes first and ``reason`` last by default: with small models (0.5B-1.5B) a reason
written first tends to grow long and drift away from the names, and a reply cut off by
``max_tokens`` inside the reason still carries a complete action (:func:`parse_reply` repairs the
cut). Pass ``reason_first=True`` for larger models that profit from reasoning before they act.

Backend specs for :func:`make_backend`: ``llamacpp:qwen2.5-coder-1.5b`` (a model of
:mod:`lookplangraph.models`), ``llamacpp:/path/model.gguf``, ``openai:MODEL`` (OpenAI, or
``$OPENAI_BASE_URL``), ``openai:MODEL@http://host:port/v1`` (vLLM, Ollama, llama.cpp server),
``scripted:REPLY1||REPLY2`` (fixed replies, for tests).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Protocol, Sequence, runtime_checkable

from sgs.actions import Action

from lookplangraph import structured
from lookplangraph.replies import check_reply, parse_reply, read_json  # re-exported
from lookplangraph.decoding import (  # re-exported: the reply schema belongs to the backends' interface
    ActionKey, ActionReply, Vocabulary, action_schema, constrained_schema, flat_names, reply_format_instructions,
    typed_action_schema,
)

__all__ = [
    "Usage", "LMReply", "Completion", "Relaxed", "LMBackend", "LMError", "ImageError", "image_part", "image_mime",
    "with_images", "read_json", "check_reply", "ActionKey", "ActionReply", "Vocabulary", "action_schema",
    "constrained_schema", "flat_names", "typed_action_schema", "parse_reply",
    "reply_format_instructions", "ContextOverflow", "LMUnavailable", "OpenAIBackend", "LlamaCppBackend", "ScriptedBackend",
    "make_backend", "parse_spec",
]


class LMError(RuntimeError):
    """The LM cannot be used at all (unreachable server, unknown model, bad key, missing package).
    A reply that is merely unreadable is not an LMError but :attr:`LMReply.error`."""


class ContextOverflow(LMError):
    """The prompt does not fit the model's context (llama.cpp's ``n_ctx``, a server's limit): a
    property of the prompt, so a planner may record it as the task's failure and go on."""


class LMUnavailable(LMError):
    """A server did not serve a request after all its retries: unreachable, timed out, or HTTP 408,
    429 or 5xx each time. Unlike other LM errors, it says nothing against the request
    itself, so the same request may succeed at another endpoint (:mod:`lookplangraph.endpoints`).
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


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

#: The image types OpenAI-compatible servers take in ``image_url`` parts, by their magic bytes.
_MAGIC: tuple[tuple[bytes, int, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", 0, "image/png"),
    (b"\xff\xd8\xff", 0, "image/jpeg"),
    (b"GIF87a", 0, "image/gif"),
    (b"GIF89a", 0, "image/gif"),
    (b"WEBP", 8, "image/webp"),  # after "RIFF" and the size
)

#: OpenAI's limit per image (20 MB); a backend's ``max_image_bytes`` changes it.
DEFAULT_MAX_IMAGE_BYTES = 20 * 1024 * 1024


def image_mime(data: bytes) -> str | None:
    """MIME type of PNG, JPEG, GIF or WebP bytes by their magic bytes, else None."""
    for magic, offset, mime in _MAGIC:
        if data[offset: offset + len(magic)] == magic and (mime != "image/webp" or data[:4] == b"RIFF"):
            return mime
    return None


def image_part(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part with the file as a base64 data URL. Raises
    :class:`ImageError` when the file is missing, empty, larger than ``max_bytes`` or not a PNG,
    JPEG, GIF or WebP image (checked by its bytes, not its name)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ImageError(f"image {path}: no such file")
    size = path.stat().st_size
    if size == 0:
        raise ImageError(f"image {path}: the file is empty")
    if size > max_bytes:
        raise ImageError(f"image {path}: {size:,} bytes is over the limit of {max_bytes:,} bytes "
                         f"(scale it down, or raise the backend's max_image_bytes)")
    data = path.read_bytes()
    mime = image_mime(data)
    if mime is None:
        raise ImageError(f"image {path}: not a PNG, JPEG, GIF or WebP image (first bytes {data[:8]!r})")
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}}


def with_images(messages: list[dict[str, Any]], images: Sequence[str | os.PathLike] | None,
                max_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> list[dict[str, Any]]:
    """A copy of ``messages`` whose last user message carries ``images`` as content parts after
    its text (a user message is appended when there is none). Unchanged without images."""
    if not images:
        return list(messages)
    parts = [image_part(p, max_bytes) for p in images]
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            m["content"] = [*(content or []), *parts]
            return out
    out.append({"role": "user", "content": parts})
    return out


def _reply(text: str, usage: Usage, seconds: float) -> LMReply:
    action, reason, error = parse_reply(text)
    return LMReply(text=text, action=action, reason=reason, error=error, usage=usage, seconds=seconds)


def _messages(static: str, dynamic: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": static}, {"role": "user", "content": dynamic}]


def _completion(text: str, schema: Any, usage: Usage, seconds: float) -> Completion:
    parsed, error = check_reply(text, schema)
    return Completion(text=text, parsed=parsed, usage=usage, seconds=seconds, error=error)


# --------------------------------------------------------------------------------------------
# OpenAI-compatible servers
# --------------------------------------------------------------------------------------------

STRUCTURED_MODES = ("json_schema", "json_object", "guided_json", "structured_outputs", "none", "auto")
#: Where a ``grammar`` (GBNF) of :meth:`OpenAIBackend.complete` goes in each structured mode whose
#: servers read one: the llama.cpp server's ``grammar`` field, vLLM's ``guided_grammar`` (before
#: 0.12) and ``structured_outputs.grammar``. OpenAI itself takes no grammar (modes
#: ``json_schema``, ``auto``, ``none``): there the reply is unconstrained.
GRAMMAR_FIELDS: dict[str, tuple[str, Any]] = {
    "json_object": ("grammar", lambda g: g),
    "guided_json": ("guided_grammar", lambda g: g),
    "structured_outputs": ("structured_outputs", lambda g: {"grammar": g}),
}
#: Structured modes whose servers compile the schema to a grammar and so accept an ``anyOf`` of
#: variants at the root: excluded actions are removed from the schema there.
GRAMMAR_MODES = ("json_object", "guided_json", "structured_outputs")


class OpenAIBackend:
    """Chat completions through the ``openai`` package: OpenAI, ``vllm serve``, Ollama,
    ``llama_cpp.server`` / llama.cpp's ``llama-server``.

    ``structured`` selects how the reply schema is enforced:

    * ``json_schema``: ``response_format={"type": "json_schema", ...strict}``; OpenAI, vLLM, Ollama.
    * ``json_object``: ``response_format={"type": "json_object", "schema": ...}``; the llama.cpp
      servers (they answer HTTP 500 to ``json_schema``).
    * ``guided_json``: ``extra_body={"guided_json": schema}``; vLLM before 0.12.
    * ``structured_outputs``: ``extra_body={"structured_outputs": {"json": schema}}``; vLLM >= 0.12.
    * ``none``: no constraint, the reply is parsed tolerantly.
    * ``auto``: ``json_schema``; if the server rejects it (HTTP 400/422/500) on the first request,
      ``json_object`` from then on.

    The same modes carry the ``schema`` of :meth:`complete` (``json_schema`` sends it with
    ``strict: true``, so there it must be an object whose properties are all required and which
    forbids others). Images (:meth:`complete`) go as ``image_url`` parts with base64 data URLs:
    ``vllm serve`` of a vision model and OpenAI take them; a llama.cpp server only with its
    ``--mmproj`` projector. ``max_image_bytes`` caps each image (default 20 MB).

    Configuration: arguments, else ``$LOOKPLANGRAPH_LM_MODEL``, ``$OPENAI_BASE_URL``,
    ``$OPENAI_API_KEY`` (a placeholder key is used for a non-OpenAI ``base_url``). Timeouts, HTTP
    429 and 5xx and connection failures are retried ``max_retries`` times with exponential backoff
    (``backoff * 2**attempt`` seconds, capped at 30 s, or the server's Retry-After); then
    :class:`LMUnavailable` is raised, and :class:`LMError` for 404 (unknown model; the server's
    models are listed), 401 and 400.

    Hooks for an endpoint pool (:mod:`lookplangraph.endpoints`): ``gate`` (a callable returning a
    context manager) is entered around every HTTP attempt, retries included (per-endpoint
    concurrency and rate limits); ``give_up`` is asked while waiting for each retry and, when it
    returns True (the endpoint was taken out meanwhile), the retries stop with
    :class:`LMUnavailable`.
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 structured: str = "json_schema", timeout: float = 120.0, max_retries: int = 4,
                 temperature: float = 0.0, max_tokens: int = 200, seed: int | None = 0,
                 reason_first: bool = False, reason_max_length: int | None = None, backoff: float = 1.0,
                 extra_body: dict[str, Any] | None = None, retry_temperature: float = 0.7,
                 max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES, gate: Callable[[], ContextManager[Any]] | None = None,
                 give_up: Callable[[], bool] | None = None):
        try:
            import openai
        except ImportError:
            raise LMError("the OpenAI backend needs the openai package: pip install 'openai>=1.40'") from None
        self._openai = openai
        self.model = model or os.environ.get("LOOKPLANGRAPH_LM_MODEL") or ""
        if not self.model:
            raise LMError("no model name: pass one (openai:MODEL) or set LOOKPLANGRAPH_LM_MODEL")
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            if self.base_url is None or "api.openai.com" in self.base_url:
                raise LMError("no API key for OpenAI: set OPENAI_API_KEY (or give base_url of a local server)")
            key = "not-needed"
        if structured not in STRUCTURED_MODES:
            raise LMError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, got {structured!r}")
        self.structured = structured
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), float(backoff)
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.retry_temperature = float(retry_temperature)
        self.reason_first, self.reason_max_length = reason_first, reason_max_length
        self.extra_body = dict(extra_body or {})
        self.max_image_bytes = int(max_image_bytes)
        self.url = self.base_url or "https://api.openai.com/v1"
        self.name = f"openai:{self.model}" + (f"@{self.base_url}" if self.base_url else "")
        # a plain-HTTP server (a local vLLM) needs no TLS: skip loading the CA store, which costs
        # ~30 ms of CPU per client, once per worker of an evaluation
        http_client = (openai.DefaultHttpxClient(verify=False)
                       if self.base_url and self.base_url.startswith("http://") else None)
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0,
                                    http_client=http_client)
        self._auto_fallback_done = structured != "auto"
        self._gate, self._give_up = gate, give_up

    def _request(self, messages: list[dict[str, Any]], mode: str, schema: dict[str, Any] | None,
                 relaxed: Relaxed | None, stop: Sequence[str] | None, max_tokens: int | None,
                 schema_name: str, grammar: str | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                              "max_tokens": self.max_tokens if max_tokens is None else max_tokens}
        if self.seed is not None:
            kw["seed"] = self.seed
        if stop:
            kw["stop"] = list(stop)
        if relaxed is not None and mode not in GRAMMAR_MODES:  # the schema cannot be enforced exactly here
            schema = relaxed.schema
            kw["temperature"], kw["seed"] = relaxed.temperature, relaxed.seed
        # response_format goes in extra_body: the same JSON on the wire, but the openai package
        # walks its typed parameters recursively, and over a schema with hundreds of names that
        # cost more CPU than the rest of the request (benchmarks/bench_eval_throughput.py)
        extra: dict[str, Any] = {}
        if mode != "none" and schema is not None:
            if mode in ("json_schema", "auto"):
                extra["response_format"] = {"type": "json_schema",
                                            "json_schema": {"name": schema_name, "schema": schema, "strict": True}}
            elif mode == "json_object":
                extra["response_format"] = {"type": "json_object", "schema": schema}
            elif mode == "guided_json":
                extra["guided_json"] = schema
            elif mode == "structured_outputs":
                extra["structured_outputs"] = {"json": schema}
        if grammar is not None and mode in GRAMMAR_FIELDS:
            key, value = GRAMMAR_FIELDS[mode]
            extra[key] = value(grammar)
        extra.update(self.extra_body)
        if extra:
            kw["extra_body"] = extra
        return kw

    def _post(self, request: dict[str, Any]) -> Any:
        """``POST /chat/completions`` with ``request`` (as :meth:`_request` builds it) as the JSON
        body. The same request as ``client.chat.completions.create(**request)`` and the same
        errors, without the package's recursive walk over the typed parameters (``post`` is its
        documented way to send a body as it is), which costs a third of a request's CPU."""
        body = {k: v for k, v in request.items() if k != "extra_body"}
        body.update(request.get("extra_body") or {})
        return self.client.post("/chat/completions", body=body, cast_to=self._openai.types.chat.ChatCompletion)

    def _wait_to_retry(self, delay: float) -> bool:
        """Sleep ``delay`` seconds before a retry; True (at once) when ``give_up`` says to stop."""
        if self._give_up is None:
            time.sleep(delay)
            return False
        end = time.monotonic() + delay
        while True:
            if self._give_up():
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.2))

    def _server_models(self) -> list[str] | None:
        try:
            return [m.id for m in self.client.models.list()]
        except Exception:
            return None

    def _delay(self, attempt: int, exc: Exception) -> float:
        delay = min(30.0, self.backoff * (2 ** attempt))
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            if retry_after is not None:
                delay = max(delay, min(30.0, float(retry_after)))
        except ValueError:
            pass
        return delay

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 relaxed: Relaxed | None = None, schema_name: str = "reply", grammar: str | None = None) -> Completion:
        """One chat completion (:meth:`LMBackend.complete`); see the class docstring for the
        structured modes, retries and errors. ``relaxed``: what to send in modes that cannot
        enforce ``schema`` exactly (:class:`Relaxed`); ``schema_name`` names it for ``json_schema``;
        ``grammar`` goes where the mode's server reads one (:data:`GRAMMAR_FIELDS`), else nowhere."""
        if grammar is not None and schema is not None:
            raise ValueError("complete() takes a schema or a grammar, not both")
        oa = self._openai
        messages = with_images(messages, images, self.max_image_bytes)
        wire_schema = structured.json_schema(schema)
        t0 = time.perf_counter()
        attempt = 0
        refused = True  # every attempt so far failed to connect
        while True:
            mode = self.structured
            try:
                request = self._request(messages, mode, wire_schema, relaxed, stop, max_tokens, schema_name, grammar)
                if self._gate is None:
                    resp = self._post(request)
                else:
                    with self._gate():
                        resp = self._post(request)
                break
            except (oa.APIConnectionError, oa.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                if mode == "auto" and not self._auto_fallback_done and status in (400, 422, 500):
                    self.structured, self._auto_fallback_done = "json_object", True
                    continue
                if status == 404:
                    models = self._server_models()
                    listing = (f"; the server has: {', '.join(models)}" if models
                               else "; /models did not answer either: check base_url (it usually ends in /v1)")
                    raise LMError(f"model {self.model!r} not found at {self.url} (HTTP 404){listing}") from None
                if status in (401, 403):
                    raise LMError(f"{self.url} refused the API key (HTTP {status}): set OPENAI_API_KEY") from None
                if status is not None and status >= 500 and mode in ("json_schema", "auto") and "response_format" in str(exc):
                    raise LMError(f"{self.url} does not accept response_format json_schema (HTTP {status}); "
                                  f"use structured='json_object' (llama.cpp servers) or 'auto'") from None
                retryable = status is None or status == 408 or status == 429 or status >= 500
                if status == 400 and re.search(r"context|maximum.*tokens|too long", str(exc), re.I):
                    raise ContextOverflow(f"{self.url}: the prompt does not fit the model's context: {_short(exc)}") from None
                if not retryable:
                    hint = (f"; try structured='json_object' or 'none' instead of {mode!r}"
                            if mode != "none" and re.search(r"response_format|schema|guided|structured", str(exc)) else "")
                    raise LMError(f"{self.url} rejected the request (HTTP {status}): {_short(exc)}{hint}") from None
                timed_out = isinstance(exc, oa.APITimeoutError)
                refused = refused and status is None and not timed_out
                given_up = attempt < self.max_retries and self._wait_to_retry(self._delay(attempt, exc))
                if attempt >= self.max_retries or given_up:
                    if timed_out:
                        what = f"did not answer within {self.timeout:g} s"
                    elif status is None:
                        what = "is unreachable"
                    else:
                        what = f"answered HTTP {status}"
                    raise LMUnavailable(f"the LM server at {self.url} {what} after {attempt + 1} attempts"
                                        f"{' (given up: the endpoint was taken out)' if given_up else ''}: {_short(exc)}",
                                        refused=refused, status=status) from None
                attempt += 1
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        u = resp.usage
        cached = None
        if u is not None:
            details = getattr(u, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) if details is not None else None
        usage = Usage(prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(u, "completion_tokens", 0) or 0, cached_tokens=cached)
        return _completion(text, schema, usage, time.perf_counter() - t0)

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        """The next action: :meth:`complete` with the action schema minus ``excluded``; where the
        structured mode cannot enforce that (see :class:`Relaxed`), the schema without exclusions,
        sampled at ``retry_temperature`` with a seed that changes with each exclusion."""
        kw = {"reason_first": self.reason_first, "reason_max_length": self.reason_max_length}
        relaxed = None
        schema = constrained_schema(names, (), **kw)
        if excluded:
            relaxed = Relaxed(schema, max(self.temperature, self.retry_temperature), (self.seed or 0) + len(excluded))
            # the schema without the excluded actions is sent only in grammar modes (``auto`` may
            # fall back to one); elsewhere building it is wasted, and it is the costliest part of
            # a request's CPU (an anyOf of variants over every name)
            if self.structured in GRAMMAR_MODES or not self._auto_fallback_done:
                schema = constrained_schema(names, excluded, **kw)
        c = self.complete(_messages(static, dynamic), schema=schema, relaxed=relaxed, schema_name="next_action")
        return _reply(c.text, c.usage, c.seconds)


def _short(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return msg.splitlines()[0][:300]


# --------------------------------------------------------------------------------------------
# llama.cpp in process
# --------------------------------------------------------------------------------------------

def default_threads() -> int:
    """``$LOOKPLANGRAPH_THREADS`` when set (a positive integer); otherwise the CPUs available to
    this process minus the 1-minute load average rounded down, at least 1: all CPUs on an idle
    machine, 1 on a 2-CPU machine that already runs one busy process. The load average lags: a
    run started right after another LM run ended still sees its load, so scripts that run
    evaluations back to back set the variable."""
    env = os.environ.get("LOOKPLANGRAPH_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise LMError(f"LOOKPLANGRAPH_THREADS must be a positive integer, not {env!r}")
        return int(env)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return max(1, min(cpus, cpus - int(load)))


def default_gpu_layers() -> int:
    """``$LOOKPLANGRAPH_GPU_LAYERS`` when set (an integer: layers offloaded to the GPU, -1 for
    all); otherwise 0. It matters only for a llama-cpp-python built with a GPU backend (e.g.
    ``CMAKE_ARGS="-DGGML_CUDA=on" pip install llama-cpp-python``); a CPU build ignores it. An
    explicit ``n_gpu_layers`` in ``lm_options`` wins."""
    env = os.environ.get("LOOKPLANGRAPH_GPU_LAYERS", "").strip()
    if not env:
        return 0
    try:
        layers = int(env)
    except ValueError:
        raise LMError(f"LOOKPLANGRAPH_GPU_LAYERS must be an integer (-1 for all layers), not {env!r}") from None
    if layers < -1:
        raise LMError(f"LOOKPLANGRAPH_GPU_LAYERS must be -1 (all layers) or more, not {layers}")
    return layers


class LlamaCppBackend:
    """A GGUF model run in process through ``llama-cpp-python``.

    ``model`` is a name of :data:`lookplangraph.models.MODELS` (assembled on first use) or a path
    to a ``.gguf`` file. Decoding is greedy (``temperature=0``) and constrained by a grammar built
    from :func:`action_schema` (what ``response_format={"type": "json_object", "schema": ...}``
    does, except that a schema the converter cannot handle raises :class:`LMError` instead of
    silently falling back to free JSON). Grammars are cached per schema.

    Prompt cache: llama-cpp-python keeps the tokens of the previous call in its KV cache and only
    evaluates the part of the new prompt after the longest common token prefix. ``cached_tokens``
    reports that prefix: the tokens held before the call compared with the new prompt's tokens.
    ``n_threads`` (also used for prompt processing) defaults to :func:`default_threads`: the CPUs
    not already busy. llama.cpp threads spin at barriers, so on an oversubscribed machine
    asking for more threads than idle CPUs is several times slower, not faster.
    ``n_gpu_layers`` defaults to :func:`default_gpu_layers` (0 unless ``$LOOKPLANGRAPH_GPU_LAYERS``).

    :meth:`complete` compiles its ``schema`` to a grammar the same way (cached per schema).
    Images need a multimodal model: the language GGUF as ``model``, its projector as ``mmproj``
    and the llama-cpp-python chat handler of that family as ``chat_handler`` (a key of
    :data:`VISION_HANDLERS`: ``qwen2.5-vl``, ``llava-1-5``, ``llava-1-6``, ``moondream``,
    ``nanollava``, ``llama-3-vision-alpha``, ``minicpm-v-2.6``, ``mtmd``, ``gemma4``; the names of
    ``llama_cpp.server``'s ``--chat_format``). Without ``mmproj`` an image request raises
    :class:`ImageError`. Image embeddings take context: use ``n_ctx`` >= 4096.
    """

    def __init__(self, model: str | os.PathLike = "qwen2.5-coder-1.5b", n_ctx: int = 4096, n_threads: int | None = None,
                 seed: int = 0, temperature: float = 0.0, max_tokens: int = 200, reason_first: bool = False,
                 reason_max_length: int | None = 300, verbose: bool = False, mmproj: str | os.PathLike | None = None,
                 chat_handler: str | None = None, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES, **llama_kwargs: Any):
        try:
            import llama_cpp
        except ImportError:
            raise LMError("the llamacpp backend needs llama-cpp-python (built from source, ~8 min on 2 cores): "
                          "pip install 'llama-cpp-python>=0.3.16'") from None
        from lookplangraph import models

        self._llama_cpp = llama_cpp
        model = str(model)
        if model in models.MODELS:
            try:
                path = models.ensure_model(model)
            except models.ModelError as exc:
                raise LMError(str(exc)) from None
            label = model
        else:
            path = Path(model).expanduser()
            if not path.is_file():
                raise LMError(f"no model file {path} and no model named {model!r} "
                              f"(known: {', '.join(models.MODELS)})")
            label = str(path)
        if n_threads is None:
            n_threads = default_threads()
        llama_kwargs.setdefault("n_threads_batch", n_threads)
        llama_kwargs.setdefault("n_gpu_layers", default_gpu_layers())
        self.path, self.name = path, f"llamacpp:{label}"
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.reason_first, self.reason_max_length = reason_first, reason_max_length
        self.max_image_bytes = int(max_image_bytes)
        self.vision = None
        if mmproj is not None or chat_handler is not None:
            llama_kwargs["chat_handler"] = self.vision = _vision_handler(llama_cpp, mmproj, chat_handler, verbose)
        try:
            self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                                       verbose=verbose, **llama_kwargs)
        except Exception as exc:
            raise LMError(f"llama.cpp could not load {path}: {exc}") from None
        self._grammars: dict[str | None, Any] = {}

    def _grammar(self, schema: dict[str, Any] | None, gbnf: str | None = None) -> Any:
        """The compiled grammar of a reply schema or of GBNF text (cached)."""
        key = json.dumps(schema, sort_keys=True) if gbnf is None else "gbnf:" + gbnf
        g = self._grammars.get(key)
        if g is None:
            try:
                if gbnf is None:
                    g = self._llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
                else:
                    g = self._llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
            except Exception as exc:
                what = "the reply schema" if gbnf is None else "the GBNF grammar"
                raise LMError(f"llama.cpp cannot turn {what} into a grammar: {exc}") from None
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[key] = g
        return g

    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None) -> Completion:
        """One chat completion (:meth:`LMBackend.complete`), constrained by the grammar of
        ``schema`` or by the GBNF ``grammar``; raises :class:`LMError` only if the prompt does not fit the context or
        llama.cpp fails, :class:`ImageError` for images without a vision model."""
        if images and self.vision is None:
            raise ImageError(f"{self.name} cannot see images: load a multimodal model with its projector "
                             f"(mmproj=PATH, chat_handler=one of {', '.join(VISION_HANDLERS)})")
        messages = with_images(messages, images, self.max_image_bytes)
        if grammar is not None and schema is not None:
            raise ValueError("complete() takes a schema or a grammar, not both")
        wire_schema = structured.json_schema(schema)
        if grammar is not None:
            grammar = self._grammar(None, grammar)
        elif wire_schema is not None:
            grammar = self._grammar(wire_schema)
        before = self.llm.input_ids[: self.llm.n_tokens].tolist()
        t0 = time.perf_counter()
        try:
            out = self.llm.create_chat_completion(
                messages=messages, temperature=self.temperature,
                max_tokens=self.max_tokens if max_tokens is None else max_tokens,
                seed=self.seed, grammar=grammar, stop=list(stop) if stop else [])
        except ValueError as exc:  # e.g. "Requested tokens (...) exceed context window"
            kind = ContextOverflow if "context" in str(exc).lower() else LMError
            raise kind(f"{self.name}: {exc} (raise n_ctx in lm_options)") from None
        seconds = time.perf_counter() - t0
        u = out.get("usage") or {}
        n_prompt = int(u.get("prompt_tokens", 0))
        prompt_ids = self.llm.input_ids[:n_prompt].tolist()
        common = 0
        for a, b in zip(before, prompt_ids):
            if a != b:
                break
            common += 1
        cached = min(common, max(n_prompt - 1, 0))  # a fully cached prompt replays its last token
        usage = Usage(prompt_tokens=n_prompt, completion_tokens=int(u.get("completion_tokens", 0)), cached_tokens=cached)
        text = out["choices"][0]["message"].get("content") or ""
        return _completion(text, schema, usage, seconds)

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        """One constrained chat completion (``excluded`` removed from the grammar); raises
        :class:`LMError` only if the prompt does not fit the context or llama.cpp fails."""
        schema = constrained_schema(names, excluded, reason_first=self.reason_first,
                                    reason_max_length=self.reason_max_length)
        c = self.complete(_messages(static, dynamic), schema=schema)
        return _reply(c.text, c.usage, c.seconds)


#: ``chat_handler`` names of :class:`LlamaCppBackend` (as ``llama_cpp.server --chat_format``) and
#: the llama-cpp-python 0.3.36 classes that put images into the prompt of each model family.
VISION_HANDLERS = {
    "qwen2.5-vl": "Qwen25VLChatHandler",
    "llava-1-5": "Llava15ChatHandler",
    "llava-1-6": "Llava16ChatHandler",
    "moondream": "MoondreamChatHandler",
    "nanollava": "NanoLlavaChatHandler",
    "llama-3-vision-alpha": "Llama3VisionAlphaChatHandler",
    "minicpm-v-2.6": "MiniCPMv26ChatHandler",
    "mtmd": "MTMDChatHandler",
    "gemma4": "Gemma4ChatHandler",
}


def _vision_handler(llama_cpp: Any, mmproj: str | os.PathLike | None, name: str | None, verbose: bool) -> Any:
    if mmproj is None or name is None:
        raise LMError("images in process need both mmproj=PATH (the model's projector GGUF) and chat_handler=NAME "
                      f"(one of {', '.join(VISION_HANDLERS)})")
    if name not in VISION_HANDLERS:
        raise LMError(f"unknown chat_handler {name!r}; known: {', '.join(VISION_HANDLERS)}")
    path = Path(mmproj).expanduser()
    if not path.is_file():
        raise LMError(f"no projector file {path} (mmproj)")
    from llama_cpp import llama_chat_format

    cls = getattr(llama_chat_format, VISION_HANDLERS[name], None)
    if cls is None:
        raise LMError(f"this llama-cpp-python has no {VISION_HANDLERS[name]} (chat_handler {name!r}); "
                      "install llama-cpp-python==0.3.36")
    try:
        return cls(clip_model_path=str(path), verbose=verbose)
    except Exception as exc:
        raise LMError(f"llama.cpp could not load the projector {path} with {cls.__name__}: {exc}") from None


# --------------------------------------------------------------------------------------------
# Scripted replies (tests, demos)
# --------------------------------------------------------------------------------------------

class ScriptedBackend:
    """Replays fixed reply texts in order (the last one repeats); not a language model. For tests
    of the planner loop, the parser and the graph augmentation. ``decide`` and ``complete`` share
    the replies; ``complete`` checks images (:func:`image_part`) and the schema as real backends
    do and records each request in ``requests``. Usage counts are rough (characters / 4)."""

    def __init__(self, replies: list[str], name: str = "scripted"):
        if not replies:
            raise ValueError("ScriptedBackend needs at least one reply")
        self.replies, self.name, self.calls = list(replies), name, 0
        self.prompts: list[tuple[str, str, list[str] | None]] = []
        self.excluded: list[list[ActionKey]] = []  # what each call was asked not to produce (ignored)
        self.requests: list[dict[str, Any]] = []  # complete(): messages (with image parts), schema, stop, max_tokens

    def _next(self) -> str:
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        return text

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 grammar: str | None = None) -> Completion:
        sent = with_images(messages, images)
        self.requests.append({"messages": sent, "schema": structured.json_schema(schema), "stop": stop,
                              "max_tokens": max_tokens, "grammar": grammar})
        text = self._next()
        prompt_chars = sum(len(m["content"]) if isinstance(m.get("content"), str) else
                           sum(len(part.get("text", "")) for part in m.get("content") or ()) for m in messages)
        usage = Usage(prompt_tokens=prompt_chars // 4, completion_tokens=len(text) // 4, cached_tokens=None)
        return _completion(text, schema, usage, 0.0)

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        text = self._next()
        self.prompts.append((static, dynamic, names))
        self.excluded.append(list(excluded))
        usage = Usage(prompt_tokens=(len(static) + len(dynamic)) // 4, completion_tokens=len(text) // 4, cached_tokens=None)
        return _reply(text, usage, 0.0)


# --------------------------------------------------------------------------------------------
# Specs
# --------------------------------------------------------------------------------------------

def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``(kind, model, base_url)`` of a backend spec; raises :class:`LMError` for an unknown kind.

    ``llamacpp:NAME|PATH``; ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` (split at the last
    ``@`` followed by ``http://`` or ``https://``; MODEL may be empty to use
    ``$LOOKPLANGRAPH_LM_MODEL``); ``scripted:TEXT`` (replies separated by ``||``).
    """
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if not sep:
        raise LMError(f"backend spec {spec!r} has no kind; use llamacpp:MODEL, openai:MODEL[@BASE_URL] or scripted:REPLY")
    if kind in ("llamacpp", "llama.cpp", "llama_cpp"):
        from lookplangraph.models import DEFAULT_MODEL
        return "llamacpp", rest.strip() or DEFAULT_MODEL, None
    if kind == "openai":
        m = re.match(r"^(.*)@(https?://.+)$", rest.strip())
        if m:
            return "openai", m.group(1), m.group(2)
        return "openai", rest.strip(), None
    if kind == "scripted":
        return "scripted", rest, None
    raise LMError(f"unknown backend kind {kind!r} in {spec!r}; use llamacpp:, openai: or scripted:")


def make_backend(spec: str, **opts: Any) -> LMBackend:
    """Build a backend from a spec (see :func:`parse_spec`); ``opts`` go to its constructor.

    Examples: ``llamacpp:qwen2.5-coder-1.5b``, ``llamacpp:/models/x.gguf``, ``openai:gpt-4o``,
    ``openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1`` (vLLM),
    ``openai:qwen2.5-coder:1.5b@http://localhost:11434/v1`` (Ollama),
    ``openai:local@http://127.0.0.1:8080/v1`` with ``structured="json_object"`` (llama.cpp server).
    """
    kind, model, base_url = parse_spec(spec)
    pool_keys = sorted({"endpoints", "endpoint_concurrency", "endpoint_rate", "endpoint_failures"} & set(opts))
    if pool_keys:
        raise LMError(f"{', '.join(pool_keys)} belong to an endpoint pool, which one backend is not: "
                      "build the workers' backends with lookplangraph.endpoints.pool_factory (as eval does)")
    if kind == "llamacpp":
        return LlamaCppBackend(model, **opts)
    if kind == "openai":
        return OpenAIBackend(model or None, base_url=base_url or opts.pop("base_url", None), **opts)
    return ScriptedBackend(model.split("||"), **opts)
