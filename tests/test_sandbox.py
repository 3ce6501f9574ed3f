"""Normal use of the sandbox for LM-written code: networkx queries over a graph passed as data,
prints, readable errors with snippet line numbers, the policy's rules, limits and isolation
reporting. (Attacks: tests/test_sandbox_attacks.py.)"""

from __future__ import annotations

import sys
import textwrap

import networkx as nx
import pytest

from lookplangraph.sandbox import (PolicyError, Sandbox, SandboxLimits, SandboxUnavailable,
                                   check_code, enforce_policy)
from lookplangraph.sandbox.runner import DEFAULT_IMPORTS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only")

PRELUDE = textwrap.dedent("""
    import networkx as nx
    G = nx.node_link_graph(DATA, edges="links")
    def holder(node):
        for parent in G.successors(node):
            return parent
        return None
""")


@pytest.fixture(scope="module")
def box():
    return Sandbox(SandboxLimits(cpu_seconds=2, wall_seconds=8, output_bytes=2_000))


@pytest.fixture(scope="module")
def scene():
    g = nx.DiGraph()
    g.add_node("kitchen-1", layer="room", states=[])
    g.add_node("fridge-1", layer="asset", states=["closed"])
    g.add_node("table-1", layer="asset", states=[])
    g.add_node("apple-1", layer="object", states=[])
    g.add_node("mug-1", layer="object", states=["dirty"])
    g.add_edge("fridge-1", "kitchen-1", relation="in_room")
    g.add_edge("table-1", "kitchen-1", relation="in_room")
    g.add_edge("apple-1", "fridge-1", relation="inside")
    g.add_edge("mug-1", "table-1", relation="ontop")
    return nx.node_link_data(g, edges="links")


def test_networkx_queries_over_the_scene(box, scene):
    r = box.run(textwrap.dedent("""
        import collections
        inside = [n for n, p, d in G.edges(data=True) if d['relation'] == 'inside']
        print(inside)
        print(nx.shortest_path(G, 'apple-1', 'kitchen-1'))
        print(holder('mug-1'), holder('kitchen-1'))
        print(dict(collections.Counter(G.nodes[n]['layer'] for n in G)))
        print([n for n in G if 'dirty' in G.nodes[n]['states']])
    """), data=scene, prelude=PRELUDE)
    assert r.ok and r.kind == "ok" and r.error is None, r
    assert r.stdout.splitlines() == [
        "['apple-1']", "['apple-1', 'fridge-1', 'kitchen-1']", "table-1 None",
        "{'room': 1, 'asset': 2, 'object': 2}", "['mug-1']"]
    assert r.isolation == box.isolation and not r.isolation.startswith("weak")
    assert 0 < r.seconds < 8


def test_exception_names_the_snippet_line(box, scene):
    r = box.run("x = 1\nprint('before')\nn = G.nodes['banana']\n", data=scene, prelude=PRELUDE)
    assert not r.ok and r.kind == "exception" and r.stdout == "before\n"
    assert r.error.splitlines()[-2:] == ["  line 3: n = G.nodes['banana']", "KeyError: 'banana'"]


def test_exception_inside_a_function_lists_both_lines(box, scene):
    r = box.run("def f(x):\n    return 1 / x\n\nprint(f(0))\n", data=scene, prelude=PRELUDE)
    assert r.kind == "exception"
    assert r.error.splitlines()[1:] == ["  line 4: print(f(0))", "  line 2, in f: return 1 / x",
                                        "ZeroDivisionError: division by zero"]


def test_syntax_error_is_an_exception_with_its_line(box):
    r = box.run("x = [1, 2\nprint(x)\n")
    assert r.kind == "exception" and not r.ok and "line 1" in r.error and "SyntaxError" in r.error
    assert r.isolation == "none"  # refused on the host, no process started


def test_policy_refusal_lists_every_problem_with_lines(box):
    r = box.run("import os\nx = ().__class__\ny = eval('1')\n")
    assert r.kind == "policy" and not r.ok and r.isolation == "none"
    assert r.error.splitlines()[1:] == [
        "line 1: import of 'os' is not allowed (allowed modules: collections, functools, itertools, "
        "json, math, networkx, re, statistics)",
        "line 2: attribute '.__class__' starts with '_' (not allowed)",
        "line 3: 'eval' is not allowed in sandboxed code"]


def test_output_is_capped_with_a_marker(box):
    r = box.run("for i in range(1000):\n    print('line', i)\n")
    assert r.kind == "output" and not r.ok
    assert r.stdout.startswith("line 0\nline 1\n")
    assert r.stdout.endswith("\n[output truncated at 2000 bytes]")
    assert len(r.stdout.encode()) <= 2000 + 40


def test_data_is_a_copy_and_unicode_survives(box):
    data = {"names": ["café-1", "mug-2"]}
    r = box.run("DATA['names'].append('x')\nprint(DATA['names'])", data=data)
    assert r.ok and r.stdout == "['café-1', 'mug-2', 'x']\n"
    assert data == {"names": ["café-1", "mug-2"]}


def test_each_run_is_a_fresh_process(box):
    assert box.run("counter = 1\nprint(counter)").stdout == "1\n"
    r = box.run("print(counter)")
    assert r.kind == "exception" and "NameError" in r.error


def test_bad_input_is_rejected_clearly(box):
    with pytest.raises(TypeError, match="JSON-serialisable"):
        box.run("print(1)", data={"x": object()})
    with pytest.raises(TypeError, match="code must be a str"):
        box.run(b"print(1)")
    with pytest.raises(ValueError, match="cpu_seconds must be a positive number"):
        SandboxLimits(cpu_seconds=0)
    with pytest.raises(ValueError, match="memory_mb must be at least 64"):
        SandboxLimits(memory_mb=16)


