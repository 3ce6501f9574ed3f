"""A task's instruction: ``"<Activity title>: <clause>; <clause>."`` (:func:`instruction`).

Clauses are rendered from the goal formula on the initial graph by templates that keep counts
and quantifiers exact: forall → "all four <class>"/"each of the four ...", exists → "one of the
two ..."/"at least one of ...", forn → "exactly four of the seven table knives", forpairs → "one
candle inside each of the four wicker baskets" (equal counts), "at least one ... inside each ..."
(more children), "each ... inside a different one of ..." (fewer children); an exists over an
``and`` → "put A and B together inside one of the two cartons, keep C out of that carton".
Placements into the same destination merge; open/close/switch clauses come last. A node is "the
<class>" when its class has one node, else "the <class> in the <room>", else "the <class> from
<its initial parent>", else its name; nodes that make up their whole class are "both/all N ...".
Concepts: ``docs/benchmark/splits.md`` (BEHAVIOR-1K split).
"""

from __future__ import annotations

import itertools

from grasif import formula as F
from grasif.behavior.english import PREPOSITIONS, class_words, join_list, number_word, one_phrase, plural_phrase
from grasif.behavior.goal import RELATIONS, STATE_WORDS
from grasif.formula import Formula
from sgs.graph import Layer, Relation, SceneGraph, node_class

class _Put:
    """A placement clause: ``subjects`` (("node", name) or ("text", phrase)) go ``relation`` ``dest``.

    ``mode``: "plain"; "each" (dest is "one of the N ...", each subject may pick its own);
    "together" (all subjects into the same one of them).
    """

    __slots__ = ("subjects", "relation", "dest", "mode")

    def __init__(self, subjects, relation, dest, mode="plain"):
        self.subjects, self.relation, self.dest, self.mode = list(subjects), relation, dest, mode


