"""The graph-store protocol and what every store shares: limits, errors, results.

A :class:`GraphStore` holds one scene graph (:mod:`.scene` says how it is mapped) and answers
Cypher queries over it::

    store.load(graph)                  # replace the content (a SceneGraph, e.g. memory.graph)
    result = store.query("MATCH (o:Object) RETURN o.name LIMIT 3", {})
    store.schema_text()                # labels, properties, relationships from the catalog + dialect notes
    store.close()

**Read-only, three layers.** (1) The database: LadybugDB is opened with ``read_only=True``;
Neo4j queries run in READ access mode after an ``EXPLAIN`` that must report a read-only query
type. (2) The lexical guard (:mod:`.guard`). (3) :class:`QueryLimits`: a timeout per query, a cap
on rows and on the characters of the rendered result, and (LadybugDB) a memory cap. Every failure
is a :class:`QueryError` whose message is short, says what went wrong and how to fix it, and is
meant to be shown to the LM; the store is unchanged after it.

**Writes** go only through :meth:`GraphStore.relabel` (the paper's demonstration: a user corrects
an object's class), and only when the store was built with ``allow_writes=True``. A relabel
persists across later :meth:`load` calls (the store keeps it as an overlay on the graph).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, runtime_checkable

from sgs.graph import SceneGraph


@dataclass(frozen=True)
class QueryLimits:
    """Bounds of one query: ``timeout_s`` (the engine interrupts it), ``max_rows`` (more rows is an
    error: aggregate or LIMIT instead), ``max_chars`` of the rendered result, ``memory_mb`` (the
    embedded engine's buffer pool)."""

    timeout_s: float = 5.0
    max_rows: int = 100
    max_chars: int = 6000
    memory_mb: int = 512


class StoreError(RuntimeError):
    """The store cannot be used (engine missing or clashing, server unreachable, bad graph)."""


class WritesDisabled(StoreError):
    """A write was asked of a store built read-only (the default)."""


#: kinds of :class:`QueryError`
ERROR_KINDS = ("rejected", "syntax", "unknown_name", "timeout", "too_large", "resources", "error")


class QueryError(Exception):
    """A query that did not give a usable result. ``kind`` is one of :data:`ERROR_KINDS`;
    ``str(err)`` is the message for the LM (bounded length)."""

    def __init__(self, kind: str, message: str):
        assert kind in ERROR_KINDS, kind
        self.kind = kind
        super().__init__(_clip(message, 600))


@dataclass
class QueryResult:
    """Columns, rows (plain JSON values: nodes become property dicts with ``_label``) and the
    query's wall time."""

    columns: list[str]
    rows: list[list[Any]]
    seconds: float = 0.0

    def to_text(self) -> str:
        """The result as the LM sees it: a header line of column names, then one JSON array per
        row; ``(no rows)`` when empty."""
        head = " | ".join(self.columns)
        if not self.rows:
            return f"{head}\n(no rows)"
        return head + "\n" + "\n".join(json.dumps(r, ensure_ascii=False, default=str) for r in self.rows)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


@runtime_checkable
class GraphStore(Protocol):
    """A scene graph in a graph database (see the module doc for the contract)."""

    engine: str  # "ladybug" or "neo4j"
    limits: QueryLimits

    def load(self, graph: SceneGraph, unseen: Iterable[str] = ()) -> None:
        """Replace the stored graph by ``graph`` (objects in ``unseen`` get ``seen: false``), with
        the relabel overlay applied. Raises :class:`StoreError` if the engine fails."""

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> QueryResult:
        """Run one read-only statement within :attr:`limits`; raise :class:`QueryError` otherwise."""

    def schema_text(self) -> str:
        """The schema as the LM reads it: labels with their typed properties and relationships
        with their endpoints, read from the database catalog, then the engine's dialect notes."""

    def relabel(self, name: str, new_class: str) -> None:
        """Set the ``class`` of node ``name`` (the explicit write tool); :class:`WritesDisabled`
        unless built with ``allow_writes=True``, :class:`QueryError` for an unknown node."""

    def close(self) -> None:
        """Free the database; the store cannot be used afterwards."""


def check_relabel(allow_writes: bool, graph: SceneGraph | None, name: str, new_class: str) -> None:
    """What every store checks before the one write it allows (``relabel``): writes enabled, a
    node of that name in the loaded graph, and a class of 1-60 plain characters."""
    if not allow_writes:
        raise WritesDisabled("this graph store is read-only; relabelling needs a store built with allow_writes=True")
    if graph is None or name not in graph.nodes:
        raise QueryError("unknown_name", f"no node named {name!r} to relabel")
    if not new_class or not re.fullmatch(r"[A-Za-z0-9_ '\-]{1,60}", new_class):
        raise QueryError("rejected", f"class {new_class!r}: use 1-60 letters, digits, spaces, '_' or '-'")


def check_result_size(columns: list[str], rows: list[list[Any]], more: bool, limits: QueryLimits,
                      seconds: float) -> QueryResult:
    """The result, or :class:`QueryError` ``too_large`` when it has more than ``max_rows`` rows
    (``more``) or renders to more than ``max_chars`` characters."""
    if more:
        raise QueryError("too_large", f"the query returns more than {limits.max_rows} rows; return fewer: "
                                      f"aggregate (count, collect), use DISTINCT, filter with WHERE or add LIMIT")
    result = QueryResult(columns, rows, seconds)
    n = len(result.to_text())
    if n > limits.max_chars:
        raise QueryError("too_large", f"the result has {n} characters (limit {limits.max_chars}); return only the "
                                      f"properties you need (e.g. o.name instead of o) or fewer rows")
    return result


def plain(value: Any) -> Any:
    """A JSON-ready value: floats rounded to 4 places, NaN as None, nested lists/dicts converted."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 4)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."
