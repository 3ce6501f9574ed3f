"""Training throughput by data layout: whole conversations against their one-decision examples (run by hand).

The same episodes four ways, each trained for ``--steps`` optimizer steps of ``distill train``
(LoRA on the base GGUF, the settings below) in a process of its own, so that its peak memory is
its own: ``conversation`` (one episode a sequence, every trained answer in one pass),
``conversation, packed`` (episodes sharing sequences of ``--max-length`` tokens) and
``decisions`` (each trained answer with the conversation up to it: the same tokens per answer,
one prompt at a time, as one-decision data trains), and ``conversation, logits at every
position`` (the first, with every position projected onto the vocabulary, as training did before
:mod:`lookplangraph.distill.training.answer_logits`: the same loss, more time and memory). Optionally a fifth source, ``--also DIR``:
data of another layout (today's ``scene-history`` examples of the same tasks). Prints a Markdown
table: the whole data's tokens per trained decision (all its tokens over its trained answers),
the tokens trained on a seeded sample (``--sample`` conversations; ``--also``: 200 examples),
seconds of training (loading and tokenizing left out), tokens/s, decisions an hour (tokens/s
over the whole data's tokens a decision) and peak memory.

    .venv/bin/python benchmarks/bench_train_layouts.py --data runs/s67/conv_v1 --steps 3 \\
        --init-adapter lpg-v5 --also runs/s67/sh_v1
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lookplangraph.agent.prompts import compact_prompt  # noqa: E402
from lookplangraph.distill.planning.conversations import decisions  # noqa: E402
from lookplangraph.distill.training import sft  # noqa: E402


def one(args: argparse.Namespace) -> None:
    """Child: one training run; prints its record as JSON. Batches are drawn in the seeded shuffle's
    order, not grouped by length (the Trainer's grouping puts the longest rows first, and a few
    steps of the longest rows would not show the data's speed)."""
    version_arguments = sft._version_arguments

    def ungrouped(*a, **kw):
        out = version_arguments(*a, **kw)
        out.pop("group_by_length", None)
        if out.get("train_sampling_strategy") == "group_by_length":
            out["train_sampling_strategy"] = "random"
        return out
    sft._version_arguments = ungrouped
    if args.all_logits:
        import torch

        def every_position_loss(outputs, labels, num_items_in_batch=None):
            logits, target = outputs.logits.float()[:, :-1], labels[:, 1:]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                     ignore_index=-100, reduction="sum")
            return loss / (num_items_in_batch if num_items_in_batch is not None else (target != -100).sum())
        # train() reads both names from sft's namespace
        sft.with_answer_positions = lambda collate: collate  # no logits_to_keep: every position is projected
        sft.answer_loss = every_position_loss
    config = sft.TrainConfig(rank=16, alpha=32.0, learning_rate=1e-4, max_steps=args.steps, batch_size=1,
                             grad_accum=args.grad_accum, max_length=args.max_length, dtype=args.dtype,
                             gradient_checkpointing=args.checkpointing, save_steps=10_000, logging_steps=1,
                             system=compact_prompt(), system_name="compact", init_adapter=args.init_adapter,
                             pack=args.pack, seed=0)
    report = sft.train(args.child, args.base, args.out, config, log=lambda _: None)
    record = json.loads((Path(args.out) / "train.json").read_text())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024
    print(json.dumps({"seconds": report.seconds, "tokens": record["tokens_seen_this_call"], "peak_gb": peak}))


def tokens_per_decision(examples: list[list[dict]], base: str) -> float:
    """All tokens of ``examples`` (rendered as trained: the compact system message, the chat
    template llama.cpp applies) over their trained answers."""
    from lookplangraph.lm.llamacpp import LlamaCppBackend

    vocab = LlamaCppBackend(base, vocab_only=True)
    tokens = sum(len(vocab.prompt_tokens(sft.with_system([{"role": m["role"], "content": m["content"]} for m in ex],
                                                          compact_prompt()))) for ex in examples)
    answers = sum(1 for ex in examples for m in ex if m["role"] == "assistant" and m.get("train", True))
    return tokens / answers


def write(rows: list[list[dict]], path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "sft.jsonl").write_text("".join(json.dumps({"messages": m}) + "\n" for m in rows))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="distill data in the conversation layout")
    ap.add_argument("--also", help="data of another layout, trained the same way for comparison")
    ap.add_argument("--base", default="qwen2.5-coder-1.5b")
    ap.add_argument("--init-adapter", default=None, help="start adapter (a file or a registry name)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--grad-accum", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=3072)
    ap.add_argument("--dtype", default="auto", help="as distill train's (default auto)")
    ap.add_argument("--checkpointing", default="off")
    ap.add_argument("--sample", type=int, default=64, help="conversations drawn (seeded) for the runs")
    ap.add_argument("--only", help="run only the sources whose name starts with this")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--pack", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--all-logits", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return one(args)
    from lookplangraph.lm import embedded

    base = str(embedded.model_file(args.base))
    init = args.init_adapter
    if init and not Path(init).is_file():
        from lookplangraph.lm.llamacpp import resolve_adapter

        init = str(resolve_adapter(args.base, init))
    whole = sft.read_examples(args.data)
    chats = list(whole)
    random.Random(0).shuffle(chats)
    chats = chats[: args.sample]
    tmp = Path(tempfile.mkdtemp(prefix="bench_train_"))
    conv = write(chats, tmp / "conv")
    # name -> (the sample's directory, packed, the whole data's tokens a decision, logits at every position)
    per_conversation = tokens_per_decision(whole, base)
    sources = {"conversation": (conv, False, per_conversation, False),
               "conversation, packed": (conv, True, per_conversation, False),
               "decisions": (write([d for c in chats for d in decisions(c)], tmp / "dec"), False,
                             tokens_per_decision([d for c in whole for d in decisions(c)], base), False),
               "conversation, logits at every position": (conv, False, per_conversation, True)}
    if args.also:
        other = sft.read_examples(args.also)
        sample = list(other)
        random.Random(0).shuffle(sample)
        sample = sample[:200]
        sources[f"{Path(args.also).name} (its own layout)"] = (write(sample, tmp / "also"), False,
                                                                tokens_per_decision(other, base), False)
    print(f"base {args.base}, start {args.init_adapter or 'fresh'}, {args.steps} steps of batch 1 x {args.grad_accum}, "
          f"max_length {args.max_length}, {args.dtype}, checkpointing {args.checkpointing}\n")
    print("| data | tokens a decision | tokens trained | seconds | tokens/s | decisions/hour | peak GB |\n"
          "|---|---|---|---|---|---|---|")
    for i, (name, (path, pack, per, all_logits)) in enumerate(sources.items()):
        if args.only and not name.startswith(args.only):
            continue
        cmd = [sys.executable, __file__, "--data", args.data, "--child", str(path), "--out", str(tmp / f"run{i}"),
               "--base", base, "--steps", str(args.steps), "--grad-accum", str(args.grad_accum),
               "--max-length", str(args.max_length), "--dtype", args.dtype, "--checkpointing", args.checkpointing,
               *(["--init-adapter", init] if init else []), *(["--pack"] if pack else []),
               *(["--all-logits"] if all_logits else [])]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"| {name} | failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode} |")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        speed = r["tokens"] / r["seconds"]  # decisions an hour: at this speed, over the whole data's tokens a decision
        print(f"| {name} | {per:.0f} | {r['tokens']} | {r['seconds']:.0f} | {speed:.1f} | "
              f"{speed * 3600 / per:.0f} | {r['peak_gb']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
