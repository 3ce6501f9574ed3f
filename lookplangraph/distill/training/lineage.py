"""A training run's record carried into the adapters it makes: the stages an adapter was trained
in (``lineage``) and the stamp that puts a run's ``train.json`` into a copy of its adapter.

``distill train`` writes ``OUT/train.json`` beside ``OUT/adapter.gguf``; the adapter itself carries
only its prompt settings. :func:`stamp_run` (``distill stamp``) writes the adapter to another file
with the record inside (``lookplangraph.training``, :data:`lookplangraph.lm.lora.META_KEYS`), the
tensors byte for byte: a release. A run started from such a file reads its record
(:func:`init_record`) and writes ``lineage`` (:func:`lineage`): the start's stages, then its own,
each stage's ``init_adapter_sha256`` the file it started from and, for a stamped start,
``init_trained_as_sha256`` the same tensors as their training wrote them. See
``docs/guides/distillation.md`` (stages and releases).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lookplangraph.lm.embedded import sha256_file
from lookplangraph.lm.lora import read_adapter, stamp_adapter


class RecordError(ValueError):
    """A training record that cannot be read or does not belong to the adapter beside it."""


#: The keys of a training record that make one stage of an adapter's lineage (those it has).
STAGE_KEYS = ("data", "data_sha256", "init_adapter_sha256", "init_trained_as_sha256", "steps", "max_steps",
              "adapter_gguf_sha256", "device")


def stage_entry(record: dict[str, Any]) -> dict[str, Any]:
    """One stage of a lineage from a run's training record (``train.json``): its data (where it was
    read from, as given; a record without one is ``unrecorded``), its start and the adapter it wrote."""
    data = str(record.get("data") or "unrecorded")
    return {"stage": Path(data).name or data, **{k: record[k] for k in STAGE_KEYS if k in record}, "data": data}


def lineage(start: dict[str, Any], this_stage: dict[str, Any], start_step: int = 0) -> list[dict[str, Any]]:
    """The stages of an adapter trained from another that carries a training record (``start``,
    the ``lookplangraph.training`` of the start file), first to last: the start's own ``lineage``
    (or the start as one stage), then ``this_stage``. With ``start_step`` the run goes on with the
    start's own stage (same data), which it then replaces rather than follows."""
    earlier = list(start.get("lineage") or [stage_entry(start)])
    if start_step and earlier and earlier[-1].get("data_sha256") == this_stage.get("data_sha256"):
        earlier = earlier[:-1]
    return earlier + [this_stage]


def carry_lineage(record: dict[str, Any], start: dict[str, Any], start_step: int = 0) -> dict[str, Any]:
    """A run's ``record`` (its ``train.json``, whose ``init_adapter_sha256`` is the start file's)
    with the lineage of its start carried on: ``init_trained_as_sha256`` when the start file is a
    stamped copy (its record names the file its training wrote), and ``lineage`` (:func:`lineage`)."""
    record = dict(record)
    as_trained = start.get("adapter_gguf_sha256")
    if as_trained and as_trained != record.get("init_adapter_sha256"):
        record["init_trained_as_sha256"] = as_trained
    record["lineage"] = lineage(start, stage_entry(record), start_step)
    return record


def init_record(adapter: str | os.PathLike) -> dict[str, Any] | None:
    """The training record an adapter file carries (``lookplangraph.training``, which a release
    stamps into it), None for a file without one (such as a run's own ``adapter.gguf``)."""
    text = read_adapter(adapter).metadata.get("lookplangraph.training")
    if not text:
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{adapter}: its training record is not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise RecordError(f"{adapter}: its training record is not a JSON object")
    return record


def stamp_run(run: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Write a run's ``adapter.gguf`` to ``dst`` with its ``train.json`` as the file's training
    record (``lookplangraph.training``): the tensors unchanged, for a release or a start that
    carries its lineage on. Refused (:class:`RecordError`) when the record is not that adapter's
    (its ``adapter_gguf_sha256`` names another file: a later call of the run wrote one of them)."""
    run = Path(run)
    adapter, record_path = run / "adapter.gguf", run / "train.json"
    for f in (adapter, record_path):
        if not f.is_file():
            raise RecordError(f"{run} has no {f.name}: stamp a directory that a finished training call wrote")
    try:
        record = json.loads(record_path.read_text())
    except json.JSONDecodeError as exc:
        raise RecordError(f"{record_path} is not JSON ({exc})") from None
    have = sha256_file(adapter)
    if not isinstance(record, dict) or record.get("adapter_gguf_sha256") != have:
        raise RecordError(f"{record_path} records another adapter than {adapter} (SHA-256 {have[:16]}...): "
                         "the two come from different training calls")
    if Path(dst).resolve() == adapter.resolve():
        raise RecordError(f"write the stamped adapter to another file than {adapter}, whose SHA-256 the record names")
    return stamp_adapter(adapter, dst, {"lookplangraph.training": json.dumps(record, sort_keys=True)}).path
