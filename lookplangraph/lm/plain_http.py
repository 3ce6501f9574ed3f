"""JSON over plain HTTP with the standard library, for OpenAI-compatible servers on a network.

:class:`OpenAIBackend <lookplangraph.lm.openai_compat.OpenAIBackend>` talks to ``http://``
servers (``vllm serve``, llama.cpp's servers, Ollama) through :class:`PlainHTTP` instead of the
``openai`` package's client: that client (httpx, its request builder and its typed models) was
about half of an evaluation's CPU per LM call (``benchmarks/bench_eval_throughput.py``), and an
evaluation against a serving cluster is bound by that CPU. ``https://`` (OpenAI itself) and any
URL that the environment routes through a proxy (``HTTP_PROXY`` without a ``NO_PROXY`` entry for
the host) keep the ``openai`` package, which handles TLS and proxies: :func:`usable_for`.

:class:`PlainHTTP` keeps one keep-alive connection per thread and reports failures as
:class:`HTTPFailure` (status, message, whether it timed out, the server's ``Retry-After``), the
same facts the ``openai`` package's errors carry.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse


@dataclass
class HTTPFailure(Exception):
    """A request that got no usable answer: ``status`` None when no HTTP answer came (refused,
    reset, ``timed_out``); ``retry_after`` the header's text when the server sent one."""

    status: int | None
    message: str
    timed_out: bool = False
    retry_after: str | None = None

    def __str__(self) -> str:
        return self.message


def usable_for(base_url: str | None) -> bool:
    """Whether :class:`PlainHTTP` serves ``base_url``: an ``http://`` URL that no proxy of the
    environment applies to."""
    if not base_url:
        return False
    parsed = urlparse(base_url)
    if parsed.scheme != "http" or not parsed.hostname:
        return False
    if "http" not in urllib.request.getproxies():
        return True
    return bool(urllib.request.proxy_bypass(parsed.hostname))


class PlainHTTP:
    """``POST``/``GET`` of JSON at ``base_url`` (``http://host:port/prefix``) with headers
    ``headers`` and a ``timeout`` per request; one connection per thread, opened again after a
    failure. Raises :class:`HTTPFailure`."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float):
        parsed = urlparse(base_url)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"PlainHTTP needs an http:// URL, not {base_url!r}")
        self.host, self.port = parsed.hostname, parsed.port or 80
        self.prefix = parsed.path.rstrip("/")
        self.headers = {"Accept": "application/json", **headers}
        self.timeout = float(timeout)
        self._local = threading.local()

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The decoded JSON answer of ``method`` at ``prefix + path``; :class:`HTTPFailure` for a
        status other than 2xx (its message is the server's error text), a connection that failed
        or timed out, or an answer that is not JSON."""
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        for fresh in (False, True):  # a kept-alive connection the server has closed: once more on a new one
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request(method, self.prefix + path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (socket.timeout, TimeoutError) as exc:
                self._drop()
                raise HTTPFailure(None, f"timed out after {self.timeout:g} s ({exc})", timed_out=True) from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                self._drop()
                if reused and not fresh:
                    continue
                raise HTTPFailure(None, f"connection failed: {exc or type(exc).__name__}") from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise HTTPFailure(None, f"connection failed: {exc or type(exc).__name__}") from None
            if response.will_close:
                self._drop()
            break
        if not 200 <= response.status < 300:
            raise HTTPFailure(response.status, _error_text(response.status, payload),
                              retry_after=response.getheader("retry-after"))
        try:
            return json.loads(payload)
        except ValueError:
            raise HTTPFailure(response.status, f"the answer is not JSON: {payload[:200]!r}") from None


def _error_text(status: int, payload: bytes) -> str:
    """The server's error message (OpenAI's ``{"error": {"message": ...}}`` or its text)."""
    text = payload.decode("utf-8", "replace")
    try:
        err = json.loads(text)
    except ValueError:
        return f"Error code: {status} - {text[:300]}"
    if isinstance(err, dict):
        inner = err.get("error", err)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return f"Error code: {status} - {message}"
    return f"Error code: {status} - {text[:300]}"
