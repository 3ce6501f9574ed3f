"""Answers read from a query's rows: the values a result holds, the answer schema narrowed to
them, and whether an answer is one of them.

:func:`row_values` walks a result's rows (plain JSON values; a node is a property dict and
counts as its ``name``) and returns the names and numbers it holds, in order, once each.
:func:`narrowed_answer` is the answer schema of a question whose answer is a name, a set or list
of names, or a number, with its values restricted to those (a number may also be the count of
rows, or the length of a list a row holds); None where the rows hold no such value or the type
is another (a boolean). :func:`answer_outside_rows` says why an answer is not read from the rows
(None when it is), and :func:`answer_leaves_out_rows` why a list of names read from a one-column
result leaves some of its names out. The Cypher agent uses them with
``AgentConfig.answer_from_rows``: ``constrain`` narrows the answer turn, ``check`` sends either
kind of answer back once. Docs:
``docs/guides/cypher.md#answers-read-from-the-rows``.
"""

from __future__ import annotations

from typing import Any

#: at most this many values of a result are offered as answers
MAX_VALUES = 200


def row_values(rows: list[list[Any]]) -> tuple[list[str], list[float]]:
    """The names and the numbers ``rows`` hold, each in order of appearance, without repeats."""
    names: dict[str, None] = {}
    numbers: dict[float, None] = {}

    def walk(v: Any) -> None:
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, (int, float)):
            numbers[float(v)] = None
        elif isinstance(v, str):
            if v.strip():
                names[v] = None
        elif isinstance(v, dict):
            if isinstance(v.get("name"), str):
                names[v["name"]] = None
            else:
                for x in v.values():
                    walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for row in rows:
        walk(row)
    return list(names)[:MAX_VALUES], list(numbers)[:MAX_VALUES]


def _counts(rows: list[list[Any]]) -> list[float]:
    """What a count may be read as: the number of rows, and the length of each list a row holds."""
    return [float(len(rows))] + [float(len(v)) for row in rows for v in row if isinstance(v, list)]


def narrowed_answer(answer: dict[str, Any], rows: list[list[Any]]) -> dict[str, Any] | None:
    """``answer`` (an answer schema of :func:`lookplangraph.cypher.answers.answer_schema`) with its
    values restricted to those of ``rows`` (module doc), or None where that does not apply."""
    if not rows:
        return None
    names, numbers = row_values(rows)
    kind = answer.get("type")
    if kind == "string" and names:
        return {"type": "string", "enum": names}
    if kind == "array" and names:
        return {**answer, "items": {"type": "string", "enum": names}}
    if kind == "number":
        allowed = list(dict.fromkeys([*numbers, *_counts(rows)]))
        return {"enum": [int(x) if x.is_integer() else x for x in allowed][:MAX_VALUES]}
    return None


def answer_outside_rows(answer: dict[str, Any], given: Any, rows: list[list[Any]]) -> str | None:
    """Why ``given`` is not read from ``rows`` (a sentence for the LM), or None when it is, or when
    the answer's type is not read from rows (:func:`narrowed_answer`)."""
    narrowed = narrowed_answer(answer, rows)
    if narrowed is None:
        return None
    allowed = narrowed["items"]["enum"] if "items" in narrowed else narrowed["enum"]
    picked = given if isinstance(given, list) else [given]
    if answer.get("type") == "number":
        try:
            outside = [x for x in picked if not any(abs(float(x) - float(a)) < 1e-6 for a in allowed)]
        except (TypeError, ValueError):
            outside = picked
    else:
        outside = [x for x in picked if x not in allowed]
    if not outside:
        return None
    shown = ", ".join(map(str, allowed[:12])) + (" ..." if len(allowed) > 12 else "")
    return (f"{', '.join(map(str, outside))} is not a value of your last query's rows (they hold: {shown}); "
            "answer with values the rows give, or query again")


def _column_names(rows: list[list[Any]]) -> list[str] | None:
    """The names of a one-column result, one per row in order (repeats kept once), or None where
    a row has another number of cells or its cell is not a name (a string or a named node)."""
    names: dict[str, None] = {}
    for row in rows:
        if not isinstance(row, (list, tuple)) or len(row) != 1:
            return None
        cell = row[0]
        name = cell.get("name") if isinstance(cell, dict) else cell
        if not isinstance(name, str) or not name.strip():
            return None
        names[name] = None
    return list(names)


def answer_leaves_out_rows(answer: dict[str, Any], given: Any, rows: list[list[Any]]) -> str | None:
    """Why ``given``, a list of names (``answer`` an array schema) drawn from a one-column
    ``rows``, leaves some of the rows' names out (a sentence for the LM naming them), or None: when
    it gives them all, when it holds a name the rows lack (:func:`answer_outside_rows` says so), or
    when the answer or the result is of another shape."""
    if answer.get("type") != "array" or not isinstance(given, list) or not rows:
        return None
    names = _column_names(rows)
    if names is None or any(x not in names for x in given):
        return None
    left_out = [n for n in names if n not in given]
    if not left_out:
        return None
    shown = ", ".join(left_out[:12]) + (" ..." if len(left_out) > 12 else "")
    return (f"it gives {len(set(given))} of the {len(names)} names your last query returned and leaves out {shown}; "
            "if the rows are what the question asks for, answer with all of them, or query again for exactly "
            "what it asks")
