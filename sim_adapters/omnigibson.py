"""OmniGibson (BEHAVIOR-1K) as an environment, the way the paper runs it: high-level actions
emulated by the scene graph simulator, ``discover_objects`` answered with pictures captured in
OmniGibson beforehand (paper VI-B). Running needs the image bank alone; OmniGibson is needed only
to capture it (``scripts/capture_omnigibson_bank.py``).

**Image bank** (:class:`ImageBank`): a directory with ``manifest.jsonl``, one JSON object per
picture: ``task`` (a GraSIF task id), ``node`` (the node pictured), ``image`` (a path relative to
the manifest), ``objects`` (the true subgraph at capture time: ``name``, ``relation`` ``ontop`` or
``inside``, ``parent`` the node or an object listed before, ``states``), optional ``description``
(a text of the picture) and ``source`` (free provenance). :meth:`ImageBank.load` checks every line
and raises one :class:`BankError` listing every problem as ``file:line: what is wrong``.

**Environment** (:class:`ImageBankEnvironment`): a :class:`~sim_adapters.graph_env.GraphEnvironment`
on the task's true graph, except that ``discover_objects(node)`` with a bank entry for (task,
node) carries the entry's picture in the observation's ``image``, and without one is refused
(nothing changes; the feedback names the node and the task). :meth:`ImageBankEnvironment.describe`
gives the entry's description if it has one. In dynamic mode the pictures still show the scene as
captured; :meth:`ImageBankEnvironment.mismatches` lists the entries whose subgraph differs from
the task's initial graph. Concepts: ``docs/guides/environments.md``.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from sgs.actions import Action, make
from sgs.simulator import Infeasible, apply
from sim_adapters.base import Observation, SeenObject, StepResult
from sim_adapters.graph_env import GraphEnvironment, Writer

MANIFEST = "manifest.jsonl"
RELATIONS = ("ontop", "inside")
_KEYS = {"task", "node", "image", "objects", "description", "source"}
_OBJECT_KEYS = {"name", "relation", "parent", "states"}


class BankError(ValueError):
    """An image bank that cannot be used; the message says where (``file:line``) and what."""


@dataclass(frozen=True)
class BankEntry:
    """One picture: the node it shows in one task, the image file, the true subgraph at capture
    time (``truth``, with ``image`` set), an optional description and free provenance."""

    task: str
    node: str
    image: Path
    truth: Observation
    description: str | None = None
    source: dict[str, Any] = field(default_factory=dict)


def _entry(data: Any, root: Path, where: str) -> tuple[BankEntry | None, list[str]]:
    """The entry of one manifest line, or None and the problems found (each prefixed ``where``)."""
    if not isinstance(data, dict):
        return None, [f"{where}: not a JSON object"]
    problems = []
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        problems.append(f"unknown key(s) {', '.join(map(repr, unknown))} (allowed: {', '.join(sorted(_KEYS))})")
    for key in ("task", "node", "image"):
        if not isinstance(data.get(key), str) or not data.get(key).strip():
            problems.append(f"{key!r} is missing or not a non-empty string")
    if not isinstance(data.get("objects"), list):
        problems.append("'objects' is missing or not a list")
    if data.get("description") is not None and not isinstance(data["description"], str):
        problems.append("'description' is not a string")
    if data.get("source") is not None and not isinstance(data["source"], dict):
        problems.append("'source' is not an object")
    if problems:
        return None, [f"{where}: {p}" for p in problems]
    node, image = data["node"], root / data["image"]
    if not image.is_file():
        problems.append(f"image {data['image']} does not exist (looked for {image})")
    elif image.stat().st_size == 0:
        problems.append(f"image {data['image']} is empty (0 bytes)")
    seen: list[SeenObject] = []
    placed = {node}
    for k, obj in enumerate(data["objects"], 1):
        label = f"object {k}"
        if not isinstance(obj, dict):
            problems.append(f"{label} is not a JSON object")
            continue
        extra = sorted(set(obj) - _OBJECT_KEYS)
        name, rel, parent, states = obj.get("name"), obj.get("relation"), obj.get("parent"), obj.get("states", [])
        if not isinstance(name, str) or not name:
            problems.append(f"{label} has no name")
            continue
        label = f"object {name!r}"
        if extra:
            problems.append(f"{label}: unknown key(s) {', '.join(map(repr, extra))}")
        if rel not in RELATIONS:
            problems.append(f"{label}: relation {rel!r} is not ontop or inside")
        if not isinstance(parent, str) or not parent:
            problems.append(f"{label}: no parent")
        elif parent not in placed:
            problems.append(f"{label} is {rel} {parent!r}, which is neither the node {node} nor an object listed "
                            f"before it (parents come before children)")
        if not isinstance(states, list) or not all(isinstance(s, str) for s in states):
            problems.append(f"{label}: states is not a list of strings")
            states = []
        if name in placed:
            problems.append(f"{label} is listed twice (or is the node itself)")
        placed.add(name)
        seen.append(SeenObject(name, str(rel), str(parent), tuple(states)))
    if problems:
        return None, [f"{where}: {p}" for p in problems]
    truth = Observation(node, tuple(seen), str(image))
    return BankEntry(data["task"], node, image, truth, data.get("description"), dict(data.get("source") or {})), []


class ImageBank:
    """The entries of a bank by (task, node), in manifest order (module doc for the format)."""

    def __init__(self, entries: Iterable[BankEntry], root: Path | None = None):
        self.root = root
        self._entries: dict[tuple[str, str], BankEntry] = {}
        for e in entries:
            if (e.task, e.node) in self._entries:
                raise BankError(f"a second entry for task {e.task} node {e.node}")
            self._entries[e.task, e.node] = e

    @classmethod
    def load(cls, path: str | Path) -> "ImageBank":
        """Read and check ``path`` (the bank directory or its manifest); :class:`BankError` lists
        every problem."""
        path = Path(path)
        manifest = path / MANIFEST if path.is_dir() else path
        if not manifest.is_file():
            raise BankError(f"{path}: no image bank here ({manifest} does not exist)")
        root = manifest.parent.resolve()
        entries, problems, first = [], [], {}
        for n, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{manifest}:{n}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})")
                continue
            entry, found = _entry(data, root, where)
            problems += found
            if entry is None:
                continue
            key = (entry.task, entry.node)
            if key in first:
                problems.append(f"{where}: a second entry for task {entry.task} node {entry.node} "
                                f"(the first is on line {first[key]})")
                continue
            first[key] = n
            entries.append(entry)
        if problems:
            shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
            raise BankError(f"{manifest}: {len(problems)} problem(s):\n  " + "\n  ".join(shown))
        return cls(entries, root)

    def entry(self, task: str, node: str) -> BankEntry | None:
        return self._entries.get((task, node))

    def entries(self, task: str | None = None) -> list[BankEntry]:
        return [e for e in self._entries.values() if task is None or e.task == task]

    def tasks(self) -> list[str]:
        """Task ids with at least one entry, in manifest order."""
        return list(dict.fromkeys(t for t, _ in self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ImageBank({self.root}, {len(self)} entries, {len(self.tasks())} tasks)"


class ImageBankEnvironment(GraphEnvironment):
    """The SGS on ``task``'s true graph with ``discover_objects`` pictures from ``bank`` (an
    :class:`ImageBank` or its path); module doc. :class:`BankError` when the bank has no entry
    for the task. ``describer``: as for :class:`GraphEnvironment`, for nodes without a recorded
    description."""

    name = "omnigibson-bank"

    def __init__(self, task, bank: ImageBank | str | Path, *, describer: Writer | None = None):
        self.bank = bank if isinstance(bank, ImageBank) else ImageBank.load(bank)
        if not self.bank.entries(task.id):
            tasks = self.bank.tasks()
            listed = ", ".join(tasks[:5]) + (f" ... ({len(tasks)} tasks)" if len(tasks) > 5 else "")
            raise BankError(f"the image bank {self.bank.root or ''} has no picture for task {task.id}; "
                            f"it has {listed or 'no entries'}")
        self.task = task
        super().__init__(task.graph, task.goal, describer=describer)

    def _true_node(self, name: str | None) -> str | None:
        """The true node a planner name stands for (the graph environment's name binding, where
        it has one), or None when it binds to nothing."""
        binding = getattr(self, "binding", None)
        if binding is None or not name:
            return name
        try:
            return binding.bind(name, self._graph)
        except ValueError:
            return None

    def step(self, action: Action) -> StepResult:
        if action.function_name != "discover_objects":
            return super().step(action)
        node = self._true_node(action.node)
        if node is None:
            return super().step(action)  # the binding's feedback
        entry = self.bank.entry(self.task.id, node)
        if entry is None:
            try:
                apply(self._graph, make("discover_objects", node))  # the SGS's reason comes first
            except Infeasible:
                return super().step(action)
            alias = f" ({node})" if node != action.node else ""
            return StepResult(False, f"{action} failed: the image bank has no picture of {action.node}{alias} in "
                                     f"task {self.task.id}, so it cannot be looked at here")
        result = super().step(action)
        if result.ok and result.observation is not None:
            obs = result.observation
            result = StepResult(True, result.feedback, Observation(obs.node, obs.objects, str(entry.image)),
                                {**result.info, "bank_source": entry.source})
        return result

    def describe(self, node: str, *args, **kwargs) -> str:
        """The entry's recorded description of ``node``, else the graph environment's text."""
        true = self._true_node(node)
        entry = self.bank.entry(self.task.id, true) if true is not None else None
        if entry is not None and entry.description:
            return entry.description
        return getattr(super(), "describe")(node, *args, **kwargs)

    def mismatches(self) -> list[str]:
        """One line per entry whose recorded subgraph differs from the task's initial graph (the
        picture then shows something the SGS does not have)."""
        out = []
        for e in self.bank.entries(self.task.id):
            if e.node not in self.initial.nodes:
                out.append(f"{e.node}: not a node of task {self.task.id}")
                continue
            want = {(o.name, o.relation, o.parent, frozenset(o.states)) for o in e.truth.objects}
            have = {(o.name, o.relation, o.parent, frozenset(o.states))
                    for o in GraphEnvironment(self.initial).observe(e.node).objects}
            if want != have:
                out.append(f"{e.node}: bank has {sorted(n for n, *_ in want - have)} not in the graph, "
                           f"graph has {sorted(n for n, *_ in have - want)} not in the bank")
        return out


def write_png(path: str | Path, width: int, height: int, rgb: bytes) -> None:
    """Write 8-bit RGB pixels (``width*height*3`` bytes, rows top to bottom) as a PNG, with
    nothing but the standard library (the capture script and the tests use it)."""
    if len(rgb) != width * height * 3:
        raise ValueError(f"{width}x{height} RGB needs {width * height * 3} bytes, got {len(rgb)}")

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(height))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    Path(path).write_bytes(data)
