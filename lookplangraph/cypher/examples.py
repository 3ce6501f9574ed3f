"""Worked examples for the Cypher agent: the training questions (or instructions) most like the
one asked, each with the gold query that answered it in its own building (and, for an
instruction, the goal), written at the end of the agent's system prompt
(``AgentConfig.worked_examples = k`` for questions, ``worked_goals = k`` for instructions).

* :class:`WorkedExample`: one question or instruction of the Cypher training data as it was
  asked, with the first query of its gold turns and, for an instruction, the goal; ``building``
  is :func:`~.benchmark.building` of its scene's task (``generated`` for a generated building).
* :func:`examples_from_training` reads them off ``sft.jsonl`` files of ``cypher-data``;
  ``lookplangraph cypher-examples`` writes the shipped file (:data:`DEFAULT_FILE`).
* :class:`ExampleIndex` ranks one kind with BM25 over the words asked and gives the ``k`` best of
  distinct templates (questions) or distinct scenes (instructions).
* :func:`example_block` writes them as prompt text.

Invariant (held out): an example comes from a generated building or a development building on a
planning train-pool scene; :class:`ExampleIndex` refuses any other (:class:`LeakError`), and
the reworded evaluation phrasings are never in an example. Docs: ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from grasif.heldout import in_train_pool
from lookplangraph.agent.demonstrations import LeakError, best_distinct, read_jsonl_text, words, write_jsonl
from lookplangraph.cypher.benchmark import dev_buildings

#: the worked examples shipped with the package (``lookplangraph/cypher/data/``)
DEFAULT_FILE = "examples.v1.jsonl.gz"
#: the building of every generated scene
GENERATED = "generated"


#: the kinds of example: a question (:mod:`.qa`) or an instruction to ground (:mod:`.grounding`)
KINDS = ("qa", "grounding")


@dataclass(frozen=True)
class WorkedExample:
    """One training question (or instruction) as asked, the first query of its gold turns, for an
    instruction the goal as JSON text (``answer``), and where it comes from. ``template`` is the
    question's template, ``grounding`` for an instruction."""

    question: str
    query: str
    template: str
    split: str
    scene: str
    building: str
    kind: str = "qa"
    answer: str = ""


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def examples_from_training(paths: Iterable[str | Path], buildings: dict[tuple[str, str], str]) -> list[WorkedExample]:
    """The gold questions (``meta.source == "cypher-gold"``) and grounded instructions
    (``cypher-gold-grounding``) of ``cypher-data`` ``sft.jsonl`` files (``.gz`` read as gzip), one
    per distinct text, in the files' order: the text as the data asked it, the query of its first
    assistant turn and, for an instruction, the goal of its answer turn (an instruction without
    one is passed over). ``buildings`` maps ``(split, scene)`` of every GraSIF scene to its
    building; a scene of a ``generated-*`` split is ``generated``. A scene of neither raises
    ``ValueError``."""
    out: dict[tuple[str, str], WorkedExample] = {}
    for path in paths:
        with _open_text(Path(path)) as f:
            for number, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                except ValueError:
                    raise ValueError(f"{path}:{number}: not a JSON line") from None
                meta = row.get("meta", {}) if isinstance(row, dict) else {}
                kind = {"cypher-gold": "qa", "cypher-gold-grounding": "grounding"}.get(meta.get("source"))
                text = meta.get("question") if kind == "qa" else meta.get("instruction")
                if kind is None or text is None:
                    continue
                try:
                    replies = [json.loads(m["content"]) for m in row["messages"] if m["role"] == "assistant"]
                    split, scene = meta["split"], meta["scene"]
                except (KeyError, TypeError, ValueError):
                    raise ValueError(f"{path}:{number}: not an example of cypher-data (messages, meta)") from None
                if not replies or replies[0].get("tool") != "run_cypher_query":
                    continue
                answer = ""
                if kind == "grounding":  # every turn of an item has a line; the one with the goal counts
                    if replies[-1].get("tool") != "answer":
                        continue
                    answer = json.dumps(replies[-1]["answer"], separators=(", ", ": "))
                elif (kind, text) in out:
                    continue
                if split.startswith("generated"):
                    building = GENERATED
                elif (split, scene) in buildings:
                    building = buildings[(split, scene)]
                else:
                    raise ValueError(f"{path}: scene {split}/{scene} is neither generated nor a GraSIF task")
                out[(kind, text)] = WorkedExample(text, replies[0]["query"], meta.get("template", "grounding"),
                                                  split, scene, building, kind, answer)
    return list(out.values())


def write_examples(examples: Iterable[WorkedExample], path: Path) -> int:
    """Write ``examples`` as JSON lines (gzip when ``path`` ends in ``.gz``; written whole, then
    moved into place); returns how many."""
    return write_jsonl((asdict(e) for e in examples), path)


def read_examples(path: str | Path | None = None) -> list[WorkedExample]:
    """The examples of a JSONL file (``.gz`` read as gzip); None: the shipped file."""
    text = read_jsonl_text(path, ("cypher", "data", DEFAULT_FILE), "worked-example file",
                           "write one with `lookplangraph cypher-examples`")
    return [WorkedExample(**json.loads(line)) for line in text.splitlines() if line.strip()]


