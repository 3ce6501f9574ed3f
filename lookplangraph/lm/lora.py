"""LoRA adapters for llama.cpp: what a GGUF adapter file says about itself, the checks that it fits a
base model before llama.cpp loads it, and the prompt it was trained with.

A GGUF LoRA (``general.type = adapter``, ``adapter.type = lora``) holds, for every adapted weight
``W`` of the base, the pair ``W.lora_a`` (ggml shape ``[in, r]``) and ``W.lora_b`` (``[r, out]``).
llama.cpp applies it to an unchanged base at run time; a pair whose shapes do not fit the base, or
a file cut short, makes llama.cpp fail with a message about tensors (or worse), so
:func:`check_adapter` reads both headers first and says what is wrong in terms of the files.

Adapters this project trains carry ``lookplangraph.*`` metadata (:data:`META_KEYS`): the SHA-256
of the base they were trained on, the system prompt and the answer format of their training
examples, and the training record. ``distill train`` writes them; :func:`stamp_adapter` adds
them to an adapter trained before they existed. A planner run with such an adapter uses its own
prompt unless another is set explicitly (``system_prompt = "auto"``,
:mod:`lookplangraph.planners.config`).

The reader is the GGUF v2/v3 header format (magic, counts, key/value pairs, tensor infos) in plain
Python: nothing here needs the ``gguf`` package or llama.cpp, and no tensor data is read except
when :func:`stamp_adapter` copies it.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from lookplangraph.lm.base import AdapterError
from lookplangraph.lm.embedded import sha256_file

#: Metadata keys of an adapter trained by this project (all strings).
META_KEYS = {
    "lookplangraph.base_sha256": "SHA-256 of the base GGUF the adapter was trained on",
    "lookplangraph.system_prompt_name": "the planner's system_prompt setting whose text the examples had (full, compact)",
    "lookplangraph.system_prompt": "the exact system message of the training examples",
    "lookplangraph.prompt_layout": "the order of the examples' user message (prompts.PROMPT_LAYOUTS)",
    "lookplangraph.answer_format": "the reply format of the training examples (decoding.ANSWER_FORMATS)",
    "lookplangraph.recall": "the view's recall of the training examples (planners.config.RECALL_MODES; absent: here)",
    "lookplangraph.actions_per_answer": "the most actions one answer of the training examples holds "
                                        "(planners.config actions_per_answer; absent: 1)",
    "lookplangraph.cypher_classes_at": "where the Cypher examples' system prompts list the scene's classes "
                                       "(cypher.agent.CLASSES_AT; absent: schema)",
    "lookplangraph.training": "the training record (train.json) as JSON; an adapter trained in stages adds "
                              "\"lineage\": each stage's data, start, steps and adapter, first to last",
}

_MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
#: ggml type -> (elements per block, bytes per block), for the size check of tensor data
_BLOCKS = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
           10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210)}


class GGUFFormatError(ValueError):
    """The bytes are not a GGUF file this reader can follow (bad magic, cut short, unknown type)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file: its ggml shape (``ne``, innermost first), ggml type and data offset."""

    shape: tuple[int, ...]
    ggml_type: int
    offset: int

    def nbytes(self) -> int | None:
        """Bytes of its data, None for a type the size table does not know."""
        block = _BLOCKS.get(self.ggml_type)
        if block is None:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n // block[0] * block[1]


@dataclass
class GGUFHeader:
    """The key/value metadata and tensor infos of a GGUF file; ``data_start``: where tensor data begins."""

    path: Path
    version: int
    kv: dict[str, Any]
    tensors: dict[str, TensorInfo]
    data_start: int
    tensor_infos: tuple[int, int] = (0, 0)  # byte range of the tensor infos
    _raw: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)  # key -> byte range


def _read(f: BinaryIO, n: int) -> bytes:
    b = f.read(n)
    if len(b) != n:
        raise GGUFFormatError("the file ends inside its header (cut short?)")
    return b


def _unpack(f: BinaryIO, fmt: str) -> Any:
    return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]


def _string(f: BinaryIO) -> str:
    n = _unpack(f, "<Q")
    if n > 1 << 30:
        raise GGUFFormatError(f"a string of {n} bytes in the header (corrupt file?)")
    try:
        return _read(f, n).decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFFormatError("a header string is not UTF-8 (corrupt file?)") from None


def _value(f: BinaryIO, vtype: int, keep: bool = True) -> Any:
    if vtype in _SCALARS:
        return _unpack(f, _SCALARS[vtype])
    if vtype == _STRING:
        return _string(f)
    if vtype == _ARRAY:
        etype, n = _unpack(f, "<I"), _unpack(f, "<Q")
        if etype in _SCALARS:  # skip numeric arrays (token scores, types) without decoding them
            size = struct.calcsize(_SCALARS[etype]) * n
            data = _read(f, size)
            return list(struct.unpack(f"<{n}{_SCALARS[etype][1]}", data)) if keep and n <= 4096 else n
        if etype == _STRING and not (keep and n <= 4096):  # a vocabulary: skip it without decoding
            for _ in range(n):
                f.seek(_unpack(f, "<Q"), os.SEEK_CUR)
            return n
        items = [_value(f, etype, keep=False) for _ in range(n)]
        return items if keep and n <= 4096 else n
    raise GGUFFormatError(f"unknown metadata value type {vtype}")


def read_header(path: str | os.PathLike) -> GGUFHeader:
    """The header of the GGUF file at ``path``. Large arrays (a tokenizer's vocabulary) are read
    past and kept as their length. Raises :class:`GGUFFormatError` for a file that is not GGUF or
    is cut short, ``OSError`` for one that cannot be opened."""
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != _MAGIC:
            raise GGUFFormatError("not a GGUF file (its first bytes are not 'GGUF')")
        version = _unpack(f, "<I")
        if version not in (2, 3):
            raise GGUFFormatError(f"GGUF version {version} (this reader follows versions 2 and 3)")
        n_tensors, n_kv = _unpack(f, "<Q"), _unpack(f, "<Q")
        if n_tensors > 1 << 20 or n_kv > 1 << 20:
            raise GGUFFormatError(f"{n_tensors} tensors and {n_kv} metadata keys in the header (corrupt file?)")
        kv: dict[str, Any] = {}
        raw: dict[str, tuple[int, int]] = {}
        for _ in range(n_kv):
            start = f.tell()
            key = _string(f)
            kv[key] = _value(f, _unpack(f, "<I"))
            raw[key] = (start, f.tell())
        kv_end = f.tell()
        tensors: dict[str, TensorInfo] = {}
        for _ in range(n_tensors):
            name = _string(f)
            n_dims = _unpack(f, "<I")
            if n_dims > 8:
                raise GGUFFormatError(f"tensor {name!r} has {n_dims} dimensions (corrupt file?)")
            shape = tuple(_unpack(f, "<Q") for _ in range(n_dims))
            tensors[name] = TensorInfo(shape, _unpack(f, "<I"), _unpack(f, "<Q"))
        infos_end = f.tell()
        align = int(kv.get("general.alignment", 32))
        data_start = (infos_end + align - 1) // align * align
    return GGUFHeader(path, version, kv, tensors, data_start, (kv_end, infos_end), raw)


def _check_data(h: GGUFHeader) -> None:
    """Raise :class:`GGUFFormatError` when the file is shorter than its tensors' data."""
    size = h.path.stat().st_size
    for name, t in h.tensors.items():
        n = t.nbytes()
        if n is not None and h.data_start + t.offset + n > size:
            raise GGUFFormatError(f"the data of tensor {name!r} runs past the end of the file "
                                  f"({size} bytes): the file is cut short")


@dataclass(frozen=True)
class AdapterInfo:
    """A checked GGUF LoRA adapter: its file, architecture, ``alpha``, rank, the base weights it
    adapts with the shapes of their pairs, and its ``lookplangraph.*`` metadata (:data:`META_KEYS`;
    empty for other adapters)."""

    path: Path
    architecture: str
    alpha: float | None
    rank: int
    pairs: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # base weight -> (lora_a, lora_b) ggml shapes
    metadata: dict[str, str]

    @property
    def targets(self) -> tuple[str, ...]:
        """The base weights the adapter changes, sorted."""
        return tuple(sorted(self.pairs))

    @property
    def system_prompt_name(self) -> str | None:
        """The planner's ``system_prompt`` setting the adapter was trained with (None: not recorded)."""
        return self.metadata.get("lookplangraph.system_prompt_name")

    @property
    def cypher_classes_at(self) -> str:
        """Where its Cypher examples' system prompts listed the scene's classes (``schema`` when
        not recorded: every adapter before the ``end`` layout)."""
        return self.metadata.get("lookplangraph.cypher_classes_at", "schema")

    @property
    def answer_format(self) -> str | None:
        """The answer format of its training examples (None: not recorded)."""
        return self.metadata.get("lookplangraph.answer_format")


def read_adapter(path: str | os.PathLike) -> AdapterInfo:
    """The adapter at ``path`` with its structure checked on its own (every ``lora_a`` has its
    ``lora_b`` and their ranks agree; the data is all there). Raises :class:`AdapterError`
    saying what is wrong: no such file, not GGUF, cut short, not a LoRA adapter (a base model
    given as the adapter), unpaired or inconsistent tensors."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise AdapterError(f"no adapter file {path}")
    try:
        h = read_header(path)
        _check_data(h)
    except GGUFFormatError as exc:
        raise AdapterError(f"{path} is not a usable LoRA adapter: {exc}") from None
    except OSError as exc:
        raise AdapterError(f"cannot read the adapter {path}: {exc}") from None
    kind, atype = h.kv.get("general.type"), h.kv.get("adapter.type")
    if kind != "adapter" or atype != "lora":
        what = "a model, not an adapter (was the base given as the adapter?)" if kind in (None, "model") else \
            f"general.type = {kind!r}, adapter.type = {atype!r}"
        raise AdapterError(f"{path} is not a GGUF LoRA adapter: {what}")
    pairs: dict[str, dict[str, TensorInfo]] = {}
    for name, t in h.tensors.items():
        base, dot, part = name.rpartition(".")
        if not dot or part not in ("lora_a", "lora_b"):
            raise AdapterError(f"{path}: tensor {name!r} is not a LoRA matrix (NAME.lora_a / NAME.lora_b)")
        pairs.setdefault(base, {})[part] = t
    if not pairs:
        raise AdapterError(f"{path} holds no LoRA tensors")
    shapes = {}
    for base, ab in pairs.items():
        if set(ab) != {"lora_a", "lora_b"}:
            raise AdapterError(f"{path}: {base} has {', '.join(ab)} without its partner matrix")
        a, b = ab["lora_a"].shape, ab["lora_b"].shape
        if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
            raise AdapterError(f"{path}: {base}.lora_a {list(a)} and .lora_b {list(b)} do not make a LoRA pair")
        shapes[base] = (a, b)
    alpha = h.kv.get("adapter.lora.alpha")
    return AdapterInfo(path, str(h.kv.get("general.architecture", "")), None if alpha is None else float(alpha),
                       max(a[1] for a, _ in shapes.values()), shapes, _record(h))


def _record(h: GGUFHeader) -> dict[str, str]:
    """The ``lookplangraph.*`` metadata of a file."""
    return {k: v for k, v in h.kv.items() if k.startswith("lookplangraph.") and isinstance(v, str)}


def merged_record(path: str | os.PathLike) -> AdapterInfo | None:
    """The ``lookplangraph.*`` record of a model file into which an adapter was merged
    (``distill merge``), as an :class:`AdapterInfo` without tensors; None for a model without one
    or a file that cannot be read as GGUF (llama.cpp then says what is wrong with it)."""
    try:
        h = read_header(path)
    except (GGUFFormatError, OSError):
        return None
    meta = _record(h)
    if not meta or h.kv.get("general.type") == "adapter":
        return None
    return AdapterInfo(Path(path), str(h.kv.get("general.architecture", "")), None, 0, {}, meta)


def check_adapter(adapter: str | os.PathLike, base: str | os.PathLike, base_sha256: str | None = None) -> AdapterInfo:
    """:func:`read_adapter`, then its fit to the base GGUF at ``base``: the same architecture, every
    adapted weight present in the base with the shapes the pair needs (``lora_a`` ``[in, r]``,
    ``lora_b`` ``[r, out]`` for a base weight ``[in, out]``), and, when the adapter records the
    SHA-256 of its base, that very file (``base_sha256``: the base's known hash, e.g. from the
    embedded registry; None: the file is hashed). Raises :class:`AdapterError`."""
    info = read_adapter(adapter)
    try:
        bh = read_header(base)
    except (GGUFFormatError, OSError) as exc:
        raise AdapterError(f"cannot read the base model {base}: {exc}") from None
    barch = str(bh.kv.get("general.architecture", ""))
    if info.architecture and barch and info.architecture != barch:
        raise AdapterError(f"{info.path} is an adapter for a {info.architecture} model; the base {base} is {barch}")
    for target, (a, b) in info.pairs.items():
        w = bh.tensors.get(target)
        if w is None:
            raise AdapterError(f"{info.path} adapts {target}, which the base {base} does not have: "
                               "an adapter for another model")
        if len(w.shape) != 2 or a[0] != w.shape[0] or b[1] != w.shape[1]:
            raise AdapterError(f"{info.path} does not fit the base {base}: {target} is {list(w.shape)} in the base, "
                               f"the adapter's pair is lora_a {list(a)} / lora_b {list(b)} "
                               "(an adapter for another model size)")
    want = info.metadata.get("lookplangraph.base_sha256")
    if want:
        have = base_sha256 or sha256_file(Path(base))
        if have != want:
            raise AdapterError(f"{info.path} was trained on a base with SHA-256 {want[:16]}..., not on {base} "
                               f"({have[:16]}...): use the base it was trained on")
    return info


def _kv_string(key: str, value: str) -> bytes:
    k, v = key.encode(), value.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", _STRING) + struct.pack("<Q", len(v)) + v


def stamp_adapter(src: str | os.PathLike, dst: str | os.PathLike, metadata: dict[str, str]) -> AdapterInfo:
    """Write ``src`` to ``dst`` with ``metadata`` (keys of :data:`META_KEYS`) set: the tensors
    and every other key unchanged, byte for byte. Written to a temporary file and renamed, so
    ``dst`` is never half-written. Raises :class:`AdapterError` for an unknown key, a non-string
    value or an unusable ``src``."""
    unknown = sorted(set(metadata) - set(META_KEYS))
    if unknown:
        raise AdapterError(f"unknown adapter metadata key(s) {', '.join(unknown)}; known: {', '.join(META_KEYS)}")
    if not all(isinstance(v, str) for v in metadata.values()):
        raise AdapterError("adapter metadata values are strings")
    read_adapter(src)
    h = read_header(src)
    src, dst = Path(src), Path(dst)
    kept = [k for k in h.kv if k not in metadata and not k.startswith("GGUF.")]
    align = int(h.kv.get("general.alignment", 32))
    tmp = dst.with_name(dst.name + ".part")
    try:
        with open(src, "rb") as f, open(tmp, "wb") as out:
            out.write(_MAGIC + struct.pack("<IQQ", h.version, len(h.tensors), len(kept) + len(metadata)))
            for k in kept:
                start, end = h._raw[k]
                f.seek(start)
                out.write(f.read(end - start))
            for k, v in metadata.items():
                out.write(_kv_string(k, v))
            f.seek(h.tensor_infos[0])
            out.write(f.read(h.tensor_infos[1] - h.tensor_infos[0]))
            out.write(b"\0" * (-out.tell() % align))
            f.seek(h.data_start)
            while chunk := f.read(8 << 20):
                out.write(chunk)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return read_adapter(dst)


def training_metadata(base_sha256: str, system_prompt_name: str, system_prompt: str, prompt_layout: str,
                      answer_format: str, training: dict[str, Any] | None = None,
                      recall: str = "here", cypher_classes_at: str = "schema",
                      actions_per_answer: int = 1) -> dict[str, str]:
    """The ``lookplangraph.*`` metadata of an adapter trained on ``base_sha256`` with examples
    whose system message was ``system_prompt`` (the ``system_prompt_name`` setting's text), whose
    user message had ``prompt_layout`` and the view's ``recall`` (recorded only when not the
    default ``here``, so older adapters read the same) and whose replies have ``answer_format``;
    ``cypher_classes_at``: the layout of its Cypher examples' prompts (recorded when not ``schema``);
    ``actions_per_answer``: the most actions one of its answers holds (recorded when more than 1)."""
    meta = {"lookplangraph.base_sha256": base_sha256, "lookplangraph.system_prompt_name": system_prompt_name,
            "lookplangraph.system_prompt": system_prompt, "lookplangraph.prompt_layout": prompt_layout,
            "lookplangraph.answer_format": answer_format}
    if recall != "here":
        meta["lookplangraph.recall"] = recall
    if cypher_classes_at != "schema":
        meta["lookplangraph.cypher_classes_at"] = cypher_classes_at
    if int(actions_per_answer) > 1:
        meta["lookplangraph.actions_per_answer"] = str(int(actions_per_answer))
    if training is not None:
        meta["lookplangraph.training"] = json.dumps(training, sort_keys=True)
    return meta
