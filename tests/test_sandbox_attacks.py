"""Attacks on the sandbox for LM-written code (issue 12): each must leave the host process alive,
its graph unchanged, and give an error the LM can read.

Every attack runs against up to four sandboxes:

- ``policy``: the real configuration (host-side AST policy on, default imports);
- ``boundary``: the policy OFF and dangerous modules (os, socket, ctypes, ...) preloaded in the
  child, so only the process boundary stands between the snippet and the host;
- ``fallback``: as ``boundary`` with Landlock and the network namespace skipped: what a kernel
  or container without them gets (chroot into a deleted directory, uid drop, seccomp, descriptor
  freeze);
- ``landlock-only`` and ``seccomp-only``, for the file, network and signal attacks: one layer
  (with the uid drop when root) must hold alone: Landlock without freeze, chroot, namespace or
  seccomp; or the seccomp deny-list with the descriptor freeze, without Landlock or chroot.

The ``_check_policy`` and ``_disable`` switches used here are test-only.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import networkx as nx
import pytest

from lookplangraph.sandbox import Sandbox, SandboxLimits, SandboxUnavailable
from lookplangraph.sandbox.runner import DEFAULT_IMPORTS

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux-only")

REPO = Path(__file__).resolve().parent.parent
LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=6, memory_mb=512, output_bytes=10_000)
#: preloaded in the child for the policy-off sandboxes, so attacks need no file access to import
ATTACK_IMPORTS = DEFAULT_IMPORTS | {"os", "socket", "threading", "subprocess", "ctypes", "gc", "sys",
                                    "time", "signal", "resource"}
HOST_SECRET = "host-secret-7f3a9c"  # lives only in the host process
PRELUDE = textwrap.dedent("""
    import networkx as nx
    G = nx.node_link_graph(DATA, edges="links")
    def find(name):
        return G.nodes[name]
""")
MODES = ("policy", "boundary", "fallback", "landlock-only", "seccomp-only")
MODE_DISABLE = {"boundary": [], "fallback": ["landlock", "netns"],
                "landlock-only": ["fdfreeze", "netns", "chroot", "seccomp"],
                "seccomp-only": ["landlock", "netns", "chroot"]}


def _host_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_node("kitchen-1", layer="room")
    g.add_node("fridge-1", layer="asset", states=["closed"])
    g.add_node("apple-1", layer="object", states=[])
    g.add_edge("fridge-1", "kitchen-1", relation="in_room")
    g.add_edge("apple-1", "fridge-1", relation="inside")
    return g


_sandboxes: dict[str, Sandbox] = {}


def sandbox(mode: str) -> Sandbox:
    """The module's sandbox for ``mode`` (built once); skips with the precise missing feature."""
    if mode not in _sandboxes:
        kwargs: dict = {"allowed_imports": ATTACK_IMPORTS, "_check_policy": False}
        if mode == "policy":
            kwargs = {}
        else:
            kwargs["_disable"] = frozenset(MODE_DISABLE[mode])
        try:
            _sandboxes[mode] = Sandbox(LIMITS, **kwargs)
        except SandboxUnavailable as e:
            if mode in ("policy", "boundary"):
                raise  # the real configuration must be strong wherever the suite runs
            pytest.skip(f"{mode} isolation not available on this kernel/container: {e}")
    return _sandboxes[mode]


def run(mode: str, code: str, graph: nx.DiGraph | None = None):
    graph = graph if graph is not None else _host_graph()
    before = nx.node_link_data(graph, edges="links")
    result = sandbox(mode).run(textwrap.dedent(code), data=before, prelude=PRELUDE)
    assert nx.node_link_data(graph, edges="links") == before, "the host's graph changed"
    assert result.isolation == sandbox(mode).isolation or result.kind == "policy"
    return result


def refused(result, *, kinds=("exception",), mode: str) -> None:
    """The attack failed with a readable error (the policy's, in ``policy`` mode)."""
    if mode == "policy":
        assert result.kind == "policy", result
        assert result.error.startswith("refused by the sandbox policy") and "line " in result.error
        return
    assert not result.ok and result.kind in kinds, result
    assert isinstance(result.error, str) and result.error.strip(), result


# -- imports, files, escapes through interpreter internals -------------------------------------

ALL = pytest.mark.parametrize("mode", MODES[:3])
FS_NET = pytest.mark.parametrize("mode", MODES)


@ALL
def test_import_os_and_run_a_shell(mode):
    r = run(mode, """
        import os, subprocess
        print(subprocess.run(['sh', '-c', 'echo pwned'], capture_output=True, check=True).stdout)
    """)
    refused(r, mode=mode)
    assert "pwned" not in r.stdout
    if mode == "policy":
        assert "line 2: import of 'os' is not allowed" in r.error


