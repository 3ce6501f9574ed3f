"""The lexical read-only guard: the second of the three read-only layers (see :mod:`.store`).

:func:`check_read_only` scans a Cypher string the way the engines tokenize it — skipping string
literals (``'...'``, ``"..."`` with backslash escapes), backtick identifiers and comments
(``// ...`` and ``/* ... */``) — and rejects, with a sentence the LM can act on:

* a write or administration clause (:data:`FORBIDDEN`: ``CREATE``, ``MERGE``, ``SET``,
  ``DELETE``, ``LOAD CSV``, ``COPY``, ``ATTACH``, ``USE``, ``SHOW``, transactions ...);
* ``CALL`` of anything but a catalog procedure of :data:`READ_ONLY_PROCEDURES` or a ``CALL { ... }``
  subquery (whose clauses are scanned like the rest): Kuzu/LadybugDB also use ``CALL`` to change
  settings (``CALL timeout=0``), Neo4j to run arbitrary procedures;
* more than one statement: a ``;`` followed by anything but whitespace and comments (one trailing
  ``;`` is dropped).

A keyword only counts as a clause where it is a bare word: ``o.set``, ``:Create`` (a label) and
``$delete`` (a parameter) are names, not clauses. The guard is deliberately simple and errs on the
side of refusing; the database itself is opened read-only as well, so a string that slipped
through would still fail there.
"""

from __future__ import annotations

import re

#: Clause and command keywords that change data, schema, settings or the session.
FORBIDDEN = frozenset({
    "CREATE", "MERGE", "DELETE", "DETACH", "SET", "REMOVE", "DROP", "ALTER", "RENAME",
    "COPY", "LOAD", "IMPORT", "EXPORT", "ATTACH", "USE", "INSTALL", "UNINSTALL",
    "BEGIN", "COMMIT", "ROLLBACK", "CHECKPOINT", "TRANSACTION", "TRANSACTIONS",
    "FOREACH", "GRANT", "REVOKE", "DENY", "SHOW", "START", "STOP", "TERMINATE", "ENABLE", "DISABLE",
})

#: Procedures that only read the catalog (LadybugDB/Kuzu and Neo4j names, compared lower-case).
READ_ONLY_PROCEDURES = frozenset({
    "show_tables", "table_info", "show_connection", "db_version", "show_functions",
    "db.labels", "db.relationshiptypes", "db.propertykeys", "db.schema.visualization",
    "db.schema.nodetypeproperties", "db.schema.reltypeproperties",
})


class QueryRejected(ValueError):
    """The guard refused a query; the message says why and what to do instead."""


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scan(query: str):
    """Yield ``(kind, text, start)`` tokens outside literals/comments: kind is ``word``,
    ``semicolon`` or ``char`` (any other single character that is not whitespace)."""
    i, n = 0, len(query)
    while i < n:
        c = query[i]
        if c in "'\"":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" else 1
            i = j + 1
            yield "literal", "", i
            continue
        if c == "`":
            j = query.find("`", i + 1)
            i = n if j < 0 else j + 1
            yield "literal", "", i
            continue
        if query.startswith("//", i):
            j = query.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if query.startswith("/*", i):
            j = query.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c.isspace():
            i += 1
            continue
        m = _WORD.match(query, i)
        if m:
            yield "word", m.group(0), i
            i = m.end()
            continue
        yield ("semicolon" if c == ";" else "char"), c, i
        i += 1


def check_read_only(query: str) -> str:
    """Return ``query`` without a single trailing ``;`` if it is one read-only statement; raise
    :class:`QueryRejected` otherwise (see the module doc)."""
    if not isinstance(query, str) or not query.strip():
        raise QueryRejected("empty query: write one Cypher statement such as MATCH (o:Object) RETURN o.name LIMIT 5")
    tokens = list(_scan(query))
    cut = None
    for k, (kind, text, pos) in enumerate(tokens):
        if kind == "semicolon":
            if any(t[0] != "semicolon" for t in tokens[k + 1:]):
                raise QueryRejected("only one statement per call: remove the ';' and send the next query in "
                                    "another call")
            cut = pos if cut is None else cut
            continue
        if kind != "word":
            continue
        prev = tokens[k - 1][1] if k > 0 and tokens[k - 1][0] == "char" else ""
        if prev in (".", ":", "$"):
            continue  # property, label or parameter name
        word = text.upper()
        if word in FORBIDDEN:
            raise QueryRejected(f"{word} is not allowed: the scene graph is read-only here; use MATCH ... "
                                f"RETURN to read it")
        if word == "CALL":
            _check_call(tokens, k)
    return query[:cut].rstrip() if cut is not None else query


def _check_call(tokens: list, k: int) -> None:
    nxt = tokens[k + 1] if k + 1 < len(tokens) else None
    if nxt is not None and nxt[1] == "{":
        return  # a subquery: its clauses are scanned with the rest
    name, j = [], k + 1
    while j < len(tokens) and tokens[j][0] == "word":
        name.append(tokens[j][1])
        if j + 1 < len(tokens) and tokens[j + 1][1] == ".":
            j += 2
            continue
        j += 1
        break
    proc = ".".join(name).lower()
    following = tokens[j][1] if j < len(tokens) else ""
    if proc in READ_ONLY_PROCEDURES and following == "(":
        return
    allowed = ", ".join(sorted(READ_ONLY_PROCEDURES))
    raise QueryRejected(f"CALL {proc or '...'} is not allowed: only the catalog procedures ({allowed}) "
                        f"and CALL {{ ... }} subqueries may be called")