class _Speaker:
    """Renders a goal formula on an initial graph into imperative English clauses.

    Noun phrases: a node is "the <class>" when its class has one node, then "the <class> in the
    <room>", then "the <class> from <its parent>", then its name; nodes that make up a whole class
    are "both/all N <class>". A quantified variable is "all N <class>"/"each of the N <class>"
    (forall), "one of the N <class>"/"at least one of ..." (exists), "exactly K of the N <class>"
    (forn), and "that <class>" inside its scope.
    """

    def __init__(self, graph: SceneGraph):
        self.F = F
        self.g = graph
        self.index: dict[str, list[str]] = {}
        for n in graph.nodes:
            if graph.nodes[n].layer is not Layer.PLACE:
                self.index.setdefault(node_class(n), []).append(n)
        self.var_cat: dict[str, str] = {}

    # -- noun phrases --
    def members(self, category: str) -> list[str]:
        return self.index.get(self.F.category_class(category), [])

    def count(self, category: str) -> int:
        return len(self.members(category))

    def cw(self, category: str) -> str:
        return class_words(self.F.category_class(category))

    def ref(self, name: str, depth: int = 0) -> str:
        g = self.g
        cls = node_class(name)
        if g.nodes[name].layer is Layer.PLACE:
            return f"the {class_words(cls)}"
        same = self.index.get(cls, [name])
        words = class_words(cls)
        if len(same) == 1:
            return f"the {words}"
        room = g.place_of(name)
        if sum(g.place_of(n) == room for n in same) == 1:
            return f"the {words} in the {class_words(node_class(room))}"
        edge = g.parent.get(name)
        if depth == 0 and edge is not None and edge[1] in (Relation.ONTOP, Relation.INSIDE):
            if sum(g.parent.get(n) == edge for n in same) == 1:
                return f"the {words} from {self.ref(edge[0], 1)}"
        return name

    def term(self, arg: tuple[str, bool], env: dict[str, str]) -> str:
        name, is_var = arg
        return env[name] if is_var else self.ref(name)

    def every(self, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"both {plural_phrase(w)}" if n == 2 else f"all {number_word(n)} {plural_phrase(w)}"

    def each(self, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"each of the {number_word(n)} {plural_phrase(w)}"

    def one_of(self, category: str, at_least: bool = False) -> str:
        n, w = self.count(category), self.cw(category)
        return f"the {w}" if n == 1 else f"{'at least ' if at_least else ''}one of the {number_word(n)} {plural_phrase(w)}"

    def exactly(self, k: int, category: str) -> str:
        n, w = self.count(category), self.cw(category)
        if k == n:
            return self.every(category)
        if k == 0:
            return f"none of the {number_word(n)} {plural_phrase(w) if n != 1 else w}"
        return f"exactly {number_word(k)} of the {number_word(n)} {w if n == 1 else plural_phrase(w)}"

    def that(self, category: str) -> str:
        return f"the {self.cw(category)}" if self.count(category) == 1 else f"that {self.cw(category)}"

    def subjects(self, subjects: list) -> list[str]:
        """Phrases for a subject list; nodes that make up their whole class become "both/all N"."""
        nodes = [s[1] for s in subjects if s[0] == "node"]
        whole = {c for c in {node_class(n) for n in nodes}
                 if len(self.index.get(c, ())) > 1 and set(self.index[c]) <= set(nodes)}
        out, done = [], set()
        for kind, value in subjects:
            if kind == "node" and node_class(value) in whole:
                if node_class(value) not in done:
                    done.add(node_class(value))
                    out.append(self.every(node_class(value)))
            else:
                out.append(self.ref(value) if kind == "node" else value)
        return out

    # -- structure helpers --
    def unwrap(self, f):
        while isinstance(f, self.F.And) and len(f.items) == 1:
            f = f.items[0]
        return f

    def mentions(self, f, var: str) -> bool:
        if isinstance(f, self.F.Atom):
            return (var, True) in f.args
        return any(self.mentions(c, var) for c in f.children())

    def initially_any(self, atom, env_nodes: dict[str, list[str]]) -> bool:
        """Whether ``atom`` holds initially for some binding of its variables."""
        choices = [env_nodes.get(n, [n]) if v else [n] for n, v in atom.args]
        for args in itertools.product(*choices):
            if atom.predicate in RELATIONS:
                if self.g.parent.get(args[0]) == (args[1], RELATIONS[atom.predicate]):
                    return True
            elif atom.predicate == "inroom":
                if self.g.place_of(args[0]) == args[1]:
                    return True
            elif self.g.nodes[args[0]].has(STATE_WORDS.get(atom.predicate, atom.predicate)):
                return True
        return False

    def bound(self, env: dict[str, str]) -> dict[str, list[str]]:
        return {v: self.members(self.var_cat[v]) for v in env if v in self.var_cat}

    def bind(self, q, env: dict[str, str], text: str) -> dict[str, str]:
        self.var_cat[q.var] = q.category
        return {**env, q.var: text}

    # -- clauses --
    def clauses(self, formula) -> list[str]:
        """One clause per top-level conjunct, placements first (merged when they share a
        destination), then the clauses that only open, close or switch."""
        F = self.F
        conjuncts = formula.items if isinstance(formula, F.And) else (formula,)
        placements: list = []
        switches: list[str] = []
        for c in conjuncts:
            puts = self.puts(c)
            if puts is not None:
                placements.extend(puts)
            elif self.only_switches(c):
                switches.append(self.imperative(c, {}))
            else:
                placements.append(self.imperative(c, {}))
        return self.merge(placements) + switches

    def only_switches(self, f) -> bool:
        if isinstance(f, self.F.Atom):
            return f.predicate not in RELATIONS and f.predicate != "inroom"
        return all(self.only_switches(c) for c in f.children())

    def merge(self, items: list) -> list[str]:
        groups: dict[tuple, _Put] = {}
        order: list = []
        for item in items:
            if isinstance(item, str) or item.mode == "together":
                order.append(item)
                continue
            key = (item.relation, item.dest, item.mode)
            if key in groups:
                groups[key].subjects += item.subjects
            else:
                groups[key] = _Put(item.subjects, *key)
                order.append(groups[key])
        return [item if isinstance(item, str) else self.say_put(item) for item in order]

    def say_put(self, put: _Put) -> str:
        subjects = self.subjects(put.subjects)
        prep = PREPOSITIONS[put.relation]
        if put.mode == "together" and not put.dest.startswith("the ") and (len(subjects) > 1 or not subjects[0].startswith("the ")):
            return f"put {join_list(subjects)} together {prep} {put.dest}"
        if put.mode == "each" and not put.dest.startswith("the "):
            if len(subjects) == 1 and subjects[0].startswith(("all ", "both ")):
                return f"put each of the {subjects[0].split(' ', 1)[1]} {prep} {put.dest}"
            if len(subjects) > 1:
                return f"put each of these {prep} {put.dest}: {join_list(subjects)}"
        return f"put {join_list(subjects)} {prep} {put.dest}"

    def puts(self, f) -> list | None:
        """The placements ``f`` asks for when it is a plain placement (or an ``and`` of them)."""
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.And):
            out = []
            for c in f.items:
                got = self.puts(c)
                if got is None:
                    return None
                out += got
            return out
        if isinstance(f, F.Atom) and f.predicate in RELATIONS and not f.args[0][1] and not f.args[1][1]:
            return [_Put([("node", f.args[0][0])], f.predicate, self.ref(f.args[1][0]))]
        if not isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            return None
        body = self.unwrap(f.body)
        if isinstance(body, F.Atom) and body.predicate in RELATIONS:
            (a, av), (b, bv) = body.args
            if av and a == f.var and not bv:
                subject = (self.every(f.category) if isinstance(f, F.ForAll)
                           else self.one_of(f.category, at_least=True) if isinstance(f, F.Exists)
                           else self.exactly(f.n, f.category))
                return [_Put([("text", subject)], body.predicate, self.ref(b))]
            if isinstance(f, F.Exists) and bv and b == f.var and not av:
                return [_Put([("node", a)], body.predicate, self.one_of(f.category), self.mode("each", f.category))]
            return None
        if isinstance(f, F.ForAll) and isinstance(body, F.Exists):
            inner = self.unwrap(body.body)
            if (isinstance(inner, F.Atom) and inner.predicate in RELATIONS and f.var != body.var
                    and inner.args == ((f.var, True), (body.var, True))):
                return [_Put([("text", self.every(f.category))], inner.predicate, self.one_of(body.category),
                             self.mode("each", body.category))]
        if isinstance(f, F.Exists):
            into = self.into(f)
            if into is not None and len(into) == 1 and not into[0][2]:
                rel, subjects, _ = into[0]
                return [_Put(subjects, rel, self.one_of(f.category), self.mode("together", f.category))]
        return None

    def mode(self, mode: str, category: str) -> str:
        """``mode``, or "plain" when the category has one node (then "one of them" is "the X")."""
        return mode if self.count(category) > 1 else "plain"

    def into(self, q):
        """For a quantifier whose body is an ``and``: [(relation, subjects, rest)] of the parts that
        put things into its variable, ``rest`` the other parts; ``None`` if there are none."""
        F = self.F
        parts = self.unwrap(q.body)
        parts = parts.items if isinstance(parts, F.And) else (parts,)
        groups: dict[str, list] = {}
        rest = []
        for x in parts:
            x = self.unwrap(x)
            got = None
            if isinstance(x, F.Atom) and x.predicate in RELATIONS and x.args[1] == (q.var, True) and not x.args[0][1]:
                got = (x.predicate, ("node", x.args[0][0]))
            elif isinstance(x, F.ForAll):
                inner = self.unwrap(x.body)
                if (isinstance(inner, F.Atom) and inner.predicate in RELATIONS and x.var != q.var
                        and inner.args == ((x.var, True), (q.var, True))):
                    got = (inner.predicate, ("text", self.every(x.category)))
            if got is None:
                rest.append(x)
            else:
                groups.setdefault(got[0], []).append(got[1])
        if not groups:
            return None
        return [(rel, subjects, rest if i == 0 else []) for i, (rel, subjects) in enumerate(groups.items())]

    def imperative(self, f, env: dict[str, str]) -> str:
        """A verb phrase that makes ``f`` true; ``env``: variable → how to say it."""
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.Atom):
            return self.atom(f, env, True)
        if isinstance(f, F.Not) and isinstance(self.unwrap(f.item), F.Atom):
            return self.atom(self.unwrap(f.item), env, False)
        if isinstance(f, F.And):
            parts: list = []
            for x in f.items:
                puts = self.puts(x) if not env else None
                parts.extend(puts if puts is not None else [self.imperative(x, env)])
            return join_list(self.merge(parts))
        if isinstance(f, F.Or):
            alts = self.alternatives(f, env)
            if alts is not None:
                return alts
            return "either " + join_list([self.imperative(x, env) for x in f.items], "or")
        if isinstance(f, F.ForAll):
            return self.forall(f, env)
        if isinstance(f, (F.Exists, F.ForN)):
            quant = self.one_of(f.category, at_least=True) if isinstance(f, F.Exists) else self.exactly(f.n, f.category)
            if self.into(f) is not None:
                return self.chosen(f, env)
            body = self.unwrap(f.body)
            inner = self.bind(f, env, quant)
            if isinstance(body, F.Or):
                alts = self.alternatives(body, inner)
                if alts is not None:
                    return alts
            if isinstance(body, (F.Atom, F.Not)):
                return self.imperative(body, inner)
        if isinstance(f, F.ForPairs):
            return self.pairs(f, env)
        return "make sure that " + self.declarative(f, env)

    def atom(self, a, env, positive: bool) -> str:
        p = a.predicate
        s = self.term(a.args[0], env)
        before = self.initially_any(a, self.bound(env))
        if p in RELATIONS:
            d = self.term(a.args[1], env)
            if positive:
                return f"put {s} {PREPOSITIONS[p]} {d}"
            return f"{'take' if before else 'keep'} {s} {'out of' if p == 'inside' else 'off'} {d}"
        if p == "inroom":
            d = self.term(a.args[1], env)
            return f"bring {s} to {d}" if positive else f"keep {s} out of {d}"
        if p == "open":
            return f"open {s}" if positive else (f"close {s}" if before else f"leave {s} closed")
        if p == "toggled_on":
            return f"turn on {s}" if positive else (f"turn off {s}" if before else f"leave {s} off")
        return f"make sure {s} is {'' if positive else 'not '}{p.replace('_', ' ')}"

    def forall(self, f, env) -> str:
        F = self.F
        body = self.unwrap(f.body)
        atom = self.unwrap(body.item) if isinstance(body, F.Not) else body
        if isinstance(atom, F.Atom):
            if atom.args[0] == (f.var, True) and not any(v and n == f.var for n, v in atom.args[1:]):
                return self.imperative(body, self.bind(f, env, self.every(f.category)))
            if (atom.predicate in RELATIONS and atom.args[1] == (f.var, True) and not atom.args[0][1]):
                if body is atom:
                    return f"put {self.ref(atom.args[0][0])} {PREPOSITIONS[atom.predicate]} {self.each(f.category)}"
                return self.imperative(body, self.bind(f, env, self.every(f.category)))
        if isinstance(body, F.Or):
            alts = self.alternatives(body, self.bind(f, env, self.each(f.category)))
            if alts is not None:
                return alts
        if isinstance(body, F.ForN):
            inner = self.unwrap(body.body)
            if (isinstance(inner, F.Atom) and inner.predicate in RELATIONS
                    and inner.args == ((body.var, True), (f.var, True))):
                return f"put {self.exactly(body.n, body.category)} {PREPOSITIONS[inner.predicate]} {self.each(f.category)}"
        if isinstance(body, F.Imply) and not self.mentions(body.antecedent, f.var):
            rest = F.ForAll(f.var, f.category, body.consequent)
            return f"if {self.declarative(body.antecedent, env)}, {self.imperative(rest, env)}"
        return f"for {self.each(f.category)}, " + self.imperative(body, self.bind(f, env, self.that(f.category)))

    def alternatives(self, f, env) -> str | None:
        """``put S on A or inside one of the N Bs`` when every alternative places the same subject."""
        F = self.F
        flat: list = []
        stack = list(f.items)
        while stack:
            x = self.unwrap(stack.pop(0))
            if isinstance(x, F.Or):
                stack = list(x.items) + stack
            else:
                flat.append(x)
        subject, places = None, []
        for x in flat:
            q = None
            if isinstance(x, F.Exists) and isinstance(self.unwrap(x.body), F.Atom):
                q, x = x, self.unwrap(x.body)
            if not (isinstance(x, F.Atom) and x.predicate in RELATIONS):
                return None
            if q is not None and x.args[1] != (q.var, True):
                return None
            if subject is None:
                subject = x.args[0]
            elif x.args[0] != subject:
                return None
            if q is not None:
                places.append((x.predicate, ("text", self.one_of(q.category))))
            elif x.args[1][1]:
                places.append((x.predicate, ("text", env[x.args[1][0]])))
            else:
                places.append((x.predicate, ("node", x.args[1][0])))
        by_prep: dict[str, list] = {}
        for rel, dest in places:
            by_prep.setdefault(rel, []).append(dest)
        phrases = []
        for rel, dests in by_prep.items():
            nodes = [d[1] for d in dests if d[0] == "node"]
            texts = []
            for cls in dict.fromkeys(node_class(n) for n in nodes):
                members = self.index.get(cls, [])
                if len(members) > 1 and set(members) <= set(nodes):
                    texts.append(("class", cls))
            whole = {c for _, c in texts}
            said, words = set(), []
            for kind, value in dests:
                if kind == "node" and node_class(value) in whole:
                    if node_class(value) not in said:
                        said.add(node_class(value))
                        words.append(self.one_of(node_class(value)))
                else:
                    words.append(self.ref(value) if kind == "node" else value)
            phrases.append((PREPOSITIONS[rel], words))
        if len(phrases) == 2 and phrases[0][1] == phrases[1][1] and len(phrases[0][1]) == 1:
            return f"put {self.term(subject, env)} {phrases[0][0]} or {phrases[1][0]} {phrases[0][1][0]}"
        return f"put {self.term(subject, env)} " + join_list([f"{prep} {join_list(words, 'or')}" for prep, words in phrases], "or")

    def chosen(self, f, env) -> str:
        """exists/forn over an ``and`` that fills its variable: "put A and B together inside one
        of the N Xs, keep C out of that X and put that X on D"."""
        F = self.F
        quant = self.one_of(f.category) if isinstance(f, F.Exists) else self.exactly(f.n, f.category)
        that = self.that(f.category)
        inner = self.bind(f, env, that)
        parts = []
        rest = []
        for i, (rel, subjects, others) in enumerate(self.into(f)):
            words = self.subjects(subjects)
            plural = len(words) > 1 or not words[0].startswith("the ")
            together = " together" if plural and not quant.startswith("the ") else ""
            parts.append(f"put {join_list(words)}{together} {PREPOSITIONS[rel]} {quant if i == 0 else that}")
            rest = rest + others
        keep: dict[str, list] = {}
        for x in rest:
            neg = self.unwrap(x.item) if isinstance(x, F.Not) else None
            if isinstance(neg, F.Atom) and neg.predicate in RELATIONS and neg.args[1] == (f.var, True) and not neg.args[0][1]:
                keep.setdefault(neg.predicate, []).append(("node", neg.args[0][0]))
                continue
            if isinstance(x, F.ForAll):
                b = self.unwrap(x.body)
                a = self.unwrap(b.item) if isinstance(b, F.Not) else None
                if isinstance(a, F.Atom) and a.predicate in RELATIONS and a.args == ((x.var, True), (f.var, True)) and x.var != f.var:
                    keep.setdefault(a.predicate, []).append(("text", self.every(x.category)))
                    continue
            parts.append(self.imperative(x, inner))
        for rel, subjects in keep.items():
            parts.insert(1, f"keep {join_list(self.subjects(subjects))} {'out of' if rel == 'inside' else 'off'} {that}")
        return join_list(parts)

    def pairs(self, f, env) -> str:
        F = self.F
        body = self.unwrap(f.body)
        if (isinstance(body, F.Atom) and body.predicate in RELATIONS and f.var1 != f.var2
                and {body.args[0], body.args[1]} == {(f.var1, True), (f.var2, True)}):
            child_var = body.args[0][0]
            child_cat = f.category1 if child_var == f.var1 else f.category2
            parent_cat = f.category2 if child_var == f.var1 else f.category1
            nc, npar = self.count(child_cat), self.count(parent_cat)
            prep, cw = PREPOSITIONS[body.predicate], self.cw(child_cat)
            if nc == npar:
                return f"put {one_phrase(cw)} {prep} {self.each(parent_cat)}"
            if nc > npar:
                return f"put at least {one_phrase(cw)} {prep} {self.each(parent_cat)}"
            return f"put {self.each(child_cat)} {prep} a different one of the {number_word(npar)} {plural_phrase(self.cw(parent_cat))}"
        return "make sure that " + self.declarative(f, env)

    # -- declarative fallback --
    def declarative(self, f, env) -> str:
        F = self.F
        f = self.unwrap(f)
        if isinstance(f, F.Atom):
            s = self.term(f.args[0], env)
            if f.predicate in RELATIONS:
                return f"{s} is {PREPOSITIONS[f.predicate]} {self.term(f.args[1], env)}"
            if f.predicate == "inroom":
                return f"{s} is in {self.term(f.args[1], env)}"
            return f"{s} is {'switched on' if f.predicate == 'toggled_on' else f.predicate.replace('_', ' ')}"
        if isinstance(f, F.Not):
            if isinstance(self.unwrap(f.item), F.Atom):
                return self.declarative(f.item, env).replace(" is ", " is not ", 1)
            return "it is not the case that " + self.declarative(f.item, env)
        if isinstance(f, F.And):
            return join_list([self.declarative(x, env) for x in f.items])
        if isinstance(f, F.Or):
            return "either " + join_list([self.declarative(x, env) for x in f.items], "or")
        if isinstance(f, F.Imply):
            return f"if {self.declarative(f.antecedent, env)}, then {self.declarative(f.consequent, env)}"
        if isinstance(f, (F.ForAll, F.Exists, F.ForN)):
            quant = (self.each(f.category) if isinstance(f, F.ForAll) else self.one_of(f.category, at_least=True)
                     if isinstance(f, F.Exists) else self.exactly(f.n, f.category))
            return f"for {quant}, " + self.declarative(f.body, self.bind(f, env, self.that(f.category)))
        self.var_cat[f.var1], self.var_cat[f.var2] = f.category1, f.category2
        inner = {**env, f.var1: self.that(f.category1), f.var2: self.that(f.category2)}
        head = (f"at least {number_word(f.n)} of the {plural_phrase(self.cw(f.category1))} and {number_word(f.n)} of the "
                f"{plural_phrase(self.cw(f.category2))}" if isinstance(f, F.ForNPairs) else
                f"as many {plural_phrase(self.cw(f.category1))} and {plural_phrase(self.cw(f.category2))} as the smaller group has")
        return f"{head} form pairs, each with a different partner, where " + self.declarative(f.body, inner)


def title(activity_name: str) -> str:
    """``putting_away_games`` → ``Putting away games``."""
    text = activity_name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def instruction(activity_name: str, graph: SceneGraph, formula: str) -> str:
    """``"<Title>: <clause>; <clause>."`` for the goal ``formula`` on the initial ``graph``."""
    clauses = _Speaker(graph).clauses(Formula.parse(formula))
    return f"{title(activity_name)}: {'; '.join(clauses)}."
