"""Retrieved demonstrations: the k train-pool trajectories most like the episode's task, written
compactly before it in the prompt (they help the planner without training a model).

* A :class:`Demonstration` is one solved episode of the train pool: its instruction, its rooms and
  the accepted actions with what ``discover_objects`` saw (:mod:`lookplangraph.distill.teacher.expert`
  writes them; ``lookplangraph distill data`` builds the file).
* :class:`DemonstrationIndex` ranks them with BM25 (``rank-bm25``'s ``BM25Okapi``) over the words
  of the instruction and the classes of the rooms; the query is the episode's instruction and
  rooms. Ties keep the file's order. Nothing of the ranking is hand-written.
* :func:`demonstration_block` writes the chosen ones compactly, cut to ``max_chars`` (whole
  steps are dropped from the middle of a long one first, then whole demonstrations).

The planner puts the block at the end of the *system* message (``demonstrations = k`` in
:class:`~lookplangraph.planners.config.PlannerConfig`): it is the same at every step of an
episode, so a backend that caches prefixes evaluates it once per episode.

**Held out**: a demonstration file must hold only train-pool tasks (:mod:`grasif.heldout`); the
index refuses one that holds an evaluation task or a sibling of one (:class:`LeakError`), and a
test checks the shipped file.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Sequence

#: the demonstrations shipped with the package (``lookplangraph/agent/prompts/``): the expert's episodes
#: of the train pool (``lookplangraph distill data`` writes them)
DEFAULT_FILE = "demonstrations_v1.jsonl.gz"

_WORD = re.compile(r"[a-z]+")
_STOP = frozenset("a an the to of and or in on into onto it its is be with for from at by this that then "
                  "your you my me up".split())


class LeakError(ValueError):
    """A demonstration of an evaluation task (or of its sibling) was offered to the index."""


@dataclass(frozen=True)
class Demonstration:
    """One solved train-pool episode. ``steps``: one line per accepted action (``action`` and, for
    ``discover_objects``, ``-> saw ...``); ``rooms``: the classes of the scene's rooms."""

    task_id: str
    split: str
    seed: int | None
    instruction: str
    rooms: tuple[str, ...]
    steps: tuple[str, ...]

    @classmethod
    def from_dict(cls, d: dict) -> "Demonstration":
        return cls(d["task_id"], d["split"], d.get("seed"), d["instruction"], tuple(d.get("rooms", ())),
                   tuple(d["steps"]))

    def as_dict(self) -> dict:
        return {"task_id": self.task_id, "split": self.split, "seed": self.seed, "instruction": self.instruction,
                "rooms": list(self.rooms), "steps": list(self.steps)}


def words(text: str) -> list[str]:
    """The lower-case words of ``text`` without stop words (``coffee_table`` gives coffee, table)."""
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def read_jsonl_text(path: str | Path | None, shipped: tuple[str, ...], what: str, how: str) -> str:
    """The text of a JSON-lines file (``.gz`` read as gzip); None: the package's gzipped file at
    ``shipped`` (its path parts under ``lookplangraph/``). A missing file raises
    ``FileNotFoundError``: "no WHAT PATH; HOW"."""
    if path is None:
        return gzip.decompress(resources.files("lookplangraph").joinpath(*shipped).read_bytes()).decode("utf-8")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no {what} {p}; {how}")
    return gzip.decompress(p.read_bytes()).decode("utf-8") if p.suffix == ".gz" else p.read_text("utf-8")


def write_jsonl(rows: Iterable[dict], path: Path) -> int:
    """Write ``rows`` as JSON lines (gzip when ``path`` ends in ``.gz``), whole to a ``.part`` file
    moved into place; their number."""
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    tmp.replace(path)
    return len(lines)


def best_distinct(scores: Sequence[float], items: Sequence, k: int, key: Callable) -> list:
    """The ``k`` items of highest score, one per ``key(item)`` (the best-scoring one), best first;
    ties keep the items' order; none for ``k <= 0``."""
    out, seen = [], set()
    for i in sorted(range(len(items)), key=lambda i: -scores[i]):
        if len(out) >= k:
            break
        if key(items[i]) not in seen:
            seen.add(key(items[i]))
            out.append(items[i])
    return out


def read_demonstrations(path: str | Path | None = None) -> list[Demonstration]:
    """The demonstrations of a JSONL file (``.gz`` read as gzip); None: the shipped file."""
    text = read_jsonl_text(path, ("agent", "prompts", DEFAULT_FILE), "demonstration file",
                           "build one with `lookplangraph distill data`")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(Demonstration.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path or DEFAULT_FILE}, line {n}: not a demonstration ({exc})") from None
    return out


def write_demonstrations(demos: Iterable[Demonstration], path: Path) -> int:
    """Write ``demos`` as JSONL (gzip when ``path`` ends in ``.gz``), atomically; their number."""
    return write_jsonl((d.as_dict() for d in demos), path)


class DemonstrationIndex:
    """BM25 over the demonstrations' instructions and rooms (module doc). ``is_held_out(split,
    task_id)`` says which tasks may not be demonstrations; a demonstration of one raises
    :class:`LeakError`."""

    def __init__(self, demos: list[Demonstration], is_held_out=None):
        from rank_bm25 import BM25Okapi

        if is_held_out is not None:
            leaked = sorted({f"{d.split}/{d.task_id}" for d in demos if is_held_out(d.split, d.task_id)})
            if leaked:
                raise LeakError(f"{len(leaked)} demonstration(s) of held-out tasks: {', '.join(leaked[:5])}")
        if not demos:
            raise ValueError("no demonstrations to retrieve from")
        self.demos = demos
        self._bm25 = BM25Okapi([self._doc(d.instruction, d.rooms) for d in demos])

    @staticmethod
    def _doc(instruction: str, rooms: Iterable[str]) -> list[str]:
        return words(instruction) + [f"room:{r}" for r in rooms]

    def top(self, instruction: str, rooms: Iterable[str], k: int) -> list[Demonstration]:
        """The ``k`` best by BM25 score, one per task (the best-scoring episode of a task), best first."""
        scores = self._bm25.get_scores(self._doc(instruction, rooms))
        return best_distinct(scores, self.demos, k, lambda d: (d.split, d.task_id))


def demonstration_block(demos: list[Demonstration], max_chars: int = 2400) -> str:
    """The demonstrations as prompt text, within ``max_chars`` (module doc); empty for none."""
    if not demos:
        return ""
    budget = max(0, max_chars - 120) // len(demos)
    parts = []
    for n, d in enumerate(demos, 1):
        head = f"Solved example {n} (another home; rooms: {', '.join(d.rooms)})\nInstruction: {d.instruction}\n"
        steps = [f"{i}. {s}" for i, s in enumerate(d.steps, 1)]
        text = head + "\n".join(steps)
        keep = len(steps) - 1
        while len(text) > budget and keep > 2:  # drop whole steps from the middle
            keep -= 1
            text = head + "\n".join(steps[:keep // 2] + ["..."] + steps[len(steps) - (keep - keep // 2):])
        parts.append(text[:budget] if len(text) > budget else text)
    return ("Solved examples from other homes (the same kind of robot; names there are not names here):\n\n"
            + "\n\n".join(parts))
