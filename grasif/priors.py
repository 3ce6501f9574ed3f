"""Object priors: where objects of a class are usually kept, counted over the train pool's scenes.

``P(holder class, relation | object class)`` — *a mug is usually on a table or inside a cabinet* —
is what dynamic mode draws moved objects from (:mod:`sim_adapters.dynamic`) and what the expert's
search ranks unseen holders by (:mod:`lookplangraph.distill.teacher.expert`).

**Counted on the train pool only** (:mod:`grasif.heldout`): the initial graphs of the pinned
manifest's train tasks, one placement once per scene; the data file lists every source task with
the SHA-256 of its task file (``tests/test_priors.py`` checks that list and a rebuild). **Class
names are normalised** (:func:`normalise`: lower case, no instance number, no synset suffix,
singular, no source prefix, :data:`SYNONYMS` merged); a class never counted backs off to its head
noun (``water_bottle`` -> ``bottle``), then to the holders' marginal. **Smoothing**
(:meth:`Priors.probability`): an additive prior of strength :data:`ALPHA` toward the add-one
smoothed marginal, so every holder has some probability.

The shipped file is :data:`PRIORS_FILE` (:func:`shipped`); ``lookplangraph grasif priors --rebuild``
writes it anew from a GraSIF build, ``--object apple`` prints the top holders. An unknown class or
an unreadable file raises :class:`PriorsError`. Concepts: ``docs/benchmark/dynamic.md``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from grasif import dataset, heldout
from grasif.task import load_task
from sgs.graph import Layer, Relation, SceneGraph

#: the shipped priors (generated: ``lookplangraph grasif priors --rebuild``)
PRIORS_FILE = Path(__file__).resolve().parent / "data" / "priors_v1.json"

#: strength of the Dirichlet prior toward the marginal (in placements)
ALPHA = 2.0

#: classes that name the same thing in the sources' vocabularies
SYNONYMS = {
    "cupboard": "cabinet", "kitchen_cabinet": "cabinet", "kitchencabinet": "cabinet", "cabinets": "cabinet",
    "kitchen_counter": "countertop", "counter": "countertop", "kitchencounter": "countertop",
    "refrigerator": "fridge", "electric_refrigerator": "fridge", "tv": "television", "tvstand": "tv_stand",
    "coffeetable": "coffee_table", "bookshelf": "shelf", "shelving_unit": "shelf", "closet": "wardrobe",
    "cellphone": "phone", "cell_phone": "phone", "mobile_phone": "phone",
    "trashcan": "trash_can", "garbage_can": "trash_can", "ashcan": "trash_can", "dustbin": "trash_can",
    "sofa": "couch", "t_shirt": "shirt", "tshirt": "shirt",
}

#: prefixes a source puts before the thing itself (VirtualHome's ``clothes_shirt``)
PREFIXES = ("clothes_",)

_SYNSET = re.compile(r"\.n\.\d+.*$")
_INSTANCE = re.compile(r"[-_]?\d+$")
_KEEP_S = ("ss", "us", "is", "ics", "news", "glasses", "scissors", "pants", "jeans", "shorts", "tongs")


class PriorsError(ValueError):
    """A class the priors know nothing of, or a priors file that cannot be read; the message says
    which, with the known classes closest to it."""


def singular(word: str) -> str:
    """A plural's singular by the few rules English class names need (``dishes`` -> ``dish``,
    ``berries`` -> ``berry``, ``glasses`` and ``scissors`` kept)."""
    if word.endswith(_KEEP_S) or len(word) <= 3:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if word.endswith("oes"):
        return word[:-2]
    if word.endswith("s"):
        return word[:-1]
    return word


def normalise(name: str) -> str:
    """The class a node name or class word stands for (module doc): ``Coffee_Cup-3`` -> ``coffee_cup``,
    ``apple.n.01_2`` -> ``apple``, ``wicker baskets`` -> ``wicker_basket``."""
    cls = _SYNSET.sub("", name.strip().lower().replace(" ", "_"))
    cls = _INSTANCE.sub("", cls).replace("-", "_").strip("_")
    words = cls.split("_")
    words[-1] = singular(words[-1])
    cls = "_".join(w for w in words if w)
    for prefix in PREFIXES:
        if cls.startswith(prefix) and len(cls) > len(prefix):
            cls = cls[len(prefix):]
    return SYNONYMS.get(cls, cls)


def head_noun(cls: str) -> str:
    """The last word of a class (``water_bottle`` -> ``bottle``)."""
    return cls.rsplit("_", 1)[-1]


def _key(holder: str, relation: str) -> str:
    return f"{holder}|{relation}"


@dataclass(frozen=True)
class Placement:
    """One holder of an object class, as :meth:`Priors.holders` ranks them."""

    holder: str
    relation: str
    probability: float
    count: int


@dataclass(frozen=True)
class Priors:
    """``counts[object class][holder|relation]``: placements counted (module doc); ``marginal``
    the same summed over object classes; ``sources``: ``split/task id -> SHA-256`` of each task
    file counted."""

    counts: dict[str, dict[str, int]]
    marginal: dict[str, int]
    sources: dict[str, str]
    alpha: float = ALPHA

    def resolve(self, obj: str) -> str | None:
        """The counted class that stands for ``obj`` (a class or node name): its normalised class,
        else its head noun; None when neither was counted (the marginal answers for it)."""
        cls = normalise(obj)
        for c in (cls, head_noun(cls)):
            if c in self.counts:
                return c
        return None

    def _marginal(self, key: str) -> float:
        total, size = sum(self.marginal.values()), len(self.marginal) + 1
        n = self.marginal.get(key)
        if n is None:
            holder, rel = key.split("|")
            n = self.marginal.get(_key(head_noun(holder), rel), 0)
        return (n + 1) / (total + size)

    def probability(self, obj: str, holder: str, relation: str | Relation) -> float:
        """``P(holder, relation | obj)`` smoothed toward the marginal (module doc). ``obj`` and
        ``holder`` may be node names or classes; a holder class never counted with ``obj`` backs
        off to its head noun."""
        rel = relation.value if isinstance(relation, Relation) else relation
        h = normalise(holder)
        own = self.counts.get(self.resolve(obj) or "", {})
        n = own.get(_key(h, rel))
        if n is None:
            n = own.get(_key(head_noun(h), rel), 0)
        return (n + self.alpha * self._marginal(_key(h, rel))) / (sum(own.values()) + self.alpha)

    def holders(self, obj: str, top: int | None = 10) -> list[Placement]:
        """The most probable holders of ``obj``'s class, best first; :class:`PriorsError` for a
        class never counted (nor its head noun)."""
        cls = self.resolve(obj)
        if cls is None:
            known = difflib.get_close_matches(normalise(obj), list(self.counts), n=5, cutoff=0.6)
            raise PriorsError(f"no train-pool scene has an object of class {normalise(obj)!r} (nor "
                              f"{head_noun(normalise(obj))!r})" + (f"; close: {', '.join(known)}" if known else "")
                              + f"; {len(self.counts)} classes are known (`lookplangraph grasif priors --list`)")
        own = self.counts[cls]
        p = {k: self.probability(cls, *k.split("|")) for k in set(own) | set(self.marginal)}
        ranked = sorted(p, key=lambda k: (-p[k], k))
        return [Placement(*k.split("|"), p[k], own.get(k, 0)) for k in ranked[:top]]

    def to_dict(self) -> dict:
        return {"protocol": "priors_v1", "manifest": "heldout_v1", "alpha": self.alpha,
                "about": "P(holder class, relation | object class) counted over the train pool's initial graphs "
                         "(grasif.priors); regenerate with `lookplangraph grasif priors --rebuild`",
                "sources": dict(sorted(self.sources.items())),
                "marginal": dict(sorted(self.marginal.items())),
                "counts": {c: dict(sorted(v.items())) for c, v in sorted(self.counts.items())}}

    @classmethod
    def from_dict(cls, d: dict) -> "Priors":
        try:
            return cls(counts=d["counts"], marginal=d["marginal"], sources=d["sources"], alpha=float(d["alpha"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise PriorsError(f"not a priors file: {exc}") from None


def placements(graph: SceneGraph) -> list[tuple[str, str, str]]:
    """``(object, relation, holder)`` of every object on or inside another node of ``graph``
    (held objects are not placements)."""
    out = []
    for name, node in graph.nodes.items():
        if node.layer is not Layer.OBJECT or name not in graph.parent:
            continue
        holder, rel = graph.parent[name]
        if rel in (Relation.ONTOP, Relation.INSIDE) and holder in graph.nodes \
                and graph.nodes[holder].layer is not Layer.PLACE:
            out.append((name, rel.value, holder))
    return out


def _scene_key(task) -> str:
    prov = task.provenance or {}
    return f"{task.split}:{prov.get('scene') or prov.get('activity') or task.id}"


def build(data_dir: Path, manifest: dict | None = None, progress=None) -> Priors:
    """Count the priors over the train pool of ``manifest`` (default: the pinned one) in the
    GraSIF build ``data_dir``. Raises :class:`grasif.heldout.LeakError` when a task file of the
    build is not the manifest's (another build, another protocol)."""
    manifest = manifest if manifest is not None else heldout.load_manifest()
    index = dataset.read_index(dataset.ensure(data_dir, sorted({k.split("/")[0] for k in manifest["train"]})))
    seen: set[tuple[str, str, str, str]] = set()
    counts: dict[str, Counter] = {}
    sources: dict[str, str] = {}
    pool = sorted(manifest["train"])
    for n, key in enumerate(pool, 1):
        split, task_id = key.split("/", 1)
        path = Path(data_dir) / split / f"{task_id}.json"
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        if sha != manifest["train"][key] or index["splits"].get(split, {}).get(task_id) != sha:
            raise heldout.LeakError(f"{path}: not the task file the manifest pins (rebuild GraSIF, or write a new "
                                    "protocol's manifest)")
        task = load_task(path)
        if heldout.is_eval(task):  # the manifest's own check says this cannot happen; priors never rely on it
            raise heldout.LeakError(f"{key} is an evaluation task")
        scene = _scene_key(task)
        for obj, rel, holder in placements(task.graph):
            if (scene, obj, rel, holder) in seen:
                continue
            seen.add((scene, obj, rel, holder))
            counts.setdefault(normalise(obj), Counter())[_key(normalise(holder), rel)] += 1
        sources[key] = sha
        if progress:
            progress(n, len(pool))
    marginal: Counter = Counter()
    for c in counts.values():
        marginal.update(c)
    return Priors(counts={c: dict(v) for c, v in counts.items()}, marginal=dict(marginal), sources=sources)


def write(priors: Priors, path: Path = PRIORS_FILE) -> Path:
    """Write ``priors`` to ``path`` whole (a temporary file renamed into place)."""
    path = Path(path)
    tmp = path.with_suffix(".part")
    tmp.write_text(json.dumps(priors.to_dict(), indent=1) + "\n")
    tmp.replace(path)
    return path


def load(path: Path = PRIORS_FILE) -> Priors:
    """Priors from a file (:func:`write`'s format); :class:`PriorsError` when it cannot be read."""
    try:
        return Priors.from_dict(json.loads(Path(path).read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise PriorsError(f"{path}: cannot read priors ({exc})") from None


@lru_cache(maxsize=1)
def shipped() -> Priors:
    """The shipped priors (:data:`PRIORS_FILE`), read once."""
    return load(PRIORS_FILE)
