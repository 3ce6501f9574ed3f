"""The package's layers point one way: every import of every module (at the top or inside a
function) is read from the source, and each layer may import only the layers below it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: lookplangraph/ layers, lowest first: a module of a layer may import its own layer and those
#: listed before it (the episode contract and settings of planners/ sit above agent/, whose reply
#: formats they name, and below the planners that use them). Nothing below the command line may
#: import distill/ (:data:`DISTILL_USERS`): it is for making models, never for running one.
LAYERS = [
    ("lm", ["lookplangraph.lm"]),
    ("sandbox", ["lookplangraph.sandbox"]),
    ("agent", ["lookplangraph.agent"]),
    ("contract", ["lookplangraph.planners.config", "lookplangraph.planners.episode"]),
    ("planners", ["lookplangraph.planners"]),
    ("evaluation", ["lookplangraph.evaluation"]),
    ("cypher", ["lookplangraph.cypher"]),
    ("distill", ["lookplangraph.distill"]),
    ("apps", ["lookplangraph.apps"]),
    ("cli", ["lookplangraph.cli", "lookplangraph.__main__"]),
]


#: the only packages whose modules may import lookplangraph.distill
DISTILL_USERS = ("lookplangraph.distill", "lookplangraph.cli", "lookplangraph.__main__")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_statements(path: Path):
    """``(module, names)`` for every absolute import in ``path``, at the top or inside a function
    (``names`` is empty for ``import X``)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, tuple(a.name for a in node.names)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from X import y`` counts as X and X.y)."""
    return {m for module, names in import_statements(path) for m in (module, *(f"{module}.{n}" for n in names))}


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the longest prefix that holds ``module``."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


def package_modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_module_of_lookplangraph_has_a_layer():
    loose = [module_name(p) for p in package_modules("lookplangraph")
             if module_name(p) != "lookplangraph" and layer_of(module_name(p)) is None]
    assert loose == []


def test_lookplangraph_layers_import_only_their_own_and_lower_layers():
    upward = []
    for path in package_modules("lookplangraph"):
        me = layer_of(module_name(path))
        if me is None:
            continue
        for imported in imports(path):
            other = layer_of(imported)
            if other is not None and other > me:
                upward.append(f"{module_name(path)} ({LAYERS[me][0]}) imports {imported} ({LAYERS[other][0]})")
    assert upward == []


def distill_importers(modules: dict[str, Path]) -> list[str]:
    """``module imports lookplangraph.distill...`` for each module (name: its file) outside
    :data:`DISTILL_USERS` that imports the distillation floor."""
    def within(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    return sorted(f"{name} imports {m}" for name, path in modules.items() for m in imports(path)
                  if within(m, "lookplangraph.distill") and not any(within(name, u) for u in DISTILL_USERS))


def test_only_distill_and_the_command_line_import_distill():
    packages = ("sgs", "grasif", "sim_adapters", "vlm", "lookplangraph")
    assert distill_importers({module_name(p): p for package in packages for p in package_modules(package)}) == []


@pytest.mark.parametrize("package, allowed", [
    ("sgs", set()),
    ("grasif", {"sgs"}),
    ("sim_adapters", {"sgs", "grasif"}),
])
def test_lower_packages_import_nothing_above_them(package, allowed):
    ours = {"sgs", "grasif", "sim_adapters", "vlm", "lookplangraph"} - {package}
    bad = sorted(f"{module_name(p)} imports {m}" for p in package_modules(package) for m in imports(p)
                 if m.split(".")[0] in ours - allowed)
    assert bad == []


def test_vlm_uses_only_the_lm_layer_of_lookplangraph():
    bad = sorted(f"{module_name(p)} imports {m}" for p in package_modules("vlm") for m in imports(p)
                 if m.startswith("lookplangraph") and not (m == "lookplangraph.lm" or m.startswith("lookplangraph.lm.")))
    assert bad == []


def test_lookplangraph_has_at_most_ten_top_level_entries():
    entries = sorted(p.name for p in (ROOT / "lookplangraph").iterdir() if p.name != "__pycache__")
    assert len(entries) <= 10, entries


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module in ``graph`` (module -> the modules of
    ``graph`` it imports), each sorted: every import circle lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the graphs here are a few hundred modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def module_edges(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``path`` needs loaded: ``from package import name`` needs
    ``package.name`` where that is a module, else ``package``."""
    return {f"{module}.{n}" if f"{module}.{n}" in modules else module
            for module, names in import_statements(path) for n in (names or (None,))} & modules


def first_party_graph(packages=("sgs", "grasif", "sim_adapters", "vlm", "lookplangraph")) -> dict[str, set[str]]:
    """Every first-party module and the first-party modules it needs (:func:`module_edges`)."""
    modules = {module_name(p): p for package in packages for p in package_modules(package)}
    return {name: module_edges(path, set(modules)) - {name} for name, path in modules.items()}


def test_no_module_imports_itself_back_through_others():
    assert import_cycles(first_party_graph()) == []


