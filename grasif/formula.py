"""Quantified logical goals over a :class:`~sgs.graph.SceneGraph`, read and judged like BEHAVIOR's BDDL.

A goal is an S-expression in BDDL syntax (:func:`parse`, :meth:`Formula.parse`)::

    (and (forpairs (?b - wicker_basket) (?c - candle) (inside ?c ?b))
         (not (open fridge-1))
         (forn (2) (?x - apple) (ontop ?x table-1)))

:meth:`Formula.evaluate` judges it on a graph as ``bddl/condition_evaluation.py`` of bddl 3.6.0
does (this module does not import bddl): ``and or not imply``; ``forall``/``exists`` over the
nodes of the category's class; ``forn (N)`` is exactly N; ``forpairs``/``fornpairs`` bddl's
relaxed row/column check. Atoms: ``ontop``/``inside`` test the direct parent edge, ``inroom`` the
node's place, a one-argument predicate a state word (``toggled_on`` tests ``on``). A term with
its ``?`` stripped names the innermost quantifier variable of that name, else a node; a category
may be a synset (``wicker_basket.n.01``). Operators and predicates are case-insensitive; ``;``
starts a comment. Errors: a malformed formula, a wrong arity or (with a graph) an unknown node
raises :class:`FormulaError`. The full semantics, with bddl's edge cases:
``docs/concepts/goals-metrics.md``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass, field
from sgs.graph import Relation, SceneGraph, class_index as _class_index, node_class

__all__ = [
    "FormulaError",
    "Formula",
    "Atom",
    "And",
    "Or",
    "Not",
    "Imply",
    "ForAll",
    "Exists",
    "ForN",
    "ForPairs",
    "ForNPairs",
    "parse",
    "category_class",
    "BINARY_PREDICATES",
]


class FormulaError(ValueError):
    """A goal that cannot be read (syntax) or cannot be judged on a graph (unknown names).

    ``position`` is the character offset of the problem in the parsed text, or ``None``;
    ``problems`` lists one sentence per problem (one entry for syntax errors).
    """

    def __init__(self, message: str, position: int | None = None, problems: list[str] | None = None):
        super().__init__(message)
        self.position = position
        self.problems = list(problems) if problems is not None else [message]


#: Predicates with two arguments; every other predicate is a one-argument state test.
BINARY_PREDICATES = ("ontop", "inside", "inroom")
#: Unary predicates whose state word differs from their name.
_STATE_OF_PREDICATE = {"toggled_on": "on"}

_SYNSET_RE = re.compile(r"^(.+)\.[a-z]\.\d+$")


@lru_cache(maxsize=4096)
def category_class(category: str) -> str:
    """Node class a category stands for: ``wicker_basket.n.01`` → ``wicker_basket``; other
    strings unchanged."""
    m = _SYNSET_RE.match(category)
    return m.group(1) if m else category


# ---------------------------------------------------------------------------------------------
# evaluation context
# ---------------------------------------------------------------------------------------------
class _Ctx:
    __slots__ = ("graph", "nodes", "parent", "index", "env")

    def __init__(self, graph: SceneGraph):
        self.graph = graph
        self.nodes = graph.nodes
        self.parent = graph.parent
        self.index = _class_index(graph.nodes)
        self.env: dict[str, str] = {}


_MISSING = object()
_CONSTANTS_CACHE: dict[int, tuple["Formula", frozenset[str]]] = {}
_NO_NAMES: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# formula tree
# ---------------------------------------------------------------------------------------------
class Formula:
    """A parsed goal. Build with :meth:`parse`; judge with :meth:`evaluate`.

    Formulas are immutable and compare structurally; ``str()`` gives the canonical S-expression,
    which parses back to an equal formula.
    """

    __slots__ = ()

    @staticmethod
    def parse(text: str) -> "Formula":
        """Read ``text``; raise :class:`FormulaError` naming the problem and its position."""
        return _Parser(text).parse()

    # -- judging -------------------------------------------------------------------------------
    def evaluate(self, graph: SceneGraph) -> bool:
        """Truth of the formula on ``graph``. Raises :class:`FormulaError` if it names a node the
        graph lacks (see :meth:`check_names`)."""
        self._require_names(graph)
        return self._ev(_Ctx(graph))

    def conjuncts(self) -> list["Formula"]:
        """The top-level ``and`` children, or ``[self]`` — bddl's list of goal conditions."""
        return [self]

    def evaluate_conjuncts(self, graph: SceneGraph) -> list[bool]:
        """Truth of each of :meth:`conjuncts` on ``graph`` (bddl's satisfied/unsatisfied split)."""
        self._require_names(graph)
        ctx = _Ctx(graph)
        return [c._ev(ctx) for c in self.conjuncts()]

    def check_names(self, graph: SceneGraph) -> list[str]:
        """One sentence per constant (non-variable term) that is not a node of ``graph``; empty
        when the formula can be judged on it."""
        nodes = graph.nodes
        problems = []
        for name in sorted(self.constants()):
            if name not in nodes:
                close = [n for n in nodes if node_class(n) == node_class(name)][:5]
                hint = f"; nodes of that class: {', '.join(close)}" if close else ""
                problems.append(f"{name!r} is neither a node of the graph nor a bound variable{hint}")
        return problems

    def _require_names(self, graph: SceneGraph) -> None:
        hit = _CONSTANTS_CACHE.get(id(self))
        if hit is None or hit[0] is not self:
            if len(_CONSTANTS_CACHE) >= 256:
                _CONSTANTS_CACHE.pop(next(iter(_CONSTANTS_CACHE)))
            hit = _CONSTANTS_CACHE[id(self)] = (self, self.constants())  # holds self: id stays unique
        nodes = graph.nodes
        for name in hit[1]:
            if name not in nodes:
                problems = self.check_names(graph)
                raise FormulaError(f"goal names unknown nodes: {'; '.join(problems)}", None, problems)

    # -- structure -----------------------------------------------------------------------------
    def children(self) -> tuple["Formula", ...]:
        """Direct sub-formulas."""
        return ()

    def constants(self) -> frozenset[str]:
        """Node names the formula refers to directly (terms that are not variables)."""
        out: set[str] = set()
        stack: list[Formula] = [self]
        while stack:
            f = stack.pop()
            if isinstance(f, Atom):
                out.update(name for name, is_var in f.args if not is_var)
            stack.extend(f.children())
        return frozenset(out)

    def classes(self) -> frozenset[str]:
        """Node classes the quantifiers range over."""
        out: set[str] = set()
        stack: list[Formula] = [self]
        while stack:
            f = stack.pop()
            out.update(getattr(f, "_classes", _NO_NAMES))
            stack.extend(f.children())
        return frozenset(out)

    def _ev(self, ctx: _Ctx) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError


