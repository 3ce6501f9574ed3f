"""Text descriptions written from a true subgraph, for measuring the parser stage alone.

A **deterministic writer, not a model**: :func:`write_description` renders an
:class:`~sim_adapters.base.Observation` (what is truly on and inside a node) as the kind of text a
describer VLM gives, so the parser can be measured on many GraSIF observations without images.
The text varies with the seed: sentence templates, the order of the groups, plain class words
("two apples") or the memory's names ("apple-1 and apple-2"), states as adjectives or clauses,
and **distractor** sentences about things that are not there ("No cup is visible."). Things the
parser must leave out (distractors, the node's own state) are written, never the other way round:
every true object is mentioned exactly once, with its relation, its parent and its states of the
vocabulary. The same (observation, seed) always gives the same text.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from sgs.graph import node_class
from sim_adapters.base import Observation, SeenObject
from vlm.binding import DEFAULT_STATES

_NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
            "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
_IRREGULAR = {"knife": "knives", "shelf": "shelves", "leaf": "leaves", "loaf": "loaves", "mouse": "mice",
              "person": "people", "child": "children", "foot": "feet", "tooth": "teeth", "dish": "dishes"}
_STATE_WORDS = {"open": "open", "closed": "closed", "on": "switched on", "off": "switched off",
                "clean": "clean", "dirty": "dirty"}

_ONTOP = [
    "On {the_p} there {be} {x}.",
    "{X} {be} on top of {the_p}.",
    "I can see {x} lying on {the_p}.",
    "{The_p} has {x} on it.",
    "Resting on {the_p}: {x}.",
]
_INSIDE = [
    "Inside {the_p} there {be} {x}.",
    "{X} {be} inside {the_p}.",
    "{The_p} contains {x}.",
    "Looking into {the_p}, I see {x}.",
    "In {the_p}: {x}.",
]
_ABSENT = [
    "No {c} is visible.",
    "There is no {c} here.",
    "I do not see any {cs}.",
    "I looked for {a_c} but there is none.",
]
_OPENINGS = ["", "", "Here is what I see.", "The image shows {the_node}.", "This is {the_node}, seen from the front."]
_NODE_STATE = ["{The_node} itself is {state}.", "{The_node} is {state}."]


def words(cls: str) -> str:
    """``wine_glass`` → ``wine glass``."""
    return re.sub(r"[_\s-]+", " ", cls).strip()


def plural(phrase: str) -> str:
    head, _, last = phrase.rpartition(" ")
    if last in _IRREGULAR:
        p = _IRREGULAR[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        p = last + "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        p = last[:-1] + "ies"
    else:
        p = last + "s"
    return f"{head} {p}" if head else p


def _a(phrase: str) -> str:
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def _count(n: int) -> str:
    return _NUMBERS[n] if n < len(_NUMBERS) else str(n)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def write_description(truth: Observation, seed: int | str = 0, *, distractors: Sequence[str] = (),
                      node_states: Sequence[str] = (), states: Sequence[str] = DEFAULT_STATES,
                      names_probability: float = 0.5) -> str:
    """A description of ``truth`` (module doc). ``distractors``: classes that are *not* there,
    of which up to two are mentioned as absent; ``node_states``: the node's own states (said of
    the node, not an object); ``names_probability``: how often the memory's names are used
    instead of class words (a describer is asked to use known names where it can)."""
    rng = random.Random(f"{seed}|{truth.node}|{len(truth.objects)}")
    objects = list(truth.objects)
    use_names = rng.random() < names_probability
    node_text = truth.node if use_names else words(node_class(truth.node))
    the_node = node_text if use_names else "the " + node_text
    class_count: dict[str, int] = {}
    for o in objects:
        class_count[node_class(o.name)] = class_count.get(node_class(o.name), 0) + 1

    def the(parent: str) -> str:
        if parent == truth.node:
            return the_node
        if use_names or class_count.get(node_class(parent), 0) > 1:
            return parent  # the name says which of several
        return "the " + words(node_class(parent))

    def state_words(o: SeenObject) -> list[str]:
        return [_STATE_WORDS.get(s, s) for s in o.states if s in states]

    # groups of siblings that read as one phrase: same parent, relation, class and states
    groups: dict[tuple, list[SeenObject]] = {}
    for o in objects:
        key = (o.parent, o.relation, node_class(o.name), tuple(s for s in o.states if s in states))
        groups.setdefault(key, []).append(o)
    sentences: list[str] = []
    for (parent, relation, cls, _), members in groups.items():
        sw = state_words(members[0])
        n = len(members)
        # several of a class and one of them holds something: names say which holds what
        named = use_names or (class_count[cls] > 1 and any(o.parent in {m.name for m in members} for o in objects))
        if named:
            base = _join([m.name for m in members])
            if sw:
                base += (f" ({' and '.join(sw)})" if rng.random() < 0.5
                         else f", {'which is' if n == 1 else 'all'} {' and '.join(sw)},")
        else:
            phrase = words(cls) if n == 1 else plural(words(cls))
            if sw and rng.random() < 0.5:
                phrase = f"{' and '.join(sw)} {phrase}"
                sw = []
            base = _a(phrase) if n == 1 else f"{_count(n)} {phrase}"
            if sw:
                base += f" that {'is' if n == 1 else 'are'} {' and '.join(sw)}"
        be = "is" if n == 1 else "are"
        template = rng.choice(_ONTOP if relation == "ontop" else _INSIDE)
        the_p = the(parent)
        sentence = template.format(x=base, X=base if named else _cap(base), be=be, the_p=the_p,
                                   The_p=_cap(the_p) if the_p.startswith("the ") else the_p)
        sentences.append(sentence.replace(",.", ".").replace(",:", ":"))
    rng.shuffle(sentences)

    present = {node_class(o.name) for o in objects}
    absent = [c for c in dict.fromkeys(distractors) if c not in present]
    for c in rng.sample(absent, k=min(len(absent), rng.choice([0, 1, 1, 2]))):
        sentences.insert(rng.randrange(len(sentences) + 1),
                         rng.choice(_ABSENT).format(c=words(c), cs=plural(words(c)), a_c=_a(words(c))))
    shown_states = [_STATE_WORDS.get(s, s) for s in node_states if s in states]
    if shown_states and rng.random() < 0.6:
        sentences.insert(rng.randrange(len(sentences) + 1), rng.choice(_NODE_STATE).format(
            The_node=_cap(the_node) if the_node.startswith("the ") else the_node, state=" and ".join(shown_states)))
    opening = rng.choice(_OPENINGS).format(the_node=the_node)
    if not objects:
        sentences.append(f"Nothing is on or inside {the_node}.")
    return " ".join(s for s in [opening, *sentences] if s)


def describe_truth(truth: Observation, node_states: Sequence[str] = (), seed: int | str = 0) -> str:
    """The text an environment gives for ``describe(node)`` (``parser`` augmentation): ``truth``
    written by :func:`write_description` with class words only, never the memory's names. The
    environments take it as their ``describer`` (:data:`sim_adapters.graph_env.Writer`)."""
    return write_description(truth, seed, node_states=tuple(node_states), names_probability=0.0)
