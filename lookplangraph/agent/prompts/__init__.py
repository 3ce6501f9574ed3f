"""Prompt templates (``lookplangraph/agent/prompts/*.txt``) and how they are filled.

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
    return resources.files("lookplangraph").joinpath("agent", "prompts", f"{name}.txt").read_text(encoding="utf-8")


def static_prompt() -> str:
    return template("static")


def compact_prompt() -> str:
    """The two-sentence system message of a model fine-tuned on the expert's trajectories
    (``system_prompt = "compact"``; ``distill train --system-prompt compact`` trains with it): no
    action contracts and no examples, which such a model has learned; a fifth of the static
    prompt's tokens."""
    return template("compact").strip()


#: how every prompt layout reports a refused or unreadable answer (the privileged expert reads it)
FEEDBACK = "Feedback on your last answer:"

#: the planner's ``system_prompt`` settings that name a system message (``auto`` chooses one)
SYSTEM_PROMPTS = ("full", "compact")


def system_prompt(name: str) -> str:
    """The text of the system message ``name`` (one of :data:`SYSTEM_PROMPTS`): ``full`` the static
    prompt, ``compact`` the trained model's two sentences."""
    if name not in SYSTEM_PROMPTS:
        raise ValueError(f"unknown system prompt {name!r}; known: {', '.join(SYSTEM_PROMPTS)}")
    return static_prompt() if name == "full" else compact_prompt()


#: Orders of the user message (the ``prompt_layout`` setting). ``scene-history``: instruction,
#: scene, previous steps, feedback (``auto``'s choice when no adapter records one). ``history-scene``:
#: instruction, the list of places, previous steps, then the rest of the scene and feedback: what
#: stays the same within an episode comes first and the history only grows at its end, so a
#: backend's prefix cache (llama.cpp in process, a server's prefix caching) serves all of it and
#: evaluates only the scene of this step and the feedback anew. ``journal``: append-only, each
#: prompt the previous one with what happened since (:mod:`lookplangraph.agent.journal`; the loop
#: writes it, not :func:`dynamic_prompt`). ``conversation``: the journal's lines as a chat, each
#: answer an assistant turn exactly as the model gave it and what became of it the next user turn
#: (:mod:`lookplangraph.agent.conversation`): an episode is one conversation, trained whole.
PROMPT_LAYOUTS = ("scene-history", "history-scene", "journal", "conversation")


def dynamic_prompt(instruction: str, scene: str, history: list[tuple[str, str, str]], feedback: str | None,
                   layout: str = "scene-history") -> str:
    """The user message of one decision. ``history``: (reason, action, result) per accepted
    action, oldest first (a step without a reason is written as its action alone); ``layout``
    one of :data:`PROMPT_LAYOUTS` (``history-scene`` moves the scene's first line, the places,
    before the history)."""
    if history:
        steps = "".join(f"\n- {f'{reason} -> ' if reason else ''}{action}{f' [{result}]' if result else ''}"
                        for reason, action, result in history)
    else:
        steps = "none."
    fb = f"{FEEDBACK} {feedback}\n" if feedback else ""
    if layout == "scene-history":
        return template("dynamic").format(instruction=instruction, scene=scene, history=steps, feedback=fb)
    if layout in ("journal", "conversation"):
        raise ValueError(f"the {layout} layout is written step by step (lookplangraph.agent.journal, "
                         "lookplangraph.agent.conversation)")
    if layout != "history-scene":
        raise ValueError(f"unknown prompt layout {layout!r}; layouts: {', '.join(PROMPT_LAYOUTS)}")
    first, _, rest = scene.partition("\n")
    places, scene = (first, rest) if first.startswith("Places:") else ("", scene)
    return template("dynamic_history_first").format(instruction=instruction, places=places, scene=scene,
                                                    history=steps, feedback=fb)
