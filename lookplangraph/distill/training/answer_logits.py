"""The training loss read from the answer positions' logits only.

A planning conversation is mostly prompt: its trained tokens (the answers) are about one in ten.
The Trainer's causal-LM loss projects every position onto the vocabulary, although it reads only
the positions that predict a trained token. :func:`with_answer_positions` adds those positions to
each batch as ``logits_to_keep`` (so the model projects only them) and :func:`answer_loss`, the
Trainer's ``compute_loss_func``, computes the same number from them: next-token cross-entropy
summed over the trained labels and divided by the step's trained tokens
(``num_items_in_batch``). The loss and its gradient are those over every position's logits
(``tests/test_distill_train.py``); see ``docs/guides/distillation.md``.
"""

from __future__ import annotations

from typing import Any, Callable


def answer_positions(labels: Any) -> Any:
    """The positions ``p`` of a batch's ``labels`` (``(batch, length)``, -100 where not trained)
    whose next token ``labels[:, p + 1]`` is trained in some row, as a 1-D tensor: the only
    positions whose logits the loss reads (:func:`answer_loss`). A batch with no trained token
    keeps position 0, whose target is masked (a zero loss)."""
    import torch

    keep = (labels[:, 1:] != -100).any(dim=0).nonzero().flatten()
    return keep if keep.numel() else torch.zeros(1, dtype=torch.long, device=labels.device)


def with_answer_positions(collate: Callable[[list[Any]], Any]) -> Callable[[list[Any]], Any]:
    """``collate`` whose batches also hold ``logits_to_keep``: :func:`answer_positions` of their
    labels, so the model projects only those positions onto the vocabulary. A conversation's
    prompt tokens are most of its tokens (nine in ten in the planning sets), and for the 1.5B the
    vocabulary projection is about a sixth of a position's forward multiply-adds, its logits the
    largest tensors of a step (1.9 GB in float32 at 3,072 tokens, as much again for their
    gradient)."""
    def collate_kept(rows: list[Any]) -> Any:
        batch = collate(rows)
        batch["logits_to_keep"] = answer_positions(batch["labels"])
        return batch
    return collate_kept


def answer_loss(outputs: Any, labels: Any, num_items_in_batch: Any = None) -> Any:
    """The Trainer's causal-LM loss (next-token cross-entropy over the trained labels, summed and
    divided by ``num_items_in_batch``, the trained tokens of the whole accumulated step, or by this
    batch's where None) from ``outputs.logits`` computed at :func:`answer_positions` only
    (``(batch, positions, vocabulary)``): the same number as the loss over every position's logits."""
    import torch

    keep = answer_positions(labels)
    target = labels[:, 1:][:, keep]
    logits = outputs.logits.float()
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                             ignore_index=-100, reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else (target != -100).sum().clamp(min=1)
    return loss / count
