"""The action set and its one model: every action, whether an LM wrote it as a call
(``rearrange(cup-1, inside, coffee_machine-1)``) or as a structured object
(``{"function_name": "rearrange", "node": "cup-1", "relation": "inside", "destination": ...}``),
becomes one :class:`Action`.

Parsing is about form only: a well-formed call to an unknown function or an unknown node still
parses, and the simulator answers it with feedback. Text that is not an action at all raises
:class:`ActionSyntaxError`, whose message is written for the LM.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

#: Functions the LM may call, with the arguments each takes (in call order).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "go_to": ("node",),
    "discover_objects": ("node",),
    "pick_up": ("node",),
    "put_on": ("destination",),
    "put_inside": ("destination",),
    "rearrange": ("node", "relation", "destination"),
    "open": ("node",),
    "close": ("node",),
    "turn_on": ("node",),
    "turn_off": ("node",),
    "done": (),
}
#: Functions the simulator executes directly; ``rearrange`` is expanded into these.
PRIMITIVES = frozenset(FUNCTIONS) - {"rearrange"}
RELATIONS = ("ontop", "inside")

_FUNCTION_ALIASES = {
    "goto": "go_to", "go": "go_to", "move_to": "go_to", "navigate": "go_to",
    "discover": "discover_objects", "discover_object": "discover_objects", "explore": "discover_objects",
    "pickup": "pick_up", "grab": "pick_up", "pick": "pick_up",
    "put_in": "put_inside", "put_into": "put_inside", "place_inside": "put_inside",
    "place_on": "put_on", "put_ontop": "put_on", "put": "put_on",
    "turnon": "turn_on", "switch_on": "turn_on", "turnoff": "turn_off", "switch_off": "turn_off",
    "finish": "done", "stop": "done",
}
_RELATION_ALIASES = {
    "ontop": "ontop", "on": "ontop", "ontop_of": "ontop", "on_top_of": "ontop", "onto": "ontop", "on_top": "ontop",
    "inside": "inside", "in": "inside", "inside_of": "inside", "into": "inside", "in_to": "inside",
}


class ActionSyntaxError(ValueError):
    """Text that cannot be read as an action; the message says what form is expected."""


class Action(BaseModel):
    """One action. ``node`` is the acted-on node (the object for ``rearrange``), ``destination``
    the place to put things for ``put_on``/``put_inside``/``rearrange``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    function_name: str
    node: str | None = None
    relation: str | None = None
    destination: str | None = None

    @field_validator("function_name")
    @classmethod
    def _canonical_function(cls, v: str) -> str:
        key = re.sub(r"[\s\-]+", "_", v.strip().lower())
        return _FUNCTION_ALIASES.get(key, key)

    @field_validator("relation")
    @classmethod
    def _canonical_relation(cls, v: str | None) -> str | None:
        if v is None:
            return None
        key = re.sub(r"[\s\-]+", "_", v.strip().lower())
        return _RELATION_ALIASES.get(key, key)

    @field_validator("node", "destination")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        if v is None:
            return None
        v = v.strip().strip("'\"` <>").strip()
        return v or None

    def __str__(self) -> str:
        args = [getattr(self, a) for a in FUNCTIONS.get(self.function_name, ("node", "relation", "destination"))]
        if self.function_name in ("put_on", "put_inside") and self.node:
            args = [self.node, self.destination]
        if self.function_name == "done" and self.node:
            args = [self.node]
        return f"{self.function_name}({', '.join(a for a in args if a is not None)})"


def make(function_name: str, node: str | None = None, relation: str | None = None, destination: str | None = None) -> Action:
    """Fast constructor for already-canonical actions (the simulator's own corrections)."""
    return Action.model_construct(function_name=function_name, node=node, relation=relation, destination=destination)


_CALL_RE = re.compile(r"^\s*([A-Za-z_][\w\- ]*?)\s*\((.*)\)\s*;?\s*$", re.S)


def parse_action(value: Any) -> Action:
    """Read an action from call syntax, a JSON string, a dict, or an :class:`Action`.

    Raises :class:`ActionSyntaxError` with a message meant for the LM.
    """
    if isinstance(value, Action):
        return value
    if isinstance(value, dict):
        return _from_dict(value)
    if not isinstance(value, str):
        raise ActionSyntaxError(f"an action is a call like go_to(kitchen-1) or a JSON object, got {type(value).__name__}")
    text = value.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text, strict=False)
        except json.JSONDecodeError as exc:
            raise ActionSyntaxError(f"the action is not valid JSON ({exc.msg} at character {exc.pos})") from None
        return _from_dict(data)
    match = _CALL_RE.match(text)
    if not match:
        raise ActionSyntaxError(f"cannot read {text!r} as an action; write one call like pick_up(apple-1)")
    name, arg_text = match.group(1), match.group(2).strip()
    args = [a for a in (s.strip() for s in arg_text.split(","))] if arg_text else []
    if any(not a for a in args):
        raise ActionSyntaxError(f"empty argument in {text!r}")
    fn = Action._canonical_function(name)
    if fn in ("put_on", "put_inside") and len(args) == 2:
        return Action(function_name=fn, node=args[0], destination=args[1])
    if fn == "done":
        return Action(function_name=fn, node=args[0] if args else None)
    slots = FUNCTIONS.get(fn)
    if slots is None:  # unknown function: keep what was written, the simulator answers it
        slots = ("node", "relation", "destination")[: max(len(args), 1)]
    if len(args) != len(slots):
        raise ActionSyntaxError(f"{fn} takes {len(slots)} argument{'s' if len(slots) != 1 else ''} ({', '.join(slots)}), got {len(args)} in {text!r}")
    return Action(function_name=fn, **dict(zip(slots, args)))


def _from_dict(data: Any) -> Action:
    if isinstance(data, dict) and "action" in data and isinstance(data["action"], (dict, str)):
        data = data["action"]
        if isinstance(data, str):
            return parse_action(data)
    if not isinstance(data, dict):
        raise ActionSyntaxError("the action must be a JSON object with function_name, node, relation, destination")
    fn = data.get("function_name", data.get("function", data.get("name")))
    if not isinstance(fn, str) or not fn.strip():
        raise ActionSyntaxError("the action has no function_name")
    fields = {}
    for key in ("node", "relation", "destination"):
        v = data.get(key)
        if v is not None and not isinstance(v, str):
            raise ActionSyntaxError(f"{key} must be a node name string, got {v!r}")
        fields[key] = v
    return Action(function_name=fn, **fields)


def parse_plan(steps: Any) -> list[Action]:
    """Read a plan: a list of action strings or objects (or ``{"plan": [...]}``)."""
    if isinstance(steps, dict) and "plan" in steps:
        steps = steps["plan"]
    if not isinstance(steps, list):
        raise ActionSyntaxError("a plan is a JSON list of actions")
    out = []
    for i, step in enumerate(steps):
        try:
            out.append(parse_action(step))
        except ActionSyntaxError as exc:
            raise ActionSyntaxError(f"step {i + 1}: {exc}") from None
    return out
