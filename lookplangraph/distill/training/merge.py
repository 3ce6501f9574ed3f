"""A LoRA adapter merged into its base's weights and quantized again with llama.cpp's own quantizer.

llama.cpp applies a GGUF LoRA at run time: two extra small matrix products per adapted weight and
token. :func:`merge_lora` removes them: every weight of the base is dequantized (the ``gguf``
package), each adapted weight ``W`` becomes ``W + scale * alpha / r * B @ A``, the result is
written as an F16 GGUF (a temporary file beside ``out``), and ``llama_model_quantize`` of
llama-cpp-python turns it into the requested type (``q8_0`` by default). The merged model
carries the adapter's ``lookplangraph.*`` metadata (:mod:`lookplangraph.lm.lora`), so a planner
still runs it with the prompt it was trained with.

Quantizing again adds its own rounding to the base's, and a LoRA update is small: a coarse type
can round the update away, so whether a merged model decides as the adapter does is to be checked
(``benchmarks/bench_decision.py``; ``docs/guides/distillation.md``), not assumed. Needs the
``distill`` extra (gguf, numpy) and llama-cpp-python.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lookplangraph.lm.base import AdapterError
from lookplangraph.lm.lora import check_adapter, read_header

#: ``--type`` names and llama.cpp's ``llama_ftype`` values
FILE_TYPES = {"q4_k_m": 15, "q5_k_m": 17, "q6_k": 18, "q8_0": 7, "f16": 1}


@dataclass(frozen=True)
class MergeReport:
    """What :func:`merge_lora` wrote: the file, its size, how many weights the adapter changed, the
    seconds of the merge (dequantize, add, write F16) and of the quantization."""

    path: Path
    size: int
    merged: int
    merge_seconds: float
    quantize_seconds: float


def merge_lora(base: str | os.PathLike, adapter: str | os.PathLike, out: str | os.PathLike, *, file_type: str = "q8_0",
               scale: float = 1.0, threads: int | None = None, base_sha256: str | None = None,
               progress: Callable[[int, int], None] | None = None) -> MergeReport:
    """Write ``base`` with ``adapter`` merged into it at ``out`` (module doc), quantized as
    ``file_type`` (a key of :data:`FILE_TYPES`). The adapter is checked against the base first
    (:func:`lookplangraph.lm.lora.check_adapter`: :class:`AdapterError`). ``out`` appears whole
    or not at all; the F16 intermediate is removed. ``progress(done, total)`` after each tensor."""
    import numpy as np

    try:
        import gguf
        from gguf import quants
    except ImportError:
        raise AdapterError("merging an adapter needs the gguf package: pip install 'lookplangraph[distill]'") from None
    import llama_cpp

    if file_type not in FILE_TYPES:
        raise AdapterError(f"unknown file type {file_type!r}; known: {', '.join(FILE_TYPES)}")
    info = check_adapter(adapter, base, base_sha256)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    f16 = out.with_name(out.name + ".f16.part")
    part = out.with_name(out.name + ".part")
    t0 = time.perf_counter()
    try:
        base_reader = gguf.GGUFReader(str(base))
        lora = {t.name: t for t in gguf.GGUFReader(str(info.path)).tensors}
        alpha = info.alpha if info.alpha is not None else float(info.rank)
        writer = gguf.GGUFWriter(str(f16), str(base_reader.fields["general.architecture"].contents()))
        for field in base_reader.fields.values():
            if field.name.startswith("GGUF.") or field.name in ("general.architecture", "general.file_type"):
                continue
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub)
        writer.add_file_type(FILE_TYPES["f16"])
        for key, value in info.metadata.items():
            writer.add_string(key, value)
        merged = 0
        tensors = base_reader.tensors
        for i, t in enumerate(tensors):
            w = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(
                tuple(int(d) for d in reversed(t.shape.tolist())))
            if t.name + ".lora_a" in lora:
                a = np.asarray(lora[t.name + ".lora_a"].data, dtype=np.float32)  # (r, in)
                b = np.asarray(lora[t.name + ".lora_b"].data, dtype=np.float32)  # (out, r)
                w = w + (scale * alpha / info.rank) * (b @ a)
                merged += 1
            keep_f32 = t.tensor_type == gguf.GGMLQuantizationType.F32
            writer.add_tensor(t.name, w if keep_f32 else w.astype(np.float16))
            if progress:
                progress(i + 1, len(tensors))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        merge_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = FILE_TYPES[file_type]
        params.nthread = threads or (os.cpu_count() or 1)
        rc = llama_cpp.llama_model_quantize(str(f16).encode(), str(part).encode(), params)
        if rc != 0:
            raise AdapterError(f"llama.cpp could not quantize the merged model (code {rc})")
        quantize_seconds = time.perf_counter() - t1
        read_header(part)  # a readable GGUF, or GGUFFormatError
        os.replace(part, out)
    finally:
        f16.unlink(missing_ok=True)
        part.unlink(missing_ok=True)
    return MergeReport(out, out.stat().st_size, merged, merge_seconds, quantize_seconds)
