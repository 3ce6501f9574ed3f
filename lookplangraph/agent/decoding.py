"""Constrained decoding: what one LM decode may produce, as a JSON schema.

* :func:`action_schema` — the reply object with ``node``/``destination`` restricted to a flat
  list of names (every function may name any of them);
* :func:`typed_action_schema` — a per-function :data:`Vocabulary` (each function only the names
  it can take);
* :func:`constrained_schema` — either of them minus *excluded actions*: the planner passes the
  :data:`ActionKey` of every reply refused in the current memory state, and of actions that
  cannot be accepted in it (``go_to`` the room the agent is in ...), so that the next decode
  cannot produce them. The allowed set is kept as a union of *boxes* (a product of allowed
  values per slot: functions × node × relation × destination); excluding an action subtracts
  its box, which splits a box into at most four. The schema is an ``anyOf`` of one object per
  box (boxes that differ only in their functions are merged), which grammar-based decoders
  (llama.cpp, vLLM, ``llama_cpp.server``) enforce exactly. Without exclusions the schemas are
  exactly those of :func:`action_schema` / :func:`typed_action_schema`.

:func:`action_key` gives the meaning of an action as an :data:`ActionKey`: the function and the
slots it takes (``put_on(table-1)`` written with ``node`` or with ``destination`` is one action).

:func:`chain_schema` is the schema of an answer of up to *k* actions (``actions_per_answer``):
one action object, or a JSON list of 2 to *k* of them, the first without the excluded actions
(they were refused in the state the answer starts from), the others over the same names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from sgs.actions import FUNCTIONS, RELATIONS, Action


#: The decision's reply formats, by the order of their keys: the action then a reason (the
#: default), the reason first (``reason_first``), or the action alone (``reason_max_length = 0``:
#: no ``reason`` key, the fewest tokens to decode). A trained adapter records the one its
#: examples had (:mod:`lookplangraph.lm.lora`); the schema is
#: :func:`action_schema`'s. The planner's settings (:mod:`lookplangraph.planners.config`) name one.
ANSWER_FORMATS = ("action+reason", "reason+action", "action")


def answer_format(reason_first: bool = False, reason_max_length: int | None = None) -> str:
    """The :data:`ANSWER_FORMATS` name of the reply settings (``reason_max_length`` 0 drops the reason)."""
    if reason_max_length is not None and reason_max_length < 0:
        raise ValueError(f"reason_max_length must be 0 (no reason) or more, not {reason_max_length}")
    if reason_max_length == 0:
        return "action"
    return "reason+action" if reason_first else "action+reason"


class ActionReply(BaseModel):
    """The reply object: the action fields of :class:`sgs.actions.Action`, then a short reason."""

    model_config = ConfigDict(extra="forbid")

    function_name: str = Field(description="one of the available functions")
    node: str | None = Field(description="the node acted on (for rearrange: the object), or null")
    relation: str | None = Field(description="ontop or inside (only for rearrange), or null")
    destination: str | None = Field(description="where to put the object (put_on, put_inside, rearrange), or null")
    reason: str = Field(description="one short sentence: why this action")


def _nullable(inner: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [inner, {"type": "null"}]}


Vocabulary = Mapping[str, Mapping[str, Sequence[str]]]
"""Per-function vocabulary: ``{function_name: {"node": [...], "destination": [...]}}``; a
function missing from it cannot be chosen, a slot missing from its entry must be null."""


def flat_names(names: "Iterable[str] | Vocabulary | None") -> list[str] | None:
    """All names of a vocabulary (or the list itself), first occurrence order."""
    if names is None or not isinstance(names, Mapping):
        return None if names is None else list(names)
    out: dict[str, None] = {}
    for slots in names.values():
        for values in slots.values():
            out.update(dict.fromkeys(values))
    return list(out)


def typed_action_schema(vocabulary: Vocabulary, *, reason_first: bool = False,
                        reason_max_length: int | None = None) -> dict[str, Any]:
    """Schema whose variants tie each function to the names it may take (``anyOf`` of objects,
    functions with the same slots grouped). Grammar-based decoders (llama.cpp, vLLM) accept it;
    OpenAI's strict mode needs an object root, so :class:`OpenAIBackend` sends the flat schema."""
    return boxes_schema(typed_boxes(vocabulary), reason_first=reason_first, reason_max_length=reason_max_length)


@lru_cache(maxsize=1)
def _reply_properties_json() -> str:
    """The properties of :class:`ActionReply`'s generated JSON schema, titles dropped, as JSON
    text. Generated once (pydantic's schema generation was a sixth of an evaluation's CPU per LM
    call); each caller decodes its own copy, which is cheaper than ``copy.deepcopy``."""
    props = ActionReply.model_json_schema()["properties"]
    return json.dumps({key: {k: v for k, v in value.items() if k != "title"} for key, value in props.items()})


