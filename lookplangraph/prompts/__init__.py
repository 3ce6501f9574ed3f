"""Prompt templates (``lookplangraph/prompts/*.txt``) and how they are filled.

The prompt is two messages: the **static** part (role, scene conventions, the action set with a
one-line contract each, the answer format and two worked examples) is the same bytes for every
step of every task, so a server can keep its KV cache; the **dynamic** part carries the
instruction, the memory-graph serialization, the previous reasons and actions, and feedback.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def template(name: str) -> str:
    """The text of ``prompts/<name>.txt``."""
    return resources.files("lookplangraph").joinpath("prompts", f"{name}.txt").read_text(encoding="utf-8")


def static_prompt() -> str:
    return template("static")


def compact_prompt() -> str:
    """The two-sentence system message of a model fine-tuned on the expert's trajectories
    (``system_prompt = "compact"``; ``distill train --system-prompt compact`` trains with it): no
    action contracts and no examples, which such a model has learned; a fifth of the static
    prompt's tokens."""
    return template("compact").strip()


def dynamic_prompt(instruction: str, scene: str, history: list[tuple[str, str, str]], feedback: str | None) -> str:
    """``history``: (reason, action, result) per accepted action, oldest first."""
    if history:
        steps = "".join(f"\n- {reason or '(no reason)'} -> {action}{f' [{result}]' if result else ''}"
                        for reason, action, result in history)
    else:
        steps = "none."
    fb = f"Feedback on your last answer: {feedback}\n" if feedback else ""
    return template("dynamic").format(instruction=instruction, scene=scene, history=steps, feedback=fb)
