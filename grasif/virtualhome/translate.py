"""A program in our action set: the ground-truth plan (:func:`translate_program`).

The program is replayed on our graph, our agent in the room of VirtualHome's character (a step
naming a node in another room first emits ``go_to``): GRAB → pick_up; PUTBACK → put_on; PUTIN →
put_inside; PUTOBJBACK → put back where taken; DROP/RELEASE/PUTON → put_on the room's floor;
OPEN/CLOSE/SWITCHON/SWITCHOFF → open/close/turn_on/turn_off; a GRAB of an asset and every other
action leave our graph unchanged and are left out. A put onto a node without the affordance puts
the object back. One hand: a GRAB while holding puts the held object back where it was taken from
and takes it again when the program puts it. :func:`compact_plan` then shortens the plan without
changing its final graph. A step we cannot express raises :class:`TranslationError`.
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from grasif.virtualhome.convert import Naming, RawGraph, affords_relation
from grasif.virtualhome.source import HAND_ACTIONS, PUT_ACTIONS, STATE_ACTIONS, Program, Step
from sgs.actions import Action, make
from sgs.graph import Layer, Relation, SceneGraph
from sgs.simulator import check, run_plan

class TranslationError(RuntimeError):
    """A program step that the translation cannot express in our action set."""


class _Translator:
    """Emits primitive actions while keeping a copy of our scene graph in step with the program."""

    def __init__(self, graph: SceneGraph, naming: Naming, raw: RawGraph, program: Program):
        self.g = graph
        self.naming = naming
        self.raw = raw
        self.program = program
        self.plan: list[Action] = []
        self.pending: list[str] = []  # grabbed in VirtualHome, put back by our one-handed agent
        self.taken: dict[str, tuple[str, Relation]] = {}  # where each object was last taken from

    # -- helpers --------------------------------------------------------------------------------
    def emit(self, fn: str, node: str | None = None, dest: str | None = None) -> None:
        action = make(fn, node, None, dest) if fn not in ("put_on", "put_inside") else make(fn, None, None, dest)
        out = check(self.g, action, correct=False)
        if not out.ok:
            raise TranslationError(f"{self.program.id}: {out.feedback}")
        self.g = out.graph
        self.plan.append(action)

    def name(self, vh_id: int) -> str | None:
        kept = self.naming.canonical(self.raw, vh_id)
        return self.naming.names[kept] if kept is not None else None

    def room_of(self, vh_id: int) -> str | None:
        name = self.name(vh_id)
        if name is not None:
            return self.g.place_of(name)
        room = self.raw.room_of.get(vh_id)
        return self.naming.names.get(room) if room is not None else None

    def go(self, room: str | None) -> None:
        if room is not None and room != self.g.agent.location:
            self.emit("go_to", room)

    def here_floor(self) -> str:
        room_id = self.naming.ids[self.g.agent.location]
        return self.naming.names[self.naming.floor[room_id]]

    def pick(self, obj: str) -> None:
        """Go to ``obj``, open what hides it, pick it up, close again what was opened."""
        self.go(self.g.place_of(obj))
        blockers = self.g.enclosing_closed(obj)
        for c in blockers:
            self.emit("open", c)
        self.taken[obj] = self.g.parent[obj]
        self.emit("pick_up", obj)
        for c in reversed(blockers):
            self.emit("close", c)

    def put(self, dest: str, relation: Relation) -> None:
        """Go to ``dest``, open what hides or closes it, put the held object, close again."""
        self.go(self.g.place_of(dest))
        blockers = self.g.enclosing_closed(dest)
        if relation is Relation.INSIDE and self.g.nodes[dest].has("closed"):
            blockers.append(dest)
        for c in blockers:
            self.emit("open", c)
        self.emit("put_on" if relation is Relation.ONTOP else "put_inside", dest=dest)
        for c in reversed(blockers):
            self.emit("close", c)

    def free_hand(self) -> None:
        """Put the held object back where it was taken from; it stays 'grabbed' for the program."""
        held = self.g.agent.holding
        if held is None:
            return
        parent, rel = self.taken[held]
        here = self.g.agent.location
        self.put(parent, rel)
        self.pending.append(held)
        self.go(here)

    def take(self, obj: str) -> None:
        """Make the agent hold ``obj`` (grabbed earlier or now)."""
        if self.g.agent.holding == obj:
            return
        self.free_hand()
        here = self.g.agent.location
        if obj in self.pending:
            self.pending.remove(obj)
        self.pick(obj)
        self.go(here)

    # -- the program ----------------------------------------------------------------------------
    def run(self) -> list[Action]:
        for step in self.program.steps:
            a, first = step.action, step.args[0][1] if step.args else None
            if first is None:  # STANDUP, SLEEP, WAKEUP
                continue
            if a in ("WALK", "RUN") and first in self.raw.rooms:
                self.go(self.name(first))
                continue
            if a not in HAND_ACTIONS:  # the character walks to what it acts on
                self.go(self.room_of(first))
            obj = self.name(first)
            if a in HAND_ACTIONS and (obj is None or self.g.nodes[obj].layer is not Layer.OBJECT):
                continue  # VirtualHome also lets the character grab water, an asset for us
            if a == "GRAB":
                if self.g.agent.holding != obj:
                    self.free_hand()
                self.pick(obj)
            elif a in PUT_ACTIONS:
                dest = self._need(self.name(step.args[1][1]), step)
                self.take(obj)
                if affords_relation(self.g.nodes[dest], PUT_ACTIONS[a]):
                    self.put(dest, PUT_ACTIONS[a])
                else:  # VirtualHome puts things on anything; we cannot: put it back
                    self.put(*self.taken[obj])
            elif a == "PUTOBJBACK":
                self.take(obj)
                self.put(*self.taken[obj])
            elif a in ("DROP", "RELEASE", "PUTON"):
                self.take(obj)
                self.put(self.here_floor(), Relation.ONTOP)
            elif a in STATE_ACTIONS:
                self.emit(STATE_ACTIONS[a], self._need(obj, step))
        # VirtualHome still holds what it grabbed last and did not put: so do we
        if self.g.agent.holding is None and self.pending:
            self.take(self.pending[-1])
        return self.plan

    def _need(self, name: str | None, step: Step) -> str:
        if name is None:
            raise TranslationError(f"{self.program.id}: {step.text} names a node that the conversion dropped")
        return name


def translate_program(program: Program, graph: SceneGraph, naming: Naming, raw: RawGraph) -> list[Action]:
    """The program in our primitive actions (one hand), then compacted (:func:`compact_plan`)."""
    primitive = _Translator(graph, naming, raw, program).run()
    return compact_plan(graph, primitive)


def _final(graph: SceneGraph, plan: list[Action]) -> SceneGraph | None:
    g, outs = run_plan(graph, plan, correct=False)
    return g if all(o.ok for o in outs) else None


def compact_plan(graph: SceneGraph, plan: list[Action]) -> list[Action]:
    """Shorten a primitive plan without changing its final graph (the plan's meaning here):

    1. drop steps that change nothing in the end, alone or in pairs (an object picked up and put
       back where it was, a node opened and closed again, a go_to that the next step makes needless);
    2. merge ``pick_up(o)`` and the next put of ``o`` into ``rearrange``, when only go_to and state
       changes lie between (those are moved in front: they do not depend on what is held);
    3. drop needless steps again. Every change is kept only if the plan stays feasible without
       corrections and its final graph is the same.
    """
    target = _final(graph, plan)
    if target is None:
        raise TranslationError("the translated plan is not feasible")
    out = _prune(graph, list(plan), target)
    out = _merge(graph, out, target)
    return _prune(graph, out, target)


_UNDO = {"open": "close", "close": "open", "turn_on": "turn_off", "turn_off": "turn_on"}


def _prune(graph: SceneGraph, plan: list[Action], target: SceneGraph) -> list[Action]:
    changed = True
    while changed:
        changed = False
        for i in reversed(range(len(plan))):
            candidate = plan[:i] + plan[i + 1:]
            if _final(graph, candidate) == target:
                plan, changed = candidate, True
                break
        if changed:
            continue
        for i, a in enumerate(plan):
            j = _partner(plan, i)
            if j is not None:
                candidate = plan[:i] + plan[i + 1:j] + plan[j + 1:]
                if _final(graph, candidate) == target:
                    plan, changed = candidate, True
                    break
    return plan


def _partner(plan: list[Action], i: int) -> int | None:
    """The step that may undo step ``i``: the next put after a pick_up, the next opposite toggle."""
    a = plan[i]
    for j in range(i + 1, len(plan)):
        b = plan[j]
        if a.function_name == "pick_up" and b.function_name in ("put_on", "put_inside"):
            return j
        if b.function_name == _UNDO.get(a.function_name) and b.node == a.node:
            return j
    return None


def _merge(graph: SceneGraph, plan: list[Action], target: SceneGraph) -> list[Action]:
    out = list(plan)
    i = 0
    while i < len(out):
        if out[i].function_name == "pick_up":
            j = i + 1
            while j < len(out) and out[j].function_name in ("go_to", *_UNDO):
                j += 1
            if j < len(out) and out[j].function_name in ("put_on", "put_inside"):
                rel = "ontop" if out[j].function_name == "put_on" else "inside"
                merged = make("rearrange", out[i].node, rel, out[j].destination)
                candidate = out[:i] + out[i + 1:j] + [merged] + out[j + 1:]
                if _final(graph, candidate) == target:
                    out = candidate
                    continue
        i += 1
    return out
