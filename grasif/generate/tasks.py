"""Generated tasks on a generated building (:mod:`grasif.generate.worlds`): every goal kind the
validator knows, each instruction in one of several phrasings, each task checked before it is kept.

Kinds: :data:`KINDS` (``rearrange``, ``attribute``, ``decoy``, ``multi``, ``count``, ``state``,
``sequence``) are the default draw; :data:`OPT_IN_KINDS` are drawn only when asked for, so what a
seed gives by default does not depend on them: :data:`REMOVAL_KINDS` (``remove``, ``clear``: goals
written as formulas) and :data:`WIDER_KINDS` (``pack``, ``switch_one``, ``nested_out``, ``chain``,
made for the ``house`` and ``lab`` buildings). Objects are named by class and where they are,
assets by class and room, an owned thing by its owner; an object is chosen only where its class
and holder name it alone. The ground-truth plan is at the level of the office split's
(``rearrange``, state actions) and closes again each container its corrections open that the
goal does not want open. A task is kept only when no goal part holds already and the plan
reaches the goal through the SGS with nothing else changed (``unchanged_elsewhere``).
What each kind asks, with examples: ``docs/benchmark/generated.md``.
"""

from __future__ import annotations

import random

from grasif.goals import CountGoal, GoalSpec, NodeGoal, already_met
from grasif.priors import Priors
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import parse_plan
from sgs.graph import Layer, Relation, SceneGraph, affords, node_class
from sgs.simulator import run_plan

from grasif.generate.wording import say
from grasif.generate.worlds import Building

KINDS = ("rearrange", "attribute", "decoy", "multi", "count", "state", "sequence")
#: kinds drawn only when named (``--task-kinds``): formula goals with a negation, and the wider
#: kinds (module doc)
REMOVAL_KINDS = ("remove", "clear")
WIDER_KINDS = ("pack", "switch_one", "nested_out", "chain")
OPT_IN_KINDS = REMOVAL_KINDS + WIDER_KINDS

#: phrasings of each kind: ``{obj}``, ``{objs}``, ``{n}``, ``{cls}``, ``{prep}`` (on / in), ``{into}`` (onto / into),
#: ``{dest}``, ``{verb}``, ``{thing}`` and ``{usual}`` (where the object usually is: "on the shelf in
#: the kitchen") are filled in
PHRASINGS: dict[str, tuple[str, ...]] = {
    "rearrange": ("Put {obj} {prep} {dest}.", "Please move {obj} {into} {dest}.",
                  "Could you take {obj} and leave it {prep} {dest}?", "I need {obj} {prep} {dest}.",
                  "{Obj} should be {prep} {dest}; bring it there."),
    "attribute": ("Put {obj} {prep} {dest}.", "Find {obj} and put it {prep} {dest}.",
                  "Could you bring {obj} to {dest} and leave it {prep} it?", "I need {obj} {prep} {dest}.",
                  "{Obj} belongs {prep} {dest}; take it there."),
    "decoy": ("Find {obj} and put it {prep} {dest}. It is usually {usual}, but it may have been moved.",
              "Bring {obj} to {dest} and leave it {prep} it; the last time I saw it, it was {usual}.",
              "{Obj} goes {prep} {dest}. It normally lives {usual}, though someone may have taken it.",
              "Please put {obj} {prep} {dest}. Look {usual} first; it might not be there any more.",
              "I need {obj} {prep} {dest}. People keep it {usual}, unless it was borrowed."),
    "multi": ("Put {objs} {prep} {dest}.", "Gather {objs} and place them {prep} {dest}.",
              "Please bring {objs} to {dest} and put them {prep} it.", "I want {objs} {prep} {dest}."),
    "count": ("Put {n} {cls} {prep} {dest}.", "Bring {n} {cls} to {dest} and put them {prep} it.",
              "We need {n} {cls} {prep} {dest}."),
    "state": ("{Verb} {thing}.", "Please {verb} {thing}.", "Could you {verb} {thing}?", "{Thing} should be {state}."),
    "remove": ("Take {obj} {off} {dest}.", "Please get {obj} {off} {dest}.",
               "{Obj} should not be {prep} {dest} any more; put it somewhere else.",
               "Remove {obj} from {dest}.", "Could you move {obj} away from {dest}?"),
    "clear": ("Take all the {cls} {off} {dest}.", "Please remove every {one} from {dest}.",
              "No {cls} should be left {prep} {dest}.", "Clear the {cls} {off} {dest} and put them elsewhere.",
              "Get each {one} {off} {dest}."),
    "pack": ("Pack {objs} into {dest}.", "Put {objs} in {dest}.", "{Objs} need to go in {dest}."),
    "switch_one": ("Switch on {thing}, and only that one.", "Just switch on {thing}; leave the other {one_plural} "
                   "as they are.", "{Thing} should be switched on, the other {one_plural} not touched."),
    "nested_out": ("Take {obj} out of {container} and put it {prep} {dest}.",
                   "Get {obj} out of {container}; it goes {prep} {dest}.", "I need {obj} from {container} {prep} {dest}."),
    "chain": ("Take {obj} to {dest} and put it {prep} it, then bring {obj2} to {dest2} and put it {prep2} it.",
              "First put {obj} {prep} {dest}; after that {obj2} goes {prep2} {dest2}.",
              "{Obj} belongs {prep} {dest} and {obj2} {prep2} {dest2}."),
    "sequence": ("Heat up {obj}: put it in {dest}, close it and switch it on.",
                 "Warm {obj} in {dest}: inside, door closed, switched on.",
                 "Put {obj} in {dest}, shut the door and turn it on."),
}