@FS_NET
def test_dunder_import_and_list_root(mode):
    r = run(mode, "print(__import__('os').listdir('/'))")
    refused(r, mode=mode)
    assert "etc" not in r.stdout


@FS_NET
def test_open_etc_passwd(mode):
    r = run(mode, "print(open('/etc/passwd').read())")
    refused(r, mode=mode)
    assert "root:" not in r.stdout
    if mode == "policy":
        assert "line 1: 'open' is not allowed" in r.error


SUBCLASSES_ESCAPE = """
    for c in ().__class__.__base__.__subclasses__():
        if c.__name__ == '_wrap_close':
            g = c.__init__.__globals__
            fd = g['open']('/etc/passwd', 0)
            print(g['read'](fd, 200))
"""


@FS_NET
def test_subclasses_escape_to_os(mode):
    r = run(mode, SUBCLASSES_ESCAPE)
    refused(r, mode=mode)
    assert "root:" not in r.stdout


@FS_NET
def test_getattr_with_built_up_dunder_names(mode):
    r = run(mode, """
        base = getattr(getattr((), '__cl' + 'ass__'), '__ba' + 'se__')
        wrap = [c for c in getattr(base, '__subcl' + 'asses__')() if c.__name__ == '_wrap_close'][0]
        g = getattr(getattr(wrap, '__in' + 'it__'), '__glo' + 'bals__')
        print(g['listdir']('/'), g['read'](g['open']('/etc/passwd', 0), 100))
    """)
    refused(r, mode=mode)
    assert "root:" not in r.stdout and "etc" not in r.stdout


@ALL
def test_os_through_an_allowed_module(mode):
    r = run(mode, """
        import networkx
        print(networkx.lazy_imports.os.listdir('/'))
        networkx.algorithms.chordal.sys.modules['os'].system('echo pwned')
    """)
    refused(r, mode=mode)
    assert "etc" not in r.stdout and "pwned" not in r.stdout


@FS_NET
def test_generator_frame_to_builtins(mode):
    r = run(mode, """
        def gen():
            yield 1
        frame = gen().gi_frame
        opener = frame.f_builtins['open']
        print(opener('/etc/passwd').read())
    """)
    refused(r, mode=mode)
    assert "root:" not in r.stdout
    if mode == "policy":
        assert "gi_frame" in r.error and "f_builtins" in r.error


@ALL
def test_format_string_attribute_leak(mode):
    r = run(mode, "print('{0.__globals__}'.format(find))")
    # the child holds no host object: whatever the template reaches is the child's own namespace
    assert HOST_SECRET not in r.stdout
    if mode == "policy":
        refused(r, mode=mode)
        assert "'.format' is not allowed" in r.error
    else:
        assert "HOST_SECRET" not in r.stdout and "DATA" in r.stdout  # reached only the child's globals


# -- the graph ------------------------------------------------------------------------------------

@ALL
def test_mutating_the_graph_leaves_the_host_graph(mode):
    graph = _host_graph()
    r = run(mode, """
        G.remove_node('apple-1')
        G.nodes['fridge-1']['states'].append('open')
        DATA['nodes'].clear()
        print(len(G))
    """, graph=graph)
    assert r.ok and r.stdout.strip() == "2", r
    assert set(graph) == {"kitchen-1", "fridge-1", "apple-1"}
    assert graph.nodes["fridge-1"]["states"] == ["closed"]


# -- CPU, memory, output ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES[:2])
def test_while_true(mode):
    r = run(mode, "while True:\n    pass")
    assert r.kind == "timeout" and "time limit of 1 s (CPU) exceeded" in r.error, r
    assert r.seconds < LIMITS.wall_seconds


@pytest.mark.parametrize("mode", MODES[:2])
def test_huge_power(mode):
    r = run(mode, "x = 10 ** (10 ** 8)\nprint(x)")
    assert not r.ok and r.kind in ("timeout", "memory", "exception"), r
    assert r.error and r.seconds < LIMITS.wall_seconds + 1


@pytest.mark.parametrize("mode", MODES[:2])
def test_six_gigabytes(mode):
    r = run(mode, "x = bytearray(6 * 1024 ** 3)\nprint(len(x))")
    assert r.kind == "memory" and "memory limit of 512 MB exceeded" in r.error and "line 1" in r.error, r


@pytest.mark.parametrize("mode", MODES[:2])
def test_printing_500_megabytes_at_once(mode):
    r = run(mode, "print('x' * 500_000_000)")
    assert not r.ok and r.kind in ("memory", "output"), r
    assert len(r.stdout) <= LIMITS.output_bytes + 100


