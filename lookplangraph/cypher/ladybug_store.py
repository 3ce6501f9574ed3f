"""The embedded store: LadybugDB (``pip install ladybug``; the maintained fork of Kuzu), in process.

Read-only layer 1 comes in two isolations:

* ``"transaction"`` (default): one in-memory database; :meth:`LadybugStore.load` replaces its
  content in a write transaction of the store's own, and every query of the LM runs inside
  ``BEGIN TRANSACTION READ ONLY`` ... ``ROLLBACK``, where the engine refuses any write. A 200-node
  scene (re)loads in tens of milliseconds (``benchmarks/bench_cypher.py``), fast enough to follow
  the planner's memory graph after every action.
* ``"file"``: the graph is written into a fresh database file, which is closed and reopened with
  ``read_only=True``: no write can reach it by any route. Each load costs a checkpoint to disk and
  a reopen (several times slower; see the benchmark).

Queries also pass the lexical guard (:mod:`.guard`) and run with the engine's query timeout, a
row and character cap, and a buffer pool of ``limits.memory_mb``.

Import name: the package installs a module called ``ladybug``, and so do Ladybug Tools'
``ladybug-core``/``ladybug-geometry`` (an unrelated environmental-analysis library). When the
module found is not the database, :class:`~.store.StoreError` says so and how to fix it.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

from sgs.graph import SceneGraph

from lookplangraph.cypher.guard import QueryRejected, check_read_only
from lookplangraph.cypher.scene import NODE_LABELS, RELATIONSHIPS, SceneRows
from lookplangraph.cypher.store import (
    QueryError, QueryLimits, QueryResult, StoreError, check_relabel, check_result_size, plain,
)

#: What the embedded engine does differently from Neo4j's Cypher, checked against ladybug 0.22.
DIALECT_NOTES = """\
Dialect: LadybugDB (Kuzu) Cypher. Differences from Neo4j:
- Put labels in patterns: MATCH (o:Object). A label test in WHERE (WHERE n:Object) is a syntax error.
- Lists are 1-based: list[1] is the first element; list[0] is an error.
- No list comprehensions ([x IN l WHERE ...]); use 'x' IN l, any(x IN l WHERE ...), size(l), list_filter(l, x -> x = 'a').
- No shortestPath(): write MATCH p = (a)-[* SHORTEST 1..10]-(b).
- Variable-length relationships need an upper bound of at most 30: -[:ON_TOP_OF|INSIDE*1..5]->.
- ORDER BY inside WITH needs SKIP or LIMIT; to sort a collected list use list_sort(collect(x)).
- No APOC procedures and no point() functions.
- Strings: lower(s), s CONTAINS 'x', s STARTS WITH 'x'. Counting: count(*), count(DISTINCT x)."""


def import_ladybug():
    """The LadybugDB module; :class:`StoreError` when it is missing or when another package's
    ``ladybug`` module (Ladybug Tools) shadows it."""
    try:
        import ladybug
    except ImportError:
        raise StoreError("the embedded graph store needs LadybugDB: pip install 'ladybug>=0.22,<0.23'") from None
    if not hasattr(ladybug, "Database") or not hasattr(ladybug, "Connection"):
        raise StoreError(f"the module 'ladybug' at {getattr(ladybug, '__file__', '?')} is not LadybugDB (it lacks "
                         "Database/Connection): probably Ladybug Tools' ladybug-core, which installs a module of the "
                         "same name. Use a separate virtual environment, or pip uninstall ladybug-core and "
                         "pip install --force-reinstall 'ladybug>=0.22,<0.23'")
    return ladybug


class LadybugStore:
    """LadybugDB behind the :class:`~.store.GraphStore` protocol (see the module doc)."""

    engine = "ladybug"
    ISOLATIONS = ("transaction", "file")

    def __init__(self, limits: QueryLimits | None = None, *, allow_writes: bool = False,
                 isolation: str = "transaction"):
        if isolation not in self.ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(self.ISOLATIONS)}, not {isolation!r}")
        self._lb = import_ladybug()
        self.limits = limits or QueryLimits()
        self.allow_writes = allow_writes
        self.isolation = isolation
        self.relabels: dict[str, str] = {}
        self._root: Path | None = None
        self._serial = itertools.count()
        self._db = self._conn = self._path = None
        self._graph: SceneGraph | None = None
        self._unseen: frozenset[str] = frozenset()
        self._schema: str | None = None
        self.load_seconds = 0.0

    # -- content --------------------------------------------------------------------------------
    def load(self, graph: SceneGraph, unseen: Iterable[str] = ()) -> None:
        t0 = time.perf_counter()
        rows = SceneRows.build(graph, unseen, self.relabels)
        try:
            if self.isolation == "file":
                self._load_file(rows)
            else:
                self._load_memory(rows)
        except RuntimeError as exc:
            raise StoreError(f"LadybugDB could not load the scene graph: {exc}") from None
        self._graph, self._unseen = graph, frozenset(unseen)
        self.load_seconds = time.perf_counter() - t0

    def _load_memory(self, rows: SceneRows) -> None:
        if self._conn is None:
            self._db = self._lb.Database(":memory:", buffer_pool_size=self.limits.memory_mb * 2**20)
            self._conn = self._lb.Connection(self._db)
            for statement in _ddl():
                self._conn.execute(statement)
            self._conn.set_query_timeout(max(1, int(self.limits.timeout_s * 1000)))
        conn = self._conn
        conn.execute("BEGIN TRANSACTION")
        try:
            for label in reversed(NODE_LABELS):
                conn.execute(f"MATCH (n:{label}) DETACH DELETE n")
            _fill(conn, rows)
        except RuntimeError:
            _rollback(conn)
            raise
        conn.execute("COMMIT")

    def _load_file(self, rows: SceneRows) -> None:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="lpg-cypher-"))
        path = self._root / f"scene{next(self._serial)}.lbug"
        size = self.limits.memory_mb * 2**20
        try:
            db = self._lb.Database(str(path), buffer_pool_size=size)
            conn = self._lb.Connection(db)
            for statement in _ddl():
                conn.execute(statement)
            _fill(conn, rows)
            conn.close()
            db.close()
            ro = self._lb.Database(str(path), read_only=True, buffer_pool_size=size)
            ro_conn = self._lb.Connection(ro)
            ro_conn.set_query_timeout(max(1, int(self.limits.timeout_s * 1000)))
        except RuntimeError:
            _remove(path)
            raise
        self._close_db()
        self._db, self._conn, self._path = ro, ro_conn, path

    @property
    def graph(self) -> SceneGraph | None:
        """The scene graph last loaded (without the relabel overlay)."""
        return self._graph

    def relabel(self, name: str, new_class: str) -> None:
        check_relabel(self.allow_writes, self._graph, name, new_class)
        self.relabels[name] = new_class
        self.load(self._graph, self._unseen)

    # -- queries --------------------------------------------------------------------------------
    def query(self, cypher: str, params: dict[str, Any] | None = None) -> QueryResult:
        if self._conn is None or self._graph is None:
            raise StoreError("nothing loaded: call load(graph) first")
        try:
            text = check_read_only(cypher)
        except QueryRejected as exc:
            raise QueryError("rejected", str(exc)) from None
        conn = self._conn
        in_txn = self.isolation == "transaction"
        t0 = time.perf_counter()
        try:
            if in_txn:
                conn.execute("BEGIN TRANSACTION READ ONLY")
            result = conn.execute(text, dict(params or {}))
            if isinstance(result, list):  # several statements: the guard should have refused them
                raise QueryError("rejected", "only one statement per call")
            columns = list(result.get_column_names())
            rows, more = [], False
            while result.has_next():
                if len(rows) == self.limits.max_rows:
                    more = True
                    break
                rows.append([_value(v) for v in result.get_next()])
            result.close()
        except RuntimeError as exc:
            raise _error(str(exc), self.limits) from None
        finally:
            if in_txn:
                _rollback(conn)
        return check_result_size(columns, rows, more, self.limits, time.perf_counter() - t0)

    def schema_text(self) -> str:
        if self._schema is None:
            self._schema = self._catalog() + "\n\n" + DIALECT_NOTES
        return self._schema

    def _catalog(self) -> str:
        order = {name: i for i, name in enumerate((*NODE_LABELS, *RELATIONSHIPS))}
        tables = sorted(self.query("CALL show_tables() RETURN name, type").rows, key=lambda r: order.get(r[0], 99))
        lines = ["Node labels and their properties:"]
        for name, kind in tables:
            if kind == "NODE":
                props = self.query(f"CALL table_info('{name}') RETURN name, type").rows
                lines.append(f"  (:{name} {{" + ", ".join(f"{p}: {t}" for p, t in props) + "})")
        lines.append("Relationships:")
        for name, kind in tables:
            if kind == "REL":
                ends = self.query(f"CALL show_connection('{name}') RETURN *").rows
                lines.append("  " + ", ".join(f"(:{a})-[:{name}]->(:{b})" for a, b, *_ in ends))
        return "\n".join(lines)

    # -- lifetime -------------------------------------------------------------------------------
    def _close_db(self) -> None:
        for thing in (self._conn, self._db):
            if thing is not None:
                thing.close()
        if self._path is not None:
            _remove(self._path)
        self._db = self._conn = self._path = None

    def close(self) -> None:
        self._close_db()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self._graph = None

    def __enter__(self) -> "LadybugStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _fill(conn, rows: SceneRows) -> None:
    for label, items in rows.nodes.items():
        if items:
            fields = ", ".join(f"`{k}`: r.`{k}`" for k in items[0])
            conn.execute(f"UNWIND $rows AS r CREATE (:{label} {{{fields}}})", {"rows": items})
    for (kind, src, dst), items in rows.edges.items():
        conn.execute(f"UNWIND $rows AS r MATCH (a:{src} {{name: r.a}}), (b:{dst} {{name: r.b}}) "
                     f"CREATE (a)-[:{kind}]->(b)", {"rows": items})


def _rollback(conn) -> None:
    """End the connection's transaction; an engine that already ended it (errors do) is fine."""
    try:
        conn.execute("ROLLBACK")
    except RuntimeError as exc:
        if "no active transaction" not in str(exc).lower():
            raise


