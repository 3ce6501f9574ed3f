"""``lookplangraph view --explain``: before the page is written, ask an LM for the reasons of the
steps that have none, as ``lookplangraph explain`` does, and save them where the page finds them.

:func:`ask_missing_reasons` goes through the LookPlanGraph episodes of the run and eval
directories (trials ask their reasons live, other planners are not replayed): a step that proposed
an action and has no reason, neither in its trace nor saved in the directory's ``reasons.jsonl``
for that action, is asked of the run's own LM (the spec and options of its ``config.json``) or of
``lm`` when given; nothing else is asked, and an episode with nothing missing is not replayed.
Each reason is saved as soon as it is given
(:func:`lookplangraph.evaluation.explain.save_reasons`: merged, written atomically), so an
interrupted command keeps the ones before. ``progress`` gets one line per episode. An episode that cannot be
replayed is named on its line and skipped; an LM that cannot be made or used stops the asking
(:class:`ReasonsUnavailable`, after the reasons before it were saved).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from lookplangraph.apps.viewer.load import expand, kind_of, read_json, read_jsonl, step_records
from lookplangraph.evaluation.explain import (ReplayError, ask_and_save, chosen_prompts, load_episode, read_reasons,
                                              replay_prompts, unexplained_calls)
import lookplangraph.lm
from lookplangraph.lm import LMError


class ReasonsUnavailable(RuntimeError):
    """The LM that gives the reasons cannot be made or used; the message says which and why."""


@dataclass
class Asked:
    """What :func:`ask_missing_reasons` did: episodes looked at, asked, and reasons saved."""

    episodes: int = 0
    asked: int = 0
    saved: int = 0
    skipped: int = 0


def _episodes(run_dir: Path) -> list[tuple[str | None, str | None, str | None, list[dict]]]:
    """``(task argument of load_episode, split, task_id, trace rows)`` of a run or eval
    directory's episodes (split and id None where only the episode's task file says them)."""
    if kind_of(run_dir) == "run":
        rows, _ = read_jsonl(run_dir / "trace.jsonl")
        return [(None, None, None, step_records(rows, "trace.jsonl")[0])]
    out = []
    for f in sorted((run_dir / "traces").glob("*.jsonl")) if (run_dir / "traces").is_dir() else []:
        split, sep, task_id = f.stem.partition("__")
        if sep:
            rows, _ = read_jsonl(f)
            out.append((f"{split}/{task_id}", split, task_id, step_records(rows, f.name)[0]))
    return out


def ask_missing_reasons(run_dirs: list[Path], *, data_dir: Path | None = None, lm: str | None = None,
                        progress: Callable[[str], None] = print, make: Callable | None = None) -> Asked:
    """Ask for and save the missing reasons of ``run_dirs``' episodes (module doc). ``make(spec,
    **options)`` builds a backend (default :func:`lookplangraph.lm.make_backend`)."""
    if make is None:
        make = lookplangraph.lm.make_backend  # looked up per call: tests replace it
    backends: dict[tuple[str, str], object] = {}
    done = Asked()
    for run_dir in expand([Path(p) for p in run_dirs]):
        if kind_of(run_dir) not in ("eval", "run"):
            continue
        config, _ = read_json(run_dir / "config.json")
        if config is None or (config.get("planner") or "lookplangraph") != "lookplangraph":
            continue
        for task_arg, split, task_id, trace in _episodes(run_dir):
            done.episodes += 1
            where = f"{run_dir}" + (f" {task_arg}" if task_arg else "")
            saved = read_reasons(run_dir)
            if split is not None and not unexplained_calls(trace, saved, split, task_id):
                progress(f"reasons: {where}: every step has its reason")  # not replayed: nothing to ask
                continue
            try:
                task, settings, recorded = load_episode(run_dir, task_arg, data_dir)
                missing = unexplained_calls(recorded, saved, task.split, task.id)
                prompts = chosen_prompts(replay_prompts(task, settings, recorded), missing) if missing else []
            except ReplayError as exc:
                done.skipped += 1
                progress(f"reasons: {where}: not asked: {exc}")
                continue
            if not prompts:
                progress(f"reasons: {where}: every step has its reason")
                continue
            spec = lm or settings.lm
            options = {} if lm else dict(settings.lm_options)
            key = (spec, json.dumps(options, sort_keys=True, default=str))
            if key not in backends:
                try:
                    backends[key] = make(spec, **options)
                except (LMError, ValueError) as exc:
                    raise ReasonsUnavailable(f"the LM {spec} cannot be made: {exc}") from None
            progress(f"reasons: {where}: asking {spec} for {len(prompts)} step(s)")
            for prompt in prompts:
                try:
                    done.saved += sum(n for _, _, n in ask_and_save(backends[key], task, recorded, [prompt], run_dir, spec))
                except LMError as exc:
                    raise ReasonsUnavailable(f"the LM {spec} cannot give the reasons: {exc}") from None
                done.asked += 1
    return done
