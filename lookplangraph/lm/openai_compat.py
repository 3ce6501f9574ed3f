"""Chat completions from OpenAI-compatible servers: OpenAI, vLLM, Ollama, llama.cpp's servers."""

from __future__ import annotations

import os
import re
import time
from typing import Any, Callable, ContextManager, Sequence

from lookplangraph.lm import plain_http, structured
from lookplangraph.lm.base import Completion, ContextOverflow, LMError, LMUnavailable, Relaxed, Usage, checked_completion
from lookplangraph.lm.images import DEFAULT_MAX_IMAGE_BYTES, with_images


STRUCTURED_MODES = ("json_schema", "json_object", "guided_json", "structured_outputs", "none", "auto")
#: the structured mode of an :class:`OpenAIBackend` made without one
DEFAULT_STRUCTURED = "json_schema"
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


def mode_constraints(mode: str, fallback_done: bool = True) -> frozenset[str]:
    """:attr:`LMBackend.constraints` of a structured mode: a grammar in :data:`GRAMMAR_MODES`, a
    strict JSON schema in ``json_schema``; ``auto`` is ``json_schema`` that may fall back to a
    grammar mode on its first request, so before that it claims both (a caller then sends the exact
    schema, and :class:`Relaxed` for the case it stays ``json_schema``); ``none`` enforces nothing."""
    if mode in GRAMMAR_MODES:
        return frozenset({"grammar"})
    if mode == "json_schema" or (mode == "auto" and fallback_done):
        return frozenset({"json_schema"})
    if mode == "auto":
        return frozenset({"json_schema", "grammar"})
    return frozenset()


