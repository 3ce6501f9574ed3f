"""The episode as one chat (``prompt_layout = "conversation"``): user turns say what happened,
assistant turns are the model's answers exactly as it gave them.

The first user turn is the instruction and the view (the journal's opening,
:mod:`lookplangraph.agent.journal`); after each answer the next user turn starts with its
outcome — ``Done.``, ``Done as: STEPS.`` when corrections added steps, ``Feedback on your last
answer: ...`` for a refusal or an unreadable answer — followed by what the view shows that it has
not shown before (the journal's lines: rooms entered, objects seen, nodes changed, the search
line). Invariant: nothing written is rewritten, so decision *k*'s prompt is the first *k* user
turns and *k − 1* answers of the conversation, and a backend's prefix cache (llama.cpp in
process, a server's prefix caching) holds everything but the newest user turn. Training data in
this layout is one conversation per episode (:mod:`lookplangraph.distill.planning.conversations`).
Concept and an example: ``docs/concepts/loop.md#the-conversation-layout``.
"""

from __future__ import annotations

from lookplangraph.agent.journal import Journal
from lookplangraph.agent.prompts import FEEDBACK


def outcome_line(accepted: bool, feedback: str | None, done_as: str = "") -> str:
    """The first line of the user turn after an answer: ``Done.`` / ``Done as: STEPS.`` for an
    accepted one (``done_as``: the loop's ``done as: ...`` text, empty when the action ran as it
    was), then ``Feedback on your last answer: ...`` when there is feedback."""
    parts = []
    if accepted:
        steps = done_as.removeprefix("done as: ")
        parts.append(f"Done as: {steps}." if steps else "Done.")
    if feedback:
        parts.append(f"{FEEDBACK} {feedback}")
    return " ".join(parts) if parts else f"{FEEDBACK} the answer was not carried out"


class Conversation:
    """One episode's chat (module doc): :meth:`prompt` gives the turns of the next decision,
    :meth:`answered` records the answer and what became of it."""

    def __init__(self, instruction: str):
        self.journal = Journal(instruction)
        self.turns: list[dict[str, str]] = []  # user and assistant turns so far, oldest first
        self._taken = 0  # how much of the journal's text the turns hold
        self._outcome: str | None = None  # the outcome line of the last answer, for the next user turn

    def prompt(self, shown: dict, missing: dict[str, tuple[str, str, str]] | None = None) -> list[dict[str, str]]:
        """The turns after the system message for the next decision: every earlier turn as it
        was, then the new user turn (the outcome of the last answer and what ``shown``, a text
        view of :func:`lookplangraph.agent.view.view`, adds; ``missing`` as for
        :meth:`Journal.prompt`)."""
        self.journal.prompt(shown, missing)
        return self.prompt_turns()

    def answered(self, text: str, accepted: bool, feedback: str | None, done_as: str = "") -> None:
        """Record the answer ``text`` (the reply exactly as the model gave it) to the turn of the
        last :meth:`prompt`, and its outcome (:func:`outcome_line`) for the next user turn."""
        turns = self.prompt_turns()
        self.turns = [*turns, {"role": "assistant", "content": text}]
        self._taken = len(self.journal.text)
        self._outcome = outcome_line(accepted, feedback, done_as)

    def prompt_turns(self) -> list[dict[str, str]]:
        """The turns of the last :meth:`prompt` without asking the view again."""
        new = self.journal.text[self._taken:]
        content = new if self._outcome is None else self._outcome + new
        return [*self.turns, {"role": "user", "content": content}]