def _ddl() -> list[str]:
    out = []
    for label in NODE_LABELS:
        extra = ", seen BOOLEAN" if label == "Object" else ""
        out.append(f"CREATE NODE TABLE {label}(name STRING, class STRING, states STRING[], affordances STRING[], "
                   f"properties STRING[]{extra}, PRIMARY KEY(name))")
    for kind, (src, dsts) in RELATIONSHIPS.items():
        out.append(f"CREATE REL TABLE {kind}(" + ", ".join(f"FROM {src} TO {d}" for d in dsts) + ")")
    return out


def _remove(path: Path) -> None:
    for p in path.parent.glob(path.name + "*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _value(v: Any) -> Any:
    """Engine values as plain JSON: a node becomes its properties plus ``_label``; a relationship
    ``{"_type": ...}``; a path ``{"nodes": [...], "relationships": [...]}``."""
    if isinstance(v, dict):
        if "_NODES" in v and "_RELS" in v:
            return {"nodes": [_value(n) for n in v["_NODES"]], "relationships": [_value(r) for r in v["_RELS"]]}
        if "_SRC" in v and "_DST" in v:
            return {"_type": v.get("_LABEL")} | {k: plain(x) for k, x in v.items() if not k.startswith("_")}
        if "_LABEL" in v:
            return {"_label": v["_LABEL"]} | {k: plain(x) for k, x in v.items() if not k.startswith("_")}
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_value(x) for x in v]
    return plain(v)


