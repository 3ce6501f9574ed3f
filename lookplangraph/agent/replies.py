"""Reading the next action from an LM reply, tolerantly: :func:`parse_reply` takes a JSON object
(possibly fenced, surrounded by prose, with single quotes, trailing commas, raw newlines, a nested
``"action"``, cut off inside its final ``reason``; the JSON itself is read by
:mod:`lookplangraph.lm.json_reply`) or call syntax such as ``pick_up(apple-1)``, and never raises:
an unreadable reply becomes an error sentence for the LM. :func:`parse_answer` also reads an
answer of several actions (a JSON list of action objects, ``actions_per_answer`` > 1).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sgs.actions import FUNCTIONS, Action, ActionSyntaxError, parse_action

from lookplangraph.lm.json_reply import FENCE_RE, FREE_TEXT_KEYS, CutOff, extract_json

_EXAMPLE = '{"function_name": "go_to", "node": "kitchen-1", "relation": null, "destination": null, "reason": "..."}'
_CALL_SEARCH_RE = re.compile(r"\b(" + "|".join(sorted(FUNCTIONS, key=len, reverse=True)) + r")\s*\(([^()\n]*)\)")


def _reason_of(data: dict[str, Any]) -> str | None:
    for key in FREE_TEXT_KEYS:
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
    candidates = [m.group(1) for m in FENCE_RE.finditer(text)] + [text]
    for cand in candidates:
        try:
            found = extract_json(cand)
        except CutOff:
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


def parse_answer(text: str | None, limit: int = 1) -> tuple[list[Action], str | None, str | None]:
    """Read ``(actions, reason, error)`` from an answer of at most ``limit`` actions; never raises.

    With ``limit`` 1 it is :func:`parse_reply` (a list of one item is that item). Otherwise the
    answer is one action as :func:`parse_reply` reads it, or a JSON list of 1 to ``limit`` action
    objects (``reason``: the first one's); actions after a ``done()`` are dropped, as the episode
    ends there. Exactly one of ``actions`` (non-empty) and ``error`` is set.
    """
    if limit > 1 and text is not None:
        stripped = str(text).strip()
        candidates = [m.group(1).strip() for m in FENCE_RE.finditer(stripped)] + [stripped]
        for cand in candidates:
            if not cand.startswith("["):
                continue
            try:
                data = json.loads(cand)
            except ValueError:
                found = _extract(cand)
                if found is None:
                    continue
                data = found
            if not isinstance(data, list):
                continue
            if not data or len(data) > limit:
                return [], None, (f"Your answer holds {len(data)} actions; give 1 to {limit}, as one JSON object "
                                  f"like {_EXAMPLE} or a list of them.")
            actions: list[Action] = []
            reason = None
            for n, item in enumerate(data, 1):
                one, said, error = parse_reply(json.dumps(item) if isinstance(item, dict) else str(item))
                if one is None:
                    return [], None, f"Action {n} of your answer: {error}"
                reason = reason if reason is not None else said
                actions.append(one)
                if one.function_name == "done":
                    break
            return actions, reason, None
    action, reason, error = parse_reply(text)
    return ([action] if action is not None else []), reason, error


def _extract(text: str):
    try:
        found = extract_json(text)
    except CutOff:
        return None
    return found[0] if found is not None else None


def _parse_call(call: str, reason: str | None) -> tuple[Action | None, str | None, str | None]:
    try:
        return parse_action(call), reason, None
    except ActionSyntaxError as exc:
        return None, reason, f"Could not read your action: {exc}. Answer with one JSON object like {_EXAMPLE}."
    except Exception as exc:
        return None, reason, f"Could not read your action ({str(exc).splitlines()[0][:200]})."


