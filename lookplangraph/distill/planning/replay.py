"""A DAgger round's recorded student, replayed (:class:`RecordedStudent`): relabelling a round with
another teacher without running the student's LM again.

``distill dagger --student replay:DIR`` reads DIR's ``dagger_episodes.jsonl`` and rolls out, in
its order, each of DIR's episodes with the answers the student gave there, the new round's expert
labelling every state (:func:`~lookplangraph.distill.planning.dagger.run_round`). An episode line
keeps the student's answers (``answers``); for a round recorded before that, they are read back
from DIR's ``sft.jsonl`` (the student's chat, else the branch of its last state with the student's
action there), and an episode whose answers cannot be read back is left out (counted).

The replay is the same episode only where the loop asks for exactly the recorded answers: where
it asks for more (this code ends the episode later) the replay answers ``done()``, where it asks
for fewer something ended it sooner; either way :attr:`RecordedStudent.diverged` is true and the
round writes no example of that episode. See ``docs/guides/distillation.md#relabelling-a-round``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sgs.actions import make, parse_action

from lookplangraph.lm import Completion

#: the student spec that replays a round: ``replay:DIR``
PREFIX = "replay:"


def round_key(split: str, task_id: str, seed: int | None) -> str:
    """An episode's key in a DAgger round's files: ``split/task_id@static|seed``."""
    return f"{split}/{task_id}@{'static' if seed is None else seed}"


class ReplayError(ValueError):
    """A directory that holds no DAgger round to replay."""


class RecordedStudent:
    """The answers a DAgger round's student gave, episode by episode (module doc): :meth:`begin`
    an episode by its key, then ``complete()`` gives its answers in order."""

    def __init__(self, source: Path) -> None:
        source = Path(source)
        episodes = source / "dagger_episodes.jsonl"
        if not episodes.exists():
            raise ReplayError(f"{source} holds no DAgger round to replay (no dagger_episodes.jsonl)")
        lines = [json.loads(line) for line in episodes.read_text().splitlines() if line.strip()]
        lines = [ep for ep in lines if ep.get("replay") != "diverged"]
        chats = _chats(source / "sft.jsonl") if any("answers" not in ep for ep in lines) else {}
        self.answers: dict[str, list[str]] = {}
        self.episodes: list[tuple[str, str, int | None]] = []  # (split, task id, seed) of each, in order
        self.unrecoverable: list[str] = []  # episodes whose answers could not be read back
        for ep in lines:
            texts = ep.get("answers") or _read_back(ep, chats.get(ep["key"], []))
            if texts is None:
                self.unrecoverable.append(ep["key"])
            else:
                self.answers[ep["key"]] = texts
                self.episodes.append((ep["split"], ep["task_id"], ep["seed"]))
        students = sorted({ep.get("student", "?") for ep in lines})
        self.name = f"{' + '.join(students) or 'no student'}, replayed from {source}"
        self._queue: list[str] = []
        self._overrun = False

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()  # it decodes nothing

    def begin(self, key: str) -> None:
        """Replay the episode ``key`` (``split/task_id@static|seed``) from its first answer."""
        if key not in self.answers:
            raise ReplayError(f"no recorded answers for {key}")
        self._queue, self._overrun = list(self.answers[key]), False

    @property
    def diverged(self) -> bool:
        """The episode asked for more answers than were recorded, or ended with some unused."""
        return self._overrun or bool(self._queue)

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        if not self._queue:
            self._overrun = True
            return Completion(text=json.dumps(make("done").model_dump()))
        return Completion(text=self._queue.pop(0))


def _chats(sft: Path) -> dict[str, list[dict[str, Any]]]:
    """A round's ``sft.jsonl`` lines by episode key."""
    out: dict[str, list[dict[str, Any]]] = {}
    if sft.exists():
        for line in sft.read_text().splitlines():
            if line.strip():
                x = json.loads(line)
                m = x.get("meta", {})
                if m.get("source") == "dagger":
                    out.setdefault(round_key(m["split"], m["task_id"], m.get("seed")), []).append(x)
    return out


def _read_back(episode: dict[str, Any], lines: list[dict[str, Any]]) -> list[str] | None:
    """The student's answers of a round recorded before episodes kept them (module doc); None
    where the examples do not hold them all."""
    def said(x: dict[str, Any]) -> list[str]:
        return [m["content"] for m in x["messages"] if m["role"] == "assistant"]

    states = episode.get("states", 0)
    for x in lines:
        if x["meta"].get("kind") == "student" and len(said(x)) == states:
            return said(x)
    last = [x for x in lines if x["meta"].get("step") == states and x["meta"].get("student_action")]
    if not last:
        return None
    try:
        action = parse_action(last[0]["meta"]["student_action"])
    except ValueError:
        return None
    return said(last[0])[:states - 1] + [json.dumps(action.model_dump())]
