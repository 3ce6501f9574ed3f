"""The words of intent questions (:mod:`.intents`): a small grammar, drawn with a seeded generator.

A question is put together from parts:

* a **frame** of the intent, in one of three forms: a direct question ("How many mugs are in the
  kitchen?"), an embedded clause after a request ("Could you tell me how many mugs there are in
  the kitchen?", "I'd like to know ...") or an imperative ("Count the mugs in the kitchen.",
  "List ...", "Please name ..."); a direct question may get a prefix ("Quick question: ...");
* alternatives inside a frame, written ``[a|b|c]`` (verbs, "how many" / "what number of",
  "things" / "objects" / "items", "currently", "in total" ...);
* **slots** named in words: a class by its display name (:func:`display`: "hats" for
  ``clothes_hat``, "TV stands" for ``tvstand``) as a plural (:func:`plural_words`: "theses",
  "knives", "scissors") or with its article ("mugs", "a mug"), a state
  as an adjective ("switched on"), the preposition of the relationship ("on", "on top of",
  "in", "inside", "on or in"), an owner ("Tom") or a colour;
* **nodes** named by :func:`describe`: by name, or by a description that names the node alone
  in the scene ("the fridge", "the red mug", "Tom's desk", "the mug in kitchen-1", "the cup on
  table-1"); rooms by name or, when the scene has one room of the kind, "the kitchen".

A description never gives away the answer: a question about an object's room does not name it by
its room, nor one about what it rests on by its holder. A question about what is directly on or
in a node says "directly" when something below it is nested further.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from functools import lru_cache

from sgs.graph import Layer, Relation, SceneGraph, class_index, node_class

from lookplangraph.cypher.intents import EITHER, INSIDE, ONTOP, is_colour, is_owner

#: how each relationship type is said
PREPOSITIONS = {ONTOP: ("on", "on top of"), INSIDE: ("in", "inside"), EITHER: ("on or in", "on or inside", "in or on")}
#: how a state is said (others: the state word, underscores as spaces)
STATE_WORDS = {"on": ("on", "switched on", "turned on"), "off": ("off", "switched off", "turned off"),
               "closed": ("closed", "shut"), "open": ("open",)}
PREFIXES = ("", "", "", "", "Quick question: ", "Excuse me, ", "Hi! ", "Hey, ")
#: requests that take an embedded clause
REQUESTS = ("Tell me {c}.", "Please tell me {c}.", "Could you tell me {c}?", "Can you tell me {c}?",
            "I'd like to know {c}.", "I want to know {c}.", "Do you know {c}?", "Can you check {c}?",
            "Find out {c}, please.")
COMMANDS = ("{R}.", "Please {r}.", "{R}, please.", "Could you {r}?", "Can you {r}?")

_THINGS = "[things|objects|items]"
_ANY_DEPTH = "[at any depth|nested ones included|including things inside other things|directly or indirectly]"
_FURNITURE = "[piece of furniture|asset|fixture or piece of furniture]"

#: intent -> (direct questions, embedded clauses, imperatives); fields: module doc
FRAMES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "count_scene": (
        ("How many {pl} are there[| in total| altogether| in the whole scene]",
         "How many {pl} [do we have|can you find|exist][| in total]", "What is the [total |]number of {pl}",
         "What number of {pl} [are there|can be found][| in total]"),
        ("how many {pl} there are[| in total| altogether]", "what the [total |]number of {pl} is"),
        ("count [the|all the] {pl}", "give me the [total |]number of {pl}")),
    "count_room": (
        ("How many {pl} are [there |]in {room}", "How many {pl} does {room} [have|contain|hold]",
         "What is the number of {pl} in {room}", "In {room}, how many {pl} are there"),
        ("how many {pl} there are in {room}", "how many {pl} {room} [has|contains]"),
        ("count the {pl} in {room}", "give me the number of {pl} in {room}")),
    "count_on": (
        ("How many {pl} are [there |]{directly}{on} {node}", "How many {pl} [sit|rest|can be found] {directly}{on} {node}",
         "What is the number of {pl} {directly}{on} {node}"),
        ("how many {pl} there are {directly}{on} {node}", "how many {pl} are {directly}{on} {node}"),
        ("count the {pl} {directly}{on} {node}", "give me the number of {pl} {directly}{on} {node}")),
    "locate_room": (
        ("[Which|What] room is {obj} in", "In [which|what] room is {obj}", "Which room has {obj}",
         "In which room [can I|will I|would I] find {obj}", "Where is {obj}? [Which room|In which room], I mean"),
        ("which room {obj} is in", "in [which|what] room {obj} is"),
        ("name the room [that has|with] {obj}", "find the room {obj} is in")),
    "locate_holder": (
        ("What is {obj} {on}", "What does {obj} [sit|rest|lie] {on}", "Where exactly is {obj}? What is it {on}"),
        ("what {obj} is {on}", "what {obj} [sits|rests] {on}"),
        ("name [what|the thing] {obj} is {on}", "find out what {obj} [sits|rests] {on}")),
    "contents_direct": (
        ("What is {directly}{on} {node}", "What {things} are {directly}{on} {node}",
         "Which {things} [sit|rest|lie] {directly}{on} {node}"),
        ("what is {directly}{on} {node}", "which {things} are {directly}{on} {node}"),
        ("list [the|all the] {things} {directly}{on} {node}", "name everything {directly}{on} {node}")),
    "contents_deep": (
        ("What is on or in {node}, " + _ANY_DEPTH, "Which {things} are on or in {node}, " + _ANY_DEPTH,
         "What does {node} hold, " + _ANY_DEPTH),
        ("what is on or in {node}, " + _ANY_DEPTH, "everything that {node} holds, " + _ANY_DEPTH),
        ("list everything on or in {node}, " + _ANY_DEPTH, "name all the {things} {node} holds, " + _ANY_DEPTH)),
    "support": (
        ("Which " + _FURNITURE + " ultimately holds {obj}", "What " + _FURNITURE + " is {obj} ultimately on or in",
         "Following what {obj} rests on, which " + _FURNITURE + " do you reach"),
        ("which " + _FURNITURE + " ultimately holds {obj}", "which " + _FURNITURE + " {obj} is ultimately on or in"),
        ("name the " + _FURNITURE + " that ultimately holds {obj}",
         "find the " + _FURNITURE + " {obj} [ultimately|in the end] sits on or in")),
    "list_class": (
        ("Which {pl} are there", "What {pl} [are there|do we have|exist][| here| in the scene]",
         "Which {pl} [can you find|does the scene have]"),
        ("which {pl} there are", "what {pl} [exist|we have]"),
        ("list [all the|the] {pl}", "name every {sg}", "give me [the names of |]all the {pl}")),
    "list_room": (
        ("Which {pl} are in {room}", "What {pl} [are there|can be found|can I find] in {room}",
         "In {room}, which {pl} are there"),
        ("which {pl} are in {room}", "which {pl} {room} [has|contains]"),
        ("list the {pl} in {room}", "name [every|each] {sg} in {room}")),
    "list_state": (
        ("Which {pl} are {st}", "What {pl} are [currently |]{st}", "Which of the {pl} are {st}"),
        ("which {pl} are {st}", "which of the {pl} are [currently |]{st}"),
        ("list the {pl} that are {st}", "name [every|each] {sg} that is {st}")),
    "list_property": (
        ("Which {things} are {colour}", "What {colour} {things} are there", "What is {colour}"),
        ("which {things} are {colour}", "what is {colour}"),
        ("list [everything|all the {things}] that [is|are] {colour}", "name every {colour} thing")),
    "list_owner": (
        ("What does {owner} own", "Which {things} belong to {owner}", "What belongs to {owner}"),
        ("what {owner} owns", "which {things} belong to {owner}"),
        ("list [everything|all the {things}] {owner} owns", "name {owner}'s {things}")),
    "chain_contents": (
        ("What is {on} the {cwords} {on2} {asset}", "Which {things} are {on} the {cwords} {on2} {asset}",
         "What [do|does] the {cwords} {on2} {asset} [hold|contain]"),
        ("what is {on} the {cwords} {on2} {asset}", "which {things} are {on} the {cwords} {on2} {asset}"),
        ("list [everything|what is] {on} the {cwords} {on2} {asset}", "name the {things} {on} the {cwords} {on2} {asset}")),
    "rooms_with_class": (
        ("Which rooms [have|contain] {pl}", "In which rooms [are there|can I find] {pl}",
         "What rooms have at least one {sg}", "Which rooms have any {pl}"),
        ("which rooms [have|contain] {pl}", "in which rooms there are {pl}"),
        ("list the rooms [with|that have|containing] {pl}", "name every room that has {a_sg}")),
    "compare_rooms": (
        ("Which has more {pl}: {room} or {room2}", "Are there more {pl} in {room} or in {room2}",
         "Which room has more {pl}, {room} or {room2}", "Where are there more {pl}, in {room} or in {room2}"),
        ("which of {room} and {room2} has more {pl}", "whether {room} or {room2} has more {pl}"),
        ("compare {room} and {room2} and name the one with more {pl}",
         "name the room with more {pl}, {room} or {room2}")),
    "state_check": (
        ("Is {node} {st}", "Is {node} currently {st}", "Is {node} {st} right now"),
        ("whether {node} is {st}", "if {node} is [currently |]{st}"),
        ("check whether {node} is {st}", "find out if {node} is {st}")),
    "state_any": (
        ("Is any {sg} {st}", "Are any [of the |]{pl} {st}", "Is there {a_sg} that is {st}", "Is at least one {sg} {st}"),
        ("whether any {sg} is {st}", "if any of the {pl} are {st}"),
        ("check whether any {sg} is {st}", "find out if any of the {pl} are {st}")),
}

#: class -> its words where the class name is no plain English: VirtualHome's glued and misspelt
#: names (as :func:`grasif.virtualhome.instruction.label` reads them, but "light" stays "light"),
#: and the few others the splits have (``t_shirt``, ``tv``, ``hands_both``)
DISPLAY = {
    "coffe_maker": "coffee maker", "cpuscreen": "computer screen", "tvstand": "TV stand", "ceilinglamp": "ceiling lamp",
    "walllamp": "wall lamp", "tablelamp": "table lamp", "closetdrawer": "closet drawer", "wallshelf": "wall shelf",
    "stovefan": "stove fan", "powersocket": "power socket", "doorjamb": "door jamb", "dishrack": "dish rack",
    "creditcard": "credit card", "photoframe": "photo frame", "mousepad": "mouse pad", "trashcan": "trash can",
    "after_shave": "aftershave", "tooth_paste": "toothpaste", "hands_both": "hands", "dvd_player": "DVD player",
    "cd": "CD", "tv": "TV", "t_shirt": "T-shirt"}
#: VirtualHome's category prefixes (``clothes_hat``, ``food_donut``, ``instrument_guitar``): a
#: display name goes without them, except in the classes of :data:`KEEP_PREFIX`
CATEGORY_PREFIXES = ("clothes_", "food_", "instrument_")
#: classes whose prefix is part of the name (a clothes dryer is no dryer of any kind)
KEEP_PREFIX = ("clothes_airer", "clothes_dryer", "food_processor")
#: a room of a generated office's occupant: ``annas_office`` -> "Anna's office"
_OWNED_ROOM = re.compile(r"^([a-z]+)s_office$")

#: plurals the rules of :func:`plural_words` get wrong, by last word
IRREGULAR = {
    "person": "people", "man": "men", "woman": "women", "child": "children", "mouse": "mice", "foot": "feet",
    "tooth": "teeth", "goose": "geese", "die": "dice", "ox": "oxen",
    "knife": "knives", "wife": "wives", "life": "lives", "shelf": "shelves", "leaf": "leaves", "half": "halves",
    "loaf": "loaves", "scarf": "scarves", "calf": "calves", "wolf": "wolves", "thief": "thieves",
    "cactus": "cacti", "fungus": "fungi", "nucleus": "nuclei", "radius": "radii", "stimulus": "stimuli",
    "axis": "axes", "criterion": "criteria", "phenomenon": "phenomena",
    "potato": "potatoes", "tomato": "tomatoes", "mango": "mangoes", "echo": "echoes", "hero": "heroes",
    "volcano": "volcanoes", "torpedo": "torpedoes", "domino": "dominoes", "mosquito": "mosquitoes",
    "quiz": "quizzes", "lens": "lenses", "atlas": "atlases", "canvas": "canvases", "gas": "gases",
    "stomach": "stomachs"}
#: last words of :data:`IRREGULAR` that a glued compound may end in (``bookshelf``, ``pocketknife``,
#: ``salesperson``); the others only as words of their own (``box`` is no ``ox``, ``hoodie`` no ``die``)
HEADS = ("person", "woman", "child", "mouse", "foot", "tooth", "knife", "wife", "shelf", "leaf", "loaf", "scarf")
#: words the same for one and many: plurals and pairs whose last letters look singular, and
#: uncountable ones (other words ending in an ``s`` that no singular ends in are plural already)
SAME = ("series", "species", "news", "chassis", "sheep", "deer", "fish", "aircraft", "dice",
        "money", "food", "jelly", "shampoo", "mouthwash", "polish", "toothpaste", "sugar", "milk")
#: endings of singular words in ``s`` (``glass``, ``cactus``, ``iris``): other words in ``s`` are
#: plural already (``clothes``, ``pants``, ``scissors``, ``glasses``, ``keys``, ``band-aids``)
_SINGULAR_S = ("ss", "us", "is")


def words(cls: str) -> str:
    """A class in words: ``coffee_table`` -> ``coffee table``, ``bottle__of__gin`` -> ``bottle of
    gin``, ``food_food`` -> ``food``."""
    parts = [w for w in cls.replace("__", "_").split("_") if w]
    return " ".join(w for i, w in enumerate(parts) if i == 0 or w != parts[i - 1])


def display(cls: str) -> str:
    """The name a question gives a class: its words (:func:`words`), with VirtualHome's category
    prefix dropped (``clothes_hat`` -> ``hat``, ``food_donut`` -> ``donut``; not ``clothes_dryer``),
    :data:`DISPLAY`'s words for names that are no English (``tvstand`` -> ``TV stand``), and an
    occupant's office as theirs (``annas_office`` -> ``Anna's office``).

    The scene graph gives no display names: a node has only its name, and its class is the name
    without the number (:func:`sgs.graph.node_class`); the GraSIF instructions word classes
    themselves (:func:`grasif.virtualhome.instruction.label`). :func:`name_of` is this with
    classes of a scene that would read alike kept apart."""
    if cls in DISPLAY:
        return DISPLAY[cls]
    owned = _OWNED_ROOM.match(cls)
    if owned:
        return f"{owned.group(1).capitalize()}'s office"
    for prefix in CATEGORY_PREFIXES:
        if cls.startswith(prefix) and cls not in KEEP_PREFIX and words(cls[len(prefix):]):
            return words(cls[len(prefix):])
    return words(cls)


@lru_cache(maxsize=64)
def _names(classes: tuple[str, ...]) -> dict[str, str]:
    shown = {c: display(c) for c in classes}
    alike = Counter(n.lower() for n in shown.values())
    return {c: (n if alike[n.lower()] == 1 else words(c)) for c, n in shown.items()}


def name_of(g: SceneGraph, cls: str) -> str:
    """:func:`display` of ``cls``, or its plain words where another class of ``g`` has the same
    display name (a scene with ``food_chicken`` and ``chicken`` asks about each by its words)."""
    return _names(tuple(sorted(class_index(g.nodes)))).get(cls) or display(cls)


def _plural_word(word: str) -> str:
    low = word.lower()
    if low in IRREGULAR:
        return IRREGULAR[low]
    if low in SAME:
        return word
    head = next((h for h in HEADS if low.endswith(h)), None)
    if head:
        return word[: -len(head)] + IRREGULAR[head]
    if low.endswith("sis"):
        return word[:-2] + "es"
    if low.endswith("s") and not low.endswith(_SINGULAR_S):
        return word
    if low.endswith("y") and low[-2:-1] not in tuple("aeiou"):
        return word[:-1] + "ies"
    if low.endswith(("s", "sh", "ch", "x", "z")):
        return word + "es"
    return word + "s"


def plural_words(text: str) -> str:
    """The plural of a noun phrase, by its head noun: ``bottle of gin`` -> ``bottles of gin``,
    ``basket for clothes`` -> ``baskets for clothes``, ``wall shelf`` -> ``wall shelves``,
    ``battery`` -> ``batteries``, ``thesis`` -> ``theses``, ``box`` -> ``boxes``; irregular ones
    (:data:`IRREGULAR`, also at the end of a glued compound: :data:`HEADS`), words the same in
    the plural (:data:`SAME`) and words already plural (``clothes``, ``scissors``: an ``s`` after
    anything but ``s``, ``u`` or ``i``) kept."""
    cut = min((i for i in (text.find(" of "), text.find(" for ")) if i > 0), default=len(text))
    head, tail = text[:cut], text[cut:]
    *before, last = head.split(" ")
    return " ".join([*before, _plural_word(last)]) + tail


def plural(cls: str) -> str:
    """The plural of a class's :func:`display` name: ``cup`` -> ``cups``, ``bottle__of__gin`` ->
    ``bottles of gin``, ``clothes_hat`` -> ``hats``, ``thesis`` -> ``theses`` (:func:`plural_words`)."""
    return plural_words(display(cls))


_ALT = re.compile(r"\[([^\[\]]*)\]")


def _alternatives(text: str, rng: random.Random) -> str:
    return _ALT.sub(lambda m: rng.choice(m.group(1).split("|")), text)


def _article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _the(noun: str) -> str:
    """``the kitchen``; an owner's room without the article (``Anna's office``)."""
    return noun if re.match(r"[A-Z][a-z]*'s ", noun) else f"the {noun}"


def _things(g: SceneGraph) -> list[str]:
    return [n for n, node in g.nodes.items() if node.layer is not Layer.PLACE]


def describe_room(g: SceneGraph, room: str, rng: random.Random) -> str:
    """``kitchen-1``, or ``the kitchen`` (``Anna's office``) when the scene has one room of its kind."""
    cls = node_class(room)
    forms = [room] + ([_the(name_of(g, cls))] if sum(node_class(r) == cls for r in g.places) == 1 else [])
    return rng.choice(forms)


def descriptions(g: SceneGraph, n: str, avoid: tuple[str, ...] = ()) -> list[str]:
    """Every way :func:`describe` may name node ``n`` alone in ``g`` (its name first); ``avoid``:
    ``room`` (not by its room), ``holder`` (not by what it rests on or in)."""
    cls = node_class(n)
    w = name_of(g, cls)
    same = [m for m in _things(g) if node_class(m) == cls]
    props = g.nodes[n].properties or ()
    forms = [n]
    if len(same) == 1:
        forms.append(f"the {w}")
    for p in props:
        unique = sum(p in (g.nodes[m].properties or ()) for m in same) == 1
        if unique and is_colour(p):
            forms.append(f"the {p} {w}")
        elif unique and is_owner(p):
            forms.append(f"{p} {w}")
    room = g.place_of(n)
    if len(same) > 1 and room and "room" not in avoid and sum(g.place_of(m) == room for m in same) == 1:
        forms.append(f"the {w} in {room}")
    holder, rel = g.parent.get(n, (None, None))
    if (len(same) > 1 and g.nodes[n].layer is Layer.OBJECT and rel in (Relation.ONTOP, Relation.INSIDE)
            and "holder" not in avoid and sum(g.parent.get(m, (None,))[0] == holder for m in same) == 1):
        on = "on" if rel is Relation.ONTOP else "in"
        forms.append(f"the {w} {on} {holder}")
        hcls = node_class(holder)
        if sum(node_class(m) == hcls for m in _things(g)) == 1:
            forms.append(f"the {w} {on} {_the(name_of(g, hcls))}")
    return forms


def describe(g: SceneGraph, n: str, rng: random.Random, avoid: tuple[str, ...] = ()) -> str:
    """One of :func:`descriptions`, drawn with ``rng``; a room in it named by :func:`describe_room`."""
    form = rng.choice(descriptions(g, n, avoid))
    room = g.place_of(n)
    if room and form.endswith(f" in {room}"):
        form = form[: -len(room)] + describe_room(g, room, rng)
    return form


def _nested_below(g: SceneGraph, node: str, cls: str | None = None) -> bool:
    """Whether an object (of ``cls``) is below ``node`` deeper than directly on or in it."""
    direct = set(g.children(node))
    return any(d not in direct and (cls is None or node_class(d) == cls) for d in g.descendants(node))


def fields(intent: str, slots: dict[str, str], g: SceneGraph, rng: random.Random) -> dict[str, str]:
    """The slots of a question in words (module doc)."""
    out: dict[str, str] = {"things": _alternatives(_THINGS, rng)}
    cls = slots.get("cls")
    if cls:
        sg = name_of(g, cls)
        out |= {"pl": plural_words(sg), "sg": sg, "a_sg": _article(sg), "cwords": plural_words(sg)}
    avoid = {"locate_room": ("room",), "locate_holder": ("holder",), "support": ("holder",)}.get(intent, ())
    for key in ("node", "obj", "asset"):
        if key in slots:
            out[key] = describe(g, slots[key], rng, avoid)
    for key in ("room", "room2"):
        if key in slots:
            out[key] = describe_room(g, slots[key], rng)
    for key, name in (("rel", "on"), ("rel2", "on2")):
        if key in slots:
            out[name] = rng.choice(PREPOSITIONS[slots[key]])
    if "state" in slots:
        out["st"] = rng.choice(STATE_WORDS.get(slots["state"], (slots["state"].replace("_", " "),)))
    prop = slots.get("prop", "")
    out |= {"colour": prop, "owner": prop[:-2]}
    if intent in ("count_on", "contents_direct"):
        nested = _nested_below(g, slots["node"], cls)
        out["directly"] = "directly " if nested else rng.choice(("", "", "directly "))
    if intent == "chain_contents":
        holders = [c for c in g.children(slots["asset"]) if node_class(c) == cls and g.children(c)]
        if len(holders) == 1:
            out["cwords"] = name_of(g, cls)
    return out


def _frames(intent: str, slots: dict[str, str]):
    if intent == "list_property" and is_owner(slots["prop"]):
        return FRAMES["list_owner"]
    return FRAMES[intent]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def phrase(intent: str, slots: dict[str, str], g: SceneGraph, rng: random.Random) -> str:
    """A question of ``intent`` about ``slots`` in words drawn with ``rng`` (module doc)."""
    direct, clauses, commands = _frames(intent, slots)
    f = fields(intent, slots, g, rng)
    form = rng.choice(("question", "question", "clause", "command"))
    if form == "question":
        text = _cap(_alternatives(rng.choice(direct), rng).format(**f)) + "?"
        prefix = rng.choice(PREFIXES)
        return prefix + (_lower_first(text) if prefix and not prefix.endswith("! ") else text)
    if form == "clause":
        clause = _alternatives(rng.choice(clauses), rng).format(**f)
        return _cap(rng.choice(REQUESTS).format(c=clause))
    command = _alternatives(rng.choice(commands), rng).format(**f)
    return _cap(rng.choice(COMMANDS).format(R=_cap(command), r=command))


def _lower_first(text: str) -> str:
    """``text`` after a prefix: its first word in lower case unless it is a name (``kitchen-1``)."""
    first = text.split(" ", 1)[0]
    return text if re.search(r"[\d'_-]", first) else text[:1].lower() + text[1:]
