"""The append-only user message (``prompt_layout = "journal"``): each decision's prompt is the
previous one with what happened since appended, so a prefix cache (llama.cpp in process, a
server's prefix caching) serves everything before and evaluates only the new lines.

:meth:`Journal.answered` appends an answer as ``- action`` (``- reason -> action`` when it has a
reason), with ``[done as: ...]`` when corrections added steps and, for a refused answer, a line
``Feedback on your last answer: ...``. :meth:`Journal.prompt` then appends what the view
(:mod:`lookplangraph.agent.view`, text style) shows that it has not shown before: a room
entered for the first time in full, a room entered again as ``Back in``, objects under ``Seen``
when first seen and ``Remembered, not seen yet`` when a prior first shows, nodes whose line
changed under ``Changed``, what the agent holds when that changed, and the search line.
Invariant: nothing written is rewritten; each prompt starts with the previous one.
Concept and an example: ``docs/concepts/loop.md#the-journal-layout``.
"""

from __future__ import annotations

from lookplangraph.agent.prompts import FEEDBACK
from lookplangraph.agent.view import NODE_SECTIONS, entry_line, places_line, render_search


class Journal:
    """One episode's append-only user message (module doc)."""

    def __init__(self, instruction: str):
        self.text = f"Instruction: {instruction}"
        self.written: dict[str, str] = {}  # node -> the last line the journal gave it
        self.remembered: set[str] = set()  # nodes written as remembered, not seen yet
        self.rooms: set[str] = set()  # rooms described in full
        self.room: str | None = None
        self.holding: str | None = None
        self.search: list[str] = []  # the search lines written last
        self.missing: set[str] = set()

    def answered(self, action: str | None, reason: str | None, feedback: str | None, done_as: str = "") -> None:
        """Append an answer: ``action`` as the loop read it (None: unreadable), its ``reason`` if
        any, the steps corrections added (``done_as``) and the ``feedback`` of a refusal."""
        said = action or "(an answer that could not be read)"
        line = f"\n- {f'{reason} -> ' if reason else ''}{said}{f' [{done_as}]' if done_as else ''}"
        self.text += line + (f"\n{FEEDBACK} {feedback}" if feedback else "")

    def prompt(self, shown: dict, missing: dict[str, tuple[str, str, str]] | None = None) -> str:
        """The user message of the next decision: the journal with what ``shown`` (a view of
        :func:`lookplangraph.agent.view.view`, text style) adds appended, then ``Answer:``.
        ``missing``: the memory's objects not found where remembered
        (:attr:`lookplangraph.agent.memory.MemoryGraph.missing`), written once each when the
        view carries no search line for them."""
        if self.room is None:
            self.text += "\n" + places_line(shown)
        parts: list[str] = []
        room, holding = shown["agent"]["room"], shown["agent"]["holding"]
        nodes = [e for key in NODE_SECTIONS for e in shown.get(key, ())]
        entries = {e["name"]: entry_line(e) for e in nodes}
        # what a node is like, whichever room the agent is in (a line of another room adds "in room")
        ident = {e["name"]: entry_line({k: v for k, v in e.items() if k != "room"}) for e in nodes}
        if room != self.room:
            first = room not in self.rooms
            head = f"In {room}" if first else f"Back in {room}"
            if self.room is None or holding != self.holding:
                head += f", holding {holding or 'nothing'}"
            parts.append(head + ".")
            if first:
                self.rooms.add(room)
                for key, title in (("assets", "Assets here"), ("objects", "Seen here"),
                                   ("remembered", "Remembered here, not seen yet"),
                                   ("recalled", "The instruction names, remembered elsewhere"),
                                   ("named_assets", "The instruction names, in other rooms")):
                    lines = [entries[e["name"]] for e in shown.get(key, ())]
                    if lines:
                        parts.append(f"{title}: " + "; ".join(lines) + ".")
                    self.written.update({e["name"]: ident[e["name"]] for e in shown.get(key, ())})
                    if key in ("remembered", "recalled"):
                        self.remembered.update(e["name"] for e in shown.get(key, ()))
            self.room = room
        elif holding != self.holding:
            parts.append(f"Holding {holding or 'nothing'}.")
        self.holding = holding
        unseen = {e["name"] for key in ("remembered", "recalled") for e in shown.get(key, ())}
        fresh = [n for n in entries if n not in self.written or self.written[n] != ident[n]]
        seen = [n for n in fresh if n not in unseen and (n not in self.written or n in self.remembered)]
        recalled = [n for n in fresh if n in unseen]
        changed = [n for n in fresh if n not in seen and n not in recalled]
        for title, names in (("Seen", seen), ("Remembered, not seen yet", recalled), ("Changed", changed)):
            if names:
                parts.append(f"{title}: " + "; ".join(entries[n] for n in names) + ".")
        self.written.update({n: ident[n] for n in fresh})
        self.remembered = (self.remembered - set(seen)) | set(recalled)
        search = render_search(shown)
        if search and search != self.search:
            parts += search
            self.search = search
        elif not search:
            gone = [n for n in (missing or {}) if n not in self.missing]
            if gone:
                parts.append("Not found where remembered: " + ", ".join(
                    f"{n} (was {missing[n][0]} {missing[n][1]})" for n in gone) + ".")
        self.missing |= set(missing or ())
        if parts:
            self.text += "\n" + " ".join(parts)
        return self.text + "\nAnswer:"
