"""Language-model backends behind one interface: :class:`LMBackend.decide` turns a prompt into the
next action.

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

import ast
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from sgs.actions import FUNCTIONS, Action, ActionSyntaxError, parse_action

from lookplangraph.decoding import (  # re-exported: the reply schema belongs to the backends' interface
    ActionKey, ActionReply, Vocabulary, action_schema, constrained_schema, flat_names, reply_format_instructions,
    typed_action_schema,
)

__all__ = [
    "Usage", "LMReply", "LMBackend", "LMError", "ActionKey", "ActionReply", "Vocabulary", "action_schema",
    "constrained_schema", "flat_names", "typed_action_schema", "parse_reply",
    "reply_format_instructions", "OpenAIBackend", "LlamaCppBackend", "ScriptedBackend",
    "make_backend", "parse_spec",
]


class LMError(RuntimeError):
    """The LM cannot be used at all (unreachable server, unknown model, bad key, missing package).
    A reply that is merely unreadable is not an LMError but :attr:`LMReply.error`."""


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


@runtime_checkable
class LMBackend(Protocol):
    """Anything that proposes the next action. ``name`` identifies model and endpoint
    (``llamacpp:qwen2.5-coder-0.5b``, ``openai:gpt-4o@https://...``) and keys the reply cache."""

    name: str

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply: ...


# --------------------------------------------------------------------------------------------
# Tolerant parsing
# --------------------------------------------------------------------------------------------

_EXAMPLE = '{"function_name": "go_to", "node": "kitchen-1", "relation": null, "destination": null, "reason": "..."}'
_FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_CALL_SEARCH_RE = re.compile(r"\b(" + "|".join(sorted(FUNCTIONS, key=len, reverse=True)) + r")\s*\(([^()\n]*)\)")
_REASON_KEYS = ("reason", "reasoning", "thought", "thoughts", "explanation", "rationale")


def _scan_object(text: str, start: int) -> tuple[int | None, bool, list[str]]:
    """From the ``{`` at ``start``: (end index after the matching ``}`` or None if the text ends
    first, whether the end falls inside a string, the stack of open brackets)."""
    stack: list[str] = []
    in_str: str | None = None
    esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == in_str:
                in_str = None
        elif c in "\"'":
            in_str = c
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if stack and stack[-1] == c:
                stack.pop()
            if not stack:
                return i + 1, False, []
    return None, in_str is not None, stack


def _loads_lenient(s: str) -> Any:
    """json.loads with raw control characters allowed, then trailing commas removed, then Python
    literal syntax (single quotes, None/True/False). Raises ValueError."""
    try:
        return json.loads(s, strict=False)
    except json.JSONDecodeError:
        pass
    no_trailing = re.sub(r",\s*([}\]])", r"\1", s)
    try:
        return json.loads(no_trailing, strict=False)
    except json.JSONDecodeError:
        pass
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", no_trailing)))
    for candidate in (no_trailing, py):
        try:
            value = ast.literal_eval(candidate.replace("\n", " "))
        except Exception:  # ValueError, SyntaxError, TypeError (unhashable set items), RecursionError
            continue
        if isinstance(value, (dict, list)):
            return value
    raise ValueError("not JSON")


class _CutOff(Exception):
    """The reply ends inside an action field."""


def _extract_json(text: str) -> tuple[Any, bool] | None:
    """The first JSON object (or list) in ``text``: (value, repaired). ``repaired`` is True when
    the object was cut off and closed here; a cut inside a string is only accepted when that
    string is the last value, i.e. the reason of an action-first reply."""
    starts = [m.start() for m in re.finditer(r"[{\[]", text)]
    for start in starts[:20]:
        end, in_string, stack = _scan_object(text, start)
        if end is not None:
            try:
                return _loads_lenient(text[start:end]), False
            except ValueError:
                continue
        # cut off: close the open string and brackets
        body = text[start:].rstrip()
        if in_string:
            quote = '"' if body.count('"') % 2 else "'"
            body += quote
        else:
            body = re.sub(r"[,:]\s*$", "", body)
            body = re.sub(r',\s*"[^"]*"\s*$', "", body)  # a dangling key without value
        try:
            value = _loads_lenient(body + "".join(reversed(stack)))
        except ValueError:
            continue
        if in_string and isinstance(value, dict) and value and list(value)[-1] not in _REASON_KEYS:
            raise _CutOff  # the cut fell inside an action field: do not guess the name
        return value, True
    return None


def _reason_of(data: dict[str, Any]) -> str | None:
    for key in _REASON_KEYS:
        v = data.get(key)
        if v is not None:
            return (v if isinstance(v, str) else json.dumps(v)).strip() or None
    return None


def parse_reply(text: str | None) -> tuple[Action | None, str | None, str | None]:
    """Read ``(action, reason, error)`` from an LM reply; never raises.

    Accepts a JSON object (possibly inside a code fence or surrounded by prose, with raw newlines
    in strings, single quotes, trailing commas, a nested ``"action"`` object, or cut off inside
    the final ``reason``), or call syntax such as ``pick_up(apple-1)`` anywhere in the text.
    Exactly one of ``action`` and ``error`` is set; ``error`` is a short sentence for the LM.
    """
    if text is None or not str(text).strip():
        return None, None, f"Your reply was empty. Answer with one JSON object like {_EXAMPLE}."
    text = str(text).strip()
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    for cand in candidates:
        try:
            found = _extract_json(cand)
        except _CutOff:
            return None, None, f"Your reply was cut off inside the action. Answer with one short JSON object like {_EXAMPLE}."
        if found is None:
            continue
        data, _ = found
        if isinstance(data, list):
            dicts = [d for d in data if isinstance(d, (dict, str))]
            if len(data) == 1 and dicts:
                data = dicts[0]
            else:
                return None, None, f"Your reply holds {len(data)} items; give exactly one action as one JSON object like {_EXAMPLE}."
        if isinstance(data, str):
            return _parse_call(data, None)
        if not isinstance(data, dict):
            continue
        reason = _reason_of(data)
        try:
            return parse_action(data), reason, None
        except ActionSyntaxError as exc:
            return None, reason, f"Could not read your action: {exc}. Answer with one JSON object like {_EXAMPLE}."
        except Exception as exc:  # pydantic validation of odd values
            first = str(exc).splitlines()[0][:200]
            return None, reason, f"Could not read your action ({first}). Answer with one JSON object like {_EXAMPLE}."
    # no JSON: call syntax, the whole reply or somewhere in it
    stripped = text.strip().strip("`").strip()
    if re.fullmatch(r"[A-Za-z_][\w\- ]*\s*\(.*\)\s*;?", stripped, re.S):
        return _parse_call(stripped, None)
    m = _CALL_SEARCH_RE.search(text)
    if m:
        return _parse_call(m.group(0), text[:500])
    return None, None, f"Could not find an action in your reply. Answer with one JSON object like {_EXAMPLE}."


def _parse_call(call: str, reason: str | None) -> tuple[Action | None, str | None, str | None]:
    try:
        return parse_action(call), reason, None
    except ActionSyntaxError as exc:
        return None, reason, f"Could not read your action: {exc}. Answer with one JSON object like {_EXAMPLE}."
    except Exception as exc:
        return None, reason, f"Could not read your action ({str(exc).splitlines()[0][:200]})."


def _reply(text: str, usage: Usage, seconds: float) -> LMReply:
    action, reason, error = parse_reply(text)
    return LMReply(text=text, action=action, reason=reason, error=error, usage=usage, seconds=seconds)


def _messages(static: str, dynamic: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": static}, {"role": "user", "content": dynamic}]


# --------------------------------------------------------------------------------------------
# OpenAI-compatible servers
# --------------------------------------------------------------------------------------------

STRUCTURED_MODES = ("json_schema", "json_object", "guided_json", "structured_outputs", "none", "auto")
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

    Configuration: arguments, else ``$LOOKPLANGRAPH_LM_MODEL``, ``$OPENAI_BASE_URL``,
    ``$OPENAI_API_KEY`` (a placeholder key is used for a non-OpenAI ``base_url``). Timeouts, HTTP
    429 and 5xx and connection failures are retried ``max_retries`` times with exponential backoff
    (``backoff * 2**attempt`` seconds, capped at 30 s, or the server's Retry-After); then, and for
    404 (unknown model; the server's models are listed), 401 and 400, :class:`LMError` is raised.
    """

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                 structured: str = "json_schema", timeout: float = 120.0, max_retries: int = 4,
                 temperature: float = 0.0, max_tokens: int = 200, seed: int | None = 0,
                 reason_first: bool = False, reason_max_length: int | None = None, backoff: float = 1.0,
                 extra_body: dict[str, Any] | None = None, retry_temperature: float = 0.7):
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
        self.url = self.base_url or "https://api.openai.com/v1"
        self.name = f"openai:{self.model}" + (f"@{self.base_url}" if self.base_url else "")
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)
        self._auto_fallback_done = structured != "auto"

    def _request(self, static: str, dynamic: str, names: list[str] | None, mode: str,
                 excluded: Sequence[ActionKey] = ()) -> dict[str, Any]:
        kw: dict[str, Any] = {"model": self.model, "messages": _messages(static, dynamic),
                              "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.seed is not None:
            kw["seed"] = self.seed
        exact = mode in GRAMMAR_MODES  # these servers enforce an anyOf of variants
        if excluded and not exact:  # fallback: sample, differently for each exclusion
            kw["temperature"] = max(self.temperature, self.retry_temperature)
            kw["seed"] = (self.seed or 0) + len(excluded)
        extra = dict(self.extra_body)
        if mode != "none":
            schema = constrained_schema(names, excluded if exact else (), reason_first=self.reason_first,
                                        reason_max_length=self.reason_max_length)
            if mode in ("json_schema", "auto"):
                kw["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "next_action", "schema": schema, "strict": True}}
            elif mode == "json_object":
                kw["response_format"] = {"type": "json_object", "schema": schema}
            elif mode == "guided_json":
                extra["guided_json"] = schema
            elif mode == "structured_outputs":
                extra["structured_outputs"] = {"json": schema}
        if extra:
            kw["extra_body"] = extra
        return kw

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

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        """One chat completion; see the class docstring for retries and errors."""
        oa = self._openai
        t0 = time.perf_counter()
        attempt = 0
        while True:
            mode = self.structured
            try:
                resp = self.client.chat.completions.create(**self._request(static, dynamic, names, mode, excluded))
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
                if not retryable:
                    hint = (f"; try structured='json_object' or 'none' instead of {mode!r}"
                            if mode != "none" and re.search(r"response_format|schema|guided|structured", str(exc)) else "")
                    raise LMError(f"{self.url} rejected the request (HTTP {status}): {_short(exc)}{hint}") from None
                if attempt >= self.max_retries:
                    if isinstance(exc, oa.APITimeoutError):
                        what = f"did not answer within {self.timeout:g} s"
                    elif status is None:
                        what = "is unreachable"
                    else:
                        what = f"answered HTTP {status}"
                    raise LMError(f"the LM server at {self.url} {what} after {attempt + 1} attempts: {_short(exc)}") from None
                time.sleep(self._delay(attempt, exc))
                attempt += 1
        text = (resp.choices[0].message.content or "") if resp.choices else ""
        u = resp.usage
        cached = None
        if u is not None:
            details = getattr(u, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) if details is not None else None
        usage = Usage(prompt_tokens=getattr(u, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(u, "completion_tokens", 0) or 0, cached_tokens=cached)
        return _reply(text, usage, time.perf_counter() - t0)


def _short(exc: Exception) -> str:
    msg = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return msg.splitlines()[0][:300]


# --------------------------------------------------------------------------------------------
# llama.cpp in process
# --------------------------------------------------------------------------------------------

def default_threads() -> int:
    """CPUs available to this process minus the 1-minute load average rounded down, at least 1:
    all CPUs on an idle machine, 1 on a 2-CPU machine that already runs one busy process."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return max(1, min(cpus, cpus - int(load)))


class LlamaCppBackend:
    """A GGUF model run in process through ``llama-cpp-python``.

    ``model`` is a name of :data:`lookplangraph.models.MODELS` (assembled on first use) or a path
    to a ``.gguf`` file. Decoding is greedy (``temperature=0``) and constrained by a grammar built
    from :func:`action_schema` (what ``response_format={"type": "json_object", "schema": ...}``
    does, except that a schema the converter cannot handle raises :class:`LMError` instead of
    silently falling back to free JSON). Grammars are cached per ``names`` and ``excluded``.

    Prompt cache: llama-cpp-python keeps the tokens of the previous call in its KV cache and only
    evaluates the part of the new prompt after the longest common token prefix. ``cached_tokens``
    reports that prefix: the tokens held before the call compared with the new prompt's tokens.
    ``n_threads`` (also used for prompt processing) defaults to :func:`default_threads`: the CPUs
    not already busy. llama.cpp threads spin at barriers, so on an oversubscribed machine
    asking for more threads than idle CPUs is several times slower, not faster.
    """

    def __init__(self, model: str | os.PathLike = "qwen2.5-coder-1.5b", n_ctx: int = 4096, n_threads: int | None = None,
                 seed: int = 0, temperature: float = 0.0, max_tokens: int = 200, reason_first: bool = False,
                 reason_max_length: int | None = 300, verbose: bool = False, **llama_kwargs: Any):
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
        self.path, self.name = path, f"llamacpp:{label}"
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.reason_first, self.reason_max_length = reason_first, reason_max_length
        try:
            self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                                       verbose=verbose, **llama_kwargs)
        except Exception as exc:
            raise LMError(f"llama.cpp could not load {path}: {exc}") from None
        self._grammars: dict[str | None, Any] = {}

    def _grammar(self, names: list[str] | None, excluded: Sequence[ActionKey] = ()) -> Any:
        key = json.dumps([names, sorted(map(list, excluded), key=str)], sort_keys=True)
        g = self._grammars.get(key)
        if g is None:
            schema = constrained_schema(names, excluded, reason_first=self.reason_first,
                                        reason_max_length=self.reason_max_length)
            try:
                g = self._llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            except Exception as exc:
                raise LMError(f"llama.cpp cannot turn the action schema into a grammar: {exc}") from None
            if len(self._grammars) > 64:
                self._grammars.clear()
            self._grammars[key] = g
        return g

    def close(self) -> None:
        """Free the model's memory now rather than at garbage collection."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        """One constrained chat completion (``excluded`` removed from the grammar); raises
        :class:`LMError` only if the prompt does not fit the context or llama.cpp fails."""
        grammar = self._grammar(names, excluded)
        before = self.llm.input_ids[: self.llm.n_tokens].tolist()
        t0 = time.perf_counter()
        try:
            out = self.llm.create_chat_completion(
                messages=_messages(static, dynamic), temperature=self.temperature, max_tokens=self.max_tokens,
                seed=self.seed, grammar=grammar)
        except ValueError as exc:  # e.g. "Requested tokens (...) exceed context window"
            raise LMError(f"{self.name}: {exc}") from None
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
        return _reply(text, usage, seconds)


# --------------------------------------------------------------------------------------------
# Scripted replies (tests, demos)
# --------------------------------------------------------------------------------------------

class ScriptedBackend:
    """Replays fixed reply texts in order (the last one repeats); not a language model. For tests
    of the planner loop and the parser. Usage counts are rough (characters / 4)."""

    def __init__(self, replies: list[str], name: str = "scripted"):
        if not replies:
            raise ValueError("ScriptedBackend needs at least one reply")
        self.replies, self.name, self.calls = list(replies), name, 0
        self.prompts: list[tuple[str, str, list[str] | None]] = []
        self.excluded: list[list[ActionKey]] = []  # what each call was asked not to produce (ignored)

    def decide(self, static: str, dynamic: str, names: list[str] | None,
               excluded: Sequence[ActionKey] = ()) -> LMReply:
        text = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
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
    if kind == "llamacpp":
        return LlamaCppBackend(model, **opts)
    if kind == "openai":
        return OpenAIBackend(model or None, base_url=base_url or opts.pop("base_url", None), **opts)
    return ScriptedBackend(model.split("||"), **opts)
