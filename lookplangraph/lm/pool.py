"""Several OpenAI-compatible endpoints serving one model, shared by the workers of an evaluation.

:class:`EndpointPool` holds the endpoints (:class:`Endpoint`: URL, ``concurrency``, ``rate``);
each worker's :class:`PooledBackend` is bound to one live endpoint at its first request and stays
there (the server's prefix cache keeps its static prompt); workers spread round-robin by the
fewest bound workers per unit of ``concurrency``. ``concurrency`` caps the requests in flight at
an endpoint and ``rate`` paces their starts, both over every HTTP attempt, retries included.
``max_failures`` failed requests in a row (or one request that could not connect at all) take an
endpoint out of rotation. The request that failed raises :class:`EndpointDown` in its episode,
which the runner runs again from the start on another endpoint; when no endpoint is left,
:class:`AllEndpointsDown` stops the evaluation.

Invariants: all endpoints serve the same model with the same settings; the backend's ``name`` is
``openai:MODEL@pool`` whatever the URLs, so a reply cache replays with other endpoints. The
pool's state lives in shared memory (``spawn`` context), so worker processes share one pool when
it travels to them with the factory (:class:`PoolClients`) at their start; it cannot be sent
later. Docs: ``docs/guides/evaluation.md`` (*Evaluation at scale*).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlparse

from lookplangraph.lm.base import Completion, LMError, LMUnavailable
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.lm.openai_compat import DEFAULT_STRUCTURED, OpenAIBackend, mode_constraints
from lookplangraph.lm.specs import make_backend, parse_spec

__all__ = ["Endpoint", "EndpointPool", "EndpointDown", "AllEndpointsDown", "PooledBackend", "PoolClients",
           "LMFactory", "lm_factory",
           "parse_endpoints", "pool_factory"]


class EndpointDown(LMError):
    """The endpoint of this worker failed a request (after its retries) or was taken out while
    the episode ran on it: run the episode again from the start. ``url``: that endpoint."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"endpoint {url} failed: {reason}")
        self.url, self.reason = url, reason


class AllEndpointsDown(LMError):
    """No endpoint of the pool is left; the message lists why each was taken out."""


#: the multiprocessing context of the pool's shared state and of evaluation worker processes: ``spawn``
MP_CONTEXT = multiprocessing.get_context("spawn")
_REASON_BYTES = 600


class _Shared:
    """A value in shared memory (module doc: across processes) read and written as an attribute
    of :class:`Endpoint`; writes that must agree with others are made under the pool's lock.
    ``typecode`` is :mod:`multiprocessing`'s (``"c"``: a text of up to ``_REASON_BYTES`` bytes,
    ``None`` when empty; ``"b"``: a flag)."""

    def __init__(self, typecode: str, initial: Any = 0):
        self.typecode, self.initial = typecode, initial

    def __set_name__(self, owner, name: str) -> None:
        self.slot = name

    def make(self):
        """The shared cell of a new endpoint."""
        if self.typecode == "c":
            return MP_CONTEXT.Array("c", _REASON_BYTES, lock=False)
        return MP_CONTEXT.Value(self.typecode, self.initial, lock=False)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj._state[self.slot].value
        if self.typecode == "c":
            return value.decode("utf-8", "replace") or None
        return bool(value) if self.typecode == "b" else value

    def __set__(self, obj, value) -> None:
        if self.typecode == "c":  # cut to the cell, on a character boundary
            value = (value or "").encode("utf-8")[: _REASON_BYTES - 1].decode("utf-8", "ignore").encode("utf-8")
        obj._state[self.slot].value = value


@dataclass(eq=False)
class Endpoint:
    """One server: ``url`` (its ``/v1`` base), ``concurrency`` (requests in flight, None: no
    limit) and ``rate`` (request starts per second, None: no limit). The rest (``alive``,
    ``failures`` in a row, workers ``bound`` to it now, HTTP attempts started as ``requests``,
    ``dead_reason``) is the pool's state, in shared memory (module doc)."""

    url: str
    concurrency: int | None = None
    rate: float | None = None
    _state: dict = field(default_factory=dict, repr=False)
    _slots: Any = field(default=None, repr=False)

    alive = _Shared("b", 1)
    failures = _Shared("i")
    bound = _Shared("i")
    requests = _Shared("q")
    dead_reason = _Shared("c")
    _next_start = _Shared("d", 0.0)

    def __post_init__(self) -> None:
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"endpoint {self.url!r} is not an http(s) URL (e.g. http://host:8000/v1)")
        self.url = self.url.rstrip("/")
        self._state = {name: cell.make() for name, cell in vars(Endpoint).items() if isinstance(cell, _Shared)}
        if self.concurrency is not None:
            if int(self.concurrency) < 1:
                raise ValueError(f"endpoint {self.url}: concurrency must be at least 1, not {self.concurrency}")
            self.concurrency = int(self.concurrency)
            self._slots = MP_CONTEXT.BoundedSemaphore(self.concurrency)
        if self.rate is not None:
            if not float(self.rate) > 0:
                raise ValueError(f"endpoint {self.url}: rate must be a positive number of requests/s, not {self.rate}")
            self.rate = float(self.rate)