NUMBERS = {2: "two", 3: "three"}
STATE_VERBS = {"on": ("switch on", "turn_on"), "off": ("switch off", "turn_off"),
               "open": ("open", "open"), "closed": ("close", "close")}


#: plurals the rules below would get wrong
PLURALS = {"glasses": "glasses", "headphones": "headphones", "keys": "keys", "knife": "knives", "shelf": "shelves"}


def words(cls: str) -> str:
    return cls.replace("_", " ")


def plural(cls: str) -> str:
    """``cup`` -> ``cups``, ``glass`` -> ``glasses``, ``knife`` -> ``knives``."""
    if cls in PLURALS:
        return words(PLURALS[cls])
    return words(cls) + ("es" if cls.endswith(("s", "sh", "ch", "x")) else "s")


class Describer:
    """Names nodes of one building as an instruction would (module doc)."""

    def __init__(self, graph: SceneGraph, b: Building):
        self.g, self.b = graph, b
        self.classes: dict[str, list[str]] = {}
        for n in graph.nodes:
            self.classes.setdefault(node_class(n), []).append(n)

    def room(self, room: str) -> str:
        """``Chen's office``, ``the kitchen``, ``the upstairs bathroom`` where the storey tells
        several apart, or ``meeting room 2``."""
        if room in self.b.occupants:
            return f"{self.b.occupants[room].capitalize()}'s office"
        kind = self.b.kinds[room]
        same = [r for r in self.g.places if self.b.kinds.get(r) == kind]
        if len(same) == 1:
            return f"the {words(kind)}"
        storey = list(self.g.nodes[room].properties or ())
        if storey and sum(list(self.g.nodes[r].properties or ()) == storey for r in same) == 1:
            return f"the {storey[0]} {words(kind)}"
        return f"{words(kind)} {same.index(room) + 1}"

    def asset(self, asset: str) -> str:
        """``Chen's desk``, ``the fridge`` (the only one), ``the shelf in the kitchen``; "" when
        its room has two of its class (it cannot be named alone)."""
        cls, room = node_class(asset), self.g.place_of(asset)
        if room in self.b.occupants and cls == "desk":
            return f"{self.b.occupants[room].capitalize()}'s desk"
        owner = next((p for p in self.g.nodes[asset].properties or () if p.endswith("'s")), None)
        if owner and sum(owner in (self.g.nodes[a].properties or ()) for a in self.classes[cls]) == 1:
            return f"{owner} {words(cls)}"
        if len(self.classes[cls]) == 1:
            return f"the {words(cls)}"
        in_room = [a for a in self.classes[cls] if self.g.place_of(a) == room]
        if len(in_room) > 1:
            return ""  # not nameable alone
        where = self.room(room)
        return f"the {words(cls)} in {where}"

    def obj(self, obj: str) -> str:
        """``the apple`` (the only one) or ``the apple on the shelf in the kitchen``; "" when it is
        not on an asset that names it alone, or shares its holder with another of its class."""
        cls = node_class(obj)
        holder, rel = self.g.parent[obj]
        same = [o for o in self.classes[cls] if self.g.parent.get(o, (None,))[0] == holder]
        if len(same) > 1:
            return ""
        if self.g.nodes[holder].layer is Layer.OBJECT and self.b.wider:
            where = self.obj(holder)  # "the screwdriver in the toolbox on the workbench"
            return f"the {words(cls)} {'on' if rel is Relation.ONTOP else 'in'} {where}" if where else ""
        if self.g.nodes[holder].layer is not Layer.ASSET:
            return ""
        if len(self.classes[cls]) == 1:
            return f"the {words(cls)}"
        where = self.asset(holder)
        if not where:
            return ""
        return f"the {words(cls)} {'on' if rel is Relation.ONTOP else 'in'} {where}"

    def by_property(self, obj: str) -> str:
        """``the red mug``, ``Chen's mug`` or ``Chen's red mug``: the object named by the first of
        its properties (a possessive and a colour together) that no other object of its class has;
        "" when it has none such or is the only one of its class."""
        cls = node_class(obj)
        others = [o for o in self.classes[cls] if o != obj]
        props = list(self.g.nodes[obj].properties or ())
        if not others or not props:
            return ""
        taken = {p for o in others for p in (self.g.nodes[o].properties or ())}
        unique = [p for p in props if p not in taken]
        if not unique:
            return ""
        owner = next((p for p in props if p.endswith("'s")), None)
        colour = next((p for p in props if not p.endswith("'s")), None)
        if owner in unique:
            return f"{owner} {colour + ' ' if colour else ''}{words(cls)}"
        return f"the {unique[0]} {words(cls)}"


