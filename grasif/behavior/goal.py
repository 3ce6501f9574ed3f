"""The goal: the BDDL goal in :mod:`grasif.formula` syntax (:func:`goal_formula`), and bddl's own check.

The formula has one top-level conjunct per bddl goal condition, so plan precision counts bddl's
conditions. Terms become node names (with or without bddl's ``?``), categories their class,
variables ``?<class>``; ``ontop``/``inside`` test the direct parent edge, ``toggled_on`` the
``on`` state, ``open`` the ``open`` state (:data:`RELATIONS`, :data:`STATE_WORDS`). A goal predicate outside
:data:`~grasif.behavior.source.KEPT_PREDICATES` or an unknown term raises
:class:`grasif.dataset.SourceError` naming the file.

:class:`BddlGoalChecker` judges bddl's compiled goal (``TrivialBackend``) on a graph's facts;
``tests/test_behavior.py`` checks that it agrees with the formula.
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

import re

from grasif.behavior.convert import Converted
from grasif.behavior.source import AGENT_SYNSET, KEPT_PREDICATES, SYNSET_RE, Activity, quiet_stdout, require_bddl
from grasif.dataset import SourceError
from sgs.graph import Relation, SceneGraph

#: How ``ontop``/``inside`` and the state predicates read on our graph.
RELATIONS = {"ontop": Relation.ONTOP, "inside": Relation.INSIDE}
STATE_WORDS = {"open": "open", "toggled_on": "on"}


class _FormulaWriter:
    """BDDL goal → :mod:`grasif.formula` text (module doc); one instance per activity."""

    def __init__(self, act: Activity, conv: Converted):
        self.act, self.conv = act, conv
        self.var_names: dict[str, str] = {}

    def var(self, label: str, category: str) -> str:
        label = label.lstrip("?")
        if label not in self.var_names:
            m = SYNSET_RE.match(label)
            base = self.conv.classes.get(label) or (re.sub(r"[^a-z0-9_]", "_", m.group(1)) if m else re.sub(r"[^a-z0-9_]", "_", label)) or "x"
            name, k = base, 0
            while name in self.var_names.values():
                k += 1
                name = f"{base}_{chr(ord('a') + k)}"
            self.var_names[label] = name
        return self.var_names[label]

    def spec(self, spec, bound: dict[str, str]) -> tuple[str, dict[str, str]]:
        if not (isinstance(spec, list) and len(spec) == 3 and spec[1] == "-"):
            raise SourceError(f"{self.act.path}: malformed quantifier variable {spec!r}")
        label, _, category = spec
        if category not in self.act.objects or category == AGENT_SYNSET:
            raise SourceError(f"{self.act.path}: goal quantifies over {category!r}, which has no objects")
        v = self.var(label, category)
        return f"(?{v} - {self.conv.classes[category]})", {**bound, label.lstrip("?"): v}

    def term(self, t: str, bound: dict[str, str], pred: str) -> str:
        s = t.lstrip("?")
        if s in bound:
            return "?" + bound[s]
        if s in self.conv.names:
            return self.conv.names[s]
        if pred == "inroom" and s in self.conv.rooms:
            return self.conv.rooms[s]
        raise SourceError(f"{self.act.path}: goal term {t!r} is neither a bound variable nor an object")

    def write(self, expr, bound: dict[str, str]) -> str:
        head = expr[0]
        if head in ("and", "or", "not", "imply"):
            if (head == "not" and len(expr) != 2) or (head == "imply" and len(expr) != 3):
                raise SourceError(f"{self.act.path}: malformed {head} in the goal")
            return f"({head} " + " ".join(self.write(e, bound) for e in expr[1:]) + ")"
        if head in ("forall", "exists"):
            spec, inner = self.spec(expr[1], bound)
            return f"({head} {spec} {self.write(expr[2], inner)})"
        if head == "forn":
            spec, inner = self.spec(expr[2], bound)
            return f"(forn ({int(expr[1][0])}) {spec} {self.write(expr[3], inner)})"
        if head == "forpairs":
            s1, inner = self.spec(expr[1], bound)
            s2, inner = self.spec(expr[2], inner)
            return f"(forpairs {s1} {s2} {self.write(expr[3], inner)})"
        if head == "fornpairs":
            s1, inner = self.spec(expr[2], bound)
            s2, inner = self.spec(expr[3], inner)
            return f"(fornpairs ({int(expr[1][0])}) {s1} {s2} {self.write(expr[4], inner)})"
        if head not in KEPT_PREDICATES:
            raise SourceError(f"{self.act.path}: goal predicate {head!r} is outside {sorted(KEPT_PREDICATES)}")
        return f"({head} " + " ".join(self.term(t, bound, head) for t in expr[1:]) + ")"


def goal_formula(act: Activity, conv: Converted) -> str:
    """The activity's goal in :mod:`grasif.formula` syntax, one top-level conjunct per bddl condition."""
    writer = _FormulaWriter(act, conv)
    parts = [writer.write(g, {}) for g in act.goal]
    if len(parts) == 1 and act.goal[0][0] != "and":
        return parts[0]
    return "(and " + " ".join(parts) + ")"


class BddlGoalChecker:
    """bddl's compiled goal (``TrivialBackend``) judged on the facts of a :class:`SceneGraph`.

    ``instances`` maps node names to bddl instances (a task's provenance). Facts: ``ontop``/``inside``
    from each parent edge, ``open`` from the ``open`` state, ``toggled_on`` from ``on``. Calling it
    returns bddl's (success, [verdict per goal condition]).
    """

    def __init__(self, act: Activity, instances: dict[str, str]):
        bddl = require_bddl()
        from bddl.trivial_backend import TrivialBackend, TrivialGenericObject, TrivialSimulator

        self.instances = instances
        self.sim = TrivialSimulator()
        scope = bddl.activity.get_object_scope(act.conds)
        for key in scope:
            scope[key] = TrivialGenericObject(key, self.sim)
        with quiet_stdout():
            self.goal = bddl.activity.get_goal_conditions(act.conds, TrivialBackend(), scope, generate_ground_options=False)
        self._evaluate = bddl.activity.evaluate_goal_conditions

    def facts(self, graph: SceneGraph) -> dict[str, set]:
        inst = self.instances
        out: dict[str, set] = {"ontop": set(), "inside": set(), "open": set(), "toggled_on": set()}
        for child, (par, rel) in graph.parent.items():
            if rel is Relation.ONTOP:
                out["ontop"].add((inst[child], inst[par]))
            elif rel is Relation.INSIDE:
                out["inside"].add((inst[child], inst[par]))
        for name, node in graph.nodes.items():
            if node.has("open"):
                out["open"].add((inst[name],))
            if node.has("on"):
                out["toggled_on"].add((inst[name],))
        return out

    def __call__(self, graph: SceneGraph) -> tuple[bool, list[bool]]:
        for key, value in self.facts(graph).items():
            setattr(self.sim, key, value)
        with quiet_stdout():
            ok, result = self._evaluate(self.goal)
        satisfied = set(result["satisfied"])
        return bool(ok), [i in satisfied for i in range(len(self.goal))]