class OpenAIBackend:
    """Chat completions from OpenAI-compatible servers: OpenAI, ``vllm serve``, Ollama,
    ``llama_cpp.server`` / llama.cpp's ``llama-server``. ``http://`` servers are spoken to with
    the standard library (:mod:`lookplangraph.lm.plain_http`: the ``openai`` package's client
    was half of an evaluation's CPU per call), OpenAI and other ``https://`` or proxied URLs
    through the ``openai`` package; both send the same requests and fail the same ways.

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

    Hooks for an endpoint pool (:mod:`lookplangraph.lm.pool`): ``gate`` (a callable returning a
    context manager) is entered around every HTTP attempt, retries included (per-endpoint
    concurrency and rate limits); ``give_up`` is asked while waiting for each retry and, when it
    returns True (the endpoint was taken out meanwhile), the retries stop with
    :class:`LMUnavailable`.
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 structured: str = DEFAULT_STRUCTURED, timeout: float = 120.0, max_retries: int = 4,
                 temperature: float = 0.0, max_tokens: int = 200, seed: int | None = 0, backoff: float = 1.0,
                 extra_body: dict[str, Any] | None = None, retry_temperature: float = 0.7,
                 max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES, gate: Callable[[], ContextManager[Any]] | None = None,
                 give_up: Callable[[], bool] | None = None):
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
        self.extra_body = dict(extra_body or {})
        self.max_image_bytes = int(max_image_bytes)
        self.url = self.base_url or "https://api.openai.com/v1"
        self.name = f"openai:{self.model}" + (f"@{self.base_url}" if self.base_url else "")
        # plain-HTTP servers (vLLM, llama.cpp on a network) through the standard library, the rest
        # (OpenAI, TLS, proxies) through the openai package (lookplangraph.lm.plain_http)
        self._plain = self.client = None
        if plain_http.usable_for(self.base_url):
            self._plain = plain_http.PlainHTTP(self.base_url, {"Authorization": f"Bearer {key}"}, self.timeout)
        else:
            try:
                import openai
            except ImportError:
                raise LMError("the OpenAI backend needs the openai package for https:// and proxied servers: "
                              "pip install 'openai>=1.40'") from None
            self._openai = openai
            self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)
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
            kw["temperature"] = max(self.temperature, self.retry_temperature)
            kw["seed"] = (self.seed or 0) + relaxed.seed_offset
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
        body; the decoded JSON answer, or :class:`~lookplangraph.lm.plain_http.HTTPFailure`.
        Through the openai package, ``post`` (its documented way to send a body as it is) skips
        the package's recursive walk over the typed parameters, a third of a request's CPU, and
        ``cast_to=object`` hands back the JSON as it is instead of a typed ``ChatCompletion``."""
        body = {k: v for k, v in request.items() if k != "extra_body"}
        body.update(request.get("extra_body") or {})
        if self._plain is not None:
            return self._plain.request("POST", "/chat/completions", body)
        oa = self._openai
        try:
            return self.client.post("/chat/completions", body=body, cast_to=object)
        except oa.APITimeoutError as exc:
            raise plain_http.HTTPFailure(None, _short(exc), timed_out=True) from None
        except oa.APIConnectionError as exc:
            raise plain_http.HTTPFailure(None, _short(exc)) from None
        except oa.APIStatusError as exc:
            response = getattr(exc, "response", None)
            retry_after = response.headers.get("retry-after") if response is not None else None
            raise plain_http.HTTPFailure(exc.status_code, str(exc), retry_after=retry_after) from None

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

    @property
    def constraints(self) -> frozenset[str]:
        """What the current structured mode enforces (:func:`mode_constraints`)."""
        return mode_constraints(self.structured, self._auto_fallback_done)

    def _server_models(self) -> list[str] | None:
        try:
            if self._plain is not None:
                return [m["id"] for m in self._plain.request("GET", "/models")["data"]]
            return [m.id for m in self.client.models.list()]
        except Exception:
            return None

    def _delay(self, attempt: int, failure: plain_http.HTTPFailure) -> float:
        delay = min(30.0, self.backoff * (2 ** attempt))
        try:
            if failure.retry_after is not None:
                delay = max(delay, min(30.0, float(failure.retry_after)))
        except ValueError:
            pass
        return delay

    def complete(self, messages: list[dict[str, Any]], *, images: Sequence[str | os.PathLike] | None = None,
                 schema: Any = None, stop: Sequence[str] | None = None, max_tokens: int | None = None,
                 relaxed: Relaxed | None = None, schema_name: str = "reply", grammar: str | None = None) -> Completion:
        """One chat completion (:meth:`LMBackend.complete`); see the class docstring for the
        structured modes, retries and errors. ``relaxed``: what to send in modes that cannot
        enforce ``schema`` exactly (:class:`Relaxed`), sampled at ``max(temperature,
        retry_temperature)`` with ``seed + relaxed.seed_offset``; ``schema_name`` names the schema
        for ``json_schema``;
        ``grammar`` goes where the mode's server reads one (:data:`GRAMMAR_FIELDS`), else nowhere."""
        if grammar is not None and schema is not None:
            raise ValueError("complete() takes a schema or a grammar, not both")
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
            except plain_http.HTTPFailure as exc:
                status = exc.status
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
                timed_out = exc.timed_out
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
        text, usage = _reply_text(resp), _usage(resp)
        return checked_completion(text, schema, usage, time.perf_counter() - t0)


def _reply_text(reply: Any) -> str:
    """The message text of a chat completion (its JSON object); "" when it has no choice or no
    content."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message") or {}
    return (message.get("content") if isinstance(message, dict) else None) or ""


def _usage(reply: Any) -> Usage:
    """The token counts of a chat completion (its JSON object); zeros where the server sent none,
    ``cached_tokens`` only where it sent ``prompt_tokens_details``."""
    u = reply.get("usage") if isinstance(reply, dict) else None
    if not isinstance(u, dict):
        return Usage(prompt_tokens=0, completion_tokens=0, cached_tokens=None)
    details = u.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(prompt_tokens=u.get("prompt_tokens") or 0, completion_tokens=u.get("completion_tokens") or 0,
                 cached_tokens=cached)


def _short(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return msg.splitlines()[0][:300]