# -- atoms --------------------------------------------------------------------------------------
_ONTOP, _INSIDE, _INROOM, _STATE = 0, 1, 2, 3
_KIND = {"ontop": _ONTOP, "inside": _INSIDE, "inroom": _INROOM}


@dataclass(frozen=True, slots=True)
class Atom(Formula):
    """``(predicate term...)``. ``args`` holds ``(name, is_variable)`` pairs; variables are
    resolved lexically at parse time."""

    predicate: str
    args: tuple[tuple[str, bool], ...]
    _kind: int = field(init=False, repr=False, compare=False)
    _state: str = field(init=False, repr=False, compare=False)
    _a: str = field(init=False, repr=False, compare=False)
    _a_var: bool = field(init=False, repr=False, compare=False)
    _b: str | None = field(init=False, repr=False, compare=False)
    _b_var: bool = field(init=False, repr=False, compare=False)
    _rel: Relation | None = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        problem = _arity_problem(self.predicate, len(self.args))
        if problem:
            raise FormulaError("; ".join(problem))
        kind = _KIND.get(self.predicate, _STATE)
        b = self.args[1] if len(self.args) > 1 else (None, False)
        for key, value in (
            ("_kind", kind),
            ("_state", _STATE_OF_PREDICATE.get(self.predicate, self.predicate)),
            ("_a", self.args[0][0]),
            ("_a_var", self.args[0][1]),
            ("_b", b[0]),
            ("_b_var", b[1]),
            ("_rel", {_ONTOP: Relation.ONTOP, _INSIDE: Relation.INSIDE}.get(kind)),
        ):
            object.__setattr__(self, key, value)

    def _ev(self, ctx: _Ctx) -> bool:
        a = ctx.env[self._a] if self._a_var else self._a
        rel = self._rel
        if rel is not None:
            edge = ctx.parent.get(a)
            return (
                edge is not None
                and edge[0] == (ctx.env[self._b] if self._b_var else self._b)
                and edge[1] == rel
            )
        if self._kind == _STATE:
            states = ctx.nodes[a].states
            return states is not None and self._state in states
        return ctx.graph.place_of(a) == (ctx.env[self._b] if self._b_var else self._b)

    def __str__(self) -> str:
        return f"({self.predicate} {' '.join(_term(t) for t in self.args)})"


