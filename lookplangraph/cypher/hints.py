"""What the store knows that bears on a query that found nothing (the agent's feedback).

A small model that writes ``MATCH (o:Object {class: 'fridge'})-...`` for a fridge that is an
*Asset* gets no rows and takes the empty result for the answer. :func:`empty_result_note` reads
the names and classes the query looks for (``{class: 'x'}``, ``{name: 'x'}``, ``n.class = 'x'``)
and says, for each, which labels hold such nodes (with a few names), which label the query
looked under, how that label is connected (its relationships, from :data:`LINKS`), and, when no
node has the value at all, the nearest classes or names the store has. It asks the store with
plain per-label ``count``/``name`` queries that both engines (LadybugDB, Neo4j) run.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from lookplangraph.cypher.store import QueryError

LABELS = ("Room", "Asset", "Object")
#: how each label is connected (the scene schema of :mod:`lookplangraph.cypher.scene`)
LINKS = {
    "Room": "a Room is reached from its assets: (a:Asset)-[:IN_ROOM]->(r:Room)",
    "Asset": "an Asset is in its room by one step: (a:Asset)-[:IN_ROOM]->(r:Room); objects rest on or in it: "
             "(o:Object)-[:ON_TOP_OF|INSIDE]->(a)",
    "Object": "an Object rests ON_TOP_OF or INSIDE an Asset or another Object, and reaches its room through "
              "those steps: (o:Object)-[:ON_TOP_OF|INSIDE*1..5]->(:Asset)-[:IN_ROOM]->(r:Room)",
}
_MAP = re.compile(r"\(\s*(\w*)\s*(?::\s*(\w+))?\s*\{([^}]*)\}")  # (var:Label {props})
_PAIR = re.compile(r"(class|name)\s*:\s*'([^'\\]{1,80})'")
_WHERE = re.compile(r"\b(\w+)\.(class|name)\s*=\s*'([^'\\]{1,80})'")
_VAR = re.compile(r"\(\s*(\w+)\s*:\s*(\w+)")


def looked_for(query: str) -> list[tuple[str, str, str | None]]:
    """``(property, value, label the query gave it or None)`` for every class or name the query
    compares with a literal, in order, without repeats."""
    labels = {var: label for var, label in _VAR.findall(query)}
    out: list[tuple[str, str, str | None]] = []
    for var, label, props in _MAP.findall(query):
        for prop, value in _PAIR.findall(props):
            out.append((prop, value, label or labels.get(var)))
    for var, prop, value in _WHERE.findall(query):
        out.append((prop, value, labels.get(var)))
    return list(dict.fromkeys(out))


def is_empty(rows: list[list[Any]]) -> bool:
    """No rows, or only rows of nothing (nulls, zeros, empty lists or strings): a result that does
    not show an answer."""
    return all(all(v in (None, 0, "", []) or v == [] for v in row) for row in rows)


def _ask(store, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
    try:
        return store.query(query, params).rows
    except QueryError:
        return []


def holders(store, prop: str, value: str, limit: int = 4) -> dict[str, list[str]]:
    """Per label, up to ``limit`` names of the nodes whose ``prop`` is ``value`` (labels with none
    left out; none when the store cannot answer)."""
    found = {}
    for label in LABELS:
        rows = _ask(store, f"MATCH (n:{label}) WHERE n.{prop} = $value RETURN n.name LIMIT {int(limit)}",
                    {"value": value})
        if rows:
            found[label] = [str(r[0]) for r in rows]
    return found


def values(store, label: str, prop: str = "class", limit: int = 2000) -> list[str]:
    """The distinct values of ``prop`` on ``label`` nodes, sorted (at most ``limit``; none when
    the store cannot answer). The agent's prompt lists the classes with it."""
    rows = _ask(store, f"MATCH (n:{label}) RETURN DISTINCT n.{prop} AS v ORDER BY v LIMIT {int(limit)}")
    return [str(r[0]) for r in rows if r and r[0] is not None]


def _nearest(store, prop: str, value: str) -> list[str]:
    """Classes (or names) of the store closest to ``value``."""
    seen = {v for label in LABELS for v in values(store, label, prop)}
    return difflib.get_close_matches(value, sorted(seen), n=3, cutoff=0.6)


def empty_result_note(store, query: str) -> str | None:
    """A note for the LM after ``query`` found nothing (module doc), or None when the query
    compares no class or name with a literal."""
    lines = []
    for prop, value, label in looked_for(query)[:4]:
        found = holders(store, prop, value)
        if not found:
            near = _nearest(store, prop, value)
            lines.append(f"no node has {prop} '{value}'" + (f"; the store has {prop}es like: {', '.join(near)}"
                                                             if near and prop == "class" else
                                                             f"; names like: {', '.join(near)}" if near else ""))
            continue
        where = "; ".join(f"{len(names)}{'+' if len(names) == 4 else ''} {lab} node(s) ({', '.join(names[:3])})"
                          for lab, names in found.items())
        line = f"{prop} '{value}' is held by {where}"
        if label and label not in found:
            line += f" - not by {label}, where the query looked"
        lines.append(line)
        for lab in found:  # the label was right but the path may not be: how that label is connected
            lines.append(LINKS[lab])
    if not lines:
        return None
    return "Note: this found nothing. What the store has: " + "; ".join(dict.fromkeys(lines)) + "."
