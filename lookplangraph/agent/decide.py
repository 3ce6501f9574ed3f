"""The agent's decision: the next action from one ``complete()`` call of any LM backend.

:func:`decide` is the only place where a prompt becomes an action. It takes the ``static``
system message (keep it byte-identical across an episode's steps, so a backend's prefix cache
reuses it), the ``dynamic`` user message, the node ``names`` the LM may use (a list or a
per-function :data:`~lookplangraph.agent.decoding.Vocabulary`) and the ``excluded`` actions
(:data:`~lookplangraph.agent.decoding.ActionKey`), and returns an :class:`LMReply`: the parsed
action or feedback on an unreadable reply, never an exception. Backends know nothing of actions:
where one enforces a ``grammar`` the exclusions are removed from the schema
(:func:`~lookplangraph.agent.decoding.constrained_schema`), elsewhere it gets
:class:`~lookplangraph.lm.Relaxed` (the schema without them, sampled with a moved seed) and the
loop refuses a reply that still repeats an excluded action.

The reply puts the action first and ``reason`` last unless ``reason_first``
(:func:`~lookplangraph.agent.decoding.action_schema`); :func:`parse_reply` repairs a reply cut
off inside the reason. ``reason_max_length`` caps the reason (None:
:data:`DEFAULT_REASON_MAX_LENGTH` of the backend kind). :func:`explain` asks for the reason of an
action already decided, with a schema that fixes every key of the action, so only the reason is
decoded. With ``actions`` > 1 an answer may hold up to that many actions
(:func:`~lookplangraph.agent.decoding.chain_schema`; the exclusions bind the first): the first is
``action``, the others ``then``. Docs: ``docs/guides/lm-backends.md``, ``docs/concepts/loop.md#reasons-on-demand``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from sgs.actions import Action

from lookplangraph.agent.decoding import ActionKey, Vocabulary, action_schema, chain_schema, constrained_schema
from lookplangraph.agent.replies import parse_answer
from lookplangraph.lm.base import LMBackend, Relaxed, Usage

#: ``reason_max_length`` when none is configured, by backend kind (the prefix of the backend's name)
DEFAULT_REASON_MAX_LENGTH: dict[str, int] = {"llamacpp": 300}


@dataclass
class LMReply:
    """One decision. ``action`` is None exactly when ``error`` is set; ``error`` is a short
    sentence meant to be shown to the LM on the next step. ``then``: the answer's actions after
    ``action`` (an answer of several, ``actions_per_answer``), in order. ``seconds``: wall time
    of the ``complete()`` call, retries included."""

    text: str
    action: Action | None
    reason: str | None
    error: str | None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    then: list[Action] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["action"] = self.action.model_dump() if self.action is not None else None
        d["then"] = [a.model_dump() for a in self.then]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LMReply":
        action = Action.model_validate(d["action"]) if d.get("action") else None
        return cls(text=d["text"], action=action, reason=d.get("reason"), error=d.get("error"),
                   usage=Usage(**(d.get("usage") or {})), seconds=float(d.get("seconds", 0.0)),
                   then=[Action.model_validate(a) for a in d.get("then") or ()])


def reply_of(text: str, usage: Usage, seconds: float, actions: int = 1) -> LMReply:
    """The :class:`LMReply` of a reply text of at most ``actions`` actions, read tolerantly
    (:func:`~lookplangraph.agent.replies.parse_answer`)."""
    read, reason, error = parse_answer(text, actions)
    return LMReply(text=text, action=read[0] if read else None, reason=reason, error=error, usage=usage,
                   seconds=seconds, then=read[1:])


#: the decision's prompt after its system message: the user message, or (the conversation layout,
#: :mod:`lookplangraph.agent.conversation`) the episode's turns so far, ending with a user turn
Dynamic = "str | list[dict[str, str]]"


def decision_messages(static: str, dynamic: "Dynamic") -> list[dict[str, str]]:
    """The decision's prompt as chat messages: ``static`` the system message, then ``dynamic``: the
    user's message, or the turns of a conversation (user and assistant, ending with a user turn)."""
    turns = [{"role": "user", "content": dynamic}] if isinstance(dynamic, str) else [dict(m) for m in dynamic]
    if not turns or turns[-1]["role"] != "user":
        raise ValueError("a decision's turns end with a user turn")
    return [{"role": "system", "content": static}, *turns]


def reason_cap(lm: LMBackend, reason_max_length: int | None) -> int | None:
    """``reason_max_length``, or the default of ``lm``'s kind (:data:`DEFAULT_REASON_MAX_LENGTH`)."""
    if reason_max_length is not None:
        return reason_max_length
    return DEFAULT_REASON_MAX_LENGTH.get(lm.name.partition(":")[0])


def decide(lm: LMBackend, static: str, dynamic: "Dynamic", names: "list[str] | Vocabulary | None",
           excluded: Sequence[ActionKey] = (), *, reason_first: bool = False,
           reason_max_length: int | None = None, actions: int = 1) -> LMReply:
    """The next action (with ``actions`` > 1: up to that many) for the planner's prompt (module
    doc), from one ``lm.complete()``. Raises what ``complete()`` raises
    (:class:`~lookplangraph.lm.LMError` when the LM cannot be used); an unreadable reply is an
    :class:`LMReply` with ``error`` set."""
    kw = {"reason_first": reason_first, "reason_max_length": reason_cap(lm, reason_max_length)}
    plain = constrained_schema(names, (), **kw)
    schema = chain_schema(plain, plain, actions)
    relaxed = None
    if excluded:
        relaxed = Relaxed(schema, seed_offset=len(excluded))
        # building the schema without the excluded actions is the costliest part of a request's
        # CPU (an anyOf of variants over every name): only where a grammar can enforce it
        if "grammar" in lm.constraints:
            schema = chain_schema(constrained_schema(names, excluded, **kw), plain, actions)
    c = lm.complete(decision_messages(static, dynamic), schema=schema, relaxed=relaxed, schema_name="next_action")
    return reply_of(c.text, c.usage, c.seconds, actions)


#: the reason's cap for :func:`explain` when the decision's own cap gives none (or 0: no reason)
EXPLAIN_MAX_LENGTH = 300


def explain(lm: LMBackend, static: str, dynamic: "Dynamic", action: Action, *,
            reason_max_length: int | None = None) -> LMReply:
    """The LM's reason for ``action`` on the decision's prompt (module doc): a reply whose action
    keys are fixed to ``action``'s values and whose ``reason`` is decoded freely, at most
    ``reason_max_length`` characters (None or 0: the backend kind's cap, else
    :data:`EXPLAIN_MAX_LENGTH`). Raises what ``complete()`` raises."""
    cap = reason_max_length or reason_cap(lm, None) or EXPLAIN_MAX_LENGTH
    schema = action_schema(None, reason_max_length=cap)
    for key in ("function_name", "node", "relation", "destination"):
        value = getattr(action, key)
        schema["properties"][key] = {"type": "null"} if value is None else {"type": "string", "enum": [value]}
    c = lm.complete(decision_messages(static, dynamic), schema=schema, schema_name="reason")
    return reply_of(c.text, c.usage, c.seconds)
