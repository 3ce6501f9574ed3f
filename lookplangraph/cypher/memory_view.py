"""Keep a graph store in step with the planner's memory graph.

The agent's queries must see what the planner believes (:class:`lookplangraph.agent.memory.MemoryGraph`),
never the environment's true graph with its hidden objects. :class:`MemoryView` loads
``memory.graph`` with its unseen priors (``seen: false``) and reloads it before a query whenever
the memory changed. Scene graphs are immutable and the memory replaces ``memory.graph`` on every
change, so "changed" is an identity test (plus the unseen set, which ``discover`` changes with it).
A reload is a full load: tens of milliseconds for a 200-node scene in the default store.
"""

from __future__ import annotations

from typing import Any

from lookplangraph.cypher.store import GraphStore, QueryResult
from lookplangraph.agent.memory import MemoryGraph


class MemoryView:
    """``store`` showing ``memory``; use :meth:`query` (or :meth:`refresh` then the store)."""

    def __init__(self, store: GraphStore, memory: MemoryGraph):
        self.store, self.memory = store, memory
        self._loaded: tuple[int, frozenset[str]] | None = None
        self.reloads = 0

    @classmethod
    def at_start(cls, store: GraphStore, graph) -> "MemoryView":
        """``store`` loaded with the planner's memory of scene ``graph`` at a task's start (its
        objects as unseen priors): what ``cypher-eval`` shows the agent."""
        view = cls(store, MemoryGraph(graph))
        view.refresh()
        return view

    def refresh(self) -> bool:
        """Reload the store if the memory changed since the last load; return whether it did."""
        key = (id(self.memory.graph), frozenset(self.memory.unseen))
        if key == self._loaded:
            return False
        self.store.load(self.memory.graph, self.memory.unseen)
        self._loaded = key
        self._graph_ref = self.memory.graph  # keep the graph alive so its id is not reused
        self.reloads += 1
        return True

    def query(self, cypher: str, params: dict[str, Any] | None = None) -> QueryResult:
        self.refresh()
        return self.store.query(cypher, params)

    def schema_text(self) -> str:
        self.refresh()
        return self.store.schema_text()
