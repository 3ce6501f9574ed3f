"""Files cut into numbered chunks with a SHA-256 manifest, and put back together checked.

For carrying a large file (a base GGUF, a training set) through a channel that takes only small
files, such as a lent GPU machine that receives at most 64 MiB per call and returns files of at
most 16 MiB. ``split_file`` writes ``DIR/NAME.partNNN`` and ``DIR/NAME.manifest.json`` (the
whole file's size and SHA-256 and each chunk's); ``join_file`` checks that every chunk is there
with its size, then reads each once (its SHA-256 checked, the whole file's hashed) into
``OUT.part``, renamed only when all agree: a missing or damaged chunk is an error that names it
and never leaves a file, whole or half-written.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


class ChunkError(ValueError):
    """A chunk is missing or damaged, or the manifest does not describe the chunks."""


def split_file(path: str | os.PathLike, out_dir: str | os.PathLike, chunk_bytes: int = 60 << 20) -> Path:
    """Cut ``path`` into chunks of at most ``chunk_bytes``; returns the manifest's path."""
    path, out_dir = Path(path), Path(out_dir)
    if chunk_bytes < 1:
        raise ChunkError(f"chunk size must be positive, not {chunk_bytes}")
    if not path.is_file():
        raise ChunkError(f"no file {path}")
    out_dir.mkdir(parents=True, exist_ok=True)
    whole = hashlib.sha256()
    chunks = []
    with open(path, "rb") as f:
        for i, block in enumerate(iter(lambda: f.read(chunk_bytes), b"")):
            whole.update(block)
            name = f"{path.name}.part{i:03d}"
            (out_dir / name).write_bytes(block)
            chunks.append({"file": name, "bytes": len(block), "sha256": hashlib.sha256(block).hexdigest()})
    manifest = out_dir / f"{path.name}.manifest.json"
    manifest.write_text(json.dumps({"file": path.name, "bytes": path.stat().st_size,
                                    "sha256": whole.hexdigest(), "chunks": chunks}, indent=1))
    return manifest


def join_file(manifest: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Put the chunks of ``manifest`` back together at ``out`` (default: the original name beside
    the manifest), checking each chunk and the whole; returns the written path."""
    manifest = Path(manifest)
    try:
        m = json.loads(manifest.read_text())
        chunks = [(manifest.parent / c["file"], int(c["bytes"]), c["sha256"]) for c in m["chunks"]]
        name, size, digest = m["file"], int(m["bytes"]), m["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ChunkError(f"{manifest} is not a chunk manifest: {exc}") from None
    for path, n, _ in chunks:
        if not path.is_file():
            raise ChunkError(f"chunk {path.name} is missing")
        if path.stat().st_size != n:
            raise ChunkError(f"chunk {path.name} is damaged (its size differs from the manifest)")
    out = Path(out) if out is not None else manifest.parent / name
    part = out.with_name(out.name + ".part")
    whole = hashlib.sha256()
    try:
        with open(part, "wb") as f:  # each chunk is read once: checked, hashed into the whole, written
            for path, _, sha in chunks:
                block = path.read_bytes()
                if hashlib.sha256(block).hexdigest() != sha:
                    raise ChunkError(f"chunk {path.name} is damaged (its SHA-256 differs from the manifest)")
                whole.update(block)
                f.write(block)
        if part.stat().st_size != size or whole.hexdigest() != digest:
            raise ChunkError(f"the joined file differs from the manifest's {name} (size or SHA-256)")
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, out)
    return out