def _arity_problem(predicate: str, n: int) -> tuple[str, str] | None:
    """(problem, hint) when ``predicate`` cannot take ``n`` arguments, else ``None``."""
    if predicate in _KIND:
        if n != 2:
            return f"predicate {predicate!r} takes 2 arguments, got {n}", f"form: ({predicate} a b)"
    elif n == 0:
        return f"predicate {predicate!r} needs an argument", f"form: ({predicate} a)"
    elif n != 1:
        return (
            f"unknown predicate {predicate!r} with {n} arguments",
            f"two-argument predicates are {', '.join(BINARY_PREDICATES)}; any other predicate "
            "is a one-argument state test",
        )
    return None


def _term(t: tuple[str, bool]) -> str:
    return "?" + t[0] if t[1] else t[0]


# -- connectives --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class And(Formula):
    """All children true (true when there are none)."""

    items: tuple[Formula, ...]

    def children(self):
        return self.items

    def conjuncts(self):
        return list(self.items)

    def _ev(self, ctx):
        for f in self.items:
            if not f._ev(ctx):
                return False
        return True

    def __str__(self):
        return "(and" + "".join(" " + str(f) for f in self.items) + ")"


@dataclass(frozen=True, slots=True)
class Or(Formula):
    """Some child true (false when there are none)."""

    items: tuple[Formula, ...]

    def children(self):
        return self.items

    def _ev(self, ctx):
        for f in self.items:
            if f._ev(ctx):
                return True
        return False

    def __str__(self):
        return "(or" + "".join(" " + str(f) for f in self.items) + ")"


@dataclass(frozen=True, slots=True)
class Not(Formula):
    item: Formula

    def children(self):
        return (self.item,)

    def _ev(self, ctx):
        return not self.item._ev(ctx)

    def __str__(self):
        return f"(not {self.item})"


@dataclass(frozen=True, slots=True)
class Imply(Formula):
    """``(not antecedent) or consequent``."""

    antecedent: Formula
    consequent: Formula

    def children(self):
        return (self.antecedent, self.consequent)

    def _ev(self, ctx):
        return (not self.antecedent._ev(ctx)) or self.consequent._ev(ctx)

    def __str__(self):
        return f"(imply {self.antecedent} {self.consequent})"


# -- quantifiers --------------------------------------------------------------------------------
def _spec(var: str, category: str) -> str:
    return f"(?{var} - {category})"


def _bind(env: dict, var: str, old) -> None:
    if old is _MISSING:
        env.pop(var, None)
    else:
        env[var] = old


def _count(ctx, var: str, category: str, body: "Formula", want: bool, stop_at: int) -> int:
    """Instances of ``category`` for which ``body`` is ``want``, counted up to ``stop_at``."""
    env = ctx.env
    old = env.get(var, _MISSING)
    count = 0
    for x in ctx.index.get(category_class(category), _NO_NAMES):
        env[var] = x
        if bool(body._ev(ctx)) is want:
            count += 1
            if count >= stop_at:
                break
    _bind(env, var, old)
    return count


class _Quantifier(Formula):
    """One variable ranging over a category; subclasses are dataclasses with ``var``,
    ``category`` and ``body``."""

    __slots__ = ()

    @property
    def _classes(self):
        return (category_class(self.category),)

    def children(self):
        return (self.body,)


