"""Worked examples for the Cypher agent: the training questions most like the one asked, each with
the gold query that answered it in its own building, written at the end of the agent's system
prompt (``AgentConfig.worked_examples = k``).

* A :class:`WorkedExample` is one question of the Cypher training data (``lookplangraph
  cypher-data``: the query expert's gold turns on training scenes, :mod:`.training`) as it was
  asked, with the first query of its gold turns; ``building`` is :func:`~.benchmark.building` of
  its scene's task (``generated`` for a generated building).
* :func:`examples_from_training` reads them off ``sft.jsonl`` files of ``cypher-data``;
  ``lookplangraph cypher-examples`` writes the file the package ships (:data:`DEFAULT_FILE`).
* :class:`ExampleIndex` ranks them with BM25 (``rank-bm25``) over the question's words and gives
  the ``k`` best of distinct templates (two examples of one template teach nothing the first does
  not). Nothing of the ranking is hand-written.
* :func:`example_block` writes them as prompt text.

**Held out**: an example must come from a generated building or a building of the Cypher
benchmark's development part on a planning train-pool scene; :class:`ExampleIndex` refuses any
other (:class:`LeakError`), and ``tests/test_cypher_examples.py`` checks the shipped file against
a fresh GraSIF build. The reworded evaluation phrasings (:data:`.phrasings.REWORDED`) are never in
the training data, so never in an example either.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable

from lookplangraph.agent.demonstrations import LeakError, words

#: the worked examples shipped with the package (``lookplangraph/cypher/data/``)
DEFAULT_FILE = "examples.v1.jsonl.gz"
#: the building of every generated scene
GENERATED = "generated"


@dataclass(frozen=True)
class WorkedExample:
    """One training question as asked, the query that answered it, where it comes from."""

    question: str
    query: str
    template: str
    split: str
    scene: str
    building: str


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def examples_from_training(paths: Iterable[str | Path], buildings: dict[tuple[str, str], str]) -> list[WorkedExample]:
    """The gold questions (``meta.source == "cypher-gold"``) of ``cypher-data`` ``sft.jsonl`` files
    (``.gz`` read as gzip), one per distinct question, in the files' order: the question as the
    data asked it and the query of its first assistant turn. ``buildings`` maps ``(split, scene)``
    of every GraSIF scene to its building; a scene of a ``generated-*`` split is ``generated``. A
    scene of neither raises ``ValueError``."""
    out: dict[str, WorkedExample] = {}
    for path in paths:
        with _open_text(Path(path)) as f:
            for line in f:
                row = json.loads(line)
                meta = row.get("meta", {})
                if meta.get("source") != "cypher-gold" or meta.get("question") in out:
                    continue
                first = next((m for m in row["messages"] if m["role"] == "assistant"), None)
                reply = json.loads(first["content"]) if first else {}
                if reply.get("tool") != "run_cypher_query":
                    continue
                split, scene = meta["split"], meta["scene"]
                if split.startswith("generated"):
                    building = GENERATED
                elif (split, scene) in buildings:
                    building = buildings[(split, scene)]
                else:
                    raise ValueError(f"{path}: scene {split}/{scene} is neither generated nor a GraSIF task")
                out[meta["question"]] = WorkedExample(meta["question"], reply["query"], meta["template"], split,
                                                      scene, building)
    return list(out.values())


def write_examples(examples: Iterable[WorkedExample], path: Path) -> int:
    """Write ``examples`` as gzipped JSON lines (written whole, then moved into place); returns how many."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    n = 0
    with gzip.GzipFile(tmp, "wb", mtime=0) as raw:
        for e in examples:
            raw.write((json.dumps(asdict(e)) + "\n").encode("utf-8"))
            n += 1
    tmp.replace(path)
    return n


def read_examples(path: str | Path | None = None) -> list[WorkedExample]:
    """The examples of a JSONL file (``.gz`` read as gzip); None: the shipped file."""
    if path is None:
        raw = resources.files("lookplangraph").joinpath("cypher", "data", DEFAULT_FILE).read_bytes()
        lines = gzip.decompress(raw).decode("utf-8").splitlines()
    else:
        p = Path(path)
        if not p.exists():
            raise FileNotFoundError(f"no worked-example file {p}; write one with `lookplangraph cypher-examples`")
        with _open_text(p) as f:
            lines = f.read().splitlines()
    return [WorkedExample(**json.loads(line)) for line in lines if line.strip()]


def held_out(example: WorkedExample, dev: set[str]) -> bool:
    """Whether ``example`` comes from a building the Cypher benchmark holds out (not generated and
    not among ``dev``, the development part's buildings)."""
    return example.building != GENERATED and example.building not in dev


class ExampleIndex:
    """BM25 over the examples' questions (module doc). ``dev``: the buildings an example may come
    from besides generated ones (default: the shipped benchmark's development part); an example of
    any other raises :class:`LeakError`."""

    def __init__(self, examples: list[WorkedExample], dev: set[str] | None = None):
        from rank_bm25 import BM25Okapi

        if dev is None:
            from lookplangraph.cypher.training import dev_buildings

            dev = dev_buildings()
        leaked = sorted({f"{e.split}/{e.scene}" for e in examples if held_out(e, dev)})
        if leaked:
            raise LeakError(f"{len(leaked)} worked example scene(s) of held-out buildings: {', '.join(leaked[:5])}")
        if not examples:
            raise ValueError("no worked examples to retrieve from")
        self.examples = examples
        self._bm25 = BM25Okapi([words(e.question) for e in examples])

    def top(self, question: str, k: int) -> list[WorkedExample]:
        """The ``k`` best by BM25 score, one per template (its best-scoring question), best first;
        ties keep the file's order."""
        if k <= 0:
            return []
        scores = self._bm25.get_scores(words(question))
        out, templates = [], set()
        for i in sorted(range(len(self.examples)), key=lambda i: -scores[i]):
            e = self.examples[i]
            if e.template not in templates:
                templates.add(e.template)
                out.append(e)
                if len(out) == k:
                    break
        return out


@lru_cache(maxsize=1)
def shipped_index() -> ExampleIndex:
    """The index of the shipped file, built once per process."""
    return ExampleIndex(read_examples())


def example_block(examples: list[WorkedExample]) -> str:
    """The examples as the end of the agent's system prompt; empty for none."""
    if not examples:
        return ""
    body = "\n".join(f"Question: {e.question}\nQuery: {e.query}" for e in examples)
    return ("Questions about other buildings, each with the query that answered it in its own building (use the "
            "names of this building in yours):\n" + body)
