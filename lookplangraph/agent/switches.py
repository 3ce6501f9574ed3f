"""What an instruction asks of the devices it names, and the reminder on a ``done()`` that leaves
one otherwise (the planner's ``remind_switch``).

A *device* is a node of the memory graph with an on/off state. A *switch request* is a device
class the instruction names and the state it asks of it: "switch on the lamp", "turn the TV off",
"start the dishwasher", "leave his night light on", "the lamp should be switched on". A phrase
without a device of its own ("switch it on", "start a cycle", "run it") asks it of the device
named last before it. A clause (the text between ``.``, ``!``, ``?``, ``;``, ``,`` and "but")
with a negation ("don't switch on the fan") asks nothing; "left ... on" describes, it does not
ask, and an "on" followed by a place ("leave it on the sofa") is where, not a state. Words of
another class of the graph are not a device's ("the TV stand" is not a TV). A class with several
devices is narrowed to those the instruction's descriptors pick out
(:func:`lookplangraph.agent.grounding.attached`), then to those the LM acted on; a request still
naming several, or none, is left alone.

Invariants: reads the instruction, the memory graph and the LM's own steps only, never the
goal; names only a device whose remembered state is the opposite of the one asked. Docs:
``docs/concepts/loop.md`` (*remind_switch*).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from sgs.graph import Node, SceneGraph, node_class

from grasif.priors import normalise
from lookplangraph.agent.grounding import attached, descriptors
from lookplangraph.agent.recall import spoken

#: Words that undo a clause's request ("don't" is spoken "don t").
NEGATIONS = frozenset({"not", "don", "dont", "never", "without", "no", "nor"})
#: Verbs asking a state with the word "on" or "off" right after them or after their object
#: ("switch on the lamp", "turn the TV off", "leave it on").
_PARTICLE_VERBS = frozenset({"switch", "turn", "leave", "keep", "power", "shut"})
#: Participles that ask a state where the clause says it is wanted ("the lamp should be switched
#: on", "I'd like the kettle switched on"), not where it describes ("the TV was switched on").
_PARTICIPLES = frozenset({"switched", "turned", "powered"})
_WANTING = frozenset({"should", "must", "need", "needs", "want", "wants", "like", "please", "get", "have"})
#: Verbs asking a device on by themselves, followed by a device, "it"/"them", or what it runs.
_START_VERBS = frozenset({"start", "run"})
_RUN_OBJECTS = frozenset({"it", "them", "cycle", "program", "programme", "wash", "load"})
#: Words that may stand between a particle verb and its particle ("turn the big TV in the hall off").
_MAX_BETWEEN = 6
_CLAUSE = re.compile(r"[.!?;,]+|\bbut\b", re.IGNORECASE)
#: Words that may come between a verb and its device ("switch on *his* night light").
_DETERMINERS = frozenset({"the", "a", "an", "his", "her", "their", "my", "our", "your", "its", "this", "that",
                          "both", "all", "every"})
#: Words after which what follows is a place, not the verb's object ("run *to* the toilet").
_PREPOSITIONS = frozenset({"to", "into", "in", "at", "from", "by", "over", "around", "for", "with", "toward",
                           "towards", "through", "on", "off", "up", "down", "out", "of"})
#: Words that may follow an "on" or "off" that ends a request ("leave it on for Leo"); any other
#: word makes it a place ("leave it on the sofa", "leave the TV on top of the cabinet").
_AFTER_PARTICLE = frozenset({"and", "then", "again", "too", "please", "now", "for", "while", "when", "until", "as",
                             "so", "before", "after", "tonight", "overnight", "afterwards", "all", "it", "them"})


@dataclass(frozen=True, slots=True)
class SwitchRequest:
    """The instruction asks ``state`` (``"on"`` or ``"off"``) of the devices of class ``cls``
    (:func:`grasif.priors.normalise`)."""

    cls: str
    state: str


def _is_device(node: Node) -> bool:
    """Whether ``node`` has an on/off state (module doc)."""
    return node.has("on") or node.has("off")


def device_classes(graph: SceneGraph) -> frozenset[str]:
    """The classes (:func:`grasif.priors.normalise`) of ``graph``'s devices."""
    return frozenset(normalise(node_class(n)) for n, node in graph.nodes.items() if _is_device(node))


def requests(instruction: str, graph: SceneGraph) -> list[SwitchRequest]:
    """The switch requests of ``instruction`` over the device classes of ``graph`` (module doc),
    in the order said; a class asked both ways keeps the last."""
    devices = device_classes(graph)
    classes = frozenset(normalise(node_class(n)) for n in graph.nodes) | devices
    asked: dict[str, str] = {}
    last: str | None = None  # the device class named last, for "switch it on"
    for clause in _CLAUSE.split(instruction):
        words = spoken(clause).split()
        mentions = _mentions(words, classes, devices)
        if not NEGATIONS.intersection(words):
            for at, state, objects in _phrases(words, mentions):
                before = [m[2] for m in mentions if m[0] < at]
                named_last = before[-1] if before else last
                for cls in objects or ([named_last] if named_last is not None else []):
                    asked.pop(cls, None)
                    asked[cls] = state
        if mentions:
            last = mentions[-1][2]
    return [SwitchRequest(cls, state) for cls, state in asked.items()]