def action_schema(names: "Iterable[str] | Vocabulary | None" = None, *, reason_first: bool = False,
                  reason_max_length: int | None = None) -> dict[str, Any]:
    """JSON schema of the reply, generated from :class:`ActionReply`.

    ``function_name`` gets an ``enum`` of :data:`sgs.actions.FUNCTIONS`, ``relation`` an enum of
    ``ontop``/``inside`` or null, ``node``/``destination`` an enum of ``names`` or null (free
    strings when ``names`` is None). All properties are required and no others are allowed, which
    is what OpenAI's strict structured outputs demand. Property order is the order the grammar
    enforces: action first, ``reason`` last, unless ``reason_first``. ``reason_max_length`` adds
    ``maxLength`` to the reason (llama.cpp and vLLM grammars honour it; OpenAI strict mode does not
    accept it, so leave it None there).
    """
    names = flat_names(names)
    props: dict[str, Any] = json.loads(_reply_properties_json())
    props["function_name"] = {**props["function_name"], "type": "string", "enum": list(FUNCTIONS)}
    props["relation"] = {"description": props["relation"]["description"],
                         **_nullable({"type": "string", "enum": list(RELATIONS)})}
    if names is not None:
        enum = list(dict.fromkeys(str(n) for n in names))
        for key in ("node", "destination"):
            inner = {"type": "string", "enum": enum} if enum else None
            props[key] = {"description": props[key]["description"],
                          **(_nullable(inner) if inner else {"type": "null"})}
    if reason_max_length is not None:
        props["reason"]["maxLength"] = int(reason_max_length)
    order = _key_order(reason_first, reason_max_length)
    return {
        "title": "ActionReply",
        "type": "object",
        "properties": {k: props[k] for k in order},
        "required": order,
        "additionalProperties": False,
    }


def _key_order(reason_first: bool, reason_max_length: int | None) -> list[str]:
    """The reply's keys in the order the grammar enforces them (:func:`answer_format`)."""
    action = ["function_name", "node", "relation", "destination"]
    fmt = answer_format(reason_first, reason_max_length)
    return action if fmt == "action" else ["reason", *action] if fmt == "reason+action" else [*action, "reason"]


def reply_format_instructions(reason_first: bool = False) -> str:
    """A sentence for the system prompt that describes the reply format in the schema's order."""
    action = '"function_name": "pick_up", "node": "apple-1", "relation": null, "destination": null'
    reason = '"reason": "the apple is needed for the task"'
    body = f"{reason}, {action}" if reason_first else f"{action}, {reason}"
    return ("Answer with one JSON object and nothing else, for example: {" + body + "}. "
            "Use null for arguments the function does not take; keep the reason to one short sentence.")


# --------------------------------------------------------------------------------------------
# Excluded actions
# --------------------------------------------------------------------------------------------

ActionKey = tuple[str, "str | None", "str | None", "str | None"]
"""``(function_name, node, relation, destination)`` with the slots the function does not take set
to None (:func:`action_key`)."""

_SLOTS = ("node", "relation", "destination")
_ANY = None  # a slot of an excluded box that covers every value


def action_key(action: Action) -> ActionKey:
    """What ``action`` means, independent of how it was written: slots its function does not take
    are dropped; ``put_on``/``put_inside`` with only ``node`` set mean that node as destination
    (``put_on(o, d)``, an object and a destination, keeps both)."""
    fn = action.function_name
    if fn in ("put_on", "put_inside"):
        if action.destination is None:
            return (fn, None, None, action.node)
        return (fn, action.node, None, action.destination)
    takes = FUNCTIONS.get(fn, _SLOTS)
    return (fn, *(getattr(action, s) if s in takes else None for s in _SLOTS))


def key_text(key: ActionKey) -> str:
    """``pick_up(apple-1)`` for a key, as :class:`sgs.actions.Action` prints it."""
    fn, node, relation, destination = key
    return str(Action.model_construct(function_name=fn, node=node, relation=relation, destination=destination))


@dataclass(frozen=True)
class Box:
    """A product of allowed values: any function of ``functions`` with any node of ``node`` and so
    on (``None`` inside a slot's tuple is JSON null)."""

    functions: tuple[str, ...]
    node: tuple[str | None, ...]
    relation: tuple[str | None, ...]
    destination: tuple[str | None, ...]

    def slots(self) -> tuple[tuple, tuple, tuple, tuple]:
        return (self.functions, self.node, self.relation, self.destination)


def _excluded_boxes(key: ActionKey) -> list[tuple]:
    """The decodes that mean ``key``: one box per way of writing it (``_ANY`` = every value)."""
    fn, node, relation, destination = key
    if fn in ("put_on", "put_inside") and node is None:
        return [((fn,), (None,), _ANY, (destination,)), ((fn,), (destination,), _ANY, (None,))]
    if fn in ("put_on", "put_inside"):
        return [((fn,), (node,), _ANY, (destination,))]
    takes = FUNCTIONS.get(fn, _SLOTS)
    return [((fn,), *(((v,) if s in takes else _ANY) for s, v in zip(_SLOTS, (node, relation, destination))))]


