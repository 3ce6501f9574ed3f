"""Typed answers to scene questions and their exact comparison (the paper's SLDP idea, in JSON).

Each question names its answer type; the LM answers with a JSON value of that type:

=========  ==========================================  ======================================
type       what the LM writes                          equal when
=========  ==========================================  ======================================
number     ``3`` or ``2.5``                            ``|a - b| <= 0.01``
string     ``"kitchen-1"``                             the same text (surrounding spaces aside)
boolean    ``true`` / ``false``                        the same truth value
set        ``["cup-1", "plate-2"]`` (any order)        the same elements, duplicates ignored
list       ``["bathroom-1", "bedroom-1"]`` (ordered)   the same elements in the same order
=========  ==========================================  ======================================

:func:`normalize` is lenient only where the meaning is unambiguous: a numeric string for a number,
``"yes"``/``"no"``/``"true"``/``"false"`` for a boolean, a single string for a one-element set or
list. Anything else is an :class:`AnswerError` (the answer is wrong, with the reason recorded).
"""

from __future__ import annotations

import math
from typing import Any, Literal

AnswerType = Literal["number", "string", "boolean", "set", "list"]
ANSWER_TYPES: tuple[str, ...] = ("number", "string", "boolean", "set", "list")
TOLERANCE = 0.01

#: how the prompt asks for each type
DESCRIPTIONS = {
    "number": "a number (JSON number)",
    "string": "one name (JSON string), e.g. \"kitchen-1\"",
    "boolean": "true or false (JSON boolean)",
    "set": "a JSON list of names in any order, e.g. [\"cup-1\", \"plate-2\"] ([] if none)",
    "list": "a JSON list of names in the order asked for",
}


class AnswerError(ValueError):
    """An answer that is not of the question's type."""


def answer_schema(kind: str) -> dict[str, Any]:
    """JSON schema of an answer of type ``kind`` (for constrained decoding)."""
    if kind == "number":
        return {"type": "number"}
    if kind == "string":
        return {"type": "string", "maxLength": 200}
    if kind == "boolean":
        return {"type": "boolean"}
    if kind in ("set", "list"):
        return {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": 100}
    raise ValueError(f"unknown answer type {kind!r}; one of {', '.join(ANSWER_TYPES)}")


def _text(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return str(x).strip()


def normalize(kind: str, value: Any) -> Any:
    """``value`` as a comparable Python value of type ``kind`` (see the module doc)."""
    if kind == "number":
        if isinstance(value, bool):
            raise AnswerError(f"expected a number, got {value!r}")
        if isinstance(value, (int, float)):
            out = float(value)
        elif isinstance(value, str):
            try:
                out = float(value.strip())
            except ValueError:
                raise AnswerError(f"expected a number, got {value!r}") from None
        else:
            raise AnswerError(f"expected a number, got {value!r}")
        if math.isnan(out):
            raise AnswerError("expected a number, got NaN")
        return out
    if kind == "string":
        if isinstance(value, (list, dict)) or value is None:
            raise AnswerError(f"expected one name, got {value!r}")
        return _text(value)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("yes", "true", "no", "false"):
            return value.strip().lower() in ("yes", "true")
        raise AnswerError(f"expected true or false, got {value!r}")
    if kind in ("set", "list"):
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or any(isinstance(x, (list, dict)) or x is None for x in value):
            raise AnswerError(f"expected a list of names, got {value!r}")
        items = [_text(x) for x in value]
        return frozenset(items) if kind == "set" else items
    raise ValueError(f"unknown answer type {kind!r}; one of {', '.join(ANSWER_TYPES)}")


def answers_equal(kind: str, expected: Any, given: Any) -> bool:
    """Whether ``given`` (the LM's, raw) equals ``expected`` (the benchmark's) under ``kind``;
    an answer of the wrong type is not equal."""
    try:
        a, b = normalize(kind, expected), normalize(kind, given)
    except AnswerError:
        return False
    if kind == "number":
        return abs(a - b) <= TOLERANCE
    return a == b
