"""LoRA supervised fine-tuning of a GGUF chat model on ``distill data``'s examples.

:func:`train` reads the base model and its tokenizer straight from the project's GGUF file
(``transformers`` dequantizes it through the ``gguf`` package, asked for dense weights: no model
hub), renders every example with the model's own chat template (the one llama.cpp applies at
inference), computes the loss on the answer tokens only (the assistant's reply and its
end-of-turn token; the system and user prompt are masked with -100, and only the positions that
predict a trained token are projected onto the vocabulary, :mod:`.answer_logits`; a whole conversation,
:mod:`lookplangraph.distill.planning.conversations`, has every trained answer learnt in one
pass; ``pack`` lets examples share a sequence), and trains a PEFT LoRA with the Hugging Face ``Trainer``:
seeded, with a progress bar, checkpoints every ``save_steps`` and ``resume`` from the last one
(so a run cut by a time limit, ``max_minutes``, goes on where it stopped; one whose checkpoints
are lost goes on from its adapter and step count, ``start_step``). At the end it writes
into ``OUT/``:

* ``adapter/``: the PEFT adapter (``adapter_config.json``, ``adapter_model.safetensors``);
* ``adapter.gguf``: the same adapter as a GGUF LoRA for llama.cpp (:mod:`.gguf_lora`);
* ``loss.csv`` and ``loss.png``: the training loss by step;
* ``train.json``: the configuration, the base and data SHA-256, example, decision and token counts
  (with this call's tokens trained and tokens/s), the final loss, the torch/transformers/peft versions and the device;
  a run started from an adapter that carries a training record (a released one) adds ``lineage``,
  the start's stages and its own (:mod:`.lineage`), so a release stamped from it
  (``distill stamp``) says every stage it was trained in.

The heavy dependencies (``torch``, ``transformers``, ``peft``, ``gguf``, ``accelerate``) are the
``distill`` extra; importing this module does not need them, calling :func:`train` does.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from lookplangraph.cypher.agent import classes_layout
from lookplangraph.distill.training.answer_logits import answer_loss, with_answer_positions
from lookplangraph.distill.training.gguf_lora import ExportError, export_lora, load_lora
from lookplangraph.distill.training.lineage import RecordError, carry_lineage, init_record
from lookplangraph.lm.cpu_features import cpu_has_native_bfloat16
from lookplangraph.lm.embedded import sha256_file
from lookplangraph.lm.lora import read_adapter, stamp_adapter, training_metadata

#: Every linear layer of a Qwen2/Llama block: attention and MLP projections.
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


#: Settings a resumed run may change: how long it trains, how often it saves or logs, and how it
#: computes (the kernels, activation checkpointing and the compute dtype change speed, memory and
#: rounding, not the model: the adapter's weights and Adam's moments are kept in float32 either way,
#: so a run begun in bfloat16 on a CPU that has it goes on in float32 on one that does not).
RESUMABLE_CHANGES = ("epochs", "max_steps", "max_minutes", "save_steps", "logging_steps", "attention",
                     "gradient_checkpointing", "start_step", "dtype")


#: The prompt settings of examples (and adapters) that do not record them: what data had before
#: ``counts.json`` recorded its prompt layout, answer format and recall.
UNRECORDED = {"prompt_layout": "scene-history", "answer_format": "action+reason", "recall": "here",
              "actions_per_answer": 1}


class TrainError(ValueError):
    """Training cannot start: missing extra, bad data, bad settings."""


@dataclass
class TrainConfig:
    """Settings of one LoRA fine-tuning run (all recorded in ``train.json``).

    ``examples``: use at most this many examples (after the seeded shuffle; None: all).
    ``max_length``: examples longer than this many tokens are left out (and counted).
    ``batch_size`` x ``grad_accum`` examples make one optimizer step. ``max_steps`` (if set) wins
    over ``epochs``. ``max_minutes`` stops training after that much wall time, with a checkpoint
    (resume with the same command). ``dtype``: ``auto`` is bfloat16 on a GPU or CPU that
    multiplies it in hardware, else float32 (:func:`resolve_dtype`). ``gradient_checkpointing``:
    ``auto`` is on, on a CPU as with CUDA (without it a batch of long examples can exhaust a CPU
    machine's memory); ``off`` is faster where memory allows. ``lr_schedule``: ``steps``
    (the Trainer's cosine over the optimizer steps of ``epochs``/``max_steps``) or ``time`` (the
    same warm-up and cosine over the wall time of ``max_minutes``, for a run whose length is set
    by a time limit: it ends at a learning rate near zero wherever the limit falls; a resumed run
    starts the time schedule again). ``attention``: ``sdpa`` (PyTorch's fused kernels; on CUDA
    without the cuDNN one, whose backward has been reported to give NaN gradients for Qwen2.5) or
    ``eager`` (plain matrix products: slower, the safe choice if a run still diverges).
    ``system``: the system message every example is trained with instead of the one it was built
    with (None: as built), e.g. the planner's compact prompt, which the trained model is then run with.
    A mix (:mod:`.mix`) already holds its final system messages: they stay, and a ``system`` other
    than its planning one is refused.
    ``system_name``: the planner's ``system_prompt`` setting whose text the examples' system
    message is (recorded in the adapter, so that the planner runs it with that prompt).
    ``init_adapter``: a GGUF LoRA file (e.g. a shipped adapter) whose weights the run starts from
    instead of PEFT's fresh initialisation (it must have ``rank``, ``alpha`` and ``targets``); None:
    a fresh adapter.
    ``start_step``: with ``init_adapter``, in an ``OUT`` that holds no checkpoint, go on from this
    optimizer step of the run (its seed, data and settings) whose adapter after that many steps
    ``init_adapter`` is: the examples and the learning-rate schedule continue where that run stood,
    the optimizer's moments start afresh (:func:`start_checkpoint`). For a run whose checkpoints
    were lost with its machine; once ``OUT`` has checkpoints it is ignored (they are later).
    ``pack``: examples (in their shuffled order) share sequences of up to ``max_length`` tokens,
    kept apart by restarting ``position_ids`` (:func:`pack_rows`); a batch of ``batch_size`` such
    sequences. Off: one example per row, padded within a batch.
    """

    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    targets: tuple[str, ...] = DEFAULT_TARGETS
    learning_rate: float = 2e-4
    epochs: float = 1.0
    max_steps: int | None = None
    batch_size: int = 4
    grad_accum: int = 4
    warmup_ratio: float = 0.03
    max_length: int = 4096
    examples: int | None = None
    seed: int = 0
    save_steps: int = 100
    logging_steps: int = 5
    max_minutes: float | None = None
    dtype: str = "auto"
    gradient_checkpointing: str = "auto"
    lr_schedule: str = "steps"
    attention: str = "sdpa"
    system: str | None = None
    system_name: str = "full"
    init_adapter: str | None = None
    start_step: int = 0
    pack: bool = False

    def check(self) -> None:
        """Raise :class:`TrainError` for a setting that cannot work."""
        if self.rank < 1 or self.alpha <= 0:
            raise TrainError(f"rank must be >= 1 and alpha > 0 (got rank {self.rank}, alpha {self.alpha})")
        if not 0 <= self.dropout < 1:
            raise TrainError(f"dropout must be in [0, 1), not {self.dropout}")
        if self.learning_rate <= 0 or self.batch_size < 1 or self.grad_accum < 1:
            raise TrainError("learning_rate must be > 0, batch_size and grad_accum >= 1")
        if self.max_steps is None and self.epochs <= 0:
            raise TrainError(f"epochs must be > 0 (or set max_steps), not {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise TrainError(f"max_steps must be >= 1, not {self.max_steps}")
        if self.max_length < 16 or self.save_steps < 1 or self.logging_steps < 1:
            raise TrainError("max_length must be >= 16, save_steps and logging_steps >= 1")
        if self.examples is not None and self.examples < 1:
            raise TrainError(f"examples must be >= 1, not {self.examples}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise TrainError(f"max_minutes must be > 0, not {self.max_minutes}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise TrainError(f"dtype must be auto, float32, bfloat16 or float16, not {self.dtype!r}")
        if self.gradient_checkpointing not in ("auto", "on", "off"):
            raise TrainError(f"gradient_checkpointing must be auto, on or off, not {self.gradient_checkpointing!r}")
        if self.attention not in ("sdpa", "eager"):
            raise TrainError(f"attention must be sdpa or eager, not {self.attention!r}")
        if self.lr_schedule not in ("steps", "time"):
            raise TrainError(f"lr_schedule must be steps or time, not {self.lr_schedule!r}")
        if self.lr_schedule == "time" and self.max_minutes is None:
            raise TrainError("lr_schedule 'time' needs max_minutes (the wall time the schedule runs over)")
        if not self.targets:
            raise TrainError("targets: at least one module name")
        if self.init_adapter is not None and not Path(self.init_adapter).is_file():
            raise TrainError(f"init_adapter: no file {self.init_adapter}")
        if self.start_step < 0:
            raise TrainError(f"start_step must be >= 0, not {self.start_step}")
        if self.start_step and self.init_adapter is None:
            raise TrainError("start_step needs init_adapter: the adapter after those steps, which the run goes on from")
        if self.start_step and self.max_steps is not None and self.start_step >= self.max_steps:
            raise TrainError(f"start_step {self.start_step} leaves nothing to train of max_steps {self.max_steps}")


@dataclass
class TrainReport:
    """What :func:`train` did (also in ``train.json``)."""

    out: Path
    steps: int
    examples: int
    left_out_too_long: int
    answer_tokens: int
    prompt_tokens: int
    final_loss: float | None
    seconds: float
    stopped_by_time: bool
    adapter_gguf: Path
    skipped_steps: list[int] = field(default_factory=list)  # optimizer steps skipped: non-finite gradients
    decisions: int = 0  # trained assistant turns in the examples (a one-decision example has one)
    tokens_seen: int = 0  # tokens of the rows trained in this call (padding left out)


def _need_extra():
    try:
        import peft  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import gguf  # noqa: F401
    except ImportError as exc:
        raise TrainError(f"training needs the distill extra ({exc.name} is missing): "
                         "pip install 'lookplangraph[distill]'") from None


def resolve_dtype(requested: str, cuda: bool, cuda_bfloat16: bool, cpu_bfloat16: bool) -> tuple[str, str | None]:
    """The dtype a run computes in (``float32``, ``bfloat16`` or ``float16``) for the ``dtype``
    setting ``requested`` on this machine, and a note for its log (None: nothing to say).

    ``auto``: bfloat16 where the device multiplies it in hardware (a GPU that supports it, a CPU
    with :func:`~lookplangraph.lm.cpu_features.cpu_has_native_bfloat16`), else float32.
    ``bfloat16`` asked for on a CPU without it runs (its memory is half of float32's) with a note:
    PyTorch's fallback there is several times slower than float32. ``float16`` on a CPU is a
    :class:`TrainError` (mixed precision in float16 has no CPU path)."""
    if requested == "auto":
        native = cuda_bfloat16 if cuda else cpu_bfloat16
        return ("bfloat16" if native else "float32"), None
    if requested == "float16" and not cuda:
        raise TrainError("--dtype float16 needs a GPU (mixed precision in float16 has no CPU path): on a CPU use "
                         "float32 or bfloat16")
    if requested == "bfloat16" and not cuda and not cpu_bfloat16:
        return requested, ("this CPU has no bfloat16 matrix instructions (avx512_bf16, amx_bf16 or bf16 in "
                           "/proc/cpuinfo): bfloat16 runs through a fallback several times slower than float32 "
                           "here; --dtype float32 (or auto) trains faster, in twice the memory")
    return requested, None


def data_file(path: str | os.PathLike) -> Path:
    """``path`` itself, or in a directory its ``sft.jsonl`` (else ``sft.jsonl.gz``)."""
    path = Path(path)
    if path.is_dir():
        path = next((path / n for n in ("sft.jsonl", "sft.jsonl.gz") if (path / n).is_file()), path / "sft.jsonl")
    if not path.is_file():
        raise TrainError(f"no training data at {path}: write it with `lookplangraph distill data --out DIR`")
    return path


def data_counts(data: str | os.PathLike) -> dict[str, Any]:
    """The ``counts.json`` beside the data's ``sft.jsonl`` (``distill data``, ``distill dagger``,
    ``distill mix``, ``cypher-data`` write one); empty when there is none or it does not parse."""
    path = data_file(data).parent / "counts.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError:
        return {}


def prompt_metadata(config: TrainConfig, system: str, data: str | os.PathLike, base_sha256: str) -> dict[str, str]:
    """The ``lookplangraph.*`` metadata the exported adapter carries (:mod:`lookplangraph.lm.lora`):
    the base's SHA-256, the system message the examples were trained with (``system``) and its
    name (``config.system_name``), and the prompt layout, answer format, recall and actions per
    answer the data records in its ``counts.json`` (``distill data``; data written before they were
    recorded had ``scene-history``, ``action+reason``, ``here`` and 1), and the layout of its Cypher prompts
    (:func:`cypher_layout`)."""
    counts = data_counts(data)
    recorded = {key: counts.get(key) or default for key, default in UNRECORDED.items()}
    return training_metadata(base_sha256, config.system_name, system, recorded["prompt_layout"],
                             recorded["answer_format"], recall=recorded["recall"],
                             cypher_classes_at=cypher_layout(data), actions_per_answer=recorded["actions_per_answer"])


def cypher_layout(data: str | os.PathLike) -> str:
    """Where the Cypher examples of ``data`` list the scene's classes in their system prompts
    (:func:`lookplangraph.cypher.agent.classes_layout`), read from the prompts themselves:
    ``schema`` when there are none; :class:`TrainError` when they mix both layouts."""
    layouts = {classes_layout(m["content"]) for ex in read_examples(data) for m in ex[:1] if m["role"] == "system"}
    layouts.discard(None)
    if len(layouts) > 1:
        raise TrainError("the Cypher examples list the scene's classes in both layouts (schema and end): rewrite "
                         "them into one with `distill mix --cypher-classes-at end`")
    return layouts.pop() if layouts else "schema"


def start_mismatch(adapter: str | os.PathLike, wanted: dict[str, str]) -> list[str]:
    """What the adapter ``adapter`` was trained on that differs from the run's examples (``wanted``:
    :func:`prompt_metadata`): prompt layout, answer format, recall. A run started from it then
    relearns those first; on a CPU's few hundred examples that costs more than it gains."""
    had = read_adapter(adapter).metadata
    out = []
    for key, default in UNRECORDED.items():
        was, now = had.get(f"lookplangraph.{key}", default), wanted.get(f"lookplangraph.{key}", default)
        if str(was) != str(now):
            out.append(f"the start adapter was trained with {key} {was}, these examples have {now}")
    return out