def _mentions(words: list[str], classes: Collection[str], devices: Collection[str]) -> list[tuple[int, int, str]]:
    """``(start, end, class)`` of each device class said in ``words``, in order: up to three words
    that :func:`grasif.priors.normalise` makes a class of the graph ("TV" is a television), the
    longest first, so that "desk lamp" is a desk lamp, not a lamp, and "TV stand" no TV."""
    out = []
    i = 0
    while i < len(words):
        said = ((n, normalise("_".join(words[i:i + n]))) for n in (3, 2, 1) if i + n <= len(words))
        n, cls = next(((n, cls) for n, cls in said if cls in classes), (1, None))
        if cls in devices:
            out.append((i, i + n, cls))
        i += n
    return out


def _phrases(words: list[str], mentions: list[tuple[int, int, str]]) -> list[tuple[int, str, list[str]]]:
    """``(position, state, classes)`` of each phrase in ``words`` that asks a device on or off:
    the device classes it is said of, or none for a pronoun ("switch it on", "start a cycle": the
    device named last). A phrase whose object is something else ("turn on the tap") or whose "on"
    is followed by a place ("leave it on the sofa") is left out."""
    out = []
    for i, w in enumerate(words):
        if w in _PARTICLE_VERBS:
            j = next((j for j in range(i + 1, min(len(words), i + 2 + _MAX_BETWEEN))
                      if words[j] in ("on", "off")), None)
            if j is None or (w == "shut" and words[j] == "on"):  # "shut" closes; "shut off" switches
                continue
            if j == i + 1:  # "switch on the lamp", or "switch on" alone after the device
                after = _objects(j + 1, words, mentions)
                if after or _ends(words, j):
                    out.append((i, words[j], after))
            elif _ends(words, j):
                between = [m[2] for m in mentions if i < m[0] < j]
                if between or words[i + 1:j] in (["it"], ["them"]):
                    out.append((i, words[j], between))
        elif w in _PARTICIPLES and words[i + 1:i + 2] in (["on"], ["off"]) and _ends(words, i + 1) \
                and _WANTING.intersection(words[:i]):
            out.append((i, words[i + 1], []))  # "the lamp should be switched on": the device named last
        elif w in _START_VERBS:
            after = _objects(i + 1, words, mentions)
            skip = 1 if words[i + 1:i + 2] in (["a"], ["the"], ["another"]) else 0
            if after:
                out.append((i, "on", after))
            elif words[i + 1 + skip:i + 2 + skip] and words[i + 1 + skip] in _RUN_OBJECTS:
                out.append((i, "on", []))
    return out


def _ends(words: list[str], j: int) -> bool:
    """Whether the "on" or "off" at ``words[j]`` ends its phrase (:data:`_AFTER_PARTICLE`)."""
    return j + 1 == len(words) or words[j + 1] in _AFTER_PARTICLE


def _objects(at: int, words: list[str], mentions: list[tuple[int, int, str]]) -> list[str]:
    """The device classes said from ``words[at]`` on as the object of a verb: a device right
    there, after one word, or after two of which the first is a determiner ("his night light",
    "the examination lamp"), none of them a preposition, and the devices joined to it by "and"
    or "or"."""
    starts = {m[0]: m for m in mentions}
    out = []
    i = at
    while True:
        k = next((k for k in range(i, min(i + 3, len(words))) if k in starts), None)
        if k is None or (k - i == 2 and words[i] not in _DETERMINERS) or _PREPOSITIONS.intersection(words[i:k]):
            return out
        out.append(starts[k][2])
        i = starts[k][1]
        if words[i:i + 1] not in (["and"], ["or"]):
            return out
        i += 1


def reminder(instruction: str, graph: SceneGraph, acted_on: Collection[str]) -> str | None:
    """The feedback on a ``done()`` under ``remind_switch``: each device the instruction asks on
    or off (:func:`requests`) whose state in ``graph`` is the opposite, narrowed as the module doc
    says (``acted_on``: the nodes the LM's executed steps named); None when there is none."""
    wanted = attached(instruction, graph)
    wrong = []
    for req in requests(instruction, graph):
        nodes = [n for n, node in graph.nodes.items() if normalise(node_class(n)) == req.cls and _is_device(node)]
        if req.cls in wanted:
            nodes = [n for n in nodes if wanted[req.cls] <= set(descriptors(graph, n))] or nodes
        if len(nodes) > 1:
            nodes = [n for n in nodes if n in acted_on]
        if len(nodes) == 1 and not graph.nodes[nodes[0]].has(req.state):
            wrong.append((nodes[0], req.state))
    if not wrong:
        return None
    said = "; ".join(f"{n} is {'off' if s == 'on' else 'on'} and the instruction asks for it {s}" for n, s in wrong)
    todo = ", ".join(f"turn_{s}({n})" for n, s in wrong)
    return f"{said}: {todo} before done()"