def test_prelude_failure_is_reported_as_ours(box):
    r = box.run("print(1)", prelude="raise RuntimeError('broken prelude')")
    assert r.kind == "crash" and "sandbox prelude failed: RuntimeError: broken prelude" in r.error


def test_probe_reports_what_the_machine_achieved(box):
    report = box.probe
    assert report["no_new_privs"] and report["nproc0"] and report["fdfreeze"]
    assert report["open_fds_beyond_stdio"] == []  # nothing opened before the freeze stays reachable
    assert report["files"] and report["network"] and report["signals"]
    for check in ("read_etc_passwd", "connect_loopback", "fork", "signal_parent"):
        assert report["checks"][check] != "allowed", report
        assert report["checks_before_freeze"][check] != "allowed", report  # the layers below the freeze hold too


def test_landlock_when_the_kernel_offers_it(box):
    abi = box.probe.get("landlock_abi")
    if not abi:
        pytest.skip("this kernel offers no Landlock (the chroot/namespace fallback is tested instead): "
                    + "; ".join(box.probe.get("notes", [])))
    assert f"landlock{abi}" in box.isolation
    assert ("landlock-net" in box.isolation) == (abi >= 4)


def test_weak_isolation_is_refused_unless_allowed():
    everything = frozenset({"landlock", "netns", "chroot", "fdfreeze"})
    with pytest.raises(SandboxUnavailable, match="require_strong=False") as info:
        Sandbox(_disable=everything)
    assert "file confinement" in str(info.value)
    weak = Sandbox(require_strong=False, _disable=everything)
    assert weak.isolation.startswith("weak:")
    r = weak.run("print(6 * 7)")
    assert r.ok and r.stdout == "42\n" and r.isolation.startswith("weak:")


# -- the policy alone ------------------------------------------------------------------------

ALLOWED = DEFAULT_IMPORTS


@pytest.mark.parametrize("code, expected", [
    ("import networkx as nx\nfrom collections import Counter\nimport itertools, re", []),
    ("for _ in range(3):\n    pass\nx = [v for _, v in {}.items()]", []),
    ("class Box:\n    def __init__(self, x):\n        self.x = x\n    def __repr__(self):\n        return 'b'", []),
    ("s = f'{len(G)} nodes'", []),
    ("import os.path", ["line 1: import of 'os.path' is not allowed"]),
    ("from subprocess import run", ["line 1: import of 'subprocess' is not allowed"]),
    ("from . import x", ["line 1: relative imports are not allowed"]),
    ("x = __builtins__", ["line 1: name '__builtins__' starts with '_'"]),
    ("x = G._adj", ["line 1: attribute '._adj' starts with '_'"]),
    ("f = exec", ["line 1: 'exec' is not allowed"]),
    ("def f(g):\n    return g.gi_frame.f_back", ["line 2: attribute '.f_back' reaches", "line 2: attribute '.gi_frame' reaches"]),
    ("t = e.__traceback__.tb_frame", ["line 1: attribute '.tb_frame' reaches", "line 1: attribute '.__traceback__' starts"]),
    ("'{0}'.format_map({})", ["line 1: '.format_map' is not allowed"]),
    ("class B:\n    def __del__(self):\n        pass", ["line 2: defining '__del__' is not allowed"]),
    ("class M(type, metaclass=type):\n    pass", ["line 1: metaclasses are not allowed"]),
    ("try:\n    pass\nexcept Exception as _e:\n    pass", ["line 3: name '_e' starts with '_'"]),
    ("match x:\n    case int(__class__=c):\n        pass", ["line 2: pattern attribute '__class__' is not allowed"]),
    ("x = (", ["line 1: SyntaxError"]),
    ("nx.lazy_imports.os.system('id')", ["line 1: attribute '.lazy_imports' reaches a module",
                                          "line 1: attribute '.os' reaches a module"]),
    ("m = nx.algorithms.chordal.sys.modules", ["line 1: attribute '.modules' reaches a module",
                                               "line 1: attribute '.sys' reaches a module"]),
])
def test_check_code(code, expected):
    problems = check_code(code, ALLOWED)
    assert len(problems) == len(expected), problems
    for problem, start in zip(sorted(problems), sorted(expected)):
        assert problem.startswith(start), (problem, start)


def test_enforce_policy_raises_with_problems():
    with pytest.raises(PolicyError) as info:
        enforce_policy("import os\nopen('x')", ALLOWED)
    assert info.value.problems == [
        "line 1: import of 'os' is not allowed (allowed modules: collections, functools, itertools, "
        "json, math, networkx, re, statistics)", "line 2: 'open' is not allowed in sandboxed code"]
    assert isinstance(info.value, ValueError)
    enforce_policy("print(1)", ALLOWED)  # no problem, no exception


def test_cli_probe_prints_the_isolation(capsys):
    import argparse

    from lookplangraph.sandbox import cli
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(["sandbox"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("isolation: ") and "weak:" not in out and "fork" in out
    args = parser.parse_args(["sandbox", "--json"])
    assert args.func(args) == 0
    assert '"strong": true' in capsys.readouterr().out


def test_lazy_import_of_a_module_not_provided_is_explained(box, scene):
    r = box.run("print(nx.to_numpy_array(G))", data=scene, prelude=PRELUDE)  # networkx imports numpy lazily
    assert r.kind == "exception"
    assert r.error.splitlines()[-1].startswith(
        "ModuleNotFoundError: module 'numpy' is not available in the sandbox (only these modules and what "
        "they load can be used: collections, functools, itertools, json, math, networkx, re, statistics)")
