"""Backend specs (``llamacpp:...``, ``openai:...[@URL]``, ``scripted:...``) and the factory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lookplangraph.lm.base import LMBackend, LMError
from lookplangraph.lm.embedded import DEFAULT_MODEL
from lookplangraph.lm.llamacpp import LlamaCppBackend, resolve_adapter
from lookplangraph.lm.lora import merged_record, read_adapter
from lookplangraph.lm.openai_compat import OpenAIBackend
from lookplangraph.lm.scripted import ScriptedBackend


def parse_spec(spec: str) -> tuple[str, str, str | None]:
    """``(kind, model, base_url)`` of a backend spec; raises :class:`LMError` for an unknown kind.

    ``llamacpp:NAME|PATH``; ``openai:MODEL`` or ``openai:MODEL@BASE_URL`` (split at the last
    ``@`` followed by ``http://`` or ``https://``; MODEL may be empty to use
    ``$LOOKPLANGRAPH_LM_MODEL``); ``scripted:TEXT`` (replies separated by ``||``).
    """
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if not sep:
        raise LMError(f"backend spec {spec!r} has no kind; use llamacpp:MODEL, openai:MODEL[@BASE_URL] or scripted:REPLY")
    if kind in ("llamacpp", "llama.cpp", "llama_cpp"):
        return "llamacpp", rest.strip() or DEFAULT_MODEL, None
    if kind == "openai":
        m = re.match(r"^(.*)@(https?://.+)$", rest.strip())
        if m:
            return "openai", m.group(1), m.group(2)
        return "openai", rest.strip(), None
    if kind == "scripted":
        return "scripted", rest, None
    raise LMError(f"unknown backend kind {kind!r} in {spec!r}; use llamacpp:, openai: or scripted:")


def with_native_log(spec: str, options: dict[str, Any], log: str | Path | None, verbose: bool = False) -> dict[str, Any]:
    """``options`` for :func:`make_backend` with llama.cpp's own log sent to the file ``log`` and,
    with ``verbose``, to the terminal too (:func:`lookplangraph.lm.llamacpp.route_native_log`): for
    an in-process ``llamacpp:`` spec only; any other spec (or one that does not parse: the factory
    reports it) gets ``options`` back unchanged. A ``native_log`` in ``options`` wins over ``log``."""
    try:
        kind = parse_spec(spec)[0]
    except LMError:
        return dict(options)
    if kind != "llamacpp":
        return dict(options)
    merged = {"native_log": str(log) if log is not None else None, **options}
    if verbose:
        merged["verbose"] = True
    return merged


def spec_adapter(spec: str, options: dict[str, Any] | None = None):
    """The LoRA adapter of a backend spec (``llamacpp:MODEL+ADAPTER``, or ``lora_path`` in its
    ``options``), read and checked on its own without loading any model
    (:func:`lookplangraph.lm.lora.read_adapter`), or the record of an adapter merged into the
    model file of ``llamacpp:PATH`` (:func:`~lookplangraph.lm.lora.merged_record`); None for a
    spec without either. Raises :class:`~lookplangraph.lm.AdapterError` for an adapter that
    cannot be read."""
    kind, model, _ = parse_spec(spec)
    if kind != "llamacpp":
        return None
    path = (options or {}).get("lora_path")
    if path is None and "+" in model and not Path(model).expanduser().is_file():
        base, _, adapter = model.rpartition("+")
        path = resolve_adapter(base, adapter)
    if path is not None:
        return read_adapter(path)
    file = Path(model).expanduser()
    return merged_record(file) if file.is_file() else None


def make_backend(spec: str, **opts: Any) -> LMBackend:
    """Build a backend from a spec (see :func:`parse_spec`); ``opts`` go to its constructor.

    Examples: ``llamacpp:qwen2.5-coder-1.5b``, ``llamacpp:/models/x.gguf``, ``openai:gpt-4o``,
    ``openai:Qwen/Qwen2.5-7B-Instruct@http://localhost:8000/v1`` (vLLM),
    ``openai:qwen2.5-coder:1.5b@http://localhost:11434/v1`` (Ollama),
    ``openai:local@http://127.0.0.1:8080/v1`` with ``structured="json_object"`` (llama.cpp server).
    """
    kind, model, base_url = parse_spec(spec)
    pool_keys = sorted({"endpoints", "endpoint_concurrency", "endpoint_rate", "endpoint_failures"} & set(opts))
    if pool_keys:
        raise LMError(f"{', '.join(pool_keys)} belong to an endpoint pool, which one backend is not: "
                      "build the workers' backends with lookplangraph.lm.pool.pool_factory (as eval does)")
    moved = sorted({"reason_first", "reason_max_length"} & set(opts))
    if moved:
        raise LMError(f"{', '.join(moved)} set(s) the reply format of the planner's decision, not the backend: "
                      f"write {' and '.join(f'{k} = ...' for k in moved)} at the top level of the config "
                      "(beside correction), not in lm_options")
    if kind == "llamacpp":
        return LlamaCppBackend(model, **opts)
    if kind == "openai":
        return OpenAIBackend(model or None, base_url=base_url or opts.pop("base_url", None), **opts)
    return ScriptedBackend(model.split("||"), **opts)
