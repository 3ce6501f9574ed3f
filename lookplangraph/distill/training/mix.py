"""One training set from several: planning data, DAgger rounds and Cypher data in chosen amounts
(``lookplangraph distill mix``), in a directory ``distill train`` reads like any other:

* ``sft.jsonl`` — the examples taken from each source (a seeded sample of the number asked, or
  all), in a seeded random order; each keeps its ``meta`` and gains ``meta.mixed_from``;
* ``counts.json`` — ``kind: "mix"``, the planning sources' ``prompt_layout``, ``answer_format``
  and ``recall`` (they must agree), their teachers (``experts``, below), per source what was
  available and taken (with the source file's SHA-256), ``by_source``, the planning system message
  (``systems_final: true``), the Cypher transforms when there are any, and where conversations are
  among the examples the trained ``decisions`` and the injected ``mistakes`` by kind.

Teachers: ``experts`` counts the planning examples by the teacher that labelled them, summed over
the sources; each planning or mix source records its share as ``experts`` and says where it came
from in ``experts_from``:

* ``"counted"`` — counted over the examples taken. A planning source's example counts under its
  ``meta.expert``, else the source's ``expert``, else ``expert (privileged)``; the mix writes that
  teacher into the example's ``meta.expert``, so a part of this mix can be counted again later. A
  part of a committed mix (``:N`` or ``@KEY=VALUE``) counts its examples' ``meta.expert``; a
  planning (not Cypher) example without one counts under the mix's teacher when its ``experts``
  names only one and it records no ``experts_uncounted`` (the only teacher the mix knows of),
  else it is not counted and ``experts_uncounted`` says how many.
* ``"carried"`` — a committed mix taken whole: its own ``experts`` (and ``experts_uncounted``),
  as it recorded them. Its examples are not counted again, since those a mix took from planning
  data may carry no ``meta.expert`` (mixes before ``meta.expert`` was written on every one).

Planning examples get the system message ``system`` here, once; Cypher examples keep the agent's
own, changed only by the Cypher transforms: ``cypher_transform`` (the examples of a Cypher
source) and ``cypher_system`` (the system message of every Cypher example, a committed mix's too:
``meta.source`` ``cypher-...``; e.g. :func:`lookplangraph.cypher.agent.classes_at_end`). A
source is a ``distill data`` or ``distill dagger`` directory, a ``cypher-data`` directory, or a
committed mix (``data/training/mix-vN``), taken as it is. Nothing is written unless every
source reads; the files appear whole. Why and how: ``docs/guides/distillation.md``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lookplangraph.distill.training.sft import with_system


class MixError(ValueError):
    """A source that cannot be mixed: missing, unreadable, of another format, or too small."""


@dataclass(frozen=True)
class Take:
    """``n`` examples (None: all) of the source directory ``path``; with ``where``, only of its
    examples whose ``meta`` has each of these values (``(("split", "virtualhome"),)``), so one
    part of a source can be weighted more by taking it a second time."""

    path: Path
    n: int | None = None
    where: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str:
        """How the mix records the source: the directory's name, with the filter after ``@``."""
        return self.path.name + ("@" + ",".join(f"{k}={v}" for k, v in self.where) if self.where else "")

    def matches(self, row: dict) -> bool:
        """Whether ``row`` passes the filter (every row does without one)."""
        meta = row.get("meta") or {}
        return all(str(meta.get(key)) == value for key, value in self.where)

    @classmethod
    def parse(cls, text: str) -> "Take":
        """``DIR[@KEY=VALUE[,KEY=VALUE...]][:N|:all]`` (the CLI's ``--take``)."""
        head, sep, tail = text.rpartition(":")
        n = None
        if sep and (tail.isdigit() or tail == "all"):
            if tail != "all":
                if int(tail) < 1:
                    raise MixError(f"--take {text}: the number of examples must be >= 1")
                n = int(tail)
            text = head
        path, at, filters = text.partition("@")
        where = []
        for item in filters.split(",") if at else ():
            key, eq, value = item.partition("=")
            if not eq or not key or not value:
                raise MixError(f"--take {text}: a filter is KEY=VALUE (of the examples' meta), not {item!r}")
            where.append((key, value))
        return cls(Path(path), n, tuple(where))


def source_kind(counts: dict) -> str | None:
    """``planning``, ``cypher`` or ``mix`` for a data directory's ``counts.json``; None when it
    is none of these."""
    if counts.get("kind") in ("cypher", "mix"):
        return counts["kind"]
    if "prompt_layout" in counts:
        return "planning"
    if "questions" in counts:
        return "cypher"
    return None