def _say(kind: str, slots: dict, rng: random.Random, wording: str) -> tuple[str, int | str]:
    """The instruction and its phrasing: a template of :data:`PHRASINGS` (its index) or, for
    ``wording="grammar"``, :func:`grasif.generate.wording.say` (its shape)."""
    if wording == "grammar":
        return say(kind, slots, rng)
    if wording != "templates":
        raise ValueError(f"wording is templates or grammar, not {wording!r}")
    i = rng.randrange(len(PHRASINGS[kind]))
    return PHRASINGS[kind][i].format(**slots), i


def _listed(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _prep(rel: str) -> str:
    return "on" if rel == "ontop" else "in"


def _into(rel: str) -> str:
    return "onto" if rel == "ontop" else "into"


def _holders(g: SceneGraph, d: Describer) -> list[tuple[str, str]]:
    return [(a, rel) for a in g.names(Layer.ASSET) if d.asset(a)
            for rel, verb in (("ontop", "put_on"), ("inside", "put_inside")) if affords(g.nodes[a], verb)]


def _movable(g: SceneGraph, d: Describer) -> list[str]:
    return [o for o in g.names(Layer.OBJECT) if affords(g.nodes[o], "pick_up") and d.obj(o)]


def _destination(rng: random.Random, holders: list[tuple[str, str]], cls: str, priors: Priors) -> tuple[str, str]:
    """A destination for an object of ``cls``, drawn with the object prior (a mug to a table)."""
    weights = [priors.probability(cls, node_class(h), rel) for h, rel in holders]
    return rng.choices(holders, weights=weights)[0]


def draw_task(kind: str, g: SceneGraph, b: Building, rng: random.Random, priors: Priors,
              wording: str = "templates"):
    """``(instruction, goal, plan, phrasing)`` of one task of ``kind`` (a ``decoy`` task adds
    a fifth item for its provenance: the ``decoy`` object and the asset the ``hint`` names), or
    None when this building offers none (the caller checks it: :func:`checked`). Destinations are
    drawn with the object prior of the (first) object moved. ``wording``: ``templates`` (the
    phrasing is an index into :data:`PHRASINGS`) or ``grammar`` (:mod:`grasif.generate.wording`;
    the phrasing is the shape's name)."""
    d = Describer(g, b)
    holders, movable = _holders(g, d), _movable(g, d)
    if kind == "attribute":
        named = _named_by_property(g, d)
        if not holders or not named:
            return None
        obj = rng.choice(list(named))
        dest, rel = _destination(rng, [h for h in holders if h[0] != g.parent[obj][0]] or holders, node_class(obj), priors)
        name = named[obj]
        text, i = _say(kind, dict(obj=name, Obj=name[0].upper() + name[1:], prep=_prep(rel), dest=d.asset(dest),
                                  into=_into(rel)), rng, wording)
        goal = GoalSpec(node_goals=[NodeGoal(node=obj, relation=rel, destination=dest)])
        return text, goal, [f"rearrange({obj}, {rel}, {dest})"], i
    if kind == "decoy":
        return _decoy(g, d, rng, priors, holders, wording)
    if kind in ("rearrange", "multi"):
        if not holders or not movable:
            return None
        dest, rel = _destination(rng, holders, node_class(rng.choice(movable)), priors)
        pool = [o for o in movable if g.parent[o][0] != dest]
        k = 1 if kind == "rearrange" else min(len(pool), rng.randint(2, 3))
        if k < 1 or (kind == "multi" and k < 2):
            return None
        chosen, classes = [], set()
        for o in sorted(pool, key=lambda o: (-priors.probability(o, node_class(dest), rel), rng.random())):
            if node_class(o) not in classes:
                chosen.append(o)
                classes.add(node_class(o))
            if len(chosen) == k:
                break
        if len(chosen) < k:
            return None
        names = [d.obj(o) for o in chosen]
        objs = _listed(names)
        text, i = _say(kind, dict(obj=names[0], Obj=names[0][0].upper() + names[0][1:], objs=objs,
                                  prep=_prep(rel), into=_into(rel), dest=d.asset(dest)),
                       rng, wording)
        goal = GoalSpec(node_goals=[NodeGoal(node=o, relation=rel, destination=dest) for o in chosen])
        return text, goal, [f"rearrange({o}, {rel}, {dest})" for o in chosen], i
    if kind == "count":
        if not holders:
            return None
        by_class: dict[str, list[str]] = {}
        for o in g.names(Layer.OBJECT):
            if affords(g.nodes[o], "pick_up"):
                by_class.setdefault(node_class(o), []).append(o)
        options = [(c, os) for c, os in sorted(by_class.items()) if len(os) >= 2]
        if not options:
            return None
        cls, objs = rng.choice(options)
        dest, rel = _destination(rng, holders, cls, priors)
        objs = [o for o in objs if g.parent[o][0] != dest]
        if len(objs) < 2:
            return None
        n = rng.randint(2, min(3, len(objs)))
        text, i = _say(kind, dict(n=NUMBERS[n], cls=plural(cls), prep=_prep(rel), dest=d.asset(dest),
                                  into=_into(rel)), rng, wording)
        goal = GoalSpec(count_goals=[CountGoal(cls=cls, relation=rel, destination=dest, count=n)])
        return text, goal, [f"rearrange({o}, {rel}, {dest})" for o in rng.sample(objs, n)], i
    if kind == "state":
        options = []
        for n in g.names(Layer.ASSET):
            node = g.nodes[n]
            if not d.asset(n):
                continue
            if affords(node, "turn_on") and node.has("off"):
                options.append((n, "on"))
            if affords(node, "open") and node.has("closed"):
                options.append((n, "open"))
        if not options:
            return None
        n, state = rng.choice(options)
        verb, action = STATE_VERBS[state]
        thing = d.asset(n)
        text, i = _say(kind, dict(verb=verb, Verb=verb.capitalize(), thing=thing, Thing=thing[0].upper() + thing[1:],
                                  state=f"switched {state}" if state in ("on", "off") else state), rng, wording)
        return text, GoalSpec(node_goals=[NodeGoal(node=n, states=[state])]), [f"{action}({n})"], i
    if kind in REMOVAL_KINDS:
        return _removal(kind, g, d, rng, priors, holders, wording)
    if kind == "sequence":
        ovens = [a for a in g.names(Layer.ASSET) if node_class(a) == "microwave" and d.asset(a)]
        food = [o for o in movable if node_class(o) in ("bread", "milk", "cheese", "yogurt", "apple", "banana", "orange")]
        if not ovens or not food:
            return None
        oven, obj = rng.choice(ovens), rng.choice(food)
        text, i = _say(kind, dict(obj=d.obj(obj), dest=d.asset(oven)), rng, wording)
        goal = GoalSpec(node_goals=[NodeGoal(node=obj, relation="inside", destination=oven),
                                    NodeGoal(node=oven, states=["closed", "on"])])
        return text, goal, [f"rearrange({obj}, inside, {oven})", f"close({oven})", f"turn_on({oven})"], i
    if kind in WIDER_KINDS:
        return _wider(kind, g, d, rng, priors, holders, movable, wording)
    raise ValueError(f"task kinds are {', '.join(KINDS + OPT_IN_KINDS)}, not {kind!r}")


def _removal(kind: str, g: SceneGraph, d: Describer, rng: random.Random, priors: Priors,
             holders: list[tuple[str, str]], wording: str):
    """A ``remove`` or ``clear`` task (module doc): the asset is one an instruction names alone,
    the objects go to other assets drawn with the object prior."""
    held: dict[tuple[str, str], list[str]] = {}
    for o in g.names(Layer.OBJECT):
        holder, rel = g.parent[o]
        if affords(g.nodes[o], "pick_up") and g.nodes[holder].layer is Layer.ASSET and d.asset(holder):
            held.setdefault((holder, rel.value), []).append(o)
    if kind == "remove":
        options = sorted((o, h, rel) for (h, rel), os in held.items() for o in os if d.obj(o))
    else:
        options = sorted({(c, h, rel) for (h, rel), os in held.items() for c in map(node_class, os)
                          if sum(node_class(o) == c for o in os) >= 2})
    if not options:
        return None
    what, holder, rel = rng.choice(options)
    moved = [what] if kind == "remove" else sorted(o for o in held[(holder, rel)] if node_class(o) == what)
    others = [h for h in holders if h[0] != holder]
    if not others:
        return None
    plan = []
    for o in moved:
        dest, to = _destination(rng, others, node_class(o), priors)
        plan.append(f"rearrange({o}, {to}, {dest})")
    off = "off" if rel == "ontop" else "out of"
    if kind == "remove":
        name = f"the {words(node_class(what))}"  # the only one of its class there (d.obj said so)
        text, i = _say(kind, dict(obj=name, Obj=name[0].upper() + name[1:], off=off, prep=_prep(rel),
                                  dest=d.asset(holder)), rng, wording)
        formula = f"(not ({rel} {what} {holder}))"
    else:
        text, i = _say(kind, dict(cls=plural(what), one=words(what), off=off, prep=_prep(rel), dest=d.asset(holder)),
                       rng, wording)
        var = "?" + what.split("_")[0][0]
        formula = f"(forall ({var} - {what}) (not ({rel} {var} {holder})))"
    return text, GoalSpec(formula=formula), plan, i


def _wider(kind: str, g: SceneGraph, d: Describer, rng: random.Random, priors: Priors,
           holders: list[tuple[str, str]], movable: list[str], wording: str):
    """A task of one of :data:`WIDER_KINDS` (module doc), or None when the building offers none."""
    if kind == "pack":
        bags = [o for o in g.names(Layer.OBJECT) if affords(g.nodes[o], "put_inside") and d.obj(o)]
        if not bags:
            return None
        bag = rng.choice(bags)
        pool = [o for o in movable if node_class(o) != node_class(bag) and g.nodes[g.parent[o][0]].layer is Layer.ASSET
                and not g.is_ancestor(o, bag)]  # named by their asset: "the pen in the drawer", not "in the box"
        shut = [o for o in pool if g.enclosing_closed(o)]
        if len(pool) < 2:
            return None
        k = min(len(pool), rng.randint(2, 3))
        first = [rng.choice(shut)] if shut else []  # one from a closed drawer or cabinet, where there is one
        rest = [o for o in pool if o not in first and node_class(o) not in {node_class(f) for f in first}]
        chosen = first + rng.sample(rest, min(len(rest), k - len(first)))
        if len(chosen) < 2 or len({node_class(o) for o in chosen}) < len(chosen):
            return None
        objs = _listed([d.obj(o) for o in chosen])
        text, i = _say(kind, dict(objs=objs, Objs=objs[0].upper() + objs[1:], dest=d.obj(bag)), rng, wording)
        goal = GoalSpec(node_goals=[NodeGoal(node=o, relation="inside", destination=bag) for o in chosen])
        return text, goal, [f"rearrange({o}, inside, {bag})" for o in chosen], i
    if kind == "switch_one":
        by_class: dict[str, list[str]] = {}
        for a in g.names(Layer.ASSET):
            if affords(g.nodes[a], "turn_on"):
                by_class.setdefault(node_class(a), []).append(a)
        options = [a for devices in by_class.values() if len(devices) >= 2 for a in devices
                   if d.asset(a) and g.nodes[a].has("off")]
        if not options:
            return None
        a = rng.choice(options)
        thing = d.asset(a)
        text, i = _say(kind, dict(verb="switch on", thing=thing, Thing=thing[0].upper() + thing[1:],
                                  state="switched on", one_plural=plural(node_class(a))), rng, wording)
        return text, GoalSpec(node_goals=[NodeGoal(node=a, states=["on"])]), [f"turn_on({a})"], i
    if kind == "nested_out":
        options = []
        for o in g.names(Layer.OBJECT):
            holder, rel = g.parent[o]
            if (affords(g.nodes[o], "pick_up") and g.nodes[holder].layer is Layer.OBJECT and d.obj(holder)
                    and sum(node_class(x) == node_class(o) for x in g.children(holder)) == 1):
                options.append(o)
        if not options or not holders:
            return None
        o = rng.choice(options)
        container = g.parent[o][0]
        dest, rel = _destination(rng, [h for h in holders if h[0] != g.parent[container][0]] or holders,
                                 node_class(o), priors)
        name = f"the {words(node_class(o))}"
        text, i = _say(kind, dict(obj=name, Obj=name[0].upper() + name[1:], container=d.obj(container),
                                  prep=_prep(rel), dest=d.asset(dest)), rng, wording)
        return text, GoalSpec(node_goals=[NodeGoal(node=o, relation=rel, destination=dest)]), \
            [f"rearrange({o}, {rel}, {dest})"], i
    if kind == "chain":
        if len(movable) < 2 or not holders:
            return None
        one, two = rng.sample(movable, 2)
        rooms = {g.place_of(one), g.place_of(two)}
        if len(rooms) < 2:
            return None
        there = [h for h in holders if g.place_of(h[0]) == g.place_of(two) and h[0] != g.parent[two][0]]
        third = [h for h in holders if g.place_of(h[0]) not in rooms]
        if not there or not third:
            return None
        dest, rel = _destination(rng, there, node_class(one), priors)
        dest2, rel2 = _destination(rng, third, node_class(two), priors)
        n1, n2 = d.obj(one), d.obj(two)
        text, i = _say(kind, dict(obj=n1, Obj=n1[0].upper() + n1[1:], obj2=n2, prep=_prep(rel), prep2=_prep(rel2),
                                  dest=d.asset(dest), dest2=d.asset(dest2), into=_into(rel)), rng, wording)
        goal = GoalSpec(node_goals=[NodeGoal(node=one, relation=rel, destination=dest),
                                    NodeGoal(node=two, relation=rel2, destination=dest2)])
        return text, goal, [f"rearrange({one}, {rel}, {dest})", f"rearrange({two}, {rel2}, {dest2})"], i
    raise ValueError(f"not a wider kind: {kind!r}")


def _named_by_property(g: SceneGraph, d: Describer) -> dict[str, str]:
    """The objects that can be picked up and named by a property (:meth:`Describer.by_property`),
    with that name, in graph order."""
    named = {o: d.by_property(o) for o in g.names(Layer.OBJECT) if affords(g.nodes[o], "pick_up")}
    return {o: n for o, n in named.items() if n}


def _decoy(g: SceneGraph, d: Describer, rng: random.Random, priors: Priors, holders: list[tuple[str, str]],
           wording: str):
    """A ``decoy`` task (module doc), or None when the building has no object named by a property
    with another of its class on another asset that can be named."""
    def usual(obj: str) -> str:
        holder, rel = g.parent[obj]
        where = d.asset(holder) if g.nodes[holder].layer is Layer.ASSET else ""
        return f"{'on' if rel is Relation.ONTOP else 'inside'} {where}" if where else ""

    named = _named_by_property(g, d)
    pairs = []
    for obj in named:
        mine = set(g.nodes[obj].properties or ())
        pairs += [(obj, o) for o in d.classes[node_class(obj)] if o != obj and usual(o)
                  and g.parent[o][0] != g.parent[obj][0] and not mine & set(g.nodes[o].properties or ())]
    if not pairs or not holders:
        return None
    obj, decoy = rng.choice(pairs)
    moved = rng.random() < 0.5 or not usual(obj)  # the hint names the decoy's asset: the object was moved
    hint = usual(decoy) if moved else usual(obj)
    taken = {g.parent[obj][0], g.parent[decoy][0]}
    dest, rel = _destination(rng, [h for h in holders if h[0] not in taken] or holders, node_class(obj), priors)
    if dest in taken:
        return None
    name = named[obj]
    text, i = _say("decoy", dict(obj=name, Obj=name[0].upper() + name[1:], prep=_prep(rel), dest=d.asset(dest),
                                 usual=hint, into=_into(rel)), rng, wording)
    goal = GoalSpec(node_goals=[NodeGoal(node=obj, relation=rel, destination=dest)])
    return text, goal, [f"rearrange({obj}, {rel}, {dest})"], i, {
        "decoy": decoy, "hint": g.parent[decoy][0] if moved else g.parent[obj][0]}


def closing_steps(g: SceneGraph, plan: list[str], goal: GoalSpec) -> list[str]:
    """``close`` steps for the containers the plan's corrections open and the goal does not want
    open, innermost first."""
    final, _ = run_plan(g, parse_plan(plan), correct=True)
    wanted = {ng.node for ng in goal.node_goals if "open" in ng.states}
    opened = [n for n, v in final.nodes.items() if v.has("open") and not g.nodes[n].has("open") and n not in wanted]

    def depth(n: str) -> int:
        k = 0
        while n in final.parent:
            n, k = final.parent[n][0], k + 1
        return k
    return [f"close({n})" for n in sorted(opened, key=depth, reverse=True)]


def checked(task_id: str, split: str, b: Building, g: SceneGraph, drawn, provenance: dict) -> Task | None:
    """The task, when it is one (module doc): no goal part holds already in ``g`` (the building's
    graph, parsed), and the plan with its closing steps reaches the goal with nothing else
    changed; else None."""
    text, goal, plan, phrasing, *more = drawn
    goal = goal.model_copy(update={"unchanged_elsewhere": True})
    if goal.check_names(g) or already_met(goal, g):
        return None
    plan = plan + [s for s in closing_steps(g, plan, goal) if s not in plan]
    if not validate_plan(g, plan, goal).success:
        return None
    return Task(id=task_id, split=split, instruction=text, initial_graph=b.graph, goal=goal,
                ground_truth_plan=plan, provenance={**provenance, "phrasing": phrasing, **(more[0] if more else {})})