@dataclass(frozen=True, slots=True)
class ForAll(_Quantifier):
    """Body true for every node of the category (true for none)."""

    var: str
    category: str
    body: Formula

    def _ev(self, ctx):
        return _count(ctx, self.var, self.category, self.body, False, 1) == 0

    def __str__(self):
        return f"(forall {_spec(self.var, self.category)} {self.body})"


@dataclass(frozen=True, slots=True)
class Exists(_Quantifier):
    """Body true for some node of the category (false for none)."""

    var: str
    category: str
    body: Formula

    def _ev(self, ctx):
        return _count(ctx, self.var, self.category, self.body, True, 1) == 1

    def __str__(self):
        return f"(exists {_spec(self.var, self.category)} {self.body})"


@dataclass(frozen=True, slots=True)
class ForN(_Quantifier):
    """Body true for exactly ``n`` nodes of the category."""

    n: int
    var: str
    category: str
    body: Formula

    def _ev(self, ctx):
        return _count(ctx, self.var, self.category, self.body, True, self.n + 1) == self.n

    def __str__(self):
        return f"(forn ({self.n}) {_spec(self.var, self.category)} {self.body})"


def _pair_counts(ctx: _Ctx, var1, cat1, var2, cat2, body) -> tuple[int, int, int, int]:
    """Fill bddl's pair matrix; return (#rows, row length, #rows with a true entry,
    #columns with a true entry)."""
    env, index = ctx.env, ctx.index
    cls1, cls2 = category_class(cat1), category_class(cat2)
    dom1 = index.get(cls1, _NO_NAMES)
    dom2 = index.get(cls2, _NO_NAMES)
    if cls1 != cls2 and type(body) is Atom and body._kind in (_ONTOP, _INSIDE):
        fast = _parent_pair_counts(ctx, var1, dom1, var2, dom2, body)
        if fast is not None:
            return fast
    old1, old2 = env.get(var1, _MISSING), env.get(var2, _MISSING)
    rows_true = 0
    width = 0
    cols: list[bool] = []
    for i, x in enumerate(dom1):
        any_true = False
        j = 0
        for y in dom2:
            if y == x:
                continue
            env[var1] = x
            env[var2] = y
            if body._ev(ctx):
                any_true = True
                if j >= len(cols):
                    cols.extend([False] * (j + 1 - len(cols)))
                cols[j] = True
            j += 1
        if i == 0:
            width = j
        rows_true += any_true
    # both old values were read before binding, so this also restores var1 == var2 correctly
    _bind(env, var2, old2)
    _bind(env, var1, old1)
    return len(dom1), width, rows_true, sum(cols)


def _parent_pair_counts(ctx: _Ctx, var1, dom1, var2, dom2, body: Atom):
    """Fast path of :func:`_pair_counts` for a body ``(ontop|inside ?v ?w)`` over two different
    classes, read off the parent edges in O(#rows + #columns); ``None`` when it does not apply."""
    (n0, is_var0), (n1, is_var1) = body.args
    if not (is_var0 and is_var1) or var1 == var2 or {n0, n1} != {var1, var2}:
        return None
    rel = Relation.ONTOP if body._kind == _ONTOP else Relation.INSIDE
    parent = ctx.parent
    # children: the domain whose nodes have the edge; parents: the domain it must point into
    children, parents = (dom2, dom1) if n0 == var2 else (dom1, dom2)
    targets = set(parents)
    hit_parents = set()
    hit_children = 0
    for c in children:
        edge = parent.get(c)
        if edge is not None and edge[1] == rel and edge[0] in targets:
            hit_children += 1
            hit_parents.add(edge[0])
    if n0 == var2:  # (rel ?y ?x): rows (dom1) are parents, columns (dom2) children
        return len(dom1), len(dom2), len(hit_parents), hit_children
    return len(dom1), len(dom2), hit_children, len(hit_parents)


@dataclass(frozen=True, slots=True)
class ForPairs(Formula):
    """bddl's relaxed pairing: with L = min(#rows, #columns), at least L rows and at least L
    columns of the pair matrix hold a true entry (true when the first category is empty)."""

    var1: str
    category1: str
    var2: str
    category2: str
    body: Formula

    @property
    def _classes(self):
        return (category_class(self.category1), category_class(self.category2))

    def children(self):
        return (self.body,)

    def _ev(self, ctx):
        n_rows, width, rows_true, cols_true = _pair_counts(
            ctx, self.var1, self.category1, self.var2, self.category2, self.body
        )
        least = min(n_rows, width)
        return rows_true >= least and cols_true >= least

    def __str__(self):
        return (
            f"(forpairs {_spec(self.var1, self.category1)} {_spec(self.var2, self.category2)} {self.body})"
        )


