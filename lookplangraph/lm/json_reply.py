"""Reading JSON from LM replies tolerantly: what a small model writes around, inside or instead of
a JSON value (code fences, prose around it, single quotes, trailing commas, raw newlines, a reply
cut off by ``max_tokens``), and the check of a structured reply against the schema it was asked
for. Nothing here knows what the JSON means (:mod:`lookplangraph.agent.replies` reads actions)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from lookplangraph.lm import structured

FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
#: Keys whose values are free prose: a reply cut off inside the last of them keeps what came before
#: (an object cut inside any other string is not guessed at).
FREE_TEXT_KEYS = ("reason", "reasoning", "thought", "thoughts", "explanation", "rationale")


def _scan_object(text: str, start: int) -> tuple[int | None, bool, list[str]]:
    """From the ``{`` at ``start``: (end index after the matching ``}`` or None if the text ends
    first, whether the end falls inside a string, the stack of open brackets)."""
    stack: list[str] = []
    in_str: str | None = None
    esc = False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == in_str:
                in_str = None
        elif c in "\"'":
            in_str = c
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if stack and stack[-1] == c:
                stack.pop()
            if not stack:
                return i + 1, False, []
    return None, in_str is not None, stack


def _loads_lenient(s: str) -> Any:
    """json.loads with raw control characters allowed, then trailing commas removed, then Python
    literal syntax (single quotes, None/True/False). Raises ValueError."""
    try:
        return json.loads(s, strict=False)
    except json.JSONDecodeError:
        pass
    no_trailing = re.sub(r",\s*([}\]])", r"\1", s)
    try:
        return json.loads(no_trailing, strict=False)
    except json.JSONDecodeError:
        pass
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", no_trailing)))
    for candidate in (no_trailing, py):
        try:
            value = ast.literal_eval(candidate.replace("\n", " "))
        except Exception:  # ValueError, SyntaxError, TypeError (unhashable set items), RecursionError
            continue
        if isinstance(value, (dict, list)):
            return value
    raise ValueError("not JSON")


class CutOff(Exception):
    """The reply ends inside an action field."""


def extract_json(text: str) -> tuple[Any, bool] | None:
    """The first JSON object (or list) in ``text``: (value, repaired). ``repaired`` is True when
    the object was cut off and closed here; a cut inside a string is only accepted when that
    string is the last value, i.e. the reason of an action-first reply."""
    starts = [m.start() for m in re.finditer(r"[{\[]", text)]
    for start in starts[:20]:
        end, in_string, stack = _scan_object(text, start)
        if end is not None:
            try:
                return _loads_lenient(text[start:end]), False
            except ValueError:
                continue
        # cut off: close the open string and brackets
        body = text[start:].rstrip()
        if in_string:
            quote = '"' if body.count('"') % 2 else "'"
            body += quote
        else:
            body = re.sub(r"[,:]\s*$", "", body)
            body = re.sub(r',\s*"[^"]*"\s*$', "", body)  # a dangling key without value
        try:
            value = _loads_lenient(body + "".join(reversed(stack)))
        except ValueError:
            continue
        if in_string and isinstance(value, dict) and value and list(value)[-1] not in FREE_TEXT_KEYS:
            raise CutOff  # the cut fell inside an action field: do not guess the name
        return value, True
    return None


def read_json(text: str | None) -> Any:
    """The first JSON value in a reply, read tolerantly (code fences, prose around it, single
    quotes, trailing commas); a reply cut off by ``max_tokens`` keeps what was complete before
    the cut (the open brackets are closed). None when there is none."""
    if not text or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    for cand in [m.group(1) for m in FENCE_RE.finditer(text)] + [text]:
        try:
            found = extract_json(cand)
        except CutOff:  # cut inside a field: keep what ends at the last closed object
            cut = cand.rfind("}")
            try:
                found = extract_json(cand[: cut + 1]) if cut > 0 else None
            except CutOff:
                found = None
        if found is not None:
            return found[0]
    return None


def check_reply(text: str, schema: Any) -> tuple[Any, str | None]:
    """``(parsed, error)`` of a reply to a request with ``schema`` (None: nothing to check). The
    JSON is read tolerantly (:func:`read_json`), then validated strictly
    (:func:`lookplangraph.lm.structured.check`)."""
    if schema is None:
        return None, None
    if not text or not text.strip():
        return None, "the reply is empty"
    value = read_json(text)
    if value is None:
        return None, "the reply holds no JSON"
    return structured.check(value, schema)