def _read(take: Take) -> tuple[dict, list[str], str]:
    counts_path = take.path / "counts.json"
    sft = next((take.path / n for n in ("sft.jsonl", "sft.jsonl.gz") if (take.path / n).is_file()), None)
    if sft is None or not counts_path.is_file():
        raise MixError(f"{take.path}: no sft.jsonl (or sft.jsonl.gz) and counts.json there (a distill data, distill "
                       "dagger or cypher-data directory, or a committed mix)")
    try:
        counts = json.loads(counts_path.read_text())
    except ValueError as exc:
        raise MixError(f"{counts_path}: not JSON ({exc})") from None
    if source_kind(counts) not in ("planning", "cypher", "mix"):
        raise MixError(f"{take.path}: counts.json says neither planning data (prompt_layout), Cypher data "
                       "(kind cypher) nor a mix")
    if source_kind(counts) == "mix" and not counts.get("systems_final"):
        raise MixError(f"{take.path}: a mix whose system prompts are not final cannot be taken again")
    raw = gzip.decompress(sft.read_bytes()) if sft.suffix == ".gz" else sft.read_bytes()
    lines = []
    for i, line in enumerate((line for line in raw.decode("utf-8").splitlines() if line.strip()), 1):
        try:
            row = json.loads(line)
            ok = isinstance(row.get("messages"), list) and row["messages"][-1]["role"] == "assistant"
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise MixError(f"{sft}:{i}: not a chat example ending with the assistant's answer")
        if take.matches(row):  # every line without a filter
            lines.append(line)
    if not lines and take.where:
        raise MixError(f"{take.name}: no example of {take.path} matches the filter")
    if take.n is not None and take.n > len(lines):
        raise MixError(f"{take.name}: {take.n} examples asked, {len(lines)} there")
    return counts, lines, hashlib.sha256(raw).hexdigest()


#: The teacher of a planning example whose source names none (``distill data`` before it recorded one).
DEFAULT_EXPERT = "expert (privileged)"


def _teachers(kind: str, take: Take, counts: dict, taken: list[dict]) -> tuple[Counter, int, str]:
    """(teacher -> planning examples, examples whose teacher is unknown, ``counted``/``carried``)
    of one source's taken examples (module doc); a planning example gains its ``meta.expert``."""
    if kind == "mix" and take.n is None and not take.where:
        return Counter(counts.get("experts") or {}), int(counts.get("experts_uncounted", 0)), "carried"
    teachers, unknown = Counter(), 0
    if kind == "planning":
        for row in taken:
            meta = row.setdefault("meta", {})
            meta["expert"] = meta.get("expert") or counts.get("expert") or DEFAULT_EXPERT
            teachers[meta["expert"]] += 1
    elif kind == "mix":
        recorded = list(counts.get("experts") or {}) if not counts.get("experts_uncounted") else []
        for row in taken:
            teacher = (row.get("meta") or {}).get("expert")
            if teacher:
                teachers[teacher] += 1
            elif not is_cypher(row):
                if len(recorded) == 1:
                    teachers[recorded[0]] += 1
                else:
                    unknown += 1
    return teachers, unknown, "counted"


def _label(row: dict) -> str:
    """What ``by_source`` counts an example under: its ``meta.source`` (``dagger``,
    ``cypher-gold``, ...), else its ``meta.split`` (``distill data``'s examples)."""
    meta = row.get("meta", {})
    return meta.get("source") or meta.get("split") or meta.get("mixed_from", "?")


def is_cypher(row: dict) -> bool:
    """Whether ``row`` is an example of the Cypher agent's turns (``meta.source`` ``cypher-...``)."""
    return str((row.get("meta") or {}).get("source", "")).startswith("cypher-")


def with_cypher_system(row: dict, rewrite: Callable[[str], str]) -> dict:
    """``row`` with its system message rewritten by ``rewrite``, or ``row`` itself when that
    changes nothing; ``ValueError`` for an example without a system message first, or what
    ``rewrite`` raises."""
    messages = row["messages"]
    if messages[0].get("role") != "system":
        raise ValueError("a Cypher example without a system message")
    text = rewrite(messages[0]["content"])
    if text == messages[0]["content"]:
        return row
    return {**row, "messages": [{**messages[0], "content": text}, *messages[1:]]}


