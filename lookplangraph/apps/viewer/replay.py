"""The planner's belief graph at every step of an episode, rebuilt from its trace.

A trace records what each LM call did (:class:`~lookplangraph.planners.episode.StepRecord`), not
the memory graph itself. :func:`replay` takes the task, the results row (planner and settings)
and the records and returns a :class:`Timeline`: the graph after each step, rebuilt from the
task's map the way the planner built it (a memory graph with priors for ``lookplangraph``,
trials and ``sg-rwr`` in step mode; without priors for ``react``; the map itself, with the
executed plan applied, for the static planners and SayPlan).

Invariant: the graph is exact for ground-truth or perceived observations of objects whose states
did not change behind the planner's back (observed lines carry no states). Where the trace lacks
what a ``discover_objects`` saw (inside an unchecked action of correction mode ``none``, or one
of several in a record) it is merged as nothing seen; where a step fails to replay the graph
stays as it was from there on; both are said in :attr:`Timeline.notes` with ``exact`` false, and
nothing raises. Nodes and step deltas are encoded compactly for the page's JSON (node flags
:data:`PRIOR`, :data:`SEEN`, :data:`CHANGED`, :data:`NEW`, :data:`INSPECTED`).
Docs: ``docs/guides/viewer.md`` (*The replay*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grasif.task import Task
from sgs.actions import ActionSyntaxError, parse_action
from sgs.graph import Layer, Relation, SceneGraph
from sgs.simulator import Infeasible
from sim_adapters.base import Observation, SeenObject

from lookplangraph.agent.memory import MemoryGraph

PRIOR, SEEN, CHANGED, NEW, INSPECTED = 1, 2, 4, 8, 16
#: planner name -> how it believes the scene (module doc); ``sg-rwr`` by its mode
#: (:func:`belief_of`), unknown planners: ``memory``
BELIEF = {"lookplangraph": "memory", "react": "observed", "llm-as-p": "map", "llm+p": "map",
          "sayplan": "map", "sayplan-lite": "map"}


def belief_of(planner: str, config: dict) -> str:
    """``memory``, ``observed`` or ``map``: how ``planner`` with ``config`` believes the scene."""
    if planner == "sg-rwr":  # step mode keeps a memory graph as LookPlanGraph does; static reads the map
        return "memory" if config.get("sgrwr_mode") == "step" else "map"
    return BELIEF.get(planner, "memory")
_LAYER = {Layer.PLACE: "p", Layer.ASSET: "a", Layer.OBJECT: "o"}
_REL = {Relation.IN_ROOM: "r", Relation.ONTOP: "on", Relation.INSIDE: "in", Relation.HELD: "h"}
_SEEN_LINE = re.compile(r"^(\S+) (ontop|inside) (\S+)$")


@dataclass
class Timeline:
    """The belief graph before the first step (``base``) and one delta per step record
    (module doc). ``belief``: memory | observed | map."""

    belief: str
    base: list[list]
    deltas: list[dict]
    exact: bool = True
    notes: list[str] = field(default_factory=list)


def snapshot(graph: SceneGraph, unseen: set[str], reference: SceneGraph, belief: str) -> dict[str, list]:
    """Every node of ``graph`` (and the agent) encoded (module doc); ``changed``/``new`` are
    judged against ``reference`` (the task's map)."""
    return _Encoder(reference, belief)(graph, unseen)


class _Encoder:
    """:func:`snapshot` with a cache: a node object whose place, prior and inspected marks are
    as before keeps its encoding (graphs share unchanged nodes, so a step re-encodes only what
    it changed)."""

    def __init__(self, reference: SceneGraph, belief: str):
        self.reference, self.belief = reference, belief
        self.cache: dict[tuple, tuple] = {}

    def encode(self, graph: SceneGraph, name: str, node, edge, prior: bool) -> list:
        flags = 0
        if node.layer is Layer.OBJECT and self.belief != "map":
            flags |= PRIOR if prior else SEEN
        ref = self.reference.nodes.get(name)
        states = tuple(sorted(node.states or ()))
        if ref is None:
            flags |= NEW
        elif states != tuple(sorted(ref.states or ())) or self.reference.parent.get(name) != edge:
            flags |= CHANGED
        if name in graph.inspected:
            flags |= INSPECTED
        parent, rel = edge if edge is not None else (None, None)
        return [name, _LAYER[node.layer], parent, _REL.get(rel, ""), " ".join(states), flags]

    def __call__(self, graph: SceneGraph, unseen: set[str]) -> dict[str, list]:
        out: dict[str, list] = {}
        cache, parent, inspected = self.cache, graph.parent, graph.inspected
        for name, node in graph.nodes.items():
            edge = parent.get(name)
            prior = name in unseen
            key = (id(node), edge, prior, name in inspected)
            hit = cache.get(key)
            if hit is None or hit[0] is not node:  # the node is kept in the value, so its id stays its own
                hit = cache[key] = (node, self.encode(graph, name, node, edge, prior))
            out[name] = hit[1]
        agent = graph.agent
        out[agent.name] = [agent.name, "g", agent.location, "r", "", 0]
        return out


def _delta(before: dict[str, list], after: dict[str, list], touch: list[str]) -> dict:
    delta: dict = {}
    changed = [v for k, v in after.items() if before.get(k) is not v and before.get(k) != v]
    removed = [k for k in before if k not in after]
    if changed:
        delta["set"] = changed
    if removed:
        delta["del"] = removed
    if touch:
        delta["touch"] = touch
    return delta


def _names(action) -> list[str]:
    return [n for n in (action.node, action.destination) if n]


def _seen_objects(lines: list[str], memory: MemoryGraph, reference: SceneGraph,
                  states: dict[str, list[str]] | None = None) -> list[SeenObject]:
    """``name relation parent`` lines as observed objects (module doc for their states)."""
    objects = []
    for line in lines:
        m = _SEEN_LINE.match(line.strip())
        if not m:
            continue  # "not found: ..." and anything else that is no placement
        name, rel, parent = m.groups()
        known = memory.graph.nodes.get(name) or reference.nodes.get(name)
        if states is not None and name in states:
            st = tuple(states[name])
        else:
            st = tuple(known.states or ()) if known is not None else ()
        objects.append(SeenObject(name, rel, parent, st, known.affordances if known is not None else None))
    return objects


def replay(task: Task, result: dict | None, steps: list[dict], augmentations: list[dict] | None = None,
           planner: str | None = None, config: dict | None = None) -> Timeline:
    """The belief graph of ``task``'s episode after each of ``steps`` (module doc). ``result``
    (the results row) gives the planner and its settings unless ``planner``/``config`` do;
    ``augmentations``: a trial's ``augmentations.jsonl`` rows (objects with states)."""
    result = result or {}
    planner = planner or result.get("planner") or "lookplangraph"
    config = config if config is not None else (result.get("config") or {})
    belief = belief_of(planner, config)
    reference = task.graph
    priors = belief == "map" or (belief == "memory" and bool(config.get("priors", True)))
    memory = MemoryGraph(reference, priors=priors)
    if belief == "map":
        memory.unseen = set()
    encode = _Encoder(reference, belief)
    state = encode(memory.graph, memory.unseen)
    timeline = Timeline(belief, list(state.values()), [])
    augs = list(augmentations or [])
    broken = False
    for rec in steps:
        touch: list[str] = []
        executed = [s for s in rec.get("executed") or [] if isinstance(s, str)]
        perceived = [p for p in rec.get("perceived") or [] if isinstance(p, dict)]
        discovers = sum(s.startswith("discover_objects") for s in executed)
        if not broken:
            for k, text in enumerate(executed):
                try:
                    action = parse_action(text)
                    memory.apply(action)
                except (ActionSyntaxError, Infeasible, KeyError, ValueError) as exc:
                    timeline.exact, broken = False, True
                    timeline.notes.append(f"call {rec.get('call')}: {text} could not be replayed ({exc}); "
                                          "the graph is drawn as it was before from here on")
                    break
                touch += [n for n in _names(action) if n not in touch]
                if action.function_name != "discover_objects":
                    continue
                lines, states = None, None
                if perceived:
                    entry = perceived.pop(0)
                    lines = list(entry.get("objects") or [])
                    aug = next((a for a in augs if a.get("node") == action.node), None)
                    if aug is not None:
                        augs.remove(aug)
                        states = {o["name"]: o.get("states") or [] for o in aug.get("objects") or []
                                  if isinstance(o, dict) and "name" in o}
                elif discovers == 1 or k == max(i for i, s in enumerate(executed) if s.startswith("discover_objects")):
                    lines = [s for s in rec.get("observed") or [] if isinstance(s, str)]
                    if not lines and config.get("correction") == "none":
                        lines = None
                if lines is None:
                    timeline.exact = False
                    timeline.notes.append(f"call {rec.get('call')}: what {text} saw is not in the trace; "
                                          "merged as nothing seen")
                    lines = []
                try:
                    memory.discover(Observation(action.node, tuple(_seen_objects(lines, memory, reference, states))))
                except (KeyError, ValueError) as exc:
                    timeline.exact, broken = False, True
                    timeline.notes.append(f"call {rec.get('call')}: the observation of {action.node} could not be "
                                          f"merged ({exc}); the graph is drawn as it was before from here on")
                    break
        if not executed and rec.get("proposed"):
            try:
                touch = [n for n in _names(parse_action(rec["proposed"])) if n]
            except ActionSyntaxError:
                pass
        after = encode(memory.graph, memory.unseen) if not broken else state
        timeline.deltas.append(_delta(state, after, touch))
        state = after
    return timeline


def final_state(timeline: Timeline) -> dict[str, list]:
    """The encoded nodes after the last step (what the page computes for the last step)."""
    nodes = {n[0]: n for n in timeline.base}
    for d in timeline.deltas:
        for name in d.get("del", ()):
            nodes.pop(name, None)
        for n in d.get("set", ()):
            nodes[n[0]] = n
    return nodes
