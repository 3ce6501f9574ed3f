"""A search for the cheapest final state that satisfies a goal formula (:class:`GoalSearch`).

Depth-first branch and bound over the formula for a final state that changes the fewest parents
and states of the initial graph (moves, opens on the way and switches), with one parent per
object and assets fixed. :meth:`GoalSearch.solve` returns that state as (parents, banned parents,
states), or ``None`` when it finds none within its call limit; :mod:`grasif.behavior.plan`
turns it into steps. Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

import itertools

from grasif import formula as F
from grasif.behavior.goal import RELATIONS, STATE_WORDS
from grasif.formula import category_class
from sgs.graph import Layer, Relation, SceneGraph, affords, node_class

_SWITCH = {"open": ("open", "close"), "on": ("turn_on", "turn_off")}


class GoalSearch:
    """Depth-first branch and bound over the goal formula for a final state that changes the
    fewest parents and states of the initial graph, with one parent per object and assets fixed.

    A partial state is (parents: object → (dest, Relation), forbid: object → banned parents,
    states: (node, word) → bool); unassigned objects keep their initial parent. ``forn`` picks
    exactly N instances, ``forpairs``/``fornpairs`` a one-to-one matching (sufficient for bddl's
    relaxed check). Gives up on ``inroom`` of objects and on negated ``forn``/pair quantifiers.
    """

    def __init__(self, graph: SceneGraph, limit: int = 3000):
        self.g, self.limit, self.calls = graph, limit, 0
        self.cat = category_class
        self.index: dict[str, list[str]] = {}
        for n in graph.nodes:
            self.index.setdefault(node_class(n), []).append(n)
        self.best = None
        self.best_cost = float("inf")
        self._enclosing: dict[str, tuple[str, ...]] = {}

    def enclosing(self, name: str) -> tuple[str, ...]:
        got = self._enclosing.get(name)
        if got is None:
            got = self._enclosing[name] = tuple(self.g.enclosing_closed(name))
        return got

    # -- the current final state --
    def parent(self, st, a):
        return st[0].get(a) or self.g.parent.get(a)

    def state(self, st, a, word):
        got = st[2].get((a, word))
        return self.g.nodes[a].has(word) if got is None else got

    def cost(self, st) -> int:
        """Steps the state needs: moves, opens of closed containers on the way (initial graph),
        state changes, and a close for an opened container that must end closed."""
        g = self.g
        gp, nodes = g.parent, g.nodes
        moved = [(a, p) for a, p in st[0].items() if gp.get(a) != p]
        c = len(moved) + sum(1 for a, banned in st[1].items() if a not in st[0] and gp.get(a) in banned)
        opened: set[str] = set()
        enc = self.enclosing
        for a, (dest, rel) in moved:
            opened.update(enc(a))
            opened.update(enc(dest))
            if rel is Relation.INSIDE and nodes[dest].has("closed"):
                opened.add(dest)
        c += len(opened)
        for (a, w), v in st[2].items():
            if a in opened and w == "open":
                c += not v  # opened on the way, closed again
            elif nodes[a].has(w) != v:
                c += 1
        return c

    def dom(self, category: str) -> list[str]:
        return self.index.get(self.cat(category), [])

    def holds(self, f, env, st) -> bool:
        if isinstance(f, F.Atom):
            args = [env[n] if v else n for n, v in f.args]
            if f.predicate in RELATIONS:
                return self.parent(st, args[0]) == (args[1], RELATIONS[f.predicate])
            if f.predicate == "inroom":
                a = args[0]
                while self.g.nodes[a].layer is not Layer.PLACE:
                    edge = self.parent(st, a)
                    if edge is None or edge[1] is Relation.HELD:
                        return False
                    a = edge[0]
                return a == args[1]
            return self.state(st, args[0], STATE_WORDS.get(f.predicate, f.predicate))
        if isinstance(f, F.And):
            return all(self.holds(x, env, st) for x in f.items)
        if isinstance(f, F.Or):
            return any(self.holds(x, env, st) for x in f.items)
        if isinstance(f, F.Not):
            return not self.holds(f.item, env, st)
        if isinstance(f, F.Imply):
            return (not self.holds(f.antecedent, env, st)) or self.holds(f.consequent, env, st)
        if isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            hits = sum(self.holds(f.body, {**env, f.var: x}, st) for x in self.dom(f.category))
            n = len(self.dom(f.category))
            return hits == n if isinstance(f, F.ForAll) else hits >= 1 if isinstance(f, F.Exists) else hits == f.n
        rows, cols, width = 0, set(), 0
        for i, x in enumerate(self.dom(f.category1)):
            ys = [y for y in self.dom(f.category2) if y != x]
            width = len(ys) if i == 0 else width
            hit = [j for j, y in enumerate(ys) if self.holds(f.body, {**env, f.var1: x, f.var2: y}, st)]
            rows += bool(hit)
            cols.update(hit)
        need = min(len(self.dom(f.category1)), width) if isinstance(f, F.ForPairs) else f.n
        return rows >= need and len(cols) >= need

    # -- search --
    def solve(self, formula) -> tuple | None:
        self.run(((formula, {}, True),), ({}, {}, {}))
        return self.best

    def run(self, goals, st) -> None:
        self.calls += 1
        if self.calls > self.limit:
            return
        cost = self.cost(st)
        if cost >= self.best_cost:
            return
        if not goals:
            self.best, self.best_cost = st, cost
            return
        goal, rest = goals[0], goals[1:]
        if goal[0] == "match":
            return self.match(goal, rest, st)
        self.step(*goal, rest, st)

    def branch(self, options, rest, st) -> None:
        """Try each option (a tuple of goals), those already true first."""
        ranked = sorted(options, key=lambda o: not all(self.holds(f, e, st) == p for f, e, p in o))
        for option in ranked:
            self.run(tuple(option) + rest, st)

    def step(self, f, env, pos, rest, st) -> None:
        if isinstance(f, F.Atom):
            return self.atom(f, env, pos, rest, st)
        if isinstance(f, F.Not):
            return self.run(((f.item, env, not pos),) + rest, st)
        if isinstance(f, (F.And, F.Or)):
            if isinstance(f, F.And) == pos:
                return self.run(tuple((x, env, pos) for x in f.items) + rest, st)
            return self.branch([((x, env, pos),) for x in f.items], rest, st)
        if isinstance(f, F.Imply):
            if pos:
                return self.branch([((f.antecedent, env, False),), ((f.consequent, env, True),)], rest, st)
            return self.run(((f.antecedent, env, True), (f.consequent, env, False)) + rest, st)
        if isinstance(f, (F.ForAll, F.Exists)):
            items = [(f.body, {**env, f.var: x}, pos) for x in self.dom(f.category)]
            if isinstance(f, F.ForAll) == pos:
                return self.run(tuple(items) + rest, st)
            return self.branch([(item,) for item in items], rest, st)
        if not pos:
            return  # negated forn / pair quantifiers: not searched
        if isinstance(f, F.ForN):
            dom = self.dom(f.category)
            if f.n > len(dom):
                return
            dom = sorted(dom, key=lambda x: not self.holds(f.body, {**env, f.var: x}, st))
            for chosen in itertools.combinations(dom, f.n):
                picked = set(chosen)
                goals = tuple((f.body, {**env, f.var: x}, x in picked) for x in dom)
                self.run(goals + rest, st)
                if self.calls > self.limit:
                    return
            return
        rows, cols = self.dom(f.category1), self.dom(f.category2)
        width = len([y for y in cols if rows and y != rows[0]])
        need = min(len(rows), width) if isinstance(f, F.ForPairs) else f.n
        if len(rows) <= len(cols):
            goal = ("match", f.body, env, f.var1, f.var2, tuple(rows), tuple(cols), frozenset(), need)
        else:
            goal = ("match", f.body, env, f.var2, f.var1, tuple(cols), tuple(rows), frozenset(), need)
        self.run((goal,) + rest, st)

    def match(self, goal, rest, st) -> None:
        _, body, env, vs, vl, smalls, larges, used, need = goal
        if need <= 0:
            return self.run(rest, st)
        if len(smalls) < need:
            return
        s, others = smalls[0], smalls[1:]
        options = []
        for t in larges:
            if t != s and t not in used:
                nxt = ("match", body, env, vs, vl, others, larges, used | {t}, need - 1)
                options.append(((body, {**env, vs: s, vl: t}, True), nxt))
        ranked = sorted(options, key=lambda o: not self.holds(o[0][0], o[0][1], st))
        for first, nxt in ranked:
            self.run((first, nxt) + rest, st)
        if len(others) >= need:  # leave s unmatched (fornpairs)
            self.run((("match", body, env, vs, vl, others, larges, used, need),) + rest, st)

    def atom(self, f, env, pos, rest, st) -> None:
        args = [env[n] if v else n for n, v in f.args]
        nodes, gp = self.g.nodes, self.g.parent
        a = args[0]
        if f.predicate in RELATIONS:
            want = (args[1], RELATIONS[f.predicate])
            if nodes[a].layer is not Layer.OBJECT:
                if not pos:
                    self.run(rest, st)
                return
            have = st[0].get(a)
            if have is not None:
                if (have == want) == pos:
                    self.run(rest, st)
                return
            if not pos:
                forbid = dict(st[1])
                forbid[a] = forbid.get(a, frozenset()) | {want}
                return self.run(rest, (st[0], forbid, st[2]))
            if want in st[1].get(a, ()):
                return
            b = args[1]
            if gp.get(a) != want:
                if b == a or not affords(nodes[b], "put_on" if want[1] is Relation.ONTOP else "put_inside"):
                    return
                x = b
                while nodes[x].layer is Layer.OBJECT:
                    if x == a:
                        return
                    x = self.parent(st, x)[0]
            parents = dict(st[0])
            parents[a] = want
            return self.run(rest, (parents, st[1], st[2]))
        if f.predicate == "inroom":
            if nodes[a].layer is Layer.ASSET and (gp[a][0] == args[1]) == pos:
                self.run(rest, st)
            return
        word = STATE_WORDS.get(f.predicate, f.predicate)
        got = st[2].get((a, word))
        if got is not None:
            if got == pos:
                self.run(rest, st)
            return
        if nodes[a].has(word) != pos and (word not in _SWITCH or not affords(nodes[a], _SWITCH[word][0])):
            return
        states = dict(st[2])
        states[(a, word)] = pos
        self.run(rest, (st[0], st[1], states))
