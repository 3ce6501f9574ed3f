"""The server store: a Neo4j database through the official ``neo4j`` driver (``pip install neo4j``).

Connection from the arguments or the environment: ``NEO4J_URI`` (e.g. ``bolt://localhost:7687``),
``NEO4J_USERNAME``, ``NEO4J_PASSWORD`` and optionally ``NEO4J_DATABASE`` (default: the server's
default database). :meth:`Neo4jStore.load` deletes every ``Room``/``Asset``/``Object``/``Agent``
node of that database and writes the scene graph: give the store a database of its own.

Read-only layer 1 on Neo4j: a query is first run as ``EXPLAIN``; the plan's query type must be
``r`` (read only); then it runs in a transaction of a session in READ access mode (read routing:
the server refuses writes there, and a cluster sends it to a reader) with the transaction
timeout of :class:`~.store.QueryLimits`. Rows are fetched up to ``max_rows + 1``.
"""

from __future__ import annotations

import os
import time
from typing import Any, Iterable

from sgs.graph import SceneGraph

from lookplangraph.cypher.guard import QueryRejected, check_read_only
from lookplangraph.cypher.scene import NODE_LABELS, SceneRows
from lookplangraph.cypher.store import (
    QueryError, QueryLimits, QueryResult, StoreError, check_relabel, check_result_size, plain,
)

DIALECT_NOTES = """\
Dialect: Neo4j 5 Cypher. Lists are 0-based; list comprehensions, shortestPath() and labels(n) work.
Variable-length relationships: bound them, e.g. -[:ON_TOP_OF|INSIDE*1..5]->. No APOC procedures."""


def import_neo4j():
    try:
        import neo4j
    except ImportError:
        raise StoreError("the Neo4j store needs the official driver: pip install neo4j") from None
    return neo4j


class Neo4jStore:
    """Neo4j behind the :class:`~.store.GraphStore` protocol (see the module doc)."""

    engine = "neo4j"

    def __init__(self, uri: str | None = None, username: str | None = None, password: str | None = None,
                 database: str | None = None, limits: QueryLimits | None = None, *, allow_writes: bool = False):
        self._neo4j = neo4j = import_neo4j()
        uri = uri or os.environ.get("NEO4J_URI")
        if not uri:
            raise StoreError("no Neo4j server given: set NEO4J_URI (and NEO4J_USERNAME, NEO4J_PASSWORD) or pass uri=")
        username = username or os.environ.get("NEO4J_USERNAME", "neo4j")
        password = password if password is not None else os.environ.get("NEO4J_PASSWORD", "")
        self.database = database or os.environ.get("NEO4J_DATABASE") or None
        self.limits = limits or QueryLimits()
        self.allow_writes = allow_writes
        self.relabels: dict[str, str] = {}
        self._graph: SceneGraph | None = None
        self._unseen: frozenset[str] = frozenset()
        self.load_seconds = 0.0
        try:
            self._driver = neo4j.GraphDatabase.driver(uri, auth=(username, password))
            self._driver.verify_connectivity()
        except Exception as exc:  # the driver raises many kinds (ServiceUnavailable, AuthError, ValueError ...)
            raise StoreError(f"cannot reach Neo4j at {uri}: {exc}") from None

    def _session(self, write: bool = False):
        mode = self._neo4j.WRITE_ACCESS if write else self._neo4j.READ_ACCESS
        return self._driver.session(database=self.database, default_access_mode=mode)

    # -- content --------------------------------------------------------------------------------
    def load(self, graph: SceneGraph, unseen: Iterable[str] = ()) -> None:
        t0 = time.perf_counter()
        rows = SceneRows.build(graph, unseen, self.relabels)

        def write(tx):
            tx.run("MATCH (n) WHERE " + " OR ".join(f"n:{label}" for label in NODE_LABELS) + " DETACH DELETE n")
            for label, items in rows.nodes.items():
                if items:
                    tx.run(f"UNWIND $rows AS r CREATE (n:{label}) SET n = r", rows=items)
            for (kind, src, dst), items in rows.edges.items():
                tx.run(f"UNWIND $rows AS r MATCH (a:{src} {{name: r.a}}), (b:{dst} {{name: r.b}}) "
                       f"CREATE (a)-[:{kind}]->(b)", rows=items)

        try:
            with self._session(write=True) as session:
                session.execute_write(write)
        except self._neo4j.exceptions.Neo4jError as exc:
            raise StoreError(f"Neo4j could not load the scene graph: {exc}") from None
        self._graph, self._unseen = graph, frozenset(unseen)
        self.load_seconds = time.perf_counter() - t0

    @property
    def graph(self) -> SceneGraph | None:
        return self._graph

    def relabel(self, name: str, new_class: str) -> None:
        check_relabel(self.allow_writes, self._graph, name, new_class)
        self.relabels[name] = new_class
        with self._session(write=True) as session:
            session.execute_write(lambda tx: tx.run("MATCH (n {name: $name}) SET n.class = $cls",
                                                    name=name, cls=new_class).consume())

    # -- queries --------------------------------------------------------------------------------
    def query(self, cypher: str, params: dict[str, Any] | None = None) -> QueryResult:
        if self._graph is None:
            raise StoreError("nothing loaded: call load(graph) first")
        try:
            text = check_read_only(cypher)
        except QueryRejected as exc:
            raise QueryError("rejected", str(exc)) from None
        neo4j = self._neo4j
        params = dict(params or {})
        t0 = time.perf_counter()
        try:
            with self._session() as session:
                summary = session.run("EXPLAIN " + text, params).consume()
                unknown = _unknown_names(summary)
                if unknown:
                    raise QueryError("unknown_name", unknown)
                kind = summary.query_type
                if kind != "r":
                    raise QueryError("rejected", f"the query is not read-only (Neo4j query type {kind!r}); "
                                                 "use MATCH ... RETURN to read the scene graph")
                with session.begin_transaction(timeout=self.limits.timeout_s) as tx:
                    result = tx.run(text, params)
                    columns = list(result.keys())
                    records = result.fetch(self.limits.max_rows + 1)
                    tx.rollback()
        except QueryError:
            raise
        except neo4j.exceptions.Neo4jError as exc:
            raise _error(exc, self.limits) from None
        more = len(records) > self.limits.max_rows
        rows = [[_value(neo4j, v) for v in rec.values()] for rec in records[: self.limits.max_rows]]
        return check_result_size(columns, rows, more, self.limits, time.perf_counter() - t0)

    def schema_text(self) -> str:
        lines = ["Node labels and their properties:"]
        props: dict[str, list[str]] = {}
        for label, name, types in self.query(
                "CALL db.schema.nodeTypeProperties() YIELD nodeLabels, propertyName, propertyTypes "
                "RETURN nodeLabels[0], propertyName, propertyTypes").rows:
            if label in NODE_LABELS:
                props.setdefault(label, []).append(f"{name}: {'|'.join(types or [])}")
        for label in NODE_LABELS:
            if label in props:
                lines.append(f"  (:{label} {{" + ", ".join(props[label]) + "})")
        lines.append("Relationships:")
        ends = self.query("MATCH (a)-[r]->(b) RETURN DISTINCT labels(a)[0], type(r), labels(b)[0] "
                          "ORDER BY type(r), labels(a)[0], labels(b)[0]").rows
        by_type: dict[str, list[str]] = {}
        for a, t, b in ends:
            by_type.setdefault(t, []).append(f"(:{a})-[:{t}]->(:{b})")
        lines += ["  " + ", ".join(v) for v in by_type.values()]
        return "\n".join(lines) + "\n\n" + DIALECT_NOTES

    def close(self) -> None:
        self._driver.close()
        self._graph = None