_HINTS = {
    "unknown_name": "labels are Room, Asset, Object, Agent; relationships IN_ROOM, ON_TOP_OF, INSIDE, AT, HOLDS; "
                    "properties name, class, states, affordances, properties (and seen on Object)",
}


def _error(message: str, limits: QueryLimits) -> QueryError:
    first = message.strip().splitlines()[0] if message.strip() else "query failed"
    low = message.lower()
    if "interrupted" in low or "timeout" in low:
        return QueryError("timeout", f"the query was stopped after {limits.timeout_s:g} s; avoid cartesian products "
                                     "of unconnected patterns and unbounded variable-length paths")
    if "buffer manager" in low or "out of memory" in low or "unable to allocate" in low:
        return QueryError("resources", "the query needs too much memory; connect the patterns, filter early and "
                                       "aggregate")
    if "read-only" in low or "read only" in low:
        return QueryError("rejected", "the scene graph is read-only here; use MATCH ... RETURN to read it")
    if first.startswith("Parser exception"):
        return QueryError("syntax", f"syntax error: {_tail(message)} (see the dialect notes)")
    if first.startswith("Binder exception"):
        hint = _HINTS["unknown_name"] if ("does not exist" in low or "cannot find" in low) else ""
        return QueryError("unknown_name", f"{first.removeprefix('Binder exception: ')}" + (f" ({hint})" if hint else ""))
    return QueryError("error", first)


def _tail(message: str) -> str:
    lines = [l for l in message.strip().splitlines() if l.strip()]
    head = lines[0].removeprefix("Parser exception: ")
    return head[:300]