@pytest.mark.parametrize("mode", MODES[:2])
def test_printing_500_megabytes_in_lines(mode):
    r = run(mode, "for i in range(5_000_000):\n    print('y' * 100)")
    assert r.kind == "output" and "output limit of 10000 bytes exceeded" in r.error, r
    assert r.stdout.endswith(f"[output truncated at {LIMITS.output_bytes} bytes]")
    assert len(r.stdout) <= LIMITS.output_bytes + 100
    assert r.seconds < LIMITS.wall_seconds


def test_sleeping_past_the_wall_clock():
    box = Sandbox(SandboxLimits(cpu_seconds=1, wall_seconds=1.5), allowed_imports=ATTACK_IMPORTS,
                  _check_policy=False)
    r = box.run("import time\nprint('before', flush=True)\ntime.sleep(60)")
    assert r.kind == "timeout" and "1.5 s (wall clock)" in r.error, r
    assert r.stdout == "before\n" and r.seconds < 5


@pytest.mark.parametrize("mode", MODES[:2])
@pytest.mark.parametrize("what", ["KeyboardInterrupt", "SystemExit(3)"])
def test_raise_keyboard_interrupt_or_system_exit(mode, what):
    r = run(mode, f"print('a')\nraise {what}")
    assert r.kind == "exception" and r.error.splitlines()[-1].startswith(what.split("(")[0]), r
    assert "line 2: raise" in r.error and r.stdout == "a\n"


@pytest.mark.parametrize("mode", MODES[:2])
def test_del_time_bomb(mode):
    triggered = run(mode, """
        class Bomb:
            def __del__(self):
                while True:
                    pass
        bomb = Bomb()
        bomb = None
    """)
    if mode == "policy":
        refused(triggered, mode=mode)
        assert "defining '__del__' is not allowed" in triggered.error
        return
    assert triggered.kind == "timeout", triggered
    at_exit = run(mode, """
        class Bomb:
            def __del__(self):
                while True:
                    pass
        keep = [Bomb() for _ in range(3)]
        print('done')
    """)  # the child leaves with os._exit: no collection, no hang
    assert at_exit.ok and at_exit.stdout == "done\n" and at_exit.seconds < LIMITS.wall_seconds


@ALL
def test_fork_bomb(mode):
    r = run(mode, "import os\nwhile True:\n    os.fork()")
    refused(r, mode=mode)
    if mode != "policy":
        assert "BlockingIOError" in r.error or "Resource temporarily unavailable" in r.error


@ALL
def test_thread_swarm(mode):
    r = run(mode, """
        import threading
        for _ in range(200):
            threading.Thread(target=lambda: None).start()
    """)
    refused(r, mode=mode)
    if mode != "policy":
        assert "can't start new thread" in r.error


@pytest.mark.parametrize("mode", MODES[1:])
def test_undoing_the_lockdown(mode):
    r = run(mode, """
        import os, resource
        failures = []
        for attempt in (lambda: resource.setrlimit(resource.RLIMIT_NPROC, (100, 100)),
                        lambda: resource.setrlimit(resource.RLIMIT_CPU, (999, 999)),
                        lambda: os.setuid(0)):
            try:
                attempt()
            except (OSError, ValueError) as e:
                failures.append(type(e).__name__)
        assert len(failures) == 3, f"only {failures} refused"
        raise PermissionError(failures)
    """)
    assert r.kind == "exception" and r.error.splitlines()[-1].startswith("PermissionError"), r


# -- network, the parent process, the caches ----------------------------------------------------

@FS_NET
def test_connecting_to_loopback(mode):
    # Landlock (up to ABI 7) governs TCP bind/connect only; UDP is stopped by the network
    # namespace and the descriptor freeze, which ``landlock-only`` leaves out on purpose.
    udp_too = mode != "landlock-only"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(4)
        udp.bind(("127.0.0.1", 0))
        tcp.settimeout(0.3)
        udp.settimeout(0.3)
        r = run(mode, f"""
            import socket
            errors = []
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # no name lookup, no idna codec
                s.settimeout(2)
                s.connect(('127.0.0.1', {tcp.getsockname()[1]}))
                s.sendall(b'pwned')
            except OSError as e:
                errors.append(f'tcp: {{e}}')
            if {udp_too}:
                try:
                    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'pwned', ('127.0.0.1', {udp.getsockname()[1]}))
                except OSError as e:
                    errors.append(f'udp: {{e}}')
            raise ConnectionError(errors)
        """)
        with pytest.raises(socket.timeout):
            tcp.accept()
        with pytest.raises(socket.timeout):
            udp.recvfrom(64)
    refused(r, mode=mode)
    if mode != "policy":
        assert "tcp:" in r.error and ("udp:" in r.error or not udp_too), r  # each was refused