def parse_endpoints(value: str | Sequence[str | dict[str, Any]], concurrency: int | None = None,
                    rate: float | None = None) -> list[Endpoint]:
    """Endpoints from ``URL1,URL2`` or a list of URLs and tables ``{url, concurrency, rate}`` (a
    config's ``lm_options.endpoints``). ``concurrency`` and ``rate`` are the defaults of entries
    that do not set their own. Raises ``ValueError`` for an empty list, a duplicate URL, a
    non-http URL, unknown keys or a bad limit."""
    items: list[str | dict[str, Any]] = ([u.strip() for u in value.split(",") if u.strip()]
                                         if isinstance(value, str) else list(value))
    if not items:
        raise ValueError("no endpoints given (e.g. --endpoints http://a:8000/v1,http://b:8000/v1)")
    out: list[Endpoint] = []
    for item in items:
        if isinstance(item, str):
            item = {"url": item}
        if not isinstance(item, dict) or "url" not in item:
            raise ValueError(f"an endpoint is a URL or a table with url (and concurrency, rate), not {item!r}")
        unknown = sorted(set(item) - {"url", "concurrency", "rate"})
        if unknown:
            raise ValueError(f"endpoint {item['url']}: unknown key(s) {', '.join(unknown)}; known: url, concurrency, rate")
        out.append(Endpoint(str(item["url"]), item.get("concurrency", concurrency), item.get("rate", rate)))
    urls = [e.url for e in out]
    dupes = sorted({u for u in urls if urls.count(u) > 1})
    if dupes:
        raise ValueError(f"endpoint listed twice: {', '.join(dupes)}")
    return out


def _stderr(line: str) -> None:
    print(f"\n{line}", file=sys.stderr, flush=True)