def _subtract(box: Box, cut: tuple) -> list[Box]:
    """``box`` minus the box ``cut``: at most one piece per slot that ``cut`` restricts."""
    pieces: list[Box] = []
    current = list(box.slots())
    for i, values in enumerate(cut):
        if values is _ANY:
            continue
        inside = tuple(v for v in current[i] if v in values)
        if not inside:
            return [box]  # disjoint: nothing to remove
        outside = tuple(v for v in current[i] if v not in values)
        if outside:
            pieces.append(Box(*current[:i], outside, *current[i + 1:]))
        current[i] = inside
    return pieces  # what is left in ``current`` lies inside ``cut``: removed


def flat_boxes(names: Iterable[str]) -> list[Box]:
    """The space of :func:`action_schema` with a flat name list."""
    enum = tuple(dict.fromkeys(str(n) for n in names))
    return [Box(tuple(FUNCTIONS), enum + (None,), tuple(RELATIONS) + (None,), enum + (None,))]


def typed_boxes(vocabulary: Vocabulary) -> list[Box]:
    """The space of :func:`typed_action_schema`: one box per function of the vocabulary."""
    out = []
    for fn in FUNCTIONS:
        if fn not in vocabulary:
            continue
        slots = vocabulary[fn]
        node, dest = (tuple(dict.fromkeys(slots.get(k, ()))) or (None,) for k in ("node", "destination"))
        out.append(Box((fn,), node, tuple(RELATIONS) if fn == "rearrange" else (None,), dest))
    return out


def exclude(boxes: list[Box], keys: Iterable[ActionKey]) -> list[Box]:
    """``boxes`` without every decode that means one of ``keys``."""
    for key in keys:
        for cut in _excluded_boxes(key):
            boxes = [piece for box in boxes for piece in _subtract(box, cut)]
    return boxes


def _slot_schema(values: tuple[str | None, ...]) -> dict[str, Any]:
    strings = [v for v in values if v is not None]
    if not strings:
        return {"type": "null"}
    inner = {"type": "string", "enum": strings}
    return _nullable(inner) if None in values else inner


def boxes_schema(boxes: list[Box], *, reason_first: bool = False, reason_max_length: int | None = None) -> dict[str, Any]:
    """An ``anyOf`` of one object per group of boxes that differ only in their functions (one
    object alone when there is a single group). An empty space leaves only ``done``."""
    if not boxes:
        boxes = [Box(("done",), (None,), (None,), (None,))]
    groups: dict[tuple, list[str]] = {}
    for box in boxes:
        fns = groups.setdefault((box.node, box.relation, box.destination), [])
        fns += [f for f in box.functions if f not in fns]
    reason: dict[str, Any] = {"type": "string"}
    if reason_max_length is not None:
        reason["maxLength"] = int(reason_max_length)
    order = _key_order(reason_first, reason_max_length)
    options = []
    for (node, relation, destination), fns in groups.items():
        fns = [f for f in FUNCTIONS if f in fns] + [f for f in fns if f not in FUNCTIONS]
        props = {"function_name": {"type": "string", "enum": fns}, "node": _slot_schema(node),
                 "relation": _slot_schema(relation), "destination": _slot_schema(destination), "reason": reason}
        options.append({"type": "object", "properties": {k: props[k] for k in order},
                        "required": order, "additionalProperties": False})
    return options[0] if len(options) == 1 else {"anyOf": options}


def chain_schema(first: dict[str, Any], rest: dict[str, Any], limit: int) -> dict[str, Any]:
    """An answer of at most ``limit`` actions (module doc): ``first`` alone (the one-action schema,
    exclusions and all), or a list whose first item is ``first`` and each next one ``rest``,
    as an ``anyOf`` of fixed-length lists (``prefixItems``, which grammar converters read as
    tuples). ``limit`` 1 is ``first`` itself."""
    if limit < 1:
        raise ValueError(f"an answer holds at least one action, not {limit}")
    if limit == 1:
        return first
    lists = [{"type": "array", "prefixItems": [first, *[rest] * (n - 1)], "minItems": n, "maxItems": n}
             for n in range(2, limit + 1)]
    return {"anyOf": [first, *lists]}


def constrained_schema(names: "Iterable[str] | Vocabulary | None", excluded: Sequence[ActionKey] = (), *,
                       reason_first: bool = False, reason_max_length: int | None = None) -> dict[str, Any]:
    """The reply schema for ``names`` (a flat list or a :data:`Vocabulary`) minus the actions in
    ``excluded``. Without exclusions (or with ``names`` None: free names cannot be narrowed) it is
    :func:`action_schema` / :func:`typed_action_schema` exactly."""
    kw = {"reason_first": reason_first, "reason_max_length": reason_max_length}
    if names is None or not excluded:
        if isinstance(names, Mapping):
            return typed_action_schema(names, **kw)
        return action_schema(names, **kw)
    boxes = typed_boxes(names) if isinstance(names, Mapping) else flat_boxes(names)
    return boxes_schema(exclude(boxes, excluded), **kw)
