"""The session is hermetic (tests/hermetic.py): its home, caches, GraSIF build and model cache are
its own, children inherit them, and touching the user's real ones fails the test that did it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hermetic
from grasif import dataset
from lookplangraph.lm import embedded


def _inside(path: Path, root: Path) -> bool:
    path, root = Path(os.path.abspath(path)), Path(os.path.abspath(root))
    return path == root or root in path.parents


def test_every_default_directory_is_the_sessions_own():
    guard = hermetic.current()
    for name in hermetic.VARIABLES:
        assert _inside(Path(os.environ[name]), guard.root), name
    for path in (Path.home(), dataset.default_data_dir(), embedded.models_dir(), Path(os.path.expanduser("~/.cache"))):
        assert _inside(path, guard.root), path
        assert guard.protects(path) is None, path
    assert guard.protected, "the guard protects nothing: the user's directories were not found"


def test_a_child_process_resolves_the_same_directories():
    code = ("import json; from grasif.dataset import default_data_dir; from lookplangraph.lm.embedded import models_dir; "
            "print(json.dumps([str(default_data_dir()), str(models_dir())]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    data, models = (Path(p) for p in json.loads(out))
    assert data == dataset.default_data_dir() and models == embedded.models_dir()
    assert all(_inside(p, hermetic.current().root) for p in (data, models))


def test_touching_the_users_cache_or_config_is_refused():
    guard = hermetic.current()
    before = list(guard.violations)
    for root in guard.protected:
        target = root / "lookplangraph" / "grasif" / "index.json"
        with guard.probe():
            with pytest.raises(hermetic.HermeticViolation, match="touched the user's home or cache"):
                open(target)  # noqa: SIM115 - the open is what is refused
            with pytest.raises(hermetic.HermeticViolation):
                os.listdir(root)
            with pytest.raises(hermetic.HermeticViolation):
                os.mkdir(root / "lookplangraph")
    assert guard.violations == before  # probes on purpose are not counted against the session
    # outside a probe the refusal is recorded, and the session would fail at its end: checked on
    # a guard of its own, not the session's
    own = hermetic.Guard(guard.root, (guard.root / "pretend-user-cache",))
    with pytest.raises(hermetic.HermeticViolation):
        own.hook("open", (str(guard.root / "pretend-user-cache" / "x.json"), "r", 0))
    own.hook("open", (str(guard.root / "elsewhere.json"), "r", 0))
    own.hook("open", (3, "r", 0))  # a file descriptor names no path
    assert len(own.violations) == 1 and "pretend-user-cache" in own.violations[0]