class EndpointPool:
    """The shared state of the endpoints (module doc). Thread-safe. ``log`` gets one line per
    endpoint taken out (default: stderr)."""

    def __init__(self, endpoints: Sequence[Endpoint], max_failures: int = 2, log: Callable[[str], None] | None = None):
        if not endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        if max_failures < 1:
            raise ValueError(f"max_failures must be at least 1, not {max_failures}")
        self.endpoints = list(endpoints)
        self.max_failures = int(max_failures)
        self.log = log or _stderr
        self._lock = MP_CONTEXT.Lock()  # shared with the pool's copies in worker processes
        self._cursor_value = MP_CONTEXT.Value("i", 0, lock=False)  # round-robin: where the next tie-break starts

    @property
    def _cursor(self) -> int:
        return self._cursor_value.value

    @_cursor.setter
    def _cursor(self, value: int) -> None:
        self._cursor_value.value = value

    def alive(self) -> list[Endpoint]:
        return [e for e in self.endpoints if e.alive]

    def _all_down(self) -> AllEndpointsDown:
        why = "; ".join(f"{e.url}: {e.dead_reason}" for e in self.endpoints)
        return AllEndpointsDown(f"all {len(self.endpoints)} endpoint(s) are out of rotation ({why})")

    def assign(self, avoid: Endpoint | None = None) -> Endpoint:
        """Bind a worker: the live endpoint with the fewest bound workers per unit of concurrency,
        round-robin among equals; ``avoid`` (the endpoint that just failed this worker) only when
        it is the last one alive. Raises :class:`AllEndpointsDown`."""
        with self._lock:
            alive = [e for e in self.endpoints if e.alive]
            if not alive:
                raise self._all_down()
            candidates = [e for e in alive if e is not avoid] or alive
            n = len(self.endpoints)
            order = {id(e): (self.endpoints.index(e) - self._cursor) % n for e in candidates}
            best = min(candidates, key=lambda e: (e.bound / (e.concurrency or 1), order[id(e)]))
            best.bound += 1
            self._cursor = (self.endpoints.index(best) + 1) % n
            return best

    def release(self, endpoint: Endpoint) -> None:
        """Unbind a worker from ``endpoint``."""
        with self._lock:
            endpoint.bound = max(0, endpoint.bound - 1)

    @contextmanager
    def slot(self, endpoint: Endpoint) -> Iterator[None]:
        """Around one HTTP attempt: wait for a free request slot of ``endpoint`` (its
        concurrency), then for its next start time (its rate)."""
        if endpoint._slots is not None:
            endpoint._slots.acquire()
        try:
            if endpoint.rate is not None:
                with self._lock:
                    now = time.monotonic()
                    start = max(now, endpoint._next_start)
                    endpoint._next_start = start + 1.0 / endpoint.rate
                if start > now:
                    time.sleep(start - now)
            with self._lock:
                endpoint.requests += 1
            yield
        finally:
            if endpoint._slots is not None:
                endpoint._slots.release()

    def succeeded(self, endpoint: Endpoint) -> None:
        """A request was served: the endpoint's count of failures in a row starts again."""
        if endpoint.failures:
            with self._lock:
                endpoint.failures = 0

    def failed(self, endpoint: Endpoint, reason: str, refused: bool = False) -> bool:
        """A request failed after its retries; True when ``endpoint`` is (now) out of rotation.
        It is taken out at ``max_failures`` failures in a row, or at once when ``refused`` (no
        attempt could connect)."""
        with self._lock:
            if not endpoint.alive:
                return True
            endpoint.failures += 1
            if not (refused or endpoint.failures >= self.max_failures):
                return False
            endpoint.alive = False
            endpoint.dead_reason = reason
            left = sum(e.alive for e in self.endpoints)
        why = "it refused connections" if refused else f"{endpoint.failures} failed requests in a row"
        then = "its episodes run again on the others" if left else "no endpoint is left"
        self.log(f"endpoint {endpoint.url} taken out of rotation ({why}: {reason}); "
                 f"{left} of {len(self.endpoints)} endpoint(s) left; {then}")
        return True


class PooledBackend:
    """One worker's client for a pool (module doc): an :class:`~lookplangraph.lm.LMBackend`
    whose requests go to the endpoint it is bound to. ``options`` go to each
    :class:`~lookplangraph.lm.OpenAIBackend` it makes (structured mode, timeout,
    max_retries, backoff ...). Raises :class:`EndpointDown` when its endpoint fails (the episode
    should run again) and :class:`AllEndpointsDown` when none is left; other LM errors
    (unknown model, bad key, a request the server rejects) pass unchanged."""

    def __init__(self, pool: EndpointPool, model: str, **options: Any):
        self.pool, self.model, self.options = pool, model, options
        self.name = f"openai:{model}@pool"
        self.endpoint: Endpoint | None = None
        self._client: OpenAIBackend | None = None
        self._last_failed: Endpoint | None = None

    def _bind(self) -> tuple[Endpoint, OpenAIBackend]:
        if self.endpoint is not None and not self.endpoint.alive:  # taken out between two requests
            lost = self.endpoint
            self._unbind()
            self._last_failed = lost
            raise EndpointDown(lost.url, f"taken out of rotation ({lost.dead_reason})")
        if self.endpoint is None or self._client is None:
            ep = self.pool.assign(avoid=self._last_failed)
            try:
                self._client = OpenAIBackend(self.model, base_url=ep.url, gate=lambda: self.pool.slot(ep),
                                             give_up=lambda: not ep.alive, **self.options)
            except BaseException:
                self.pool.release(ep)
                raise
            self.endpoint = ep
        return self.endpoint, self._client

    def _unbind(self) -> None:
        if self.endpoint is not None:
            self.pool.release(self.endpoint)
        self.endpoint, self._client = None, None

    def _call(self, fn: Callable[[OpenAIBackend], Any]) -> Any:
        ep, client = self._bind()
        try:
            out = fn(client)
        except LMUnavailable as exc:
            self.pool.failed(ep, str(exc), refused=exc.refused)
            self._unbind()
            self._last_failed = ep
            raise EndpointDown(ep.url, str(exc)) from None
        self.pool.succeeded(ep)
        self._last_failed = None
        return out

    @property
    def constraints(self) -> frozenset[str]:
        """What the bound client's structured mode enforces (before the first request: the mode
        the clients are made with)."""
        if self._client is not None:
            return self._client.constraints
        return mode_constraints(self.options.get("structured", DEFAULT_STRUCTURED), False)

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Completion:
        """:meth:`OpenAIBackend.complete` at this worker's endpoint."""
        return self._call(lambda c: c.complete(messages, **kwargs))

    def close(self) -> None:
        """Unbind from the pool (the worker is done)."""
        self._unbind()


