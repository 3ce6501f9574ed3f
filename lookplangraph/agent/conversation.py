"""The episode as one chat (``prompt_layout = "conversation"``): user turns say what happened,
assistant turns are the model's answers exactly as it gave them.

The first user turn is the instruction and the view (the journal's opening,
:mod:`lookplangraph.agent.journal`); after each answer the next user turn starts with its
outcome — ``Done.``, ``Done as: STEPS.`` when corrections added steps, ``Feedback on your last
answer: ...`` for a refusal or an unreadable answer — followed by what the view shows that it has
not shown before (the journal's lines: rooms entered, objects seen, nodes changed, the search
line). An answer of several actions (``actions_per_answer``) is one assistant turn; the view's
news after each action it carried out (:meth:`Conversation.saw`) go into the next user turn, in
order, after the outcome of the last action tried (:func:`outcome_line`). Invariant: nothing
written is rewritten, so decision *k*'s prompt is the first *k* user turns and *k − 1* answers of
the conversation, and a backend's prefix cache (llama.cpp in
process, a server's prefix caching) holds everything but the newest user turn. Training data in
this layout is one conversation per episode (:mod:`lookplangraph.distill.planning.conversations`).
Concept and an example: ``docs/concepts/loop.md#the-conversation-layout``.
"""

from __future__ import annotations

from lookplangraph.agent.journal import Journal
from lookplangraph.agent.prompts import FEEDBACK


def outcome_line(accepted: bool, feedback: str | None, done_as: str = "", not_done: tuple[str, ...] = ()) -> str:
    """The first line of the user turn after an answer: ``Done.`` / ``Done as: STEPS.`` for an
    accepted one (``done_as``: the loop's ``done as: ...`` text, empty when the action ran as it
    was), then ``Feedback on your last answer: ...`` when there is feedback. For an answer of
    several actions it is the outcome of the last one tried (every one before it was done as it
    was written), then ``Not carried out: ...`` for those after it (``not_done``)."""
    parts = []
    if accepted:
        steps = done_as.removeprefix("done as: ")
        parts.append(f"Done as: {steps}." if steps else "Done.")
    if feedback:
        parts.append(f"{FEEDBACK} {feedback}")
    if not parts:
        parts.append(f"{FEEDBACK} the answer was not carried out")
    if not_done:
        parts.append(f"Not carried out: {', '.join(not_done)}.")
    return " ".join(parts)


class Conversation:
    """One episode's chat (module doc): :meth:`prompt` gives the turns of the next decision,
    :meth:`answered` records the answer and what became of it."""

    def __init__(self, instruction: str):
        self.journal = Journal(instruction)
        self.turns: list[dict[str, str]] = []  # user and assistant turns so far, oldest first
        self._taken = 0  # how much of the journal's text the turns hold
        self._asked = 0  # the journal's length at the last prompt: its news after that are the next turn's
        self._outcome: str | None = None  # the outcome line of the last answer, for the next user turn

    def prompt(self, shown: dict, missing: dict[str, tuple[str, str, str]] | None = None) -> list[dict[str, str]]:
        """The turns after the system message for the next decision: every earlier turn as it
        was, then the new user turn (the outcome of the last answer and what ``shown``, a text
        view of :func:`lookplangraph.agent.view.view`, adds; ``missing`` as for
        :meth:`Journal.prompt`)."""
        self.journal.prompt(shown, missing)
        self._asked = len(self.journal.text)
        return self.prompt_turns()

    def saw(self, shown: dict, missing: dict[str, tuple[str, str, str]] | None = None) -> None:
        """Take what ``shown`` adds to the view between two actions of one answer, for the next
        user turn (after the answer's outcome), without a decision."""
        self.journal.prompt(shown, missing)

    def answered(self, text: str, accepted: bool, feedback: str | None, done_as: str = "",
                 not_done: tuple[str, ...] = ()) -> None:
        """Record the answer ``text`` (the reply exactly as the model gave it) to the turn of the
        last :meth:`prompt`, and its outcome (:func:`outcome_line`) for the next user turn."""
        turns = self._turns_to(self._asked)
        self.turns = [*turns, {"role": "assistant", "content": text}]
        self._taken = self._asked
        self._outcome = outcome_line(accepted, feedback, done_as, not_done)

    def prompt_turns(self) -> list[dict[str, str]]:
        """The turns of the last :meth:`prompt` without asking the view again."""
        return self._turns_to(self._asked)

    def _turns_to(self, end: int) -> list[dict[str, str]]:
        new = self.journal.text[self._taken:end]
        content = new if self._outcome is None else self._outcome + new
        return [*self.turns, {"role": "user", "content": content}]
