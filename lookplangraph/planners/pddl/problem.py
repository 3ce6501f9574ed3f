"""PDDL for the appendix-D domain: problems from scene graphs, plans back to actions.

* :func:`domain` — the paper's appendix-D domain (``domain.pddl``, as published).
* :class:`PddlNames` — scene-graph names ↔ PDDL names (lower case, only ``a-z 0-9 _ -``,
  starting with a letter), both ways, so a plan Fast Downward writes in lower case maps back.
* :func:`graph_problem` — a problem from a scene graph (rooms are ``room``, assets and objects
  ``object``); ``keep`` limits the objects (every room is kept).
* :func:`oracle_goal` — goal facts from the ground-truth plan's final graph compared with the
  initial one; with :func:`graph_problem`, the "oracle problem" that checks the pipeline itself.
* :func:`frame_goal` — facts keeping the closed/off nodes of a problem closed/off at the end.
* :func:`complete_declarations` — an LM-written problem's ``(:objects ...)`` rewritten from the
  scene names it uses (each once, typed by the scene; ``llm_plus_p.declare``).
* :func:`plan_actions` — Fast Downward's plan lines → :class:`~sgs.actions.Action` primitives
  (``go_to ?from ?to`` → ``go_to(to)``, ``put_on ?obj ?s ?r`` → ``put_on(s)`` ...).

The domain is kept as published; what it cannot say (closed containers around a container,
stale ``object-room`` facts, no affordances, only closed/on): ``docs/guides/baselines.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from importlib import resources
from typing import Iterable

from sgs.actions import Action, parse_action
from sgs.graph import Layer, Relation, SceneGraph
from sgs.simulator import check


@lru_cache(maxsize=None)
def domain() -> str:
    """The appendix-D domain text."""
    return resources.files("lookplangraph.planners.pddl").joinpath("domain.pddl").read_text(encoding="utf-8")


class PlanError(ValueError):
    """A plan line that is not an action of the domain, or names something unknown."""


class PddlNames:
    """Scene-graph names ↔ PDDL names for one graph (module doc)."""

    def __init__(self, names: Iterable[str]):
        self.to_pddl: dict[str, str] = {}
        self.to_graph: dict[str, str] = {}
        for name in names:
            base = re.sub(r"[^a-z0-9_-]", "_", name.lower())
            if not base or not base[0].isalpha():
                base = "n_" + base
            pddl, k = base, 1
            while pddl in self.to_graph:
                k += 1
                pddl = f"{base}_{k}"
            self.to_pddl[name], self.to_graph[pddl] = pddl, name

    def __call__(self, name: str) -> str:
        return self.to_pddl[name]

    def graph_name(self, pddl: str) -> str:
        try:
            return self.to_graph[pddl.lower()]
        except KeyError:
            raise PlanError(f"{pddl} is not a node of the scene") from None


def _fact(*words: str) -> str:
    return "(" + " ".join(words) + ")"


def graph_problem(graph: SceneGraph, goal: Iterable[str], *, name: str = "task", keep: Iterable[str] | None = None,
                  names: PddlNames | None = None) -> str:
    """A problem of the appendix-D domain for ``graph`` with ``goal`` facts (PDDL text, already
    in PDDL names); ``keep``: the assets and objects to declare (default all). Module doc."""
    names = names or PddlNames(graph.nodes)
    rooms = graph.names(Layer.PLACE)
    things = [n for n in graph.nodes if graph.nodes[n].layer in (Layer.ASSET, Layer.OBJECT)]
    if keep is not None:
        wanted = set(keep)
        things = [n for n in things if n in wanted]
    declared = set(things)
    init = [_fact("robot-in", names(graph.agent.location))]
    init.append(_fact("agent-hold", names(graph.agent.holding)) if graph.agent.holding in declared
                else _fact("hand-empty"))
    for n in things:
        room = graph.place_of(n)
        if room is not None:
            init.append(_fact("object-room", names(n), names(room)))
        par, rel = graph.parent.get(n, (None, None))
        if par in declared and rel in (Relation.ONTOP, Relation.INSIDE):
            init.append(_fact(rel.value, names(n), names(par)))
        states = set(graph.nodes[n].states or ())
        if "closed" in states:
            init.append(_fact("closed", names(n)))
        if "on" in states:
            init.append(_fact("on-state", names(n)))
    goal = list(goal)
    pname = re.sub(r"[^a-z0-9_-]", "_", name.lower()) or "task"
    if not pname[0].isalpha():
        pname = "p" + pname
    decls = [f"\n    {' '.join(names(r) for r in rooms)} - room"]
    if things:
        decls.append(f"\n    {' '.join(names(n) for n in things)} - object")
    # the layout of the LLM+P prompt's example, which is also the grammar's (pddl/grammar.py)
    return (f"(define (problem {pname})\n  (:domain instruction-following)\n  (:objects{''.join(decls)})\n"
            f"  (:init{''.join(f'{chr(10)}    {f}' for f in init)})\n"
            f"  (:goal (and{''.join(f'{chr(10)}    {g}' for g in goal)})))")


def final_graph(initial: SceneGraph, plan: Iterable) -> SceneGraph:
    """The graph after ``plan`` (actions or their text) run in the SGS with corrections."""
    graph = initial
    for step in plan:
        action = parse_action(step)
        outcome = check(graph, action, correct=True)
        if not outcome.ok:
            raise PlanError(f"{action}: {outcome.feedback}")
        graph = outcome.graph
    return graph


def oracle_goal(initial: SceneGraph, final: SceneGraph, names: PddlNames) -> tuple[list[str], list[str], list[str]]:
    """Goal facts for what differs from ``initial`` in ``final`` (module doc), the nodes they
    name, and what the domain cannot express (states other than closed/on)."""
    facts: list[str] = []
    nodes: list[str] = []
    unexpressed: list[str] = []
    for n, node in final.nodes.items():
        if node.layer not in (Layer.ASSET, Layer.OBJECT):
            continue
        before = initial.nodes.get(n)
        old_parent, new_parent = initial.parent.get(n), final.parent.get(n)
        if old_parent != new_parent and new_parent is not None:
            par, rel = new_parent
            if rel in (Relation.ONTOP, Relation.INSIDE):
                facts.append(_fact(rel.value, names(n), names(par)))
                nodes += [n, par]
            elif rel is Relation.HELD:
                facts.append(_fact("agent-hold", names(n)))
                nodes.append(n)
        old_states = set(before.states or ()) if before else set()
        new_states = set(node.states or ())
        for s in sorted(old_states ^ new_states):
            if s in ("closed", "open"):
                facts.append(_fact("closed", names(n)) if "closed" in new_states else f"(not {_fact('closed', names(n))})")
                nodes.append(n)
            elif s in ("on", "off"):
                facts.append(_fact("on-state", names(n)) if "on" in new_states else f"(not {_fact('on-state', names(n))})")
                nodes.append(n)
            else:
                unexpressed.append(f"{n}: {s}")
    return list(dict.fromkeys(facts)), list(dict.fromkeys(nodes)), sorted(set(unexpressed))


def frame_goal(graph: SceneGraph, keep: Iterable[str], names: PddlNames) -> list[str]:
    """Goal facts that keep the closed/on states of ``keep`` as they are in ``graph`` (a plan
    judged strictly must close what it opened): ``(closed c)`` for a closed node, ``(not
    (on-state d))`` for a node that is off."""
    out = []
    for n in keep:
        states = set(graph.nodes[n].states or ())
        if "closed" in states:
            out.append(_fact("closed", names(n)))
        if "off" in states:
            out.append(f"(not {_fact('on-state', names(n))})")
    return out


def relevant_nodes(graph: SceneGraph, nodes: Iterable[str]) -> set[str]:
    """``nodes`` with every holder above each of them (up to its asset) and what they hold
    directly: enough for the domain to move them."""
    keep: set[str] = set()
    for n in nodes:
        if n not in graph.nodes:
            continue
        keep.add(n)
        cur = graph.parent.get(n)
        while cur is not None and cur[1] in (Relation.ONTOP, Relation.INSIDE):
            keep.add(cur[0])
            cur = graph.parent.get(cur[0])
    return keep


def _objects_section(problem: str) -> tuple[int, int] | None:
    """Start and end (exclusive) of the ``(:objects ...)`` form of ``problem``, or None."""
    m = re.search(r"\(\s*:objects\b", problem, re.I)
    if m is None:
        return None
    depth = 0
    for i in range(m.start(), len(problem)):
        if problem[i] == "(":
            depth += 1
        elif problem[i] == ")":
            depth -= 1
            if depth == 0:
                return m.start(), i + 1
    return None


def complete_declarations(problem: str, graph: SceneGraph, names: PddlNames) -> tuple[str, list[str], list[str]]:
    """``problem`` with its ``(:objects ...)`` rewritten from the scene names it uses (module doc):
    rooms as ``room``, assets and objects as ``object``, in order of first use, each once. Names
    that are not the scene's are left where they are (Fast Downward reports them as undefined).
    Returns the text, the names it declared that the LM had not, and the names the LM declared
    more than once. A problem without a readable ``(:objects ...)`` comes back unchanged."""
    span = _objects_section(problem)
    if span is None:
        return problem, [], []
    start, end = span
    section = problem[start:end]
    declared_words = re.findall(r"[A-Za-z][A-Za-z0-9_-]*", section[section.index(":objects") + len(":objects"):])
    declared_list = [w.lower() for w in declared_words if w.lower() not in ("room", "object", "agent")]
    used = re.findall(r"[A-Za-z][A-Za-z0-9_-]*", problem[:start] + " " + section + " " + problem[end:])
    rooms: list[str] = []
    things: list[str] = []
    for word in dict.fromkeys(w.lower() for w in used):
        node = names.to_graph.get(word)
        if node is None:
            continue
        (rooms if graph.nodes[node].layer == Layer.PLACE else things).append(word)
    dropped = sorted(w for w, n in Counter(declared_list).items() if n > 1)
    added = [w for w in rooms + things if w not in declared_list and w in problem[end:]]
    lines = ["(:objects"]
    if rooms:
        lines.append(f"    {' '.join(rooms)} - room")
    if things:
        lines.append(f"    {' '.join(things)} - object")
    return problem[:start] + "\n".join(lines) + ")" + problem[end:], added, dropped


_ARITY = {"go_to": 2, "pick_up": 3, "put_on": 3, "put_inside": 3, "turn_on": 2, "turn_off": 2, "open": 2, "close": 2}


def plan_actions(lines: Iterable[str], names: PddlNames) -> list[Action]:
    """Fast Downward's plan lines → primitive actions (module doc); raises :class:`PlanError`."""
    out: list[Action] = []
    for line in lines:
        words = line.strip().strip("()").split()
        if not words:
            continue
        op, args = words[0].lower(), [names.graph_name(w) for w in words[1:]]
        if op not in _ARITY or len(args) != _ARITY[op]:
            raise PlanError(f"({line}) is not an action of the instruction-following domain")
        if op == "go_to":
            out.append(Action(function_name="go_to", node=args[1]))
        elif op == "pick_up":
            out.append(Action(function_name="pick_up", node=args[0]))
        elif op in ("put_on", "put_inside"):
            out.append(Action(function_name=op, destination=args[1]))
        else:
            out.append(Action(function_name=op, node=args[0]))
    return out


__all__ = ["PddlNames", "PlanError", "complete_declarations", "domain", "final_graph", "frame_goal", "graph_problem",
           "oracle_goal", "plan_actions", "relevant_nodes"]
