"""Host-side AST policy for LM-written Python: readable errors before anything runs.

:func:`check_code` parses a snippet on the host and returns what it may not do, one
``line N: ...`` message per problem, so a self-debugging LM gets a message it can act on (an
empty list: nothing found). It refuses imports outside ``allowed_imports`` and relative imports;
names, attributes and definitions starting with ``_`` (except ``_`` itself and a few harmless
methods); frame, traceback, generator and coroutine internals; the builtins that reach code or
attributes (``eval``, ``exec``, ``open``, ``getattr``, ``globals``, ... named at all, not only
called); ``.format`` / ``.format_map``; and attributes named like a module outside the allowlist
(``nx.lazy_imports.os``).

It is an extra layer, not the security boundary: the sandbox process
(:mod:`lookplangraph.sandbox.runner`) must contain a snippet that slips past it, and the attack
tests run with the policy switched off to prove that. Docs: ``docs/guides/sandbox.md``.
"""

from __future__ import annotations

import ast

#: builtins whose every mention is refused (calling them through another name would be as bad)
FORBIDDEN_NAMES = frozenset({
    "eval", "exec", "compile", "open", "getattr", "setattr", "delattr", "vars", "globals",
    "locals", "__import__", "input", "breakpoint", "memoryview", "exit", "quit", "help",
})
#: attributes that reach interpreter internals without a leading underscore
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "cr_frame", "cr_code", "cr_await",
    "cr_origin", "ag_frame", "ag_code", "ag_await", "f_globals", "f_locals", "f_builtins",
    "f_back", "f_code", "f_trace", "f_lasti", "tb_frame", "tb_next", "tb_lasti", "co_code",
    "func_globals", "mro", "format", "format_map",
})
#: attribute names that are modules the snippet may not import, reachable through allowed ones
#: (``nx.lazy_imports.os``, ``nx.algorithms.chordal.sys``, ``nx.atlas.importlib``, ``json.codecs``)
MODULE_ATTRIBUTES = frozenset({
    "os", "sys", "subprocess", "importlib", "import_module", "modules", "inspect", "builtins",
    "tempfile", "gzip", "bz2", "lzma", "zipfile", "tarfile", "shutil", "io", "socket", "ctypes",
    "types", "codecs", "pickle", "marshal", "logging", "copyreg", "gc", "signal", "threading",
    "multiprocessing", "pathlib", "glob", "posix", "resource", "runpy", "pty", "select", "mmap",
    "fcntl", "atexit", "weakref", "linecache", "traceback", "sysconfig", "site", "platform",
    "lazy_imports",
})
#: ``_``-prefixed method names a class may define (no hook that runs at odd times, like __del__)
ALLOWED_DUNDER_DEFS = frozenset({"__init__", "__repr__", "__str__", "__eq__", "__lt__", "__hash__"})


class PolicyError(ValueError):
    """A snippet the policy refuses; ``problems`` lists each finding as ``'line N: ...'``."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("code refused by the sandbox policy:\n" + "\n".join(self.problems))


def _private(name: str) -> bool:
    return name.startswith("_") and name != "_"


class _Checker(ast.NodeVisitor):
    def __init__(self, allowed_imports: frozenset[str]):
        self.allowed = allowed_imports
        self.problems: list[str] = []

    def _add(self, node: ast.AST, text: str) -> None:
        self.problems.append(f"line {getattr(node, 'lineno', '?')}: {text}")

    def _check_module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if root not in self.allowed:
            allowed = ", ".join(sorted(self.allowed)) or "none"
            self._add(node, f"import of '{module}' is not allowed (allowed modules: {allowed})")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            if alias.asname and _private(alias.asname):
                self._add(node, f"name '{alias.asname}' starts with '_' (not allowed)")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self._add(node, "relative imports are not allowed")
        else:
            self._check_module(node, node.module or "")
        for alias in node.names:
            for name in (alias.name, alias.asname):
                if name and _private(name):
                    self._add(node, f"name '{name}' starts with '_' (not allowed)")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in FORBIDDEN_NAMES:
            self._add(node, f"'{node.id}' is not allowed in sandboxed code")
        elif _private(node.id):
            self._add(node, f"name '{node.id}' starts with '_' (not allowed)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr):
            self._add(node, f"attribute '.{node.attr}' starts with '_' (not allowed)")
        elif node.attr in ("format", "format_map"):
            self._add(node, f"'.{node.attr}' is not allowed; use an f-string instead")
        elif node.attr in FORBIDDEN_ATTRIBUTES:
            self._add(node, f"attribute '.{node.attr}' reaches interpreter internals (not allowed)")
        elif node.attr in MODULE_ATTRIBUTES:
            self._add(node, f"attribute '.{node.attr}' reaches a module that is not allowed")
        self.generic_visit(node)

    def _check_def(self, node, name: str, method_ok: bool) -> None:
        if _private(name) and not (method_ok and name in ALLOWED_DUNDER_DEFS):
            self._add(node, f"defining '{name}' is not allowed (names starting with '_')")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._check_def(node, node.name, method_ok=True)
        self._check_arguments(node.args)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._check_arguments(node.args)
        self.generic_visit(node)

    def _check_arguments(self, args: ast.arguments) -> None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        for arg in every:
            if arg is not None and _private(arg.arg):
                self._add(arg, f"argument '{arg.arg}' starts with '_' (not allowed)")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._check_def(node, node.name, method_ok=False)
        for keyword in node.keywords:
            if keyword.arg == "metaclass":
                self._add(node, "metaclasses are not allowed")
        self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg and _private(node.arg):
            self._add(node, f"keyword '{node.arg}' starts with '_' (not allowed)")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> None:
        for attr in node.kwd_attrs:
            if _private(attr) or attr in FORBIDDEN_ATTRIBUTES:
                self._add(node, f"pattern attribute '{attr}' is not allowed")
        self.generic_visit(node)

    def _check_bound(self, node, name: str | None) -> None:
        if name and _private(name):
            self._add(node, f"name '{name}' starts with '_' (not allowed)")

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        self._check_bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self._check_bound(node, node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        self._check_bound(node, node.name)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        for name in node.names:
            self._check_bound(node, name)

    visit_Nonlocal = visit_Global


def check_code(code: str, allowed_imports: frozenset[str]) -> list[str]:
    """Every policy problem of ``code`` as ``'line N: ...'`` (``[]`` when it may run).

    A syntax error is one problem ``'line N: SyntaxError: ...'``. The check only reads the code.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str, not {type(code).__name__}")
    try:
        tree = ast.parse(code, filename="<snippet>")
    except SyntaxError as e:
        return [f"line {e.lineno or '?'}: SyntaxError: {e.msg}"]
    checker = _Checker(frozenset(allowed_imports))
    checker.visit(tree)
    return checker.problems


def enforce_policy(code: str, allowed_imports: frozenset[str]) -> None:
    """Raise :class:`PolicyError` when :func:`check_code` finds anything."""
    problems = check_code(code, allowed_imports)
    if problems:
        raise PolicyError(problems)
