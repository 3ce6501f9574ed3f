"""From the parser's entries to an :class:`~sim_adapters.base.Observation`: names bound to the
memory's names, parents checked, parents before children.

Binding rules, in order, for each entry's ``name`` (compared after :func:`canonical`: lower case,
spaces to ``_``, ``apple 1`` / ``apple_1`` / ``apple1`` to ``apple-1``, a leading article
dropped):

1. the observed node itself is not an object of its own observation: dropped;
2. a numbered name already used by an earlier entry: dropped (small models loop on one entry);
   a bare class (``apple`` twice) is one more instance each time;
3. a name the memory knows (``names``): kept, the object is confirmed where it was seen;
4. otherwise, an unclaimed prior of the same class remembered under the observed node
   (``priors``, in their order) is confirmed under that name;
5. otherwise a new name ``class-N``, N one above the highest number of that class in use.

``related_to`` must be the observed node or another entry of the same reply (by its raw or
bound name, or a class with one entry); anything else is an unknown parent and the entry is
dropped, and so is everything under a dropped entry. ``relation`` accepts ``ontop``/``inside``
and common variants (``ontop_of``, ``on top of``, ``in``...); ``states`` a list or a string of
words, mapped to the state vocabulary (``turned_on`` → ``on``); other words are left out with a
note. Nothing here raises on bad input: every dropped entry or word is one note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from sgs.graph import node_class
from sim_adapters.base import Observation, SeenObject

#: The states the augmentation reports (the paper's open/closed/turned on/turned off).
DEFAULT_STATES: tuple[str, ...] = ("open", "closed", "on", "off")

_RELATIONS = {
    "ontop": "ontop", "ontop_of": "ontop", "on_top_of": "ontop", "on_top": "ontop", "on": "ontop", "onto": "ontop",
    "on_of": "ontop", "upon": "ontop",
    "inside": "inside", "inside_of": "inside", "in": "inside", "into": "inside", "within": "inside", "in_of": "inside",
}
_STATE_WORDS = {
    "open": "open", "opened": "open", "closed": "closed", "close": "closed", "shut": "closed",
    "on": "on", "turned_on": "on", "switched_on": "on", "turnedon": "on",
    "off": "off", "turned_off": "off", "switched_off": "off", "turnedoff": "off",
    "clean": "clean", "dirty": "dirty",
}
_ARTICLE_RE = re.compile(r"^(?:the|a|an)_+")
_NUMBERED_RE = re.compile(r"^(.*?)[-_]?(\d+)$")


def canonical(name: str) -> str:
    """``"The Apple 1"`` → ``apple-1``; ``"wine glass"`` → ``wine_glass``; ``dish_bowl1`` → ``dish_bowl-1``;
    ``bottle__of__lotion`` → ``bottle_of_lotion`` (BEHAVIOR's double underscores read as one)."""
    s = re.sub(r"[\s_]+", "_", str(name).strip().lower().strip("\"'`.,;:"))
    s = _ARTICLE_RE.sub("", s)
    m = _NUMBERED_RE.match(s)
    if m and m.group(1):
        return f"{m.group(1).rstrip('-_')}-{int(m.group(2))}"
    return s


def _number(name: str) -> int | None:
    m = _NUMBERED_RE.match(name)
    return int(m.group(2)) if m and m.group(1) else None


def _words(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [w for w in re.split(r"[,;/]|\band\b", value) if w.strip()]
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for v in value:
            out += _words(v) if isinstance(v, str) else [str(v)]
        return out
    return [str(value)]


@dataclass(frozen=True)
class _Entry:
    raw: str  # canonical form of the name as written
    name: str  # bound name
    relation: str
    related_to: str  # canonical, not yet resolved
    states: tuple[str, ...]


def to_observation(node: str, entries: Any, names: Iterable[str] = (), priors: Sequence[SeenObject | str] = (),
                   states: Sequence[str] = DEFAULT_STATES) -> tuple[Observation, list[str]]:
    """The :class:`Observation` of ``node`` that the parser's ``entries`` describe (a list of
    dicts, or ``{"objects": [...]}``), and one note per dropped entry or word (module doc)."""
    notes: list[str] = []
    if isinstance(entries, dict):
        entries = entries.get("objects", entries.get("nodes", [entries]))
    if not isinstance(entries, list):
        return Observation(node), [f"the reply is not a list of objects ({type(entries).__name__})"]
    known = {canonical(n): n for n in names}
    node_key = canonical(node)
    prior_names = [p.name if isinstance(p, SeenObject) else str(p) for p in priors]
    taken: set[str] = set(known.values())  # names that a new object must not take
    # a class as the memory spells it (``bottle__of__lotion``), so new names follow the memory
    spelling = {canonical(node_class(n)): node_class(n) for n in [*known.values(), *prior_names]}
    highest: dict[str, int] = {}
    for n in [*known.values(), *prior_names, node]:
        num = _number(n)
        if num is not None:
            highest[node_class(n)] = max(highest.get(node_class(n), 0), num)
    claimed: set[str] = set()
    bound: list[_Entry] = []
    seen_raw: set[str] = set()
    for i, e in enumerate(entries):
        label = f"entry {i + 1}"
        if not isinstance(e, dict):
            notes.append(f"{label}: not an object ({str(e)[:40]!r}), dropped")
            continue
        raw_name = e.get("name", e.get("id"))
        if not isinstance(raw_name, str) or not canonical(raw_name):
            notes.append(f"{label}: no name, dropped")
            continue
        raw = canonical(raw_name)
        label = f"{raw_name!r}"
        rel_word = e.get("relation")
        relation = _RELATIONS.get(canonical(rel_word)) if isinstance(rel_word, str) else None
        if relation is None:
            notes.append(f"{label}: relation {rel_word!r} is not ontop or inside, dropped")
            continue
        parent_word = e.get("related_to", e.get("parent"))
        if not isinstance(parent_word, str) or not canonical(parent_word):
            notes.append(f"{label}: no related_to, dropped")
            continue
        if raw == node_key:
            notes.append(f"{label}: the observed node itself, dropped")
            continue
        if raw in seen_raw and _number(raw) is not None:
            notes.append(f"{label}: listed twice, the repeat dropped")
            continue
        seen_raw.add(raw)
        word_states = []
        for w in _words(e.get("states")):
            s = _STATE_WORDS.get(canonical(w), canonical(w))
            if s in states:
                if s not in word_states:
                    word_states.append(s)
            elif s not in ("", "none", "null"):
                notes.append(f"{label}: state {w!r} is not one of {', '.join(states)}, left out")
        # -- the name
        if raw in known and known[raw] not in claimed:
            name = known[raw]
        else:
            cls = node_class(raw) if _number(raw) is not None else raw
            cls = spelling.get(cls, cls)
            prior = next((p for p in prior_names if node_class(p) == cls and p not in claimed), None)
            if prior is not None:
                name = prior
            else:
                highest[cls] = highest.get(cls, 0) + 1
                name = f"{cls}-{highest[cls]}"
                while name in taken or name in claimed:
                    highest[cls] += 1
                    name = f"{cls}-{highest[cls]}"
        claimed.add(name)
        bound.append(_Entry(raw, name, relation, canonical(parent_word), tuple(word_states)))

    # -- parents: the node, or another entry by raw name, bound name or unique class
    by_raw: dict[str, str] = {}
    for b in bound:
        by_raw.setdefault(b.raw, b.name)  # a bare class written twice: the first one
    by_name = {b.name: b.name for b in bound}
    by_class: dict[str, list[str]] = {}
    for b in bound:
        by_class.setdefault(node_class(b.name), []).append(b.name)
    parent_of: dict[str, str] = {}
    for b in bound:
        p = b.related_to
        if p == node_key or p == canonical(node_class(node)):
            parent = node
        elif p in by_raw:
            parent = by_raw[p]
        elif p in known and known[p] in by_name:
            parent = known[p]
        elif len(by_class.get(p, ())) == 1:
            parent = by_class[p][0]
        else:
            notes.append(f"{b.name}: related_to {p!r} is neither {node} nor an object of this observation, dropped")
            continue
        if parent == b.name:
            notes.append(f"{b.name}: related to itself, dropped")
            continue
        parent_of[b.name] = parent

    # -- parents before children; what does not hang from the node is dropped
    children: dict[str, list[_Entry]] = {}
    for b in bound:
        if b.name in parent_of:
            children.setdefault(parent_of[b.name], []).append(b)
    ordered: list[SeenObject] = []
    queue = [node]
    while queue:
        par = queue.pop(0)
        for b in children.get(par, ()):
            ordered.append(SeenObject(b.name, b.relation, par, b.states))
            queue.append(b.name)
    placed = {o.name for o in ordered}
    for b in bound:
        if b.name in parent_of and b.name not in placed:
            notes.append(f"{b.name}: its parent {parent_of[b.name]} was dropped or forms a cycle, dropped")
    return Observation(node, tuple(ordered)), notes
