"""The LM layer: language-model backends behind one call, and what wraps them. It knows nothing of
scenes or actions (the agent's decision is :func:`lookplangraph.agent.decide.decide`, one use
of ``complete``).

* :meth:`LMBackend.complete` is the one call: chat ``messages`` (optionally ``images``, a
  ``schema`` for a structured reply or a GBNF ``grammar``) give a :class:`Completion` (text, the
  parsed and validated structure, token usage, seconds). A structured reply is always validated
  here (:mod:`.structured`), whatever the server claims to enforce: one that does not conform has
  ``parsed=None`` and ``error`` set; it never raises.
* :attr:`LMBackend.constraints` says which constrained-decoding modes a backend enforces now
  (:data:`CONSTRAINT_MODES`); a caller that needs more passes :class:`Relaxed`.
* Wrappers wrap ``complete()`` only: the reply cache (:mod:`.cache`), the endpoint pool
  (:mod:`.pool`).

:func:`make_backend` reads specs (``llamacpp:MODEL[+ADAPTER]``, ``llamacpp:/path/model.gguf``,
``openai:MODEL[@URL]``, ``scripted:REPLY1||REPLY2``). One module per concept (:mod:`.base`,
:mod:`.json_reply`, :mod:`.structured`, :mod:`.images`, :mod:`.openai_compat`, :mod:`.llamacpp`,
:mod:`.scripted`, :mod:`.specs`, :mod:`.cache`, :mod:`.pool`, :mod:`.embedded`, :mod:`.lora`);
the backends' public names are importable from the package. Docs: ``docs/guides/lm-backends.md``.
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
