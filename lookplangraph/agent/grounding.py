"""Whether an action names the node the instruction picks out by a property or a place (the
planner's ``grounding_check``).

A node's *descriptors* (:func:`descriptors`) are its properties and, for an asset, its room's
class words and properties ("kitchen") and, in a person's room, the owner ("Tom's"). A
descriptor is *attached* to a class when the instruction says it right before the class's words
("the red stapler") and some node of that class in the memory graph has it. An action is refused
when a node it moves, opens, toggles or puts something on or in lacks an attached descriptor
while another node of its class has them all; the feedback names the node the instruction
means. An object may also be picked out by *where it stands* (:func:`placed`: "the mug on the
table", "the gloves lying on the exam table"), checked in the memory graph of the step; an
object the agent has held (``moved``) is no longer described by where it stood. A descriptor said
only where something must leave or not be (:func:`said_away`) does not check destinations.

Invariants: the check reads the instruction and the memory graph only, never the task's goal;
looking (``discover_objects``) is never refused; properties do not change and assets do not
move, so a property or place-of-asset mismatch holds for the whole episode. Docs:
``docs/concepts/loop.md`` (*Two rules beyond the paper's*).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from sgs.actions import Action
from sgs.graph import Layer, Relation, SceneGraph, node_class

from grasif.priors import normalise
from lookplangraph.agent.recall import spoken


#: A person's room (``toms_office-1``): its nodes are described as that person's ("Tom's desk").
_OWNED = re.compile(r"^([a-z]+)s_office$")


def descriptors(graph: SceneGraph, name: str) -> list[str]:
    """What may stand before a node's class in an instruction to pick it out: its properties and,
    for an asset (assets do not move), its place's class words and properties ("kitchen" for
    ``fridge-1`` in ``kitchen-1``, "main kitchen") and in a person's room (``toms_office-1``) the
    owner ("Tom's")."""
    out = list(graph.nodes[name].properties or ())
    place = graph.place_of(name)
    if graph.nodes[name].layer is Layer.ASSET and place is not None:
        cls = node_class(place)
        out.append(cls.replace("_", " "))
        out += list(graph.nodes[place].properties or ())
        owner = _OWNED.match(cls)
        if owner:
            out.append(f"{owner.group(1)}'s")
    return out


def attached(instruction: str, graph: SceneGraph) -> dict[str, frozenset[str]]:
    """Class (:func:`grasif.priors.normalise`) of an object or asset -> the descriptors
    (:func:`descriptors`) ``instruction`` attaches to it (module doc); classes without any are
    left out."""
    text = spoken(instruction)
    out: dict[str, set[str]] = {}
    for name in (*graph.names(Layer.OBJECT), *graph.names(Layer.ASSET)):
        cls = normalise(node_class(name))
        words = cls.replace("_", " ")
        for desc in descriptors(graph, name):
            if spoken(f"{desc} {words}") in text:
                out.setdefault(cls, set()).add(desc)
    return {cls: frozenset(props) for cls, props in out.items()}


def said_away(instruction: str, graph: SceneGraph, wanted: dict[str, frozenset[str]] | None = None) -> frozenset[str]:
    """The classes (:func:`grasif.priors.normalise`) whose descriptors ``instruction`` says only
    where something must leave or not be (module doc): "take the phone *off* Hugo's desk", "*no*
    pens should be left on Alice's desk". A destination of such a class is not checked: the one
    the instruction wants is another. ``wanted``: :func:`attached` of the same, if at hand."""
    sentences = [spoken(sentence) for sentence in re.split(r"[.!?;]+", instruction)]
    away = set()
    for cls, descs in (attached(instruction, graph) if wanted is None else wanted).items():
        mentions = [(text, phrase) for phrase in (spoken(f"{d} {cls.replace('_', ' ')}") for d in descs)
                    for text in sentences if phrase in text]
        if mentions and not any(_said_as_wanted(text, phrase) for text, phrase in mentions):
            away.add(cls)
    return frozenset(away)


def readings(instruction: str, graph: SceneGraph, places: bool = True):
    """What the check reads of ``instruction`` in ``graph``: what it attaches (:func:`attached`),
    where it places objects (:func:`placed`, with ``places``; else nothing) and what it says only
    as a place to leave (:func:`said_away`), as :func:`mismatch` takes them."""
    wanted = attached(instruction, graph)
    where = placed(instruction, graph) if places else {}
    return wanted, where, said_away(instruction, graph, wanted)


def refusal(instruction: str, action: Action, graph: SceneGraph, moved: Collection[str] = (),
            places: bool = True) -> str | None:
    """The check as the planner's loop asks it of one action in the memory graph of its step:
    :func:`mismatch` with the instruction's :func:`readings`; ``moved``: the objects the agent
    has held in the episode."""
    wanted, where, away = readings(instruction, graph, places)
    return mismatch(action, graph, wanted, where, moved, away)


#: Words after which a node is where something is taken from, must leave or must not be ("the
#: bandages *from* the kit", "take the phone *off* Hugo's desk"): said after a class, the node
#: says where an object stands (:func:`placed`); said before a described node, the node the
#: instruction wants is another one (:func:`said_away`). Longer first: they are matched in order.
AWAY = ("off of", "out of", "away from", "free of", "from", "off")
NEGATIONS = frozenset(("no", "not", "t", "never", "nothing", "none"))


def _said_as_wanted(text: str, phrase: str) -> bool:
    """Whether the spoken sentence ``text`` says ``phrase`` at least once other than after a word
    of :data:`AWAY` (a determiner between) or in a sentence with a negation."""
    at = text.find(phrase)
    if at < 0:
        return False
    if NEGATIONS.intersection(text.split()):
        return False
    while at >= 0:
        before = text[:at].split()
        if before and before[-1] in _DETERMINERS:
            before = before[:-1]
        if not any(" ".join(before[-len(w.split()):]) == w for w in AWAY):
            return True
        at = text.find(phrase, at + 1)
    return False


#: Actions that only look or walk: discovering another desk while searching is not taking it for
#: the instruction's (and ``go_to`` names a place).
LOOKING = ("discover_objects", "go_to", "done")


def named_nodes(action: Action, graph: SceneGraph) -> list[str]:
    """The nodes ``action`` acts on or puts something on or in: its ``node`` (not the held object
    that ``put_on``/``put_inside`` may repeat) and its ``destination``; none for :data:`LOOKING`."""
    if action.function_name in LOOKING:
        return []
    out = [action.node] if action.node is not None else []
    if action.function_name in ("put_on", "put_inside") and action.node == graph.agent.holding:
        out = []
    if action.destination is not None:
        out.append(action.destination)
    return out


def mismatch(action: Action, graph: SceneGraph, wanted: dict[str, frozenset[str]],
             places: dict[str, frozenset[str]] | None = None, moved: Collection[str] = (),
             away: Collection[str] = ()) -> str | None:
    """Feedback when ``action`` names (:func:`named_nodes`) an object or asset of a class the
    instruction describes (``wanted``, from :func:`attached`) without all of those descriptors
    while another node of the class has them all, or an object of a class the instruction places
    (``places``, from :func:`placed`) that stands elsewhere while one of the class stands there
    (objects in ``moved``, those the agent has held, are not checked by place); ``None``
    otherwise (also for names that are no node: the simulator's checks answer those). A
    destination of a class in ``away`` (:func:`said_away`) is not checked by descriptor."""
    if not wanted and not places:
        return None
    for node in named_nodes(action, graph):
        if node not in graph.nodes or graph.nodes[node].layer not in (Layer.OBJECT, Layer.ASSET):
            continue
        cls = normalise(node_class(node))
        # put_on(X) alone names its destination in the node slot
        destination = node == action.destination or action.function_name in ("put_on", "put_inside")
        wrong_place = None if destination else _place_mismatch(action, graph, node, (places or {}).get(cls), moved)
        if wrong_place:
            return wrong_place
        if cls in away and destination:
            continue
        props = wanted.get(cls)
        if not props or props <= set(descriptors(graph, node)):
            continue
        layer = graph.nodes[node].layer
        fitting = [n for n in graph.names(layer)
                   if normalise(node_class(n)) == cls and props <= set(descriptors(graph, n))]
        if not fitting:
            continue
        asked = " ".join(sorted(props)) + " " + cls.replace("_", " ")
        return (f"{action}: {node} is not the {asked} the instruction names ({_described(graph, node)}); "
                f"the {asked}: {', '.join(f'{n} ({_described(graph, n)})' for n in fitting)}")
    return None


def _described(graph: SceneGraph, name: str) -> str:
    """``blue, in printing_room-1``: a node's properties and its place, for feedback."""
    return ", ".join([*(graph.nodes[name].properties or ()), f"in {graph.place_of(name)}"])


# -- where an object stands ----------------------------------------------------------------------
#: Words that introduce where an object stands, or could be its destination.
PLACE_WORDS = ("on top of", "on", "in", "inside", "at", "under", "next to", "by")
#: Words between the class and a place word that make the place a description ("the mug lying on").
STANDING = ("lying", "sitting", "standing", "left", "kept", "stored", "that is", "that are", "which is",
            "which are", "that s", "still", "currently")
#: Verbs that put things somewhere or ask for them there: after one, "the mug on the table" may
#: say where the mug goes ("we need two mugs on the table").
PUTTING = frozenset("put place set hang move bring take carry throw pack file return drop stick store "
                    "stack lay get give clear tidy empty fetch grab slide tuck stash hand need want like "
                    "wish prefer require".split())
#: Verbs after which a place is a constraint, not a description ("keep the cans out of that bucket").
KEEPING = frozenset(("keep", "leave", "stay"))
#: Words before a destination that follows a described object ("the mug on the table *to* the sink").
TOWARDS = ("back into", "back in", "back on", "back to", "into", "onto", "to", "in", "on", "inside")
_DETERMINERS = frozenset("the a an her his their our my your its this that".split())


def whereabouts(graph: SceneGraph, name: str) -> set[str]:
    """The phrases (:func:`lookplangraph.agent.recall.spoken` form, without the outer spaces) that
    say where ``name`` stands: for each node it is on or in, up to its room, the node's class words
    and, with each of its descriptors (:func:`descriptors`), "<descriptor> <class words>"."""
    out: set[str] = set()
    edge = graph.parent.get(name)
    while edge is not None and edge[0] in graph.nodes:
        holder = edge[0]
        words = node_class(holder).replace("_", " ")
        out.add(spoken(words).strip())
        extra = graph.nodes[holder].properties or () if graph.nodes[holder].layer is Layer.PLACE else descriptors(graph, holder)
        out.update(spoken(_before(d, words)).strip() for d in extra)
        if graph.nodes[holder].layer is Layer.PLACE:
            break
        edge = graph.parent.get(holder)
    return out


def placed(instruction: str, graph: SceneGraph) -> dict[str, frozenset[str]]:
    """Class of an object -> the phrases (:func:`whereabouts`) by which ``instruction`` says where
    it stands (module doc); only phrases that some object of the class in ``graph`` stands at."""
    by_class: dict[str, set[str]] = {}
    for name in graph.names(Layer.OBJECT):
        if graph.agent.holding != name:
            by_class.setdefault(normalise(node_class(name)), set()).update(whereabouts(graph, name))
    # what a destination after the description may be: an asset or an object, said with or without
    # one of its descriptors
    things = {spoken(phrase).strip() for n in (*graph.names(Layer.ASSET), *graph.names(Layer.OBJECT))
              for phrase in _node_phrases(graph, n)}
    out: dict[str, set[str]] = {}
    for sentence in re.split(r"[.!?;]+", instruction):
        words = spoken(sentence).split()
        for cls, where in by_class.items():
            cw = spoken(cls.replace("_", " ")).split()
            for i in range(len(words) - len(cw) + 1):
                if words[i:i + len(cw)] != cw:
                    continue
                found = _place_after(words, i, len(cw), where, things)
                if found:
                    out.setdefault(cls, set()).add(found)
    return {cls: frozenset(p) for cls, p in out.items()}


def _node_phrases(graph: SceneGraph, name: str) -> list[str]:
    """How an instruction may say an asset or an object: its class words, alone and after each of
    its descriptors (:func:`descriptors`)."""
    words = node_class(name).replace("_", " ")
    return [words] + [_before(d, words) for d in descriptors(graph, name)]


def _before(descriptor: str, words: str) -> str:
    """``descriptor`` said before a class's ``words`` ("kitchen table"), or alone where it already
    ends with them (a property "instrument trolley" on a trolley)."""
    return descriptor if spoken(descriptor).endswith(spoken(words)) else f"{descriptor} {words}"


def _starts(words: list[str], at: int, options) -> int:
    """Length (in words) of the first of ``options`` that ``words`` say at ``at``; 0 if none."""
    for option in options:
        ow = option.split()
        if words[at:at + len(ow)] == ow:
            return len(ow)
    return 0


def _phrase_at(words: list[str], at: int, phrases) -> str | None:
    """The longest of ``phrases`` said at ``at`` (after a determiner), or ``None``."""
    if at < len(words) and words[at] in _DETERMINERS:
        at += 1
    best = None
    for phrase in phrases:
        pw = phrase.split()
        if words[at:at + len(pw)] == pw and (best is None or len(pw) > len(best.split())):
            best = phrase
    return best


def _place_after(words: list[str], i: int, n: int, where: set[str], things: set[str]) -> str | None:
    """The place phrase describing the class said at ``words[i:i+n]``, if the words after it say
    where such an object stands and cannot be its destination (module doc); ``things``: the
    phrases that name an asset or an object, which a destination after it must start with."""
    if KEEPING.intersection(words[:i]):
        return None  # "keep the cans out of that bucket": where they must not go
    at = i + n
    standing = _starts(words, at, STANDING)
    at += standing
    source = _starts(words, at, AWAY)
    prep = source or _starts(words, at, PLACE_WORDS)
    if not prep:
        return None
    phrase = _phrase_at(words, at + prep, where)
    if phrase is None:
        return None
    if source or standing or not PUTTING.intersection(words[:i]):
        return phrase
    # after a putting verb, "on the table" is where it stands only if a destination follows
    end = at + prep + (words[at + prep] in _DETERMINERS) + len(phrase.split())
    for j in range(end, len(words)):
        k = _starts(words, j, TOWARDS)
        if k:
            det = j + k + (j + k < len(words) and words[j + k] in _DETERMINERS)
            rest = " ".join(words[det:])
            if any(rest == t or rest.startswith(t + " ") for t in things):
                return phrase
    return None


def _place_mismatch(action: Action, graph: SceneGraph, node: str, phrases: frozenset[str] | None,
                    moved: Collection[str]) -> str | None:
    """The feedback of :func:`mismatch` for an object that is not where the instruction says
    while another of its class is."""
    if not phrases or graph.nodes[node].layer is not Layer.OBJECT or node in moved or graph.agent.holding == node:
        return None
    if phrases & whereabouts(graph, node):
        return None
    cls = normalise(node_class(node))
    fitting = [n for n in graph.names(Layer.OBJECT)
               if normalise(node_class(n)) == cls and n != graph.agent.holding and n not in moved
               and phrases & whereabouts(graph, n)]
    if not fitting:
        return None
    return (f"{action}: {node} is not the {cls.replace('_', ' ')} the instruction names by where it stands "
            f"({_stands(graph, node)}); the {cls.replace('_', ' ')} there: "
            f"{', '.join(f'{n} ({_stands(graph, n)})' for n in fitting)}")


def _stands(graph: SceneGraph, name: str) -> str:
    """``on table-1 in kitchen-1``: where a node stands, for feedback."""
    holder, rel = graph.parent[name]
    if graph.nodes[holder].layer is Layer.PLACE:
        return f"in {holder}"
    return f"{'on' if rel is Relation.ONTOP else rel.value} {holder} in {graph.place_of(name)}"
