"""Instructions from a small compositional grammar (the generator's ``wording="grammar"``).

The template wording (:data:`grasif.generate.tasks.PHRASINGS`) gives each task kind three to five
fixed sentences. The grammar composes one from parts, so that the same goal comes in many shapes:

* a **core** per kind: an imperative verb phrase ("put the mug on the shelf in the kitchen",
  "gather ... and leave them in ...") or a statement of the wanted result ("the mug belongs on
  ...", "I need ..."), several of each (:data:`CORES`);
* a **frame** around an imperative: bare, "Please ...", "Could you ...?", "..., please", "I'd like
  you to ...", or split over two sentences with a pronoun ("Find the mug. Then put it on ...");
* optionally a **context** sentence before ("We're expecting guests tonight.") and, where one
  object is moved, a **reason** after ("so nobody has to look for it");
* optionally a **constraint** after: "Close whatever you open.", "Leave everything else as it is."
  (the goal already asks for both: a generated goal wants nothing else changed).

A shape is the core's and the frame's names joined (``put/please``); :func:`say` returns the
text and its shape, which the task's provenance keeps. Slots are the template wording's
(``obj``, ``objs``, ``dest``, ``prep``, ``into``, ``n``, ``cls``, ``verb``, ``thing``, ``state``,
``usual``, ``off``, ``one``, ``rest``). Deterministic for the ``rng`` it is given.
"""

from __future__ import annotations

import random

#: kind -> (name, core, is_imperative); an imperative core can be framed, a statement stands alone.
#: ``{it}`` in a core is the object again, or "it" once a frame has named the object first.
CORES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "rearrange": (
        ("put", "put {it} {prep} {dest}", True),
        ("move", "move {it} {into} {dest}", True),
        ("take", "take {it} to {dest} and leave it {prep} it", True),
        ("place", "place {it} {prep} {dest}", True),
        ("get", "get {it} {into} {dest}", True),
        ("belongs", "{Obj} belongs {prep} {dest}.", False),
        ("need", "I need {obj} {prep} {dest}.", False),
        ("should", "{Obj} should end up {prep} {dest}.", False),
        ("wrong", "{Obj} isn't where it should be: it goes {prep} {dest}.", False),
    ),
    "multi": (
        ("put", "put {objs} {prep} {dest}", True),
        ("gather", "gather {objs} and leave them {prep} {dest}", True),
        ("collect", "collect {objs} and put them {prep} {dest}", True),
        ("move", "move {objs} {into} {dest}", True),
        ("want", "I want {objs} {prep} {dest}.", False),
        ("belong", "{Objs} all belong {prep} {dest}.", False),
    ),
    "count": (
        ("put", "put {n} {cls} {prep} {dest}", True),
        ("any", "bring any {n} {cls} to {dest} and put them {prep} it", True),
        ("get", "get {n} {cls} {into} {dest}; which ones doesn't matter", True),
        ("need", "We need {n} {cls} {prep} {dest}.", False),
        ("short", "{Dest} is short of {cls}: {n} should be {prep} it.", False),
    ),
    "state": (
        ("verb", "{verb} {thing}", True),
        ("go", "go and {verb} {thing}", True),
        ("should", "{Thing} should be {state}.", False),
        ("like", "I'd like {thing} {state}.", False),
    ),
    "sequence": (
        ("heat", "heat up {obj}: put it in {dest}, close it and switch it on", True),
        ("warm", "put {obj} in {dest}, shut the door and turn it on", True),
        ("want", "I want {obj} warmed up: in {dest}, door closed, switched on.", False),
    ),
    "remove": (
        ("take", "take {it} {off} {dest}", True),
        ("get", "get {it} {off} {dest} and put it somewhere else", True),
        ("not", "{Obj} shouldn't be {prep} {dest} any more.", False),
        ("away", "{Obj} has no business {prep} {dest}; find it another place.", False),
    ),
    "clear": (
        ("take", "take all the {cls} {off} {dest}", True),
        ("clear", "clear every {one} {off} {dest}", True),
        ("none", "No {cls} should be left {prep} {dest}.", False),
        ("empty", "Make sure there are no {cls} left {prep} {dest}.", False),
    ),
    "pack": (
        ("pack", "pack {objs} into {dest}", True),
        ("put", "put {objs} in {dest}", True),
        ("need", "{Objs} need to go in {dest}.", False),
        ("want", "I want {objs} packed in {dest}.", False),
    ),
    "switch_one": (
        ("verb", "{verb} {thing}, and only that one", True),
        ("just", "just {verb} {thing}; leave the other {one_plural} as they are", True),
        ("should", "{Thing} should be {state}, the other {one_plural} not touched.", False),
    ),
    "nested_out": (
        ("take", "take {obj} out of {container} and put it {prep} {dest}", True),
        ("get", "get {obj} out of {container}; it goes {prep} {dest}", True),
        ("need", "I need {obj} from {container} {prep} {dest}.", False),
    ),
    "chain": (
        ("two", "take {obj} to {dest} and put it {prep} it, then bring {obj2} to {dest2} and put it {prep2} it", True),
        ("first", "first put {obj} {prep} {dest}; after that {obj2} goes {prep2} {dest2}", True),
        ("both", "{Obj} belongs {prep} {dest}, and {obj2} goes {prep2} {dest2}.", False),
    ),
}
#: wrappers around an imperative core: (name, text with ``{vp}``; ``{first}`` marks a frame that
#: names the object in a sentence of its own and uses "it" in the core)
FRAMES: tuple[tuple[str, str], ...] = (
    ("bare", "{Vp}."),
    ("please", "Please {vp}."),
    ("could", "Could you {vp}?"),
    ("tail", "{Vp}, please."),
    ("like", "I'd like you to {vp}."),
    ("can", "Can you {vp} for me?"),
    ("find", "Find {obj}. Then {vp}."),
    ("left", "{Obj} has been left out. {Vp}."),
)
#: frames that need a single object (``{obj}``) and a core that can say "it"
PRONOUN_FRAMES = ("find", "left")

