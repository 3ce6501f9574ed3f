"""Reading LM replies tolerantly: what a small model writes around, inside or instead of JSON.

* :func:`parse_reply` reads the next action from a reply (a JSON object, possibly fenced,
  surrounded by prose, with single quotes, trailing commas, raw newlines, a nested ``"action"``,
  cut off inside its final ``reason``; or call syntax such as ``pick_up(apple-1)``) and never
  raises: an unreadable reply becomes an error sentence for the LM;
* :func:`read_json` gives the first JSON value of any reply, and :func:`check_reply` validates it
  against a requested schema (:mod:`lookplangraph.lm.structured`).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from sgs.actions import FUNCTIONS, Action, ActionSyntaxError, parse_action

from lookplangraph.lm import structured

_EXAMPLE = '{"function_name": "go_to", "node": "kitchen-1", "relation": null, "destination": null, "reason": "..."}'
_FENCE_RE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_CALL_SEARCH_RE = re.compile(r"\b(" + "|".join(sorted(FUNCTIONS, key=len, reverse=True)) + r")\s*\(([^()\n]*)\)")
_REASON_KEYS = ("reason", "reasoning", "thought", "thoughts", "explanation", "rationale")


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


class _CutOff(Exception):
    """The reply ends inside an action field."""


def _extract_json(text: str) -> tuple[Any, bool] | None:
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
        if in_string and isinstance(value, dict) and value and list(value)[-1] not in _REASON_KEYS:
            raise _CutOff  # the cut fell inside an action field: do not guess the name
        return value, True
    return None


def _reason_of(data: dict[str, Any]) -> str | None:
    for key in _REASON_KEYS:
        v = data.get(key)
        if v is not None:
            return (v if isinstance(v, str) else json.dumps(v)).strip() or None
    return None


def parse_reply(text: str | None) -> tuple[Action | None, str | None, str | None]:
    """Read ``(action, reason, error)`` from an LM reply; never raises.

    Accepts a JSON object (possibly inside a code fence or surrounded by prose, with raw newlines
    in strings, single quotes, trailing commas, a nested ``"action"`` object, or cut off inside
    the final ``reason``), or call syntax such as ``pick_up(apple-1)`` anywhere in the text.
    Exactly one of ``action`` and ``error`` is set; ``error`` is a short sentence for the LM.
    """
    if text is None or not str(text).strip():
        return None, None, f"Your reply was empty. Answer with one JSON object like {_EXAMPLE}."
    text = str(text).strip()
    candidates = [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]
    for cand in candidates:
        try:
            found = _extract_json(cand)
        except _CutOff:
            return None, None, f"Your reply was cut off inside the action. Answer with one short JSON object like {_EXAMPLE}."
        if found is None:
            continue
        data, _ = found
        if isinstance(data, list):
            dicts = [d for d in data if isinstance(d, (dict, str))]
            if len(data) == 1 and dicts:
                data = dicts[0]
            else:
                return None, None, f"Your reply holds {len(data)} items; give exactly one action as one JSON object like {_EXAMPLE}."
        if isinstance(data, str):
            return _parse_call(data, None)
        if not isinstance(data, dict):
            continue
        reason = _reason_of(data)
        try:
            return parse_action(data), reason, None
        except ActionSyntaxError as exc:
            return None, reason, f"Could not read your action: {exc}. Answer with one JSON object like {_EXAMPLE}."
        except Exception as exc:  # pydantic validation of odd values
            first = str(exc).splitlines()[0][:200]
            return None, reason, f"Could not read your action ({first}). Answer with one JSON object like {_EXAMPLE}."
    # no JSON: call syntax, the whole reply or somewhere in it
    stripped = text.strip().strip("`").strip()
    if re.fullmatch(r"[A-Za-z_][\w\- ]*\s*\(.*\)\s*;?", stripped, re.S):
        return _parse_call(stripped, None)
    m = _CALL_SEARCH_RE.search(text)
    if m:
        return _parse_call(m.group(0), text[:500])
    return None, None, f"Could not find an action in your reply. Answer with one JSON object like {_EXAMPLE}."


def _parse_call(call: str, reason: str | None) -> tuple[Action | None, str | None, str | None]:
    try:
        return parse_action(call), reason, None
    except ActionSyntaxError as exc:
        return None, reason, f"Could not read your action: {exc}. Answer with one JSON object like {_EXAMPLE}."
    except Exception as exc:
        return None, reason, f"Could not read your action ({str(exc).splitlines()[0][:200]})."


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
    for cand in [m.group(1) for m in _FENCE_RE.finditer(text)] + [text]:
        try:
            found = _extract_json(cand)
        except _CutOff:  # cut inside a field: keep what ends at the last closed object
            cut = cand.rfind("}")
            try:
                found = _extract_json(cand[: cut + 1]) if cut > 0 else None
            except _CutOff:
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