@dataclass(frozen=True, slots=True)
class ForNPairs(Formula):
    """At least ``n`` rows and at least ``n`` columns of the pair matrix hold a true entry."""

    n: int
    var1: str
    category1: str
    var2: str
    category2: str
    body: Formula

    @property
    def _classes(self):
        return (category_class(self.category1), category_class(self.category2))

    def children(self):
        return (self.body,)

    def _ev(self, ctx):
        _, _, rows_true, cols_true = _pair_counts(
            ctx, self.var1, self.category1, self.var2, self.category2, self.body
        )
        return rows_true >= self.n and cols_true >= self.n

    def __str__(self):
        return (
            f"(fornpairs ({self.n}) {_spec(self.var1, self.category1)} "
            f"{_spec(self.var2, self.category2)} {self.body})"
        )


# ---------------------------------------------------------------------------------------------
# parser
# ---------------------------------------------------------------------------------------------
class _Tok(str):
    """A token that remembers its character offset."""

    pos: int


class _List(list):
    """A parenthesized group that remembers the offset of its ``(``."""

    pos: int


_TOKEN_RE = re.compile(r"[()]|[^\s()]+")
_COMMENT_RE = re.compile(r";[^\n]*")

#: operator → number of arguments after the operator (None: any number of formulas)
_OPERATORS = {
    "and": None,
    "or": None,
    "not": 1,
    "imply": 2,
    "forall": 2,
    "exists": 2,
    "forn": 3,
    "forpairs": 3,
    "fornpairs": 4,
}
_OPERATOR_FORMS = {
    "not": "(not F)",
    "imply": "(imply F G)",
    "forall": "(forall (?x - category) F)",
    "exists": "(exists (?x - category) F)",
    "forn": "(forn (N) (?x - category) F)",
    "forpairs": "(forpairs (?x - category) (?y - category) F)",
    "fornpairs": "(fornpairs (N) (?x - category) (?y - category) F)",
}