def hidden_imports(path: Path) -> list[int]:
    """The line of each first-party import inside a function of ``path`` that says nothing
    about why it is there: neither a comment on its line nor one on the line above it (or above the
    imports just before it). An import at the top shows a reader the arrow between the modules; one
    in a function is for a circle, an optional dependency or a measured start-up cost, and says so."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        nodes = [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
        covered = {i for n in nodes for i in range(n.lineno, n.end_lineno + 1)}
        for node in nodes:
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if not (isinstance(node, ast.ImportFrom) and node.level) and \
                    not any(m.split(".")[0] in FIRST_PARTY for m in modules):
                continue
            above = node.lineno - 1
            while above in covered:
                above -= 1
            if "#" not in lines[node.lineno - 1] and not (above >= 1 and lines[above - 1].strip().startswith("#")):
                found.append(node.lineno)
    return found


def test_first_party_imports_inside_functions_say_why():
    """Outside the command line (whose modules import each command's code when it runs), every
    first-party import in a function carries a comment with its reason."""
    found = [f"{module_name(p)}:{line}" for package in FIRST_PARTY for p in package_modules(package)
             if not module_name(p).startswith("lookplangraph.cli") for line in hidden_imports(p)]
    assert found == []


FIRST_PARTY = ("sgs", "grasif", "sim_adapters", "vlm", "lookplangraph")


def is_private(name: str) -> bool:
    """An underscore name that is not a dunder (``__version__`` is anyone's to read)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_uses(modules: dict[str, Path]) -> list[str]:
    """``module uses other._name`` for each module of ``modules`` (name: its file) that imports an
    underscore name of another first-party module (``from other import _name``, also relative and
    inside a function, and an ``__init__`` re-exporting its own submodule's) or reads one as an
    attribute of an imported module (``other._name``)."""
    found = set()
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        bound: dict[str, str] = {}  # local name -> the first-party module or name it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] not in FIRST_PARTY:
                    continue
                for alias in node.names:
                    if is_private(alias.name) and source != name:
                        found.add(f"{name} uses {source}.{alias.name}")
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in FIRST_PARTY:
                        bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and is_private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                owner = ".".join([bound[value.id], *reversed(chain)])
                if owner in modules and owner != name:
                    found.add(f"{name} uses {owner}.{node.attr}")
    return sorted(found)


def test_no_module_uses_another_modules_private_names():
    """What one module shares with others is public; an underscore name is its own module's."""
    modules = {module_name(p): p for package in FIRST_PARTY for p in package_modules(package)}
    assert private_name_uses(modules) == []


def test_the_layer_test_can_fail(tmp_path):
    """The layer checks above see an upward import, also one inside a function, and an import of the
    distillation floor from a module that runs episodes."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from lookplangraph.apps.trial import Trial\n")
    assert "lookplangraph.apps.trial" in imports(bad)
    reach = tmp_path / "reach.py"
    reach.write_text("def f():\n    from lookplangraph.distill.teacher.expert import Expert\n")
    found = distill_importers({"lookplangraph.evaluation.runner": reach, "lookplangraph.distill.planning.dagger": reach,
                               "lookplangraph.cli.onboard": reach})
    assert "lookplangraph.evaluation.runner imports lookplangraph.distill.teacher.expert" in found
    assert {line.split(" imports ")[0] for line in found} == {"lookplangraph.evaluation.runner"}
    assert layer_of("lookplangraph.cypher.agent") < layer_of("lookplangraph.distill.teacher.expert") < \
        layer_of("lookplangraph.apps.trial")
    assert layer_of("lookplangraph.apps.trial") > layer_of("lookplangraph.agent.memory")
    assert layer_of("lookplangraph.agent.memory") < layer_of("lookplangraph.planners.episode") < \
        layer_of("lookplangraph.planners.react")
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []
    hidden = tmp_path / "hidden.py"
    hidden.write_text("import json\n\ndef f():\n    import os\n    from sgs.graph import SceneGraph\n\n"
                      "def g():\n    # a circle\n    from sgs import io\n    from grasif.task import (Task,\n"
                      "                             load_task)\n    from vlm import gam  # optional\n")
    assert hidden_imports(hidden) == [5]


def test_the_private_name_check_can_fail(tmp_path):
    """It sees ``from X import _y`` (absolute, relative, in a function), ``X._y`` on an imported
    module, and lets a module's own names, dunders and non-module attributes pass."""
    pkg = tmp_path / "lookplangraph" / "cypher"
    pkg.mkdir(parents=True)
    files = {
        "lookplangraph.cypher": pkg / "__init__.py",
        "lookplangraph.cypher.qa": pkg / "qa.py",
        "lookplangraph.cypher.intents": pkg / "intents.py",
        "lookplangraph.cypher.bench": pkg / "bench.py",
        "lookplangraph.cypher.fine": pkg / "fine.py",
    }
    files["lookplangraph.cypher"].write_text("from .qa import _pick\n")
    files["lookplangraph.cypher.qa"].write_text("def _pick():\n    pass\n")
    files["lookplangraph.cypher.intents"].write_text(
        "def f():\n    from lookplangraph.cypher.qa import _pick\n")
    files["lookplangraph.cypher.bench"].write_text(
        "from lookplangraph.cypher import qa\nimport lookplangraph.cypher.qa\n"
        "qa._pick()\nlookplangraph.cypher.qa._room\n")
    files["lookplangraph.cypher.fine"].write_text(
        "from lookplangraph import __version__\nfrom lookplangraph.cypher.qa import Question\n"
        "from . import qa\nQuestion._private\nqa.__doc__\n_own = 1\n")
    assert private_name_uses(files) == [
        "lookplangraph.cypher uses lookplangraph.cypher.qa._pick",
        "lookplangraph.cypher.bench uses lookplangraph.cypher.qa._pick",
        "lookplangraph.cypher.bench uses lookplangraph.cypher.qa._room",
        "lookplangraph.cypher.intents uses lookplangraph.cypher.qa._pick",
    ]
