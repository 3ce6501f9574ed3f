"""The LM layer: language-model backends behind one call, and what wraps them. It knows nothing of
scenes or actions (the agent's decision is :func:`lookplangraph.agent.decide.decide`, one use
of ``complete``).

* :meth:`LMBackend.complete` is the one call: chat ``messages`` (optionally with ``images``, a
  ``schema`` for a structured reply or a GBNF ``grammar``) give a :class:`Completion` (text, the
  parsed and validated structure, token usage, seconds). Images go to servers as OpenAI content
  parts (``image_url`` with a base64 data URL; :func:`image_part` checks the file first). A
  structured reply is always validated here (:mod:`lookplangraph.lm.structured`), whatever the
  server claims to enforce: a reply that does not conform has ``parsed=None`` and ``error`` set,
  it never raises.
* :attr:`LMBackend.constraints` says which constrained-decoding modes a backend enforces now
  (:data:`CONSTRAINT_MODES`): ``grammar`` (llama.cpp in process; servers in the structured modes
  ``json_object``, ``guided_json``, ``structured_outputs``), ``json_schema`` (a strict schema
  with an object root: OpenAI, vLLM), or none. A caller that needs more than a backend enforces
  passes :class:`Relaxed`: the looser schema to send there, sampled at the backend's retry
  temperature with a moved seed.
* Wrappers wrap ``complete()`` only: the reply cache (:mod:`.cache`), the endpoint pool
  (:mod:`.pool`).

Backend specs for :func:`make_backend`: ``llamacpp:qwen2.5-coder-1.5b`` (a model of
:mod:`lookplangraph.lm.embedded`), ``llamacpp:/path/model.gguf``, ``openai:MODEL`` (OpenAI, or
``$OPENAI_BASE_URL``), ``openai:MODEL@http://host:port/v1`` (vLLM, Ollama, llama.cpp server),
``scripted:REPLY1||REPLY2`` (fixed replies, for tests).

The package, one module per concept: :mod:`.base` (errors, completions, the :class:`LMBackend`
protocol), :mod:`.json_reply` (reading JSON from replies tolerantly), :mod:`.structured` (the
client-side schema check), :mod:`.images`, :mod:`.openai_compat` (:class:`OpenAIBackend`),
:mod:`.llamacpp` (:class:`LlamaCppBackend`), :mod:`.scripted` (:class:`ScriptedBackend`),
:mod:`.specs` (:func:`parse_spec`, :func:`make_backend`), :mod:`.cache`, :mod:`.pool` and
:mod:`.embedded` (the embedded GGUF models and the adapters shipped for them), :mod:`.lora` (a LoRA
adapter's metadata and its fit to a base). The backends' public names are importable from the
package.
"""

from __future__ import annotations

from lookplangraph.lm.base import (
    CONSTRAINT_MODES, AdapterError, Completion, ContextOverflow, ImageError, LMBackend, LMError, LMUnavailable, Relaxed, Usage,
)
from lookplangraph.lm.images import DEFAULT_MAX_IMAGE_BYTES, image_mime, image_part, with_images
from lookplangraph.lm.json_reply import check_reply, read_json
from lookplangraph.lm.llamacpp import VISION_HANDLERS, LlamaCppBackend, default_gpu_layers, default_threads
from lookplangraph.lm.openai_compat import GRAMMAR_FIELDS, GRAMMAR_MODES, STRUCTURED_MODES, OpenAIBackend
from lookplangraph.lm.scripted import ScriptedBackend
from lookplangraph.lm.specs import make_backend, parse_spec

__all__ = [
    "Usage", "Completion", "Relaxed", "LMBackend", "LMError", "AdapterError", "ImageError", "image_part", "image_mime",
    "with_images", "read_json", "check_reply", "CONSTRAINT_MODES", "ContextOverflow", "LMUnavailable",
    "OpenAIBackend", "LlamaCppBackend", "ScriptedBackend", "make_backend", "parse_spec", "default_threads",
    "default_gpu_layers", "DEFAULT_MAX_IMAGE_BYTES", "GRAMMAR_FIELDS", "GRAMMAR_MODES", "STRUCTURED_MODES",
    "VISION_HANDLERS",
]