def with_system(messages: list[dict[str, str]], system: str | None) -> list[dict[str, str]]:
    """``messages`` with their system message replaced by ``system`` (put first if there is none;
    None: unchanged)."""
    if system is None:
        return messages
    return [{"role": "system", "content": system}, *(m for m in messages if m["role"] != "system")]


def read_examples(path: str | os.PathLike) -> list[list[dict[str, Any]]]:
    """The chat examples of an ``sft.jsonl`` or ``sft.jsonl.gz`` (or of the one in a directory): each a list of messages
    ending with an assistant turn: one decision (system, user, assistant) or a whole episode's
    conversation (:mod:`lookplangraph.distill.planning.conversations`), whose assistant turns
    carry ``"train": false`` when they are not learnt. Raises :class:`TrainError` with the line
    number for a line that is not such an example."""
    path = data_file(path)
    examples = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                messages = json.loads(line)["messages"]
            except (json.JSONDecodeError, KeyError, TypeError):
                raise TrainError(f"{path}:{n}: not a JSON object with 'messages'") from None
            if (not isinstance(messages, list) or len(messages) < 2
                    or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)
                    or messages[-1].get("role") != "assistant"):
                raise TrainError(f"{path}:{n}: 'messages' must be chat messages ending with the assistant's answer")
            if any(m.get("train", True) not in (True, False) for m in messages):
                raise TrainError(f"{path}:{n}: an assistant turn's 'train' is true or false")
            if not any(m["role"] == "assistant" and m.get("train", True) for m in messages):
                raise TrainError(f"{path}:{n}: no assistant turn is trained")
            examples.append([{"role": m["role"], "content": m["content"],
                              **({"train": False} if m["role"] == "assistant" and m.get("train") is False else {})}
                             for m in messages])
    if not examples:
        raise TrainError(f"{path} holds no examples")
    return examples


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def tokenize_example(tokenizer, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of one chat example, rendered with the model's chat template: the
    loss is on every trained assistant turn (its reply and end-of-turn: what the chat renders
    after that turn's header), -100 elsewhere. For each assistant turn the text up to its header
    (``messages[:i]`` with the generation prompt, what the backend sends for that decision) and
    the text up to its end must be prefixes of the whole conversation's rendering; a template
    that renders earlier turns otherwise (one that drops the reasoning of earlier answers, say)
    raises :class:`TrainError`. Segments are tokenized apart at those boundaries, so the tokens
    of decision *k* are exactly the tokens of its prompt and answer trained alone."""
    plain = _plain(messages)
    full = tokenizer.apply_chat_template(plain, tokenize=False)
    ids: list[int] = []
    labels: list[int] = []
    at = 0
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(plain[:i], tokenize=False, add_generation_prompt=True)
        end = full if i == len(plain) - 1 else tokenizer.apply_chat_template(plain[:i + 1], tokenize=False)
        if not (full.startswith(end) and end.startswith(prompt) and len(prompt) >= at):
            raise TrainError(f"the chat template does not render the conversation up to turn {i} as a prefix of the "
                             "whole conversation; loss on the answers needs that")
        before = tokenizer(prompt[at:], add_special_tokens=False)["input_ids"] if len(prompt) > at else []
        answer = tokenizer(end[len(prompt):], add_special_tokens=False)["input_ids"]
        ids += before + answer
        labels += [-100] * len(before) + (answer if m.get("train", True) else [-100] * len(answer))
        at = len(end)
    return ids, labels


def pack_rows(rows: list[dict[str, list[int]]], max_length: int) -> list[dict[str, list[int]]]:
    """Tokenized examples packed into sequences of at most ``max_length`` tokens, in order (a row
    goes into the current sequence while it fits, else starts the next): each packed row holds
    ``input_ids``, ``labels`` and ``position_ids`` that start again at 0 with every example.
    The model reads restarting positions as separate sequences and masks attention between
    them (``transformers`` builds that block-diagonal mask from ``position_ids`` when no
    ``attention_mask`` is given: :func:`packed_collator`); the first label of every example is
    -100 (its first token is the chat's opening), so no loss crosses a boundary."""
    packed: list[dict[str, list[int]]] = []
    cur: dict[str, list[int]] = {"input_ids": [], "labels": [], "position_ids": []}
    for row in rows:
        n = len(row["input_ids"])
        if cur["input_ids"] and len(cur["input_ids"]) + n > max_length:
            packed.append(cur)
            cur = {"input_ids": [], "labels": [], "position_ids": []}
        cur["input_ids"] += row["input_ids"]
        cur["labels"] += row["labels"]
        cur["position_ids"] += list(range(n))
    if cur["input_ids"]:
        packed.append(cur)
    return packed


def packed_collator(pad_id: int) -> Callable[[list[dict[str, list[int]]]], dict[str, Any]]:
    """A batch of :func:`pack_rows` sequences as tensors, with no ``attention_mask`` (so the model
    masks by the restarting ``position_ids``): a shorter row is filled up to the longest with
    ``pad_id`` tokens that form a sequence of their own (positions from 0, labels -100), which
    no real token attends to."""
    import torch

    def collate(rows: list[dict[str, list[int]]]) -> dict[str, Any]:
        width = max(len(r["input_ids"]) for r in rows)
        batch: dict[str, list[list[int]]] = {"input_ids": [], "labels": [], "position_ids": []}
        for r in rows:
            fill = width - len(r["input_ids"])
            batch["input_ids"].append(r["input_ids"] + [pad_id] * fill)
            batch["labels"].append(r["labels"] + [-100] * fill)
            batch["position_ids"].append(r["position_ids"] + list(range(fill)))
        return {k: torch.tensor(v, dtype=torch.long) for k, v in batch.items()}
    return collate


def load_base(base_gguf: str | os.PathLike, dtype: Any, attention: str = "sdpa"):
    """``(model, tokenizer)`` read from a GGUF file by ``transformers`` (dequantized to ``dtype``),
    with the attention implementation ``attention`` (``sdpa`` or ``eager``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_gguf = Path(base_gguf)
    if not base_gguf.is_file():
        raise TrainError(f"no base model file {base_gguf}")
    tokenizer = AutoTokenizer.from_pretrained(str(base_gguf.parent), gguf_file=base_gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(base_gguf.parent), gguf_file=base_gguf.name, dtype=dtype,
                                                 attn_implementation=attention, **dense_weights(base_gguf))
    packed = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not m.weight.is_floating_point()]
    if packed:
        raise TrainError(f"{base_gguf.name} loaded with packed GGUF weights ({packed[0]} and {len(packed) - 1} more): "
                         "training needs dense weights; this transformers ignored GgufConfig(dequantize=True)")
    # transformers marks a model read from GGUF as quantized (its loader is a "quantizer"), but the
    # weights are dequantized into plain tensors; unmarked, the Trainer takes it as the plain model it is.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Pad on the right (as transformers reads Qwen2.5's GGUF today, made explicit): a left-padded
    # row starts with queries that attend to nothing, which fused attention kernels can turn into NaN.
    tokenizer.padding_side = "right"
    return model, tokenizer


def dense_weights(base_gguf: Path) -> dict[str, Any]:
    """The ``from_pretrained`` arguments that ask for the GGUF's weights dequantized into plain
    tensors: ``quantization_config=GgufConfig(dequantize=True)``. Without it transformers 5
    keeps the weights packed in GGUF blocks (and calls the model not trainable) wherever its
    ``kernels`` package finds a matmul kernel, and dequantizes elsewhere: training would behave
    by machine. Empty for a transformers without ``GgufConfig`` (4.x, which always dequantizes)."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(gguf_file=base_gguf.name, dequantize=True)}


def _plot_loss(rows: list[tuple[int, float]], path: Path, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=120)
    ax.plot([r[0] for r in rows], [r[1] for r in rows], lw=1.5)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (answer tokens)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def time_schedule_lr(peak: float, fraction: float, warmup: float) -> float:
    """The learning rate at ``fraction`` (0..1) of a time-limited run: linear warm-up to
    ``peak`` over the first ``warmup`` of the time, then a cosine to zero at 1."""
    fraction = min(max(fraction, 0.0), 1.0)
    if warmup > 0 and fraction < warmup:
        return peak * max(fraction / warmup, 0.01)
    return peak * 0.5 * (1 + math.cos(math.pi * (fraction - warmup) / max(1 - warmup, 1e-9)))


def _version_arguments(training_arguments: type, config: TrainConfig, checkpointing: bool,
                       warmup: bool = True) -> dict[str, Any]:
    """Warm-up ratio, length-grouped batches and activation checkpointing, spelled as this
    ``transformers`` spells them (4.x: ``warmup_ratio``, ``group_by_length``,
    ``gradient_checkpointing``; 5.x: a float ``warmup_steps`` < 1,
    ``train_sampling_strategy="group_by_length"``, and ``activation_checkpointing`` in the
    releases that renamed it)."""
    import inspect

    params = inspect.signature(training_arguments.__init__).parameters
    out: dict[str, Any] = {}
    out["activation_checkpointing" if "activation_checkpointing" in params else "gradient_checkpointing"] = checkpointing
    out["warmup_ratio" if "warmup_ratio" in params else "warmup_steps"] = config.warmup_ratio if warmup else 0
    if "train_sampling_strategy" in params:
        out["train_sampling_strategy"] = "group_by_length"
    elif "group_by_length" in params:
        out["group_by_length"] = True
    return out


def start_checkpoint(trainer: Any, checkpoints: Path, step: int) -> Path:
    """Write ``checkpoints/checkpoint-STEP`` as the ``Trainer`` would have saved it after ``step``
    optimizer steps, from what a machine without that run's checkpoints still has: the model's
    weights as they are now (the start adapter, loaded), the seeded data order (the ``Trainer``
    skips the batches of those steps when it resumes), and the learning-rate schedule advanced
    by ``step``; the optimizer's state holds no moments (Adam's start afresh). Returns the
    directory; :class:`TrainError` if ``step`` leaves nothing to train."""
    import warnings

    import torch
    from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME
    from transformers.trainer_callback import ExportableState, TrainerState

    args = trainer.args
    _, per_epoch, _, _, _, _, max_steps = trainer.set_initial_training_values(args, trainer.get_train_dataloader())
    if step >= max_steps:
        raise TrainError(f"start_step {step} leaves nothing to train: the run has {max_steps} optimizer steps")
    trainer.create_optimizer_and_scheduler(num_training_steps=max_steps)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()": no step is taken here
        for _ in range(step):
            trainer.lr_scheduler.step()
    directory = checkpoints / f"checkpoint-{step}"
    if directory.exists():  # an earlier run's (OUT reused with --restart): none of its files may stay beside these
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    trainer.model.save_pretrained(str(directory))
    torch.save(trainer.optimizer.state_dict(), directory / OPTIMIZER_NAME)
    torch.save(trainer.lr_scheduler.state_dict(), directory / SCHEDULER_NAME)
    TrainerState(epoch=step / per_epoch, global_step=step, max_steps=max_steps, logging_steps=args.logging_steps,
                 save_steps=args.save_steps, train_batch_size=args.per_device_train_batch_size,
                 num_train_epochs=math.ceil(max_steps / per_epoch),
                 stateful_callbacks=[c for c in [*trainer.callback_handler.callbacks, trainer.control]
                                     if isinstance(c, ExportableState)]).save_to_json(str(directory / TRAINER_STATE_NAME))
    trainer.optimizer, trainer.lr_scheduler = None, None  # the Trainer makes its own and loads these states
    return directory


def train(data: str | os.PathLike, base_gguf: str | os.PathLike, out: str | os.PathLike,
          config: TrainConfig | None = None, resume: bool = True,
          log: Callable[[str], None] = print, callbacks: Sequence[Any] = ()) -> TrainReport:
    """Fine-tune a LoRA on ``data`` (an ``sft.jsonl`` or its directory) over ``base_gguf``; see the
    module doc for what is written into ``out``. With ``resume`` (default) a run that finds a
    checkpoint in ``OUT/checkpoints`` goes on from it: the base, the data and the settings must be
    those recorded in ``OUT/settings.json`` (else :class:`TrainError`), except :data:`RESUMABLE_CHANGES`
    (so a longer run can go on from a shorter one's last checkpoint).

    An optimizer step whose gradients are not all finite is skipped (and listed in ``train.json``);
    a run where that keeps happening (3 in a row, or over a tenth of at least 20 steps) stops with a
    checkpoint of its last finite weights and raises :class:`TrainError` without exporting, as does
    one whose adapter weights are not finite. ``callbacks``: more ``transformers`` trainer
    callbacks (after the run's own)."""
    config = config or TrainConfig()
    config.check()
    _need_extra()
    import torch
    import transformers
    import peft
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainerCallback, TrainingArguments

    # Every check of the data and settings comes before OUT is made or written.
    data_sha256 = sha256_file(data_file(data))
    counts = data_counts(data)
    mixed = counts if counts.get("systems_final") else None  # a mix (distill mix): its system messages are final
    if mixed is not None and config.system is not None and config.system != mixed.get("system_prompt"):
        raise TrainError(f"{data_file(data).parent} is a mix whose examples hold their final system messages "
                         f"(its planning ones: the {mixed.get('system_prompt_name')} prompt); train it with "
                         "--system-prompt as-built, or mix again with the system prompt wanted")
    cuda = torch.cuda.is_available()
    dtype_name, dtype_note = resolve_dtype(config.dtype, cuda, cuda and torch.cuda.is_bf16_supported(),
                                           cpu_has_native_bfloat16())
    dtype = getattr(torch, dtype_name)
    # the start's training record, when it carries one (a released adapter): the lineage goes on from it
    try:
        started = init_record(config.init_adapter) if config.init_adapter is not None else None
    except RecordError as exc:
        raise TrainError(str(exc)) from None

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base_gguf = Path(base_gguf)
    settings_path = out / "settings.json"
    settings = {"config": asdict(config), "base": str(base_gguf), "base_sha256": sha256_file(base_gguf)}
    settings["data_sha256"] = data_sha256
    if config.init_adapter is not None:
        settings["init_adapter_sha256"] = sha256_file(Path(config.init_adapter))
    settings["config"]["targets"] = list(config.targets)
    checkpoints = out / "checkpoints"
    has_checkpoint = checkpoints.is_dir() and any(checkpoints.glob("checkpoint-*"))
    if has_checkpoint and resume:
        if settings_path.is_file():
            before = json.loads(settings_path.read_text())
            changed = [k for k in ("base_sha256", "data_sha256", "init_adapter_sha256") if before.get(k) != settings.get(k)]
            defaults = asdict(TrainConfig())  # a key an older run did not record had its default
            changed += [f"config.{k}" for k in settings["config"] if k not in RESUMABLE_CHANGES
                        and before.get("config", {}).get(k, defaults[k]) != settings["config"][k]]
            if changed:
                raise TrainError(f"{out} holds checkpoints of a run with other {', '.join(changed)}: "
                                 "use another --out, or the same settings to resume")
    settings_path.write_text(json.dumps(settings, indent=1))

    examples = [m if mixed is not None else with_system(m, config.system) for m in read_examples(data)]
    random.Random(config.seed).shuffle(examples)
    if config.examples is not None:
        examples = examples[: config.examples]

    if dtype_note:
        log(f"note: {dtype_note}")
    log(f"loading {base_gguf.name} (dequantizing to {dtype_name}) ...")
    if cuda and config.attention == "sdpa":
        torch.backends.cuda.enable_cudnn_sdp(False)  # flash and memory-efficient kernels stay
    model, tokenizer = load_base(base_gguf, dtype, config.attention)

    rows, too_long, prompt_tokens, answer_tokens, decisions = [], 0, 0, 0, 0
    from tqdm.auto import tqdm

    for messages in tqdm(examples, desc="tokenize", unit="ex", mininterval=2):
        ids, labels = tokenize_example(tokenizer, messages)
        if len(ids) > config.max_length:
            too_long += 1
            continue
        n_answer = sum(1 for x in labels if x != -100)
        prompt_tokens += len(ids) - n_answer
        answer_tokens += n_answer
        decisions += sum(1 for m in messages if m["role"] == "assistant" and m.get("train", True))
        rows.append({"input_ids": ids, "labels": labels, "attention_mask": [1] * len(ids)})
    if not rows:
        raise TrainError(f"every example is longer than max_length={config.max_length} tokens")
    n_examples = len(rows)
    log(f"{n_examples} examples, {decisions} decisions trained ({too_long} longer than {config.max_length} tokens "
        f"left out); {prompt_tokens} prompt and {answer_tokens} answer tokens")
    if config.pack:
        rows = pack_rows(rows, config.max_length)
        log(f"packed into {len(rows)} sequences of at most {config.max_length} tokens")

    checkpointing = config.gradient_checkpointing in ("on", "auto")
    lora = peft.LoraConfig(r=config.rank, lora_alpha=config.alpha, lora_dropout=config.dropout,
                           target_modules=list(config.targets), bias="none", task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    if config.init_adapter is not None:
        try:
            pairs = load_lora(model, config.init_adapter, base_gguf)
        except ExportError as exc:
            raise TrainError(f"cannot start from {config.init_adapter}: {exc}") from None
        log(f"starting from the adapter {config.init_adapter} ({pairs} LoRA pairs)")
        for note in start_mismatch(config.init_adapter, prompt_metadata(config, "", data, "")):
            log(f"note: {note}")
    if checkpointing:
        model.enable_input_require_grads()
    model.config.use_cache = False  # no KV cache in training (with one, packed rows would not be kept apart)

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i]

    # what the callbacks below share with this function
    clock = {"start": time.monotonic()}
    stopped = {"by_time": False, "diverged": False}
    skipped: list[int] = []  # optimizer steps whose gradients were not finite
    by_time = config.lr_schedule == "time"

    class TimeLimit(TrainerCallback):
        """Starts the clock when training begins (after loading and tokenizing) and stops (and
        saves) after ``max_minutes`` of wall time."""

        def on_train_begin(self, args, state, control, **kwargs):
            clock["start"] = time.monotonic()
            return control

        def on_step_end(self, args, state, control, **kwargs):
            if config.max_minutes is not None and time.monotonic() - clock["start"] > config.max_minutes * 60:
                stopped["by_time"] = True
                control.should_save = True
                control.should_training_stop = True
            return control

    class TimeSchedule(TrainerCallback):
        """``lr_schedule="time"``: warm-up and cosine over the fraction of ``max_minutes`` gone,
        set before each step on the optimizer and on the Trainer's constant schedule (its base, which
        it sets again after the step, and its last rate, which the Trainer logs and prints)."""

        def on_step_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
            if optimizer is not None:
                lr = time_schedule_lr(config.learning_rate, (time.monotonic() - clock["start"]) / (config.max_minutes * 60),
                                      config.warmup_ratio)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                constant = getattr(lr_scheduler, "scheduler", lr_scheduler)  # accelerate may wrap it
                if constant is not None and hasattr(constant, "base_lrs"):
                    constant.base_lrs = [lr] * len(constant.base_lrs)
                    constant._last_lr = [lr] * len(constant.base_lrs)  # the Trainer logs get_last_lr() before it steps
            return control

    class FiniteGuard(TrainerCallback):
        """Skips an optimizer step whose gradients are not all finite (one inf is enough for the
        clipping to make every gradient NaN, and the adapter with them); stops the run when
        that keeps happening."""

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
            if not params or bool(torch.stack([torch.isfinite(p.grad).all() for p in params]).all()):
                return control
            for p in params:
                p.grad = None  # the optimizer leaves a parameter without a gradient as it is
            step = state.global_step + 1
            skipped.append(step)
            in_a_row = len(skipped) >= 3 and skipped[-3:] == list(range(step - 2, step + 1))
            if in_a_row or (step >= 20 and len(skipped) > step / 10):
                stopped["diverged"] = True
                control.should_training_stop = True
                control.should_save = True  # the weights are still the last finite ones: a rerun goes on from here
            return control

    args = TrainingArguments(
        output_dir=str(checkpoints), per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum, learning_rate=config.learning_rate,
        num_train_epochs=config.epochs, max_steps=config.max_steps if config.max_steps is not None else -1,
        lr_scheduler_type="constant" if by_time else "cosine", logging_steps=config.logging_steps,
        save_steps=config.save_steps, save_total_limit=2, seed=config.seed, data_seed=config.seed,
        bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16, report_to="none",
        remove_unused_columns=False, logging_nan_inf_filter=False, dataloader_num_workers=0,
        dataloader_pin_memory=cuda, disable_tqdm=False, use_cpu=not cuda, include_num_input_tokens_seen="non_padding",
        **_version_arguments(TrainingArguments, config, checkpointing, warmup=not by_time))
    if config.pack:
        collator = packed_collator(tokenizer.pad_token_id)
    else:
        collator = DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100)
    own = [TimeLimit(), FiniteGuard(), *([TimeSchedule()] if by_time else [])]
    trainer = Trainer(model=model, args=args, train_dataset=Rows(), data_collator=with_answer_positions(collator),
                      processing_class=tokenizer, compute_loss_func=answer_loss, callbacks=[*own, *callbacks])
    resume_from: str | bool | None = bool(has_checkpoint and resume) or None
    if config.start_step and not resume_from:
        resume_from = str(start_checkpoint(trainer, checkpoints, config.start_step))
        log(f"going on from step {config.start_step} of the seeded epoch with the adapter's weights "
            "(the optimizer's moments start afresh)")
    result = trainer.train(resume_from_checkpoint=resume_from)
    seconds = time.monotonic() - clock["start"]
    tokens_seen = int(trainer.state.num_input_tokens_seen - getattr(trainer, "_initial_num_input_tokens_seen", 0))

    logged = [h for h in trainer.state.log_history if "loss" in h]
    losses = [(int(h["step"]), float(h["loss"])) for h in logged]
    lrs = [h.get("learning_rate") for h in logged]  # the time schedule's too: it is the constant schedule's base
    with open(out / "loss.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "learning_rate"])
        w.writerows((step, loss, lr) for (step, loss), lr in zip(losses, lrs))
    if stopped["diverged"]:
        raise TrainError(f"training diverged: {len(skipped)} of {trainer.state.global_step} optimizer steps had "
                         f"non-finite gradients (steps {skipped[:10]}{' ...' if len(skipped) > 10 else ''}); nothing "
                         f"exported (see {out / 'loss.csv'}; the last finite weights are checkpointed). "
                         "Go on with --attention eager, or start over with a lower --lr or --dtype float32")
    bad = [n for n, p in model.named_parameters() if p.requires_grad and not bool(torch.isfinite(p).all())]
    if bad:
        raise TrainError(f"the adapter holds non-finite weights ({len(bad)} tensors, e.g. {bad[0]}); nothing exported")

    adapter_dir = out / "adapter"
    model.save_pretrained(str(adapter_dir))
    exported = export_lora(adapter_dir, base_gguf, out / "adapter.gguf")
    recorded = config
    if mixed is not None:  # the planning examples' system message, whatever example came first
        system = mixed.get("system_prompt") or ""
        recorded = replace(config, system_name=mixed.get("system_prompt_name", "full"))
    else:
        system = next((m["content"] for m in examples[0] if m["role"] == "system"), "") if examples else ""
    stamp_adapter(exported.path, exported.path, prompt_metadata(recorded, system, data, settings["base_sha256"]))

    _plot_loss(losses, out / "loss.png", f"LoRA r={config.rank} on {base_gguf.name}: {n_examples} examples")
    report = TrainReport(out=out, steps=int(trainer.state.global_step), examples=n_examples, decisions=decisions,
                         tokens_seen=tokens_seen,
                         left_out_too_long=too_long, answer_tokens=answer_tokens, prompt_tokens=prompt_tokens,
                         final_loss=losses[-1][1] if losses else getattr(result, "training_loss", None), seconds=seconds,
                         stopped_by_time=stopped["by_time"], adapter_gguf=exported.path, skipped_steps=skipped)
    record = {**settings, "data": str(data), "dtype_used": dtype_name, "steps": report.steps,
              "max_steps": int(trainer.state.max_steps),
              "examples": report.examples, "decisions": decisions, "sequences": len(rows), "left_out_too_long": too_long,
              "tokens_seen_this_call": tokens_seen,
              "tokens_per_second_this_call": round(tokens_seen / seconds, 2) if seconds > 0 else None,
              "prompt_tokens": prompt_tokens, "answer_tokens": answer_tokens, "final_loss": report.final_loss,
              "seconds_this_call": round(seconds, 1), "stopped_by_time": report.stopped_by_time,
              "skipped_steps": skipped,
              "adapter_gguf_sha256": sha256_file(exported.path), "lora_pairs": exported.pairs,
              "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
              "device": torch.cuda.get_device_name(0) if cuda else "cpu"}
    if started is not None:
        record = carry_lineage(record, started, config.start_step)
    (out / "train.json").write_text(json.dumps(record, indent=1))
    return report