HOST_SCRIPT = """
import json, sys
from lookplangraph.sandbox import Sandbox, SandboxLimits
from lookplangraph.sandbox.runner import DEFAULT_IMPORTS
attacks, disable = json.loads(sys.argv[1]), frozenset(json.loads(sys.argv[2]))
box = Sandbox(SandboxLimits(cpu_seconds=1, wall_seconds=6), allowed_imports=DEFAULT_IMPORTS | {"os"},
              _check_policy=False, _disable=disable)
results = {name: box.run(code).to_dict() for name, code in attacks.items()}
print("HOST-ALIVE", json.dumps(results))
"""
PARENT_ATTACKS = {
    "kill_parent": """
        import os
        errors = []
        for attempt in (lambda: os.kill(os.getppid(), 9), lambda: os.killpg(os.getpgid(os.getppid()), 9)):
            try:
                attempt()
            except OSError as e:
                errors.append(str(e))
        raise PermissionError(errors)
    """,
    "read_parent_environ": """
        import os
        print(open(f'/proc/{os.getppid()}/environ', 'rb').read())
    """,
}


@pytest.mark.parametrize("mode", MODES[1:])
def test_attacks_on_the_parent_process(mode):
    """A separate host process with a secret in its environment runs the attacks (killing it,
    reading its /proc environ): it must survive and the secret must not come back."""
    sandbox(mode)  # skips where this mode's isolation is unavailable
    secret = "sk-test-" + os.urandom(8).hex()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LPG_TEST_API_KEY": secret,
           "PYTHONPATH": str(REPO)}
    attacks = {name: textwrap.dedent(code) for name, code in PARENT_ATTACKS.items()}
    done = subprocess.run([sys.executable, "-c", HOST_SCRIPT, json.dumps(attacks), json.dumps(MODE_DISABLE[mode])],
                          capture_output=True, text=True, env=env, timeout=60, cwd=str(REPO),
                          start_new_session=True)
    assert done.returncode == 0 and "HOST-ALIVE" in done.stdout, (done.returncode, done.stderr[-2000:])
    results = json.loads(done.stdout.split("HOST-ALIVE", 1)[1])
    assert secret not in done.stdout and "LPG_TEST_API_KEY" not in done.stdout
    for name in PARENT_ATTACKS:
        assert results[name]["kind"] == "exception" and results[name]["error"], results[name]
    assert "PermissionError" in results["kill_parent"]["error"]


@pytest.fixture
def world_writable_cache():
    """A stand-in for the model cache / reply cache that even uid 65534 could write by its
    permissions (0777 directory, 0666 files): only the sandbox's confinement protects it."""
    root = Path(tempfile.mkdtemp(prefix="lpg-fake-cache-"))
    root.chmod(0o777)
    (root / "model.gguf").write_bytes(b"GGUF weights")
    (root / "replies.jsonl").write_text('{"prompt": "p", "reply": "r"}\n')
    for f in root.iterdir():
        f.chmod(0o666)
    yield root
    for f in root.iterdir():
        f.unlink()
    root.rmdir()


def _snapshot(root: Path) -> dict:
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in sorted(root.iterdir())}


@FS_NET
@pytest.mark.parametrize("target", ["model.gguf", "replies.jsonl"])
def test_writing_into_the_caches(mode, target, world_writable_cache):
    before = _snapshot(world_writable_cache)
    path = world_writable_cache / target
    r = run(mode, f"""
        import os
        path = {str(path)!r}
        done, errors = [], []
        for name, attempt in [('write', lambda: open(path, 'a').write('poison')),
                              ('truncate', lambda: os.truncate(path, 0)),
                              ('chmod', lambda: os.chmod(path, 0o777)),
                              ('rename', lambda: os.rename(path, path + '.bak')),
                              ('unlink', lambda: os.unlink(path)),
                              ('create', lambda: os.mkdir(os.path.join(os.path.dirname(path), 'new')))]:
            try:
                attempt()
                done.append(name)
            except OSError as e:
                errors.append(f'{{name}}: {{e.strerror}}')
        print('done:', done)
        raise PermissionError(errors)
    """)
    refused(r, mode=mode)
    assert _snapshot(world_writable_cache) == before
    if mode != "policy":
        assert "done: []" in r.stdout, r.stdout


def test_the_host_still_works_after_the_attacks():
    r = sandbox("boundary").run("print(sorted(G.nodes))", data=nx.node_link_data(_host_graph(), edges="links"),
                                prelude=PRELUDE)
    assert r.ok and "apple-1" in r.stdout
