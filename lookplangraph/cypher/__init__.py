"""A Cypher interface to the scene graph (Ray et al., "Structured Interfaces for Automated
Reasoning with 3D Scene Graphs"): the scene graph in a graph database, an LM that queries it.

Modules, one concept each:

* :mod:`.scene` — how a scene graph maps to labels, properties and relationships;
* :mod:`.store` — the :class:`GraphStore` protocol, query limits, errors and results;
* :mod:`.guard` — the lexical read-only guard;
* :mod:`.ladybug_store` — the embedded engine (LadybugDB, default); :mod:`.neo4j_store` — Neo4j;
* :mod:`.memory_view` — a store kept in step with the planner's memory graph;
* :mod:`.answers` — typed answers and their comparison; :mod:`.qa` and :mod:`.grounding` — the
  two benchmarks, built from GraSIF scenes; :mod:`.benchmark` — their versioned files;
* :mod:`.agent` — the LM with the ``run_cypher_query`` tool, the one-query variant and the
  whole-graph-in-context baseline; :mod:`.evaluate` — batch evaluation; :mod:`.commands` — CLI;
* :mod:`.gold` — the query expert for questions (its patterns also reword them);
  :mod:`.phrasings` — questions reworded, for training and for the reworded evaluation set.

The training data made of them is :mod:`lookplangraph.distill.cypher`.
"""

from __future__ import annotations

from lookplangraph.cypher.ladybug_store import LadybugStore
from lookplangraph.cypher.neo4j_store import Neo4jStore
from lookplangraph.cypher.store import GraphStore, QueryError, QueryLimits, QueryResult, StoreError, WritesDisabled

ENGINES = ("ladybug", "neo4j")


def open_store(engine: str = "ladybug", limits: QueryLimits | None = None, *, allow_writes: bool = False,
               **options) -> GraphStore:
    """A new, empty store of ``engine`` (``ladybug``: embedded, default; ``neo4j``: a server from
    ``NEO4J_URI``...). ``options`` go to the store's constructor. Raises :class:`StoreError`."""
    if engine == "ladybug":
        return LadybugStore(limits, allow_writes=allow_writes, **options)
    if engine == "neo4j":
        return Neo4jStore(limits=limits, allow_writes=allow_writes, **options)
    raise StoreError(f"unknown graph engine {engine!r}; one of {', '.join(ENGINES)}")


__all__ = ["ENGINES", "GraphStore", "QueryError", "QueryLimits", "QueryResult", "StoreError", "WritesDisabled",
           "open_store"]
