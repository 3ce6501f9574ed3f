"""A PEFT LoRA adapter written as a GGUF LoRA file that llama.cpp applies on top of an unchanged base GGUF
(:func:`export_lora`), and such a file read back into a PEFT model to train on from it (:func:`load_lora`).

The file format is the one llama.cpp's ``llama_adapter_lora_init`` reads (and llama.cpp's own
``convert_lora_to_gguf.py`` writes):

* metadata ``general.type = "adapter"``, ``general.architecture`` equal to the base model's,
  ``adapter.type = "lora"`` and ``adapter.lora.alpha`` (float32); llama.cpp scales each update by
  ``alpha / rank`` (times the runtime ``lora_scale``), exactly PEFT's ``lora_alpha / r``;
* for every adapted base tensor ``NAME`` (``blk.3.attn_q.weight``, ...) two tensors
  ``NAME.lora_a`` and ``NAME.lora_b``, stored in PEFT's own ``nn.Linear`` layout: ``lora_A`` of
  numpy shape ``(rank, in_features)`` and ``lora_B`` of shape ``(out_features, rank)`` (GGUF writes
  the numpy shape reversed, which is the ``ne`` order llama.cpp checks).

Hugging Face module names are mapped to GGUF tensor names by the ``gguf`` package's own
``TensorNameMap`` (no hand-written table), and every target is checked against the base GGUF's
tensor shapes before anything is written, so a wrong base is an error here, not in llama.cpp.
The file is written to ``OUT.part`` and renamed: an interrupted export leaves no half file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ExportError(ValueError):
    """An adapter that cannot be exported onto the given base, or loaded from a GGUF file into a
    run (wrong base, unsupported LoRA variant, another rank or alpha)."""


@dataclass(frozen=True)
class ExportReport:
    """What :func:`export_lora` wrote: the file, the base architecture, the LoRA pairs, rank and alpha."""

    path: Path
    architecture: str
    pairs: int
    rank: int
    alpha: float
    bytes: int


def _gguf():
    try:
        import gguf
    except ImportError:
        raise ExportError("exporting a LoRA adapter needs the gguf package: pip install 'lookplangraph[distill]'") from None
    return gguf


def base_info(base_gguf: str | os.PathLike) -> tuple[str, int, dict[str, tuple[int, ...]]]:
    """``(architecture, block_count, {tensor name: numpy-order shape})`` of a GGUF model file."""
    gguf = _gguf()
    reader = gguf.GGUFReader(str(base_gguf))
    field = reader.get_field("general.architecture")
    if field is None:
        raise ExportError(f"{base_gguf} has no general.architecture: not a GGUF model file")
    arch = field.contents()
    blocks = reader.get_field(f"{arch}.block_count")
    if blocks is None:
        raise ExportError(f"{base_gguf} has no {arch}.block_count")
    # GGUFReader's tensor.shape is ggml's ne order (innermost first); numpy order is its reverse.
    shapes = {t.name: tuple(int(x) for x in reversed(list(t.shape))) for t in reader.tensors}
    return arch, int(blocks.contents()), shapes


def _adapter_tensors(adapter_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    config_path, weights_path = adapter_dir / "adapter_config.json", adapter_dir / "adapter_model.safetensors"
    if not config_path.is_file() or not weights_path.is_file():
        raise ExportError(f"{adapter_dir} is not a PEFT adapter directory (adapter_config.json and "
                          "adapter_model.safetensors expected)")
    config = json.loads(config_path.read_text())
    from safetensors.numpy import load_file

    return config, load_file(str(weights_path))


def _tensor_names(gguf, arch: str, n_blocks: int, base_gguf) -> Any:
    """The ``gguf`` package's map from Hugging Face module names to GGUF tensor names for ``arch``."""
    arch_enum = next((a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch), None)
    if arch_enum is None:
        raise ExportError(f"the gguf package does not know the architecture {arch!r} of {base_gguf}")
    return gguf.get_tensor_name_map(arch_enum, n_blocks)