def pool_factory(spec: str, endpoints: str | Sequence[str | dict[str, Any]], options: dict[str, Any] | None = None, *,
                 concurrency: int | None = None, rate: float | None = None, max_failures: int | None = None,
                 log: Callable[[str], None] | None = None) -> Callable[[], PooledBackend]:
    """A factory of pooled backends sharing one pool, for ``--lm openai:MODEL
    --endpoints ...``. ``spec`` must be ``openai:MODEL`` (without ``@URL``: the endpoints are the
    URLs); ``options`` are the backend's ``lm_options`` (its keys ``endpoint_concurrency``,
    ``endpoint_rate`` and ``endpoint_failures`` are the pool's defaults, overridden by the
    keyword arguments). Raises ``ValueError`` for a bad spec or endpoint list."""
    kind, model, base_url = parse_spec(spec)
    if kind != "openai":
        raise ValueError(f"--endpoints needs an openai:MODEL backend, not {spec!r}")
    if base_url:
        raise ValueError(f"give the URLs in --endpoints, not in the backend spec too ({spec!r}: use openai:{model})")
    if not model:
        import os

        model = os.environ.get("LOOKPLANGRAPH_LM_MODEL", "")
        if not model:
            raise ValueError("no model name: use openai:MODEL or set LOOKPLANGRAPH_LM_MODEL")
    opts = dict(options or {})
    opts.pop("endpoints", None)
    concurrency = concurrency if concurrency is not None else opts.pop("endpoint_concurrency", None)
    rate = rate if rate is not None else opts.pop("endpoint_rate", None)
    failures = max_failures if max_failures is not None else opts.pop("endpoint_failures", 2)
    for key in ("endpoint_concurrency", "endpoint_rate", "endpoint_failures", "base_url"):
        opts.pop(key, None)
    pool = EndpointPool(parse_endpoints(endpoints, concurrency, rate), max_failures=int(failures), log=log)
    return PoolClients(pool, model, opts)


class PoolClients:
    """Makes one :class:`PooledBackend` of ``pool`` per call (one per worker): what
    :func:`pool_factory` returns. Picklable when the pool's ``log`` is (a module-level function,
    as the default is), so worker processes get it, and with it the shared pool, when they start."""

    def __init__(self, pool: EndpointPool, model: str, options: dict[str, Any]):
        self.pool, self.model, self.options = pool, model, dict(options)

    def __call__(self) -> PooledBackend:
        return PooledBackend(self.pool, self.model, **self.options)


def lm_factory(spec: str, options: dict[str, Any], *, endpoints: str | Sequence | None = None,
               concurrency: int | None = None, rate: float | None = None,
               cache: str | os.PathLike | None = None) -> Callable[[], Any]:
    """What ``eval`` and ``reproduce`` give their workers: a function making one LM per worker.
    With ``endpoints`` (or ``options["endpoints"]``) each LM is a client of one shared
    :class:`EndpointPool` (:func:`pool_factory`), else ``make_backend(spec, **options)``; with
    ``cache`` (a file) each is wrapped in the reply cache. Raises ``ValueError`` for a bad
    endpoint list at once and :class:`~lookplangraph.lm.LMError` when an LM is made."""
    endpoints = endpoints or options.get("endpoints")
    pooled = pool_factory(spec, endpoints, options, concurrency=concurrency, rate=rate) if endpoints else None
    return LMFactory(spec, options, pooled, cache)


class LMFactory:
    """One LM per call, as :func:`lm_factory` describes; picklable (worker processes get it)."""

    def __init__(self, spec: str, options: dict[str, Any], pooled: PoolClients | None,
                 cache: str | os.PathLike | None):
        self.spec, self.options, self.pooled, self.cache = spec, dict(options), pooled, cache

    def __call__(self):
        lm = self.pooled() if self.pooled is not None else make_backend(self.spec, **self.options)
        return CachedBackend(lm, self.cache) if self.cache is not None else lm
