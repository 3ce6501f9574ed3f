"""An activity's initial scene graph (:func:`convert`), with the maps between bddl terms and nodes.

* Places: the room types of the ``inroom`` facts, named ``<room>-1``, in order of first mention.
  Assets: the instances with an ``inroom`` fact. Objects: every other instance except the agent,
  ``ontop``/``inside`` the one parent its init gives. ``agent-1`` stands in the room of the floor
  its ``(ontop agent.n.01_1 floor)`` names, holding nothing.
* Names: ``<word>-<N>`` from ``<word>.<pos>.<sense>_<N>``; a wildcard ``<synset>_*`` takes the next
  free number. :attr:`Converted.instances` maps every node name (rooms too) to its bddl term.
* Affordances and states follow from the synset's abilities (:func:`abilities`): objects
  ``pick_up``; ``rigidBody`` → ``put_on``; ``fillable``/``openable`` → ``put_inside``;
  ``openable`` → ``open``/``close`` and state open/closed; ``toggleable`` → ``turn_on``/
  ``turn_off`` and state on/off, as the init says.

Errors: an object with no or two parents, an asset with a parent, an unknown synset or a graph
:func:`sgs.io.graph_from_dict` rejects raises :class:`grasif.dataset.SourceError` naming the file.
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from grasif.behavior.source import AGENT_SYNSET, KEPT_PREDICATES, SYNSET_RE, Activity, require_bddl
from grasif.dataset import SourceError
from sgs.graph import GraphError, node_class
from sgs.io import graph_from_dict

_AFFORDANCE_ORDER = ("pick_up", "put_on", "put_inside", "open", "close", "turn_on", "turn_off")
_INSTANCE_RE = re.compile(r"^(.+)_(\d+|\*)$")
_TAXONOMY = None
_ABILITY_CACHE: dict[str, frozenset[str]] = {}


def abilities(synset: str) -> frozenset[str]:
    """Taxonomy abilities of ``synset``; for a non-leaf synset, those of more than half of its
    leaf descendants. Unknown synsets raise ``KeyError``."""
    global _TAXONOMY
    if synset in _ABILITY_CACHE:
        return _ABILITY_CACHE[synset]
    if _TAXONOMY is None:
        _TAXONOMY = require_bddl().object_taxonomy.ObjectTaxonomy()
    tax = _TAXONOMY
    if not tax.is_valid_synset(synset):
        raise KeyError(synset)
    if tax.is_leaf(synset):
        out = frozenset(tax.get_abilities(synset))
    else:
        leaves = tax.get_leaf_descendants(synset)
        counts: dict[str, int] = {}
        for leaf in leaves:
            for ab in tax.get_abilities(leaf):
                counts[ab] = counts.get(ab, 0) + 1
        out = frozenset(ab for ab, n in counts.items() if 2 * n > len(leaves))
    _ABILITY_CACHE[synset] = out
    return out


@dataclass(frozen=True, eq=False)
class Converted:
    """An activity's scene graph (paper JSON) with the name maps.

    ``names``: bddl instance → node name; ``rooms``: bddl room type → place name; ``classes``:
    synset → class; ``instances``: node name → bddl term (the provenance map).
    """

    graph: dict
    names: dict[str, str]
    rooms: dict[str, str]
    classes: dict[str, str]

    @property
    def instances(self) -> dict[str, str]:
        out = {place: room for room, place in self.rooms.items()}
        out.update({name: inst for inst, name in self.names.items()})
        return out


def _class_names(act: Activity) -> dict[str, str]:
    words: dict[str, list[str]] = {}
    for synset in act.objects:
        if synset == AGENT_SYNSET:
            continue
        m = SYNSET_RE.match(synset)
        if not m:
            raise SourceError(f"{act.path}: {synset!r} is not a synset like word.n.01")
        word = re.sub(r"[^a-z0-9_\-]", "_", m.group(1)).strip("_-") or "thing"
        words.setdefault(word, []).append(synset)
    out = {}
    for word, synsets in words.items():
        for synset in synsets:
            if len(synsets) == 1:
                out[synset] = word
            else:
                m = SYNSET_RE.match(synset)
                out[synset] = f"{word}_{m.group(2)}{m.group(3)}"
    return out


def _instance_names(act: Activity, classes: dict[str, str]) -> dict[str, str]:
    names: dict[str, str] = {}
    for synset, instances in act.objects.items():
        if synset == AGENT_SYNSET:
            continue
        numbers, wild = [], []
        for inst in instances:
            m = _INSTANCE_RE.match(inst)
            if not m or m.group(1) != synset:
                raise SourceError(f"{act.path}: instance {inst!r} of {synset} is not named {synset}_<N>")
            if m.group(2) == "*":
                wild.append(inst)
            else:
                numbers.append(int(m.group(2)))
                names[inst] = f"{classes[synset]}-{int(m.group(2))}"
        top = max(numbers, default=0)
        for i, inst in enumerate(wild, start=1):
            names[inst] = f"{classes[synset]}-{top + i}"
    if len(set(names.values())) != len(names):
        raise SourceError(f"{act.path}: two instances would get the same node name")
    return names


def convert(act: Activity) -> Converted:
    """The initial scene graph of a kept activity (module doc); :class:`SourceError` naming the file."""
    where = act.path
    classes = _class_names(act)
    names = _instance_names(act, classes)
    synset_of = {inst: s for s, insts in act.objects.items() for inst in insts}
    inroom: dict[str, str] = {}
    parents: dict[str, list[tuple[str, str]]] = {}
    is_open: set[str] = set()
    is_on: set[str] = set()
    room_order: list[str] = []
    agent_support = None
    for fact in act.init:
        positive = fact[0] != "not"
        atom = fact if positive else fact[1]
        pred, args = atom[0], atom[1:]
        if pred not in KEPT_PREDICATES:
            raise SourceError(f"{where}: init predicate {pred!r} is outside {sorted(KEPT_PREDICATES)}")
        for a in args[:1] + (args[1:] if pred != "inroom" else []):
            if a not in synset_of:
                raise SourceError(f"{where}: init fact {atom} names an unknown instance {a!r}")
        if not positive:
            if pred in ("open", "toggled_on"):
                continue  # closed / off is the default
            raise SourceError(f"{where}: negated init fact {atom} is not supported")
        if synset_of[args[0]] == AGENT_SYNSET:
            if pred != "ontop" or agent_support is not None:
                raise SourceError(f"{where}: the agent must be placed by one (ontop agent floor) fact")
            agent_support = args[1]
        elif pred == "inroom":
            inroom[args[0]] = args[1]
            if args[1] not in room_order:
                room_order.append(args[1])
        elif pred in ("ontop", "inside"):
            parents.setdefault(args[0], []).append((pred, args[1]))
        elif pred == "open":
            is_open.add(args[0])
        else:
            is_on.add(args[0])
    rooms = {room: f"{re.sub(r'[^a-z0-9_]', '_', room)}-1" for room in room_order}
    if not rooms:
        raise SourceError(f"{where}: no inroom fact, so no room")
    if agent_support not in inroom:
        raise SourceError(f"{where}: the agent must stand on an inroom instance (a floor), got {agent_support!r}")

    asset_entries, object_entries = [], []
    for synset, instances in act.objects.items():
        if synset == AGENT_SYNSET:
            continue
        try:
            abl = abilities(synset)
        except KeyError:
            raise SourceError(f"{where}: synset {synset!r} is not in bddl's object taxonomy") from None
        for inst in instances:
            name = names[inst]
            affordances = set()
            states = []
            if "rigidBody" in abl:
                affordances.add("put_on")
            if "fillable" in abl or "openable" in abl:
                affordances.add("put_inside")
            if "openable" in abl:
                affordances |= {"open", "close"}
                states.append("open" if inst in is_open else "closed")
            elif inst in is_open:
                raise SourceError(f"{where}: (open {inst}) but {synset} is not openable")
            if "toggleable" in abl:
                affordances |= {"turn_on", "turn_off"}
                states.append("on" if inst in is_on else "off")
            elif inst in is_on:
                raise SourceError(f"{where}: (toggled_on {inst}) but {synset} is not toggleable")
            entry: dict[str, Any] = {"name": name}
            if inst in inroom:
                if inst in parents:
                    raise SourceError(f"{where}: {inst} is inroom {inroom[inst]} and also {parents[inst][0][0]} {parents[inst][0][1]}")
                entry["room"] = rooms[inroom[inst]]
                target = asset_entries
            else:
                got = parents.get(inst, [])
                if len(got) != 1:
                    raise SourceError(f"{where}: object {inst} needs exactly one ontop/inside parent in the init, has {len(got)}")
                rel, par = got[0]
                if synset_of.get(par) == AGENT_SYNSET:
                    raise SourceError(f"{where}: {inst} is {rel} the agent")
                entry["relation"] = f"{rel}_of"
                entry["related_to"] = names[par]
                affordances.add("pick_up")
                target = object_entries
            entry["states"] = states
            entry["affordances"] = [a for a in _AFFORDANCE_ORDER if a in affordances]
            entry["properties"] = []
            target.append(entry)
    graph = {"nodes": {
        "rooms": [{"name": rooms[r]} for r in room_order],
        "asset": asset_entries,
        "objects": object_entries,
        "agent": {"name": "agent-1", "location": rooms[inroom[agent_support]], "holding": "nothing"},
    }}
    try:
        graph_from_dict(graph)
    except GraphError as exc:
        raise SourceError(f"{where}: the converted graph is invalid: {'; '.join(exc.problems)}") from None
    for inst, name in names.items():
        if node_class(name) != classes[synset_of[inst]]:
            raise SourceError(f"{where}: node name {name} does not read back as class {classes[synset_of[inst]]}")
    return Converted(graph, names, rooms, classes)