def _value(neo4j, v: Any) -> Any:
    graph = neo4j.graph
    if isinstance(v, graph.Node):
        return {"_label": next(iter(v.labels), None)} | {k: plain(x) for k, x in v.items()}
    if isinstance(v, graph.Relationship):
        return {"_type": v.type} | {k: plain(x) for k, x in v.items()}
    if isinstance(v, graph.Path):
        return {"nodes": [_value(neo4j, n) for n in v.nodes], "relationships": [_value(neo4j, r) for r in v.relationships]}
    if isinstance(v, list):
        return [_value(neo4j, x) for x in v]
    if isinstance(v, dict):
        return {k: _value(neo4j, x) for k, x in v.items()}
    return plain(v)


def _unknown_names(summary) -> str | None:
    """Neo4j plans a query with an unknown label, relationship type or property (it only warns);
    the embedded engine refuses it. Say so to the LM the same way."""
    for note in getattr(summary, "notifications", None) or []:
        code = note.get("code", "") if isinstance(note, dict) else ""
        if any(k in code for k in ("UnknownLabel", "UnknownRelationshipType", "UnknownPropertyKey")):
            return (note.get("description") or code) + (" (labels are Room, Asset, Object, Agent; relationships "
                                                        "IN_ROOM, ON_TOP_OF, INSIDE, AT, HOLDS)")
    return None


def _error(exc, limits: QueryLimits) -> QueryError:
    code = getattr(exc, "code", "") or ""
    message = getattr(exc, "message", None) or str(exc)
    first = message.strip().splitlines()[0] if message.strip() else code
    if "TransactionTimedOut" in code or "Timeout" in code:
        return QueryError("timeout", f"the query was stopped after {limits.timeout_s:g} s; avoid cartesian products "
                                     "and unbounded variable-length paths")
    if "AccessMode" in code or "ForbiddenOnReadOnly" in code:
        return QueryError("rejected", "the scene graph is read-only here; use MATCH ... RETURN to read it")
    if "SyntaxError" in code:
        return QueryError("syntax", f"syntax error: {first}")
    if "MemoryPool" in code or "OutOfMemory" in code:
        return QueryError("resources", "the query needs too much memory; connect the patterns and aggregate")
    return QueryError("error", first)