def export_lora(adapter_dir: str | os.PathLike, base_gguf: str | os.PathLike, out: str | os.PathLike,
                dtype: str = "f16") -> ExportReport:
    """Write the PEFT adapter in ``adapter_dir`` as a GGUF LoRA for ``base_gguf`` at ``out``.

    ``dtype`` is ``"f16"`` (half the size; llama.cpp computes the update in float anyway) or
    ``"f32"``. Raises :class:`ExportError` for DoRA, rsLoRA, modules that are not linear layers of
    the base's blocks, or a shape that does not match the base.
    """
    import numpy as np

    gguf = _gguf()
    adapter_dir, out = Path(adapter_dir), Path(out)
    config, tensors = _adapter_tensors(adapter_dir)
    if config.get("use_dora"):
        raise ExportError("DoRA adapters have no GGUF LoRA form: train with use_dora=False")
    if config.get("use_rslora"):
        raise ExportError("rsLoRA scales by alpha/sqrt(r), llama.cpp by alpha/r: train with use_rslora=False")
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise ExportError("per-module ranks or alphas (rank_pattern, alpha_pattern) are not exported: one r and one lora_alpha")
    if dtype not in ("f16", "f32"):
        raise ExportError(f"dtype must be f16 or f32, not {dtype!r}")
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    arch, n_blocks, shapes = base_info(base_gguf)
    names = _tensor_names(gguf, arch, n_blocks, base_gguf)

    pairs: dict[str, dict[str, Any]] = {}
    for key, value in tensors.items():
        for part, tag in ((".lora_A.weight", "a"), (".lora_B.weight", "b")):
            if key.endswith(part):
                module = key[: -len(part)].removeprefix("base_model.model.")
                pairs.setdefault(module, {})[tag] = value
                break
        else:
            raise ExportError(f"unexpected tensor {key!r} in {adapter_dir} (only LoRA A/B weights are exported; "
                              "train without modules_to_save or trainable biases)")
    writer_tensors: list[tuple[str, Any]] = []
    for module in sorted(pairs):
        ab = pairs[module]
        if set(ab) != {"a", "b"}:
            raise ExportError(f"{module}: the LoRA pair is missing one matrix")
        target = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None or target not in shapes:
            raise ExportError(f"{module} has no tensor in the base {base_gguf} (wrong base model?)")
        out_features, in_features = shapes[target][-2], shapes[target][-1]
        a, b = ab["a"], ab["b"]
        if a.shape != (rank, in_features) or b.shape != (out_features, rank):
            raise ExportError(f"{module}: lora_A {a.shape} / lora_B {b.shape} do not fit the base tensor {target} "
                              f"{shapes[target]} with rank {rank} (wrong base model?)")
        np_dtype = np.float16 if dtype == "f16" else np.float32
        writer_tensors.append((f"{target}.lora_a", np.ascontiguousarray(a.astype(np_dtype))))
        writer_tensors.append((f"{target}.lora_b", np.ascontiguousarray(b.astype(np_dtype))))
    if not writer_tensors:
        raise ExportError(f"{adapter_dir} holds no LoRA weights")

    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(out.name + ".part")
    writer = gguf.GGUFWriter(str(part), arch)
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    for name, array in writer_tensors:
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(part, out)
    return ExportReport(out, arch, len(writer_tensors) // 2, rank, alpha, out.stat().st_size)


def load_lora(model: Any, adapter_gguf: str | os.PathLike, base_gguf: str | os.PathLike) -> int:
    """Copy the LoRA weights of the GGUF LoRA file ``adapter_gguf`` (what :func:`export_lora` or
    llama.cpp's converter writes) into the freshly made PEFT ``model``'s adapter, so that training
    goes on from that adapter; returns the number of LoRA pairs loaded.

    The inverse of :func:`export_lora`, with the same name mapping. The adapter must be one for
    ``base_gguf`` (its architecture), hold a pair for every module ``model`` adapts and none
    other, and have ``model``'s rank and alpha: anything else raises :class:`ExportError` before
    a weight is changed. Weights stored in float16 are widened to the model's dtype.
    """
    import numpy as np
    import torch

    gguf = _gguf()
    reader = gguf.GGUFReader(str(adapter_gguf))
    kind = reader.get_field("general.type")
    if kind is None or kind.contents() != "adapter":
        raise ExportError(f"{adapter_gguf} is not a GGUF adapter file (general.type is not 'adapter')")
    arch_field, alpha_field = reader.get_field("general.architecture"), reader.get_field("adapter.lora.alpha")
    arch, n_blocks, _ = base_info(base_gguf)
    if arch_field is None or arch_field.contents() != arch:
        raise ExportError(f"{adapter_gguf} is an adapter for {arch_field.contents() if arch_field else 'no architecture'}, "
                          f"the base {base_gguf} is {arch}")
    stored: dict[str, Any] = {t.name: t for t in reader.tensors}
    names = _tensor_names(gguf, arch, n_blocks, base_gguf)

    plan: list[tuple[Any, Any, Any]] = []
    for name, module in model.named_modules():
        if "default" not in getattr(module, "lora_A", {}):
            continue
        hf = name.removeprefix("base_model.model.")
        target = names.get_name(hf + ".weight", try_suffixes=(".weight",))
        a_t, b_t = stored.pop(f"{target}.lora_a", None), stored.pop(f"{target}.lora_b", None)
        if a_t is None or b_t is None:
            raise ExportError(f"{adapter_gguf} has no LoRA pair for {hf} ({target}): it adapts other modules "
                              "than this run (--rank and the targets must be the adapter's)")
        a, b = np.asarray(a_t.data, dtype=np.float32), np.asarray(b_t.data, dtype=np.float32)
        lora_a, lora_b = module.lora_A["default"].weight, module.lora_B["default"].weight
        if a.shape != tuple(lora_a.shape) or b.shape != tuple(lora_b.shape):
            raise ExportError(f"{hf}: the adapter's lora_a {a.shape} / lora_b {b.shape} do not fit this run's "
                              f"{tuple(lora_a.shape)} / {tuple(lora_b.shape)} (another rank, or another base?)")
        scaling = module.scaling["default"]
        if alpha_field is not None and abs(float(alpha_field.contents()) / a.shape[0] - scaling) > 1e-6:
            raise ExportError(f"{adapter_gguf} has alpha {alpha_field.contents()} at rank {a.shape[0]}, this run "
                              f"scales by {scaling}: pass the adapter's --alpha")
        plan.append((lora_a, lora_b, (a, b)))
    leftover = sorted(n for n in stored if n.endswith((".lora_a", ".lora_b")))
    if leftover:
        raise ExportError(f"{adapter_gguf} adapts modules this run does not ({leftover[0]}, ...): train with its targets")
    if not plan:
        raise ExportError("the model has no LoRA modules to load into")
    with torch.no_grad():
        for lora_a, lora_b, (a, b) in plan:
            lora_a.copy_(torch.from_numpy(a).to(lora_a.dtype))
            lora_b.copy_(torch.from_numpy(b).to(lora_b.dtype))
    return len(plan)