#: sentences a ``decoy`` task adds about where its object usually is (``{usual}``)
HINTS = (
    "It is usually {usual}, but it may have been moved.", "Last time I saw it, it was {usual}.",
    "People keep it {usual}, unless somebody borrowed it.", "Try {usual} first; it might not be there any more.",
)
#: the grammar's kinds that borrow another kind's cores
BORROWS = {"attribute": "rearrange", "decoy": "rearrange"}

CONTEXTS = (
    "We're expecting guests tonight.", "I'm trying to get this place tidy before the weekend.",
    "It's been a busy day.", "Things keep ending up in the wrong place around here.",
    "Someone left a bit of a mess.", "I'm about to head out.", "Quick favour.",
    "The cleaner comes tomorrow morning.", "I've got a meeting in five minutes.",
)
REASONS = (
    "so nobody has to look for it later", "because it's needed there", "before I forget",
    "so it's out of the way", "since that's where it lives",
)
#: kinds that move one object: a reason after them says "it"
SINGLE = ("rearrange", "attribute", "decoy", "nested_out", "remove")
CONSTRAINTS = ("Close whatever you open.", "Leave everything else as it is.", "Don't move anything else.")
P_CONTEXT, P_REASON, P_CONSTRAINT = 0.4, 0.25, 0.3


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def say(kind: str, slots: dict[str, str], rng: random.Random) -> tuple[str, str]:
    """An instruction for a task of ``kind`` with ``slots`` filled in, and its shape (module doc).
    ``KeyError`` for a kind the grammar has no cores for."""
    cores = CORES[BORROWS.get(kind, kind)]
    name, core, imperative = cores[rng.randrange(len(cores))]
    filled = {**slots, **{_cap_key(k): _cap(v) for k, v in slots.items() if isinstance(v, str)}}
    if imperative:
        frames = [f for f in FRAMES if f[0] not in PRONOUN_FRAMES or ("{it}" in core and "obj" in slots)]
        frame, pattern = frames[rng.randrange(len(frames))]
        it = "it" if frame in PRONOUN_FRAMES else slots.get("obj", "")
        vp = core.format(**{**filled, "it": it})
        text = pattern.format(vp=vp, Vp=_cap(vp), obj=slots.get("obj", ""), Obj=_cap(slots.get("obj", "")))
        shape = f"{name}/{frame}"
        if kind in SINGLE and rng.random() < P_REASON and text.endswith("."):
            text = f"{text[:-1]}, {REASONS[rng.randrange(len(REASONS))]}."
            shape += "+reason"
    else:
        text = core.format(**{**filled, "it": slots.get("obj", "")})
        shape = name
    if kind == "decoy":
        text = f"{text} {HINTS[rng.randrange(len(HINTS))].format(usual=slots['usual'])}"
    if rng.random() < P_CONTEXT:
        text = f"{CONTEXTS[rng.randrange(len(CONTEXTS))]} {text}"
        shape = "context+" + shape
    if rng.random() < P_CONSTRAINT:
        text = f"{text} {CONSTRAINTS[rng.randrange(len(CONSTRAINTS))]}"
        shape += "+constraint"
    return text, shape


def _cap_key(key: str) -> str:
    return key[:1].upper() + key[1:]