def held_out(example: WorkedExample, dev: set[str]) -> bool:
    """Whether ``example`` may not be shown: not from a generated building, and either from a
    building the Cypher benchmark holds out (not among ``dev``, the development part's buildings)
    or from a scene outside the planning train pool (:func:`grasif.heldout.in_train_pool`)."""
    if example.building == GENERATED:
        return False
    return example.building not in dev or not in_train_pool(example.split, example.scene)


class ExampleIndex:
    """BM25 over the examples' questions or instructions (module doc); every example of one kind.
    ``dev``: the buildings an example may come from besides generated ones (default: the shipped
    benchmark's development part); an example :func:`held_out` says may not be shown raises
    :class:`LeakError`."""

    def __init__(self, examples: list[WorkedExample], dev: set[str] | None = None):
        from rank_bm25 import BM25Okapi

        if dev is None:
            dev = dev_buildings()
        if not examples:
            raise ValueError("no worked examples to retrieve from")
        if len({e.kind for e in examples}) > 1:
            raise ValueError("worked examples of one kind per index (questions or instructions)")
        leaked = sorted({f"{e.split}/{e.scene}" for e in examples if held_out(e, dev)})
        if leaked:
            raise LeakError(f"{len(leaked)} worked example scene(s) of held-out buildings or evaluation tasks: "
                            f"{', '.join(leaked[:5])}")
        self.examples = examples
        self.kind = examples[0].kind
        self._bm25 = BM25Okapi([words(e.question) for e in examples])

    def top(self, question: str, k: int, skip: Callable[[WorkedExample], bool] | None = None) -> list[WorkedExample]:
        """The ``k`` best by BM25 score, one per template (questions) or per scene (instructions),
        best first; ties keep the file's order. ``skip``: examples it is true of are never given."""
        scores = self._bm25.get_scores(words(question))
        if skip is not None:
            scores = [-math.inf if skip(e) else s for e, s in zip(self.examples, scores)]
        picked = best_distinct(scores, self.examples, k,
                               lambda e: e.template if e.kind == "qa" else (e.split, e.scene))
        return [e for e in picked if skip is None or not skip(e)]


@lru_cache(maxsize=2)
def shipped_index(kind: str = "qa") -> ExampleIndex:
    """The index of the shipped file's examples of ``kind`` (:data:`KINDS`), built once per process."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    return ExampleIndex([e for e in read_examples() if e.kind == kind])


def example_block(examples: list[WorkedExample]) -> str:
    """The examples as the end of the agent's system prompt; empty for none."""
    if not examples:
        return ""
    if examples[0].kind == "grounding":
        body = "\n".join(f"Instruction: {e.question}\nFirst query: {e.query}\nGoal: {e.answer}" for e in examples)
        return ("Instructions in other buildings, each with the first query and the goal that grounded it there "
                "(use the names of this building in yours):\n" + body)
    body = "\n".join(f"Question: {e.question}\nQuery: {e.query}" for e in examples)
    return ("Questions about other buildings, each with the query that answered it in its own building (use the "
            "names of this building in yours):\n" + body)


def with_worked_examples(row: dict, index: ExampleIndex, k: int, share: float) -> dict:
    """A training example of the Cypher agent's turns with worked examples, as
    ``AgentConfig.worked_examples = k`` would have written its prompt, or ``row`` unchanged.

    Only gold question turns change (``meta.source == "cypher-gold"``, with ``meta.question``):
    recovery turns answer a model's mistake made without examples, and instructions get none at
    inference by default. Which questions do is a fixed function of (split, scene, question), a
    ``share`` of them, so every turn of one item agrees. The examples come from ``index`` (a
    ``qa`` index) but never from the question's own building (its scene, for a generated one) nor
    in its own words (the same :func:`~lookplangraph.agent.demonstrations.words`, which leave out
    numbers and stop words: "Is fridge-1 open?" and "is fridge-3 open" are one question): at
    inference the building is held out, and a question copied word for word would teach copying
    instead of adapting a query to this building's names and to other words."""
    meta = row.get("meta", {})
    question = meta.get("question")
    if meta.get("source") != "cypher-gold" or not question or k <= 0:
        return row
    split, scene = meta.get("split"), meta.get("scene")
    digest = hashlib.sha256(f"{split}\n{scene}\n{question}".encode()).digest()
    if int.from_bytes(digest[:8], "big") / 2**64 >= share:
        return row
    own = {e.building for e in index.examples if (e.split, e.scene) == (split, scene) and e.building != GENERATED}
    text = " ".join(words(question))

    def skip(e: WorkedExample) -> bool:
        return (e.split, e.scene) == (split, scene) or e.building in own or " ".join(words(e.question)) == text

    block = example_block(index.top(question, k, skip))
    if not block:
        return row
    messages = [dict(m) for m in row["messages"]]
    if messages[0]["role"] != "system":
        raise ValueError(f"a Cypher example of {split}/{scene} has no system message")
    messages[0]["content"] += f"\n\n{block}"
    return {**row, "messages": messages, "meta": {**meta, "worked_examples": k}}
