"""The agent's decision: the next action from one ``complete()`` call of any LM backend.

:func:`decide` is the only place where a prompt becomes an action. Backends know nothing of
actions: they state which constrained-decoding modes they enforce
(:attr:`lookplangraph.lm.LMBackend.constraints`), and the decision asks for what they can do.

* ``static`` is the system message. Keep it byte-identical across the steps of an episode: the
  backends (llama.cpp in process, ``llama_cpp.server``, vLLM with ``--enable-prefix-caching``,
  OpenAI) then reuse its KV cache and only the ``dynamic`` user message is evaluated anew.
* ``names`` are the node names the LM may use: a list, or a per-function
  :data:`~lookplangraph.agent.decoding.Vocabulary` (``{"go_to": {"node": rooms}, "pick_up":
  {"node": seen objects}, ...}``). The reply schema restricts ``node``/``destination`` to them
  (JSON-schema ``enum``), ``function_name`` to :data:`sgs.actions.FUNCTIONS` (or the
  vocabulary's functions) and ``relation`` to ``ontop``/``inside``/null.
* ``excluded`` are actions (:data:`~lookplangraph.agent.decoding.ActionKey`) the decode must not
  produce: replies already refused in the current memory state and actions that cannot be
  accepted in it. Where the backend enforces a ``grammar`` they are removed from the schema
  (:func:`~lookplangraph.agent.decoding.constrained_schema`); elsewhere (a strict ``json_schema``
  cannot hold an ``anyOf`` of variants, or nothing is enforced) the backend gets
  :class:`~lookplangraph.lm.Relaxed`: the schema without exclusions, sampled at its retry
  temperature with a seed that moves with each exclusion. The loop refuses a reply that still
  repeats an excluded action without trying it.

Reply format (:func:`~lookplangraph.agent.decoding.action_schema`)::

    {"function_name": "pick_up", "node": "apple-1", "relation": null, "destination": null,
     "reason": "the apple is on the table"}

The action comes first and ``reason`` last by default: with small models (0.5B-1.5B) a reason
written first tends to grow long and drift away from the names, and a reply cut off by
``max_tokens`` inside the reason still carries a complete action (:func:`parse_reply` repairs
the cut). ``reason_first=True`` suits larger models that profit from reasoning before they act.
``reason_max_length`` caps the reason; None takes the backend kind's default
(:data:`DEFAULT_REASON_MAX_LENGTH`: 300 characters in process, where a grammar-bound small model
otherwise writes on until ``max_tokens``; none at servers, whose strict modes may refuse the
keyword).

:func:`explain` asks for the reason of an action already decided, after the fact: the same prompt,
a schema that fixes every key of the action to its value, so only the reason is decoded (in
process the fixed text is one batch and the prompt is still in the KV cache). A planner that
answers without reasons (``reason_max_length = 0``) gives them only where a person asks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from sgs.actions import Action

from lookplangraph.agent.decoding import ActionKey, Vocabulary, action_schema, constrained_schema
from lookplangraph.agent.replies import parse_reply
from lookplangraph.lm.base import LMBackend, Relaxed, Usage

#: ``reason_max_length`` when none is configured, by backend kind (the prefix of the backend's name)
DEFAULT_REASON_MAX_LENGTH: dict[str, int] = {"llamacpp": 300}


@dataclass
class LMReply:
    """One decision. ``action`` is None exactly when ``error`` is set; ``error`` is a short
    sentence meant to be shown to the LM on the next step. ``seconds``: wall time of the
    ``complete()`` call, retries included."""

    text: str
    action: Action | None
    reason: str | None
    error: str | None
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["action"] = self.action.model_dump() if self.action is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LMReply":
        action = Action.model_validate(d["action"]) if d.get("action") else None
        return cls(text=d["text"], action=action, reason=d.get("reason"), error=d.get("error"),
                   usage=Usage(**(d.get("usage") or {})), seconds=float(d.get("seconds", 0.0)))


def reply_of(text: str, usage: Usage, seconds: float) -> LMReply:
    """The :class:`LMReply` of a reply text, read tolerantly (:func:`parse_reply`)."""
    action, reason, error = parse_reply(text)
    return LMReply(text=text, action=action, reason=reason, error=error, usage=usage, seconds=seconds)


def decision_messages(static: str, dynamic: str) -> list[dict[str, str]]:
    """The decision's prompt as chat messages: ``static`` the system message, ``dynamic`` the user's."""
    return [{"role": "system", "content": static}, {"role": "user", "content": dynamic}]


def reason_cap(lm: LMBackend, reason_max_length: int | None) -> int | None:
    """``reason_max_length``, or the default of ``lm``'s kind (:data:`DEFAULT_REASON_MAX_LENGTH`)."""
    if reason_max_length is not None:
        return reason_max_length
    return DEFAULT_REASON_MAX_LENGTH.get(lm.name.partition(":")[0])


def decide(lm: LMBackend, static: str, dynamic: str, names: "list[str] | Vocabulary | None",
           excluded: Sequence[ActionKey] = (), *, reason_first: bool = False,
           reason_max_length: int | None = None) -> LMReply:
    """The next action for the planner's prompt (module doc), from one ``lm.complete()``. Raises
    what ``complete()`` raises (:class:`~lookplangraph.lm.LMError` when the LM cannot be used);
    an unreadable reply is an :class:`LMReply` with ``error`` set."""
    kw = {"reason_first": reason_first, "reason_max_length": reason_cap(lm, reason_max_length)}
    schema = constrained_schema(names, (), **kw)
    relaxed = None
    if excluded:
        relaxed = Relaxed(schema, seed_offset=len(excluded))
        # building the schema without the excluded actions is the costliest part of a request's
        # CPU (an anyOf of variants over every name): only where a grammar can enforce it
        if "grammar" in lm.constraints:
            schema = constrained_schema(names, excluded, **kw)
    c = lm.complete(decision_messages(static, dynamic), schema=schema, relaxed=relaxed, schema_name="next_action")
    return reply_of(c.text, c.usage, c.seconds)


#: the reason's cap for :func:`explain` when the decision's own cap gives none (or 0: no reason)
EXPLAIN_MAX_LENGTH = 300


def explain(lm: LMBackend, static: str, dynamic: str, action: Action, *,
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