def mix(takes: list[Take], out: str | os.PathLike, *, system: str | None = None, system_name: str = "full",
        seed: int = 0, cypher_transform: Callable[[dict], dict] | None = None, cypher_transform_name: str = "",
        cypher_system: Callable[[str], str] | None = None, cypher_system_name: str = "") -> dict:
    """Write the mix of ``takes`` into ``out`` (module doc) and return its counts. ``system``:
    the planning examples' system message (None: as built; then ``system_name`` is ``full``).
    ``cypher_transform``: applied to every taken Cypher example (e.g. worked examples in its
    prompt, :func:`lookplangraph.cypher.examples.with_worked_examples`); counts then record
    ``cypher_transform`` (``cypher_transform_name`` and how many examples it changed).
    ``cypher_system``: applied to the system message of every Cypher example (:func:`is_cypher`) of
    every source, after ``cypher_transform``; counts then record ``cypher_system`` (the name, the
    Cypher examples and how many it changed). The samples and the order depend on neither.
    Raises :class:`MixError` before writing anything when a source is missing, unreadable,
    smaller than asked, or when planning sources disagree on prompt layout or answer format."""
    if not takes:
        raise MixError("nothing to mix: give at least one --take DIR[:N]")
    names = [t.name for t in takes]
    if len(set(names)) != len(names):
        raise MixError(f"two sources share a name ({', '.join(names)}): the mix records sources by directory name "
                       "and filter")
    rng = random.Random(seed)
    rows, sources, formats, experts, planning_system, changed = [], [], set(), Counter(), None, 0
    system_seen = system_changed = uncounted = 0
    for take in takes:
        counts, lines, sha = _read(take)
        kind = source_kind(counts)
        chosen = sorted(rng.sample(range(len(lines)), take.n)) if take.n is not None else range(len(lines))
        taken = [json.loads(lines[i]) for i in chosen]
        if kind == "planning":
            formats.add((counts["prompt_layout"], counts.get("answer_format", "action+reason"),
                         counts.get("recall", "here"), counts.get("actions_per_answer", 1)))
            if system is not None:
                taken = [{**r, "messages": with_system(r["messages"], system)} for r in taken]
            if taken and planning_system is None:
                planning_system = next((m["content"] for m in taken[0]["messages"] if m["role"] == "system"), None)
        if kind == "mix":  # a committed mix: its examples as they are, its format that of its planning part
            if counts.get("prompt_layout"):
                formats.add((counts["prompt_layout"], counts.get("answer_format", "action+reason"),
                             counts.get("recall", "here"), counts.get("actions_per_answer", 1)))
        if kind == "cypher" and cypher_transform is not None:
            before = [json.dumps(r, sort_keys=True) for r in taken]
            taken = [cypher_transform(r) for r in taken]
            changed += sum(b != json.dumps(r, sort_keys=True) for b, r in zip(before, taken))
        if cypher_system is not None and kind in ("cypher", "mix"):
            for k, row in enumerate(taken):
                if kind == "cypher" or is_cypher(row):
                    system_seen += 1
                    try:
                        taken[k] = with_cypher_system(row, cypher_system)
                    except ValueError as exc:
                        meta = row.get("meta") or {}
                        raise MixError(f"{take.name}: an example of {meta.get('split')}/{meta.get('scene')}: "
                                       f"{exc}") from None
                    system_changed += taken[k] is not row
        teachers, unknown, teachers_from = _teachers(kind, take, counts, taken)
        experts.update(teachers)
        uncounted += unknown
        for row in taken:
            row.setdefault("meta", {})["mixed_from"] = take.name
        rows.extend(taken)
        sources.append({"name": take.name, "path": str(take.path), "kind": kind, "available": len(lines),
                        "taken": len(taken), "sft_sha256": sha}
                       | ({"where": dict(take.where)} if take.where else {})
                       | ({"experts": dict(teachers), "experts_from": teachers_from} if kind != "cypher" else {})
                       | ({"experts_uncounted": unknown} if unknown else {}))
    if len(formats) > 1:
        raise MixError("the planning sources disagree on prompt layout, answer format, recall or actions per answer: "
                       + "; ".join(f"{a} with {b}, recall {c}, {k} action(s) an answer" for a, b, c, k in sorted(formats)))
    rng.shuffle(rows)
    layout, answer, recall, per_answer = next(iter(formats)) if formats else (None, None, None, 1)
    counts = {"kind": "mix", "examples": len(rows), "seed": seed, "prompt_layout": layout, "answer_format": answer,
              "recall": recall, **({"actions_per_answer": per_answer} if per_answer != 1 else {}),
              "experts": dict(experts), **({"experts_uncounted": uncounted} if uncounted else {}), "sources": sources,
              "by_source": dict(Counter(_label(r) for r in rows)),
              "system_prompt_name": system_name if system is not None else "full",
              "system_prompt": planning_system, "systems_final": True}
    if any(sum(m["role"] == "assistant" for m in r["messages"]) > 1 for r in rows):  # conversations among them
        counts["decisions"] = sum(1 for r in rows for m in r["messages"]
                                  if m["role"] == "assistant" and m.get("train", True) is not False)
        kinds = Counter(m["kind"] for r in rows for m in (r.get("meta") or {}).get("mistakes") or ())
        if kinds:
            counts["mistakes"] = {"episodes": sum(bool((r.get("meta") or {}).get("mistakes")) for r in rows), **kinds}
    if cypher_transform is not None:
        counts["cypher_transform"] = {"name": cypher_transform_name, "changed": changed}
    if cypher_system is not None:
        counts["cypher_system"] = {"name": cypher_system_name, "cypher_examples": system_seen, "changed": system_changed}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("sft.jsonl", "".join(json.dumps(r) + "\n" for r in rows)),
                       ("counts.json", json.dumps(counts, indent=1) + "\n")):
        part = out / (name + ".part")
        part.write_text(text)
        part.replace(out / name)
    return counts
