"""Answers read from a query's rows: the values a result holds, the answer schema narrowed to
them, and whether an answer is one of them.

:func:`row_values` walks a result's rows (plain JSON values; a node is a property dict and
counts as its ``name``) and returns the names and numbers it holds, in order, once each.
:func:`narrowed_answer` is the answer schema of a question whose answer is a name, a set or list
of names, or a number, with its values restricted to those (a number may also be the count of
rows, or the length of a list a row holds); None where the rows hold no such value or the type
is another (a boolean). :func:`answer_outside_rows` says why an answer is not read from the rows
(None when it is). The Cypher agent uses them with ``AgentConfig.answer_from_rows``:
``constrain`` narrows the answer turn, ``check`` sends such an answer back once. Docs:
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
