"""Language-model backends behind one interface.

* :meth:`LMBackend.complete` is the general call: chat ``messages`` (optionally with ``images``
  and a ``schema`` for a structured reply) give a :class:`Completion` (text, the parsed and
  validated structure, token usage, seconds). Images go to servers as OpenAI content parts
  (``image_url`` with a base64 data URL; :func:`image_part` checks the file first). A structured
  reply is always validated here (:mod:`lookplangraph.lm.structured`), whatever the server claims to
  enforce: a reply that does not conform has ``parsed=None`` and ``error`` set, it never raises.
* :meth:`LMBackend.decide` turns the planner's prompt into the next action; it is a thin use of
  ``complete`` with the action schema of :mod:`lookplangraph.agent.decoding` and tolerant parsing
  (:func:`parse_reply`).

For ``decide``:

* ``static`` is the system message. Keep it byte-identical across the steps of an episode: the
  backends (llama.cpp in process, ``llama_cpp.server``, vLLM with ``--enable-prefix-caching``,
  OpenAI) then reuse its KV cache and only the ``dynamic`` user message is evaluated anew.
* ``names`` are the node names the LM may use: a list, or a per-function :data:`Vocabulary`
  (``{"go_to": {"node": rooms}, "pick_up": {"node": seen objects}, ...}``). Backends with
  constrained decoding restrict ``node``/``destination`` to them (JSON-schema ``enum``),
  ``function_name`` to :data:`sgs.actions.FUNCTIONS` (or the vocabulary's functions) and
  ``relation`` to ``ontop``/``inside``/null. In process, llama.cpp ties each function to its own
  names (:func:`typed_action_schema`); servers get the flat schema over all names.
* ``excluded`` are actions (:data:`lookplangraph.agent.decoding.ActionKey`) the decode must not produce:
  replies already refused in the current memory state and actions that cannot be accepted in it.
  llama.cpp in process removes them from the grammar (:func:`constrained_schema`); servers do so
  when the structured mode is grammar-based (``json_object``, ``guided_json``,
  ``structured_outputs``); with ``json_schema`` (OpenAI's strict mode needs an object at the
  root, so no ``anyOf`` of variants) and ``none`` the fallback is sampling at
  ``retry_temperature`` with a seed that changes with each exclusion, and the planner refuses a
  reply that repeats an excluded action without trying it.

Reply format (see :func:`action_schema`)::

    {"function_name": "pick_up", "node": "apple-1", "relation": null, "destination": null,
     "reason": "the apple is on the table"}

The action comes first and ``reason`` last by default: with small models (0.5B-1.5B) a reason
written first tends to grow long and drift away from the names, and a reply cut off by
``max_tokens`` inside the reason still carries a complete action (:func:`parse_reply` repairs the
cut). Pass ``reason_first=True`` for larger models that profit from reasoning before they act.

Backend specs for :func:`make_backend`: ``llamacpp:qwen2.5-coder-1.5b`` (a model of
:mod:`lookplangraph.lm.embedded`), ``llamacpp:/path/model.gguf``, ``openai:MODEL`` (OpenAI, or
``$OPENAI_BASE_URL``), ``openai:MODEL@http://host:port/v1`` (vLLM, Ollama, llama.cpp server),
``scripted:REPLY1||REPLY2`` (fixed replies, for tests).

The package, one module per kind: :mod:`.base` (errors, replies, the :class:`LMBackend`
protocol), :mod:`.images`, :mod:`.openai_compat` (:class:`OpenAIBackend`), :mod:`.llamacpp`
(:class:`LlamaCppBackend`), :mod:`.scripted` (:class:`ScriptedBackend`) and :mod:`.specs`
(:func:`parse_spec`, :func:`make_backend`). Import from the package: every public name is here.
"""

from __future__ import annotations

from lookplangraph.lm.base import (
    Completion, ContextOverflow, ImageError, LMBackend, LMError, LMReply, LMUnavailable, Relaxed, Usage,
)
from lookplangraph.lm.images import DEFAULT_MAX_IMAGE_BYTES, image_mime, image_part, with_images
from lookplangraph.lm.llamacpp import VISION_HANDLERS, LlamaCppBackend, default_gpu_layers, default_threads
from lookplangraph.lm.openai_compat import GRAMMAR_FIELDS, GRAMMAR_MODES, STRUCTURED_MODES, OpenAIBackend
from lookplangraph.lm.scripted import ScriptedBackend
from lookplangraph.lm.specs import make_backend, parse_spec
from lookplangraph.agent.decoding import (  # re-exported: the reply schema belongs to the backends' interface
    ActionKey, ActionReply, Vocabulary, action_schema, constrained_schema, flat_names, reply_format_instructions,
    typed_action_schema,
)
from lookplangraph.agent.replies import check_reply, parse_reply, read_json  # re-exported

__all__ = [
    "Usage", "LMReply", "Completion", "Relaxed", "LMBackend", "LMError", "ImageError", "image_part", "image_mime",
    "with_images", "read_json", "check_reply", "ActionKey", "ActionReply", "Vocabulary", "action_schema",
    "constrained_schema", "flat_names", "typed_action_schema", "parse_reply",
    "reply_format_instructions", "ContextOverflow", "LMUnavailable", "OpenAIBackend", "LlamaCppBackend", "ScriptedBackend",
    "make_backend", "parse_spec", "default_threads", "default_gpu_layers", "DEFAULT_MAX_IMAGE_BYTES",
    "GRAMMAR_FIELDS", "GRAMMAR_MODES", "STRUCTURED_MODES", "VISION_HANDLERS",
]