class _Parser:
    def __init__(self, text: str):
        if not isinstance(text, str):
            raise FormulaError(f"a goal formula is a string, got {type(text).__name__}")
        self.text = text

    def where(self, pos: int | None) -> str:
        if pos is None:
            return ""
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return f" at line {line}, column {col}"

    def fail(self, message: str, pos: int | None, hint: str | None = None) -> FormulaError:
        return FormulaError(message + self.where(pos) + (f"; {hint}" if hint else ""), pos)

    # -- S-expression reader -------------------------------------------------------------------
    def read(self):
        text = _COMMENT_RE.sub(lambda m: " " * len(m.group()), self.text)
        stack: list[_List] = []
        top: list = []
        current: list = top
        for m in _TOKEN_RE.finditer(text):
            t, pos = m.group(), m.start()
            if t == "(":
                group = _List()
                group.pos = pos
                current.append(group)
                stack.append(current)
                current = group
            elif t == ")":
                if not stack:
                    raise self.fail("unbalanced parentheses: ')' without a matching '('", pos)
                current = stack.pop()
            else:
                tok = _Tok(t)
                tok.pos = pos
                current.append(tok)
        if stack:
            raise self.fail("unbalanced parentheses: '(' is never closed", current.pos)
        if not top:
            raise FormulaError("empty goal formula", 0)
        if len(top) > 1:
            extra = top[1]
            raise self.fail(f"unexpected {_show(extra)} after the end of the formula", extra.pos)
        return top[0]

    def parse(self) -> Formula:
        return self.build(self.read(), frozenset())

    # -- tree builder --------------------------------------------------------------------------
    def build(self, sx, bound: frozenset[str]) -> Formula:
        if not isinstance(sx, _List):
            raise self.fail(f"expected a parenthesized formula, got {sx!r}", sx.pos)
        if not sx:
            raise self.fail("empty expression '()'", sx.pos)
        head = sx[0]
        if isinstance(head, _List):
            raise self.fail("expected an operator or predicate name after '(', got a parenthesized group", head.pos)
        op = head.lower()
        args = sx[1:]
        if op not in _OPERATORS:
            return self.atom(op, sx, bound)
        arity = _OPERATORS[op]
        if arity is not None and len(args) != arity:
            raise self.fail(
                f"wrong number of arguments for {op!r}: expected {arity}, got {len(args)}",
                sx.pos,
                f"form: {_OPERATOR_FORMS[op]}",
            )
        if op == "and":
            return And(tuple(self.build(a, bound) for a in args))
        if op == "or":
            return Or(tuple(self.build(a, bound) for a in args))
        if op == "not":
            return Not(self.build(args[0], bound))
        if op == "imply":
            return Imply(self.build(args[0], bound), self.build(args[1], bound))
        if op in ("forall", "exists"):
            var, cat = self.varspec(args[0], op)
            body = self.build(args[1], bound | {var})
            return (ForAll if op == "forall" else Exists)(var, cat, body)
        if op == "forn":
            n = self.count(args[0], op)
            var, cat = self.varspec(args[1], op)
            return ForN(n, var, cat, self.build(args[2], bound | {var}))
        if op == "forpairs":
            v1, c1 = self.varspec(args[0], op)
            v2, c2 = self.varspec(args[1], op)
            return ForPairs(v1, c1, v2, c2, self.build(args[2], bound | {v1, v2}))
        # fornpairs
        n = self.count(args[0], op)
        v1, c1 = self.varspec(args[1], op)
        v2, c2 = self.varspec(args[2], op)
        return ForNPairs(n, v1, c1, v2, c2, self.build(args[3], bound | {v1, v2}))

    def atom(self, pred: str, sx: _List, bound: frozenset[str]) -> Atom:
        head, args = sx[0], sx[1:]
        terms = []
        for a in args:
            if isinstance(a, _List):
                raise self.fail(
                    f"unknown operator {pred!r}",
                    head.pos,
                    f"operators are {', '.join(_OPERATORS)}; a predicate's arguments are names or "
                    "?variables, not parenthesized groups",
                )
            name = a.strip("?")  # as bddl: the '?' is only decoration
            if not name:
                raise self.fail(f"empty name {a!r} in predicate {pred!r}", a.pos)
            terms.append((name, name in bound))
        problem = _arity_problem(pred, len(terms))
        if problem:
            raise self.fail(problem[0], sx.pos, problem[1])
        return Atom(pred, tuple(terms))

    def varspec(self, sx, op: str) -> tuple[str, str]:
        form = f"form: {_OPERATOR_FORMS[op]}"
        if not isinstance(sx, _List):
            raise self.fail(f"malformed quantifier {op!r}: expected a variable spec (?x - category), got {sx!r}", sx.pos, form)
        if len(sx) != 3 or any(isinstance(t, _List) for t in sx) or sx[1] != "-":
            raise self.fail(
                f"malformed quantifier {op!r}: variable spec must be (?x - category), got {_show(sx)}",
                sx.pos,
                form,
            )
        var, _, cat = sx
        if not var.startswith("?") or not var.strip("?"):
            raise self.fail(f"malformed quantifier {op!r}: variable {var!r} must start with '?'", var.pos, form)
        return var.strip("?"), str(cat)

    def count(self, sx, op: str) -> int:
        tok = sx
        if isinstance(sx, _List):
            if len(sx) != 1 or isinstance(sx[0], _List):
                raise self.fail(f"malformed quantifier {op!r}: expected a count like (2), got {_show(sx)}", sx.pos)
            tok = sx[0]
        if not tok.isdigit():
            raise self.fail(f"malformed quantifier {op!r}: count must be a non-negative integer, got {tok!r}", tok.pos)
        return int(tok)


def _show(sx) -> str:
    if isinstance(sx, list):
        return "(" + " ".join(_show(x) for x in sx) + ")"
    return str(sx)


def parse(text: str) -> Formula:
    """Same as :meth:`Formula.parse`."""
    return Formula.parse(text)
