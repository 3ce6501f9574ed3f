"""Shared fixtures. Before anything else, the session gets a home of its own (:mod:`hermetic`):
``HOME``, the XDG directories, ``LOOKPLANGRAPH_DATA`` and ``LOOKPLANGRAPH_MODELS`` point at one
empty temporary directory, and any test that touches the user's real home or cache fails."""

import hermetic

GUARD = hermetic.isolate()

import contextlib  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from sgs.io import graph_from_dict  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def gift_dict():
    return json.loads((EXAMPLES / "gift_basket" / "initial.json").read_text())


@pytest.fixture
def gift(gift_dict):
    return graph_from_dict(gift_dict)


@pytest.fixture
def gift_plan():
    return json.loads((EXAMPLES / "gift_basket" / "plan.json").read_text())


def kitchen_dict():
    """Two rooms; a closed fridge holding a closed box holding an apple; a lamp; a held-free agent."""
    return {"nodes": {
        "rooms": [{"name": "kitchen-1"}, {"name": "bedroom-1"}],
        "asset": [
            {"name": "fridge-1", "room": "kitchen-1", "states": ["closed"], "affordances": ["put_inside", "open", "close"]},
            {"name": "table-1", "room": "kitchen-1", "states": [], "affordances": ["put_on"]},
            {"name": "lamp-1", "room": "bedroom-1", "states": ["off"], "affordances": ["turn_on", "turn_off"]},
            {"name": "bed-1", "room": "bedroom-1", "states": [], "affordances": ["put_on"]},
        ],
        "objects": [
            {"name": "box-1", "relation": "inside_of", "related_to": "fridge-1", "states": ["closed"], "affordances": ["pick_up", "put_inside", "open", "close"]},
            {"name": "apple-1", "relation": "inside_of", "related_to": "box-1", "states": [], "affordances": ["pick_up"]},
            {"name": "apple-2", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up"]},
            {"name": "tray-1", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up", "put_on"]},
            {"name": "cup-1", "relation": "ontop_of", "related_to": "tray-1", "states": [], "affordances": ["pick_up", "put_inside"]},
            {"name": "book-1", "relation": "ontop_of", "related_to": "bed-1", "states": [], "affordances": ["pick_up"]},
        ],
        "agent": {"name": "agent-1", "location": "bedroom-1", "holding": "nothing"},
    }}


@pytest.fixture
def kitchen():
    return graph_from_dict(kitchen_dict())


@pytest.fixture
def kitchen_store(kitchen):
    """The kitchen loaded into an embedded LadybugDB store (the Cypher interface's), closed after."""
    from lookplangraph.cypher import QueryLimits, open_store

    store = open_store("ladybug", QueryLimits(timeout_s=2, max_rows=20, max_chars=1500))
    store.load(kitchen)
    yield store
    store.close()


def pytest_sessionfinish(session, exitstatus):
    """A session in which a test touched the user's home or cache fails, whatever else passed."""
    if GUARD.violations:
        print("\nhermetic: tests touched the user's home or cache:\n  " + "\n  ".join(dict.fromkeys(GUARD.violations)))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    hermetic.remove(GUARD)


@pytest.fixture(scope="session")
def grasif_build():
    """The session's GraSIF build with every split, in the session's own directory (what
    ``$LOOKPLANGRAPH_DATA`` names for it: :mod:`hermetic`), built on first use (seconds) and shared
    by every test and command that reads the default build."""
    from grasif import dataset

    return dataset.ensure(GUARD.root / hermetic.VARIABLES["LOOKPLANGRAPH_DATA"], list(dataset.SPLIT_MODULES),
                          progress=lambda m: None)


@pytest.fixture(scope="session")
def grasif_copy(grasif_build, tmp_path_factory):
    """A writable copy of :func:`grasif_build` (every split, the same files and index a fresh
    ``dataset.build`` writes), in a directory of its own: for tests and modules that want a build
    of their own without building one (seconds per split). ``grasif_copy()`` returns a new copy's
    path each call."""
    import shutil

    return lambda: Path(shutil.copytree(grasif_build, tmp_path_factory.mktemp("grasif") / "data"))


@pytest.fixture(scope="session")
def split_tasks():
    """``split_tasks(split)``: the tasks ``dataset.split_module(split).build_tasks()`` returns, built
    once a session per split (the VirtualHome split takes about ten seconds) and handed out as a
    fresh copy on every call (unpickled from the built list, graphs included), so that what one
    test or module does to its tasks no other sees."""
    import pickle

    from grasif import dataset

    built: dict[str, bytes] = {}

    def tasks(split: str) -> list:
        if split not in built:
            built[split] = pickle.dumps(dataset.split_module(split).build_tasks(), protocol=pickle.HIGHEST_PROTOCOL)
        return pickle.loads(built[split])

    return tasks


# ---------------------------------------------------------------------------------------------
# Real small model (Qwen2.5-Coder-0.5B-Instruct): for tests marked ``lm``
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def small_model_path():
    """Path of the assembled 0.5B GGUF; skips when llama-cpp-python or the model parts are missing."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install -e '.[lm]', builds from source)")
    from lookplangraph.lm import embedded as models

    if not models.is_available("qwen2.5-coder-0.5b"):
        pytest.skip("Qwen2.5-Coder-0.5B parts are not installed: " + models.MODELS["qwen2.5-coder-0.5b"].pip_command())
    return models.ensure_model("qwen2.5-coder-0.5b")


@contextlib.contextmanager
def llama_server_process(model_path, log_path, threads: int):
    """A llama.cpp OpenAI-compatible server (``python -m lookplangraph.lm.serve``) on 127.0.0.1
    serving ``model_path`` as ``qwen-0.5b`` with ``threads`` threads: yields ``(process, base
    URL)`` once it answers ``/v1/models`` and stops it at the end. Skips without
    llama-cpp-python[server]."""
    import importlib.util
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("sse_starlette") is None:
        pytest.skip("llama_cpp.server needs llama-cpp-python[server] (fastapi, uvicorn, sse-starlette, ...)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(log_path, "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lookplangraph.lm.serve", "--model", str(model_path), "--model_alias", "qwen-0.5b",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads),
         "--n_threads_batch", str(threads)],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server (lookplangraph.lm.serve) exited with {proc.returncode}: "
                            f"{Path(log_path).read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the llama.cpp server (lookplangraph.lm.serve) did not answer /v1/models within 120 s")
            time.sleep(0.5)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def llama_server(small_model_path, tmp_path_factory):
    """:func:`llama_server_process` for the whole session, on the idle CPUs: yields its base URL."""
    from lookplangraph.lm import default_threads

    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with llama_server_process(small_model_path, log_path, default_threads()) as (_, url):
        yield url


@pytest.fixture
def decisions(monkeypatch):
    """Every decision the LookPlanGraph loop asks for, in order, as records with ``static``,
    ``dynamic``, ``names`` and ``excluded``: a spy around :func:`lookplangraph.planners.lookplangraph.decide`
    that records its arguments and calls the real decision."""
    from types import SimpleNamespace

    import lookplangraph.planners.lookplangraph as loop

    calls = []
    real = loop.decide

    def spy(lm, static, dynamic, names, excluded=(), **kwargs):
        calls.append(SimpleNamespace(static=static, dynamic=dynamic, names=names, excluded=list(excluded)))
        return real(lm, static, dynamic, names, excluded, **kwargs)

    monkeypatch.setattr(loop, "decide", spy)
    return calls
