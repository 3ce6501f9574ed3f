"""Run settings for ``lookplangraph run`` / ``eval``: what to run (:class:`RunSettings`) and the
planner's settings (:class:`~lookplangraph.planners.config.PlannerConfig`), read from a TOML config
file (``configs/*.toml``) and overridden by command-line flags.

A config holds the run's keys and the planner's top-level keys side by side, and the baselines'
sections as tables (``[sg_rwr]``, ``[react]``, ``[sayplan]``, ``[llm_plus_p]``)::

    planner = "sg-rwr"
    lm = "llamacpp:qwen2.5-coder-1.5b"
    split = "office"
    max_actions = 12

    [sg_rwr]
    mode = "step"

Every key with its default and meaning: :func:`reference` (generated from the classes, so it
cannot drift from them). Flat keys of older configs (``sgrwr_mode = "step"``) still load, with a
note that says how to write them now.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from sim_adapters.dynamic import DEFAULT_MODE, DYNAMIC_MODES

from lookplangraph.lm.embedded import DEFAULT_MODEL, default_lm

from lookplangraph.planners.config import (
    PlannerConfig, check_choices, legacy_note, reference_lines, setting, settings_reference,
)

#: ``augmentation`` values (:mod:`lookplangraph.agent.perception`, :class:`vlm.gam.GraphAugmentation`)
AUGMENTATION_MODES = ("ground_truth", "parser", "vlm")

#: the embedded base model: the default LM of every planner but LookPlanGraph, and of ``reproduce``
BASE_LM = f"llamacpp:{DEFAULT_MODEL}"
#: LookPlanGraph's default LM: the base with the adapter the registry names its default
#: (:func:`lookplangraph.lm.embedded.default_lm`; model cards in ``docs/models/``)
DEFAULT_LM = default_lm()


class SettingsError(ValueError):
    """A config file or flag combination that cannot be used; the message names the problem."""


@dataclass
class RunSettings:
    """What to run, and the planner's settings (``config``)."""

    planner: str = setting("lookplangraph", "lookplangraph | llm-as-p | llm+p | sayplan | sayplan-lite | react | "
                                            "sg-rwr (lookplangraph.planners)")
    lm: str = setting(DEFAULT_LM, "the planner's backend spec (lookplangraph.lm.make_backend); unset, the other "
                                  f"planners get the base model {BASE_LM} (the adapter learned LookPlanGraph's "
                                  "decisions only)")
    lm_options: dict = field(default_factory=dict, metadata={"help": "passed to the backend, e.g. { n_ctx = 4096 }"})
    split: str | None = setting(None, "virtualhome | behavior | office")
    tasks: list | None = setting(None, "task ids (default: all of the split)")
    limit: int | None = setting(None, "the first N tasks after selection")
    selection: str | None = setting(None, "only tasks tagged with this selection (virtualhome)")
    dynamic: bool = setting(False, "move task-relevant objects before the episode")
    seed: int = setting(0, "dynamic-mode seed")
    dynamic_mode: str = setting(DEFAULT_MODE, "paper (a seeded half of the tasks, holders drawn from the object prior, "
                                              "same room with probability 0.5) | anywhere (every task, any holder "
                                              "in the building); sim_adapters.dynamic",
                                choices=tuple(DYNAMIC_MODES))
    env: str = setting("graph", "graph | virtualhome | virtualhome-unity[@URL] | omnigibson-bank@DIR "
                                "(lookplangraph.evaluation.runner.make_env)")
    augmentation: str = setting("ground_truth", "ground_truth | parser | vlm (lookplangraph.agent.perception)",
                                choices=AUGMENTATION_MODES)
    vlm: str | None = setting(None, "describer backend for vlm augmentation (a model that sees images)")
    vlm_options: dict = field(default_factory=dict, metadata={"help": "passed to the describer backend"})
    parser_lm: str | None = setting(None, "parser backend (default: vlm in vlm mode, lm in parser mode)")
    failures: float | dict = setting(0.0, "low-level execution failures: one rate for every kind, or a table "
                                           "{ grasp = 0.1, navigation = 0.05, device = 0.1, slip = 0.05, placement = 0.1 } "
                                           "(sim_adapters.failures); 0: none")
    failure_seed: int = setting(0, "seed of the low-level failures' draws")
    concurrency: int = setting(1, "episodes in flight")
    processes: int = setting(1, "worker processes the episodes in flight are spread over (1: threads of one process)")
    cache: bool | str = setting(False, "true: record/replay LM replies in OUT/lm_cache.jsonl; a path: that cache "
                                       "file (replay another run's replies)")
    out: str | None = setting(None, "output directory")
    config: PlannerConfig = field(default_factory=PlannerConfig,
                                  metadata={"help": "the planner's settings: top-level keys and tables"})

    def __post_init__(self):
        check_choices(self)
        if self.failures:
            from sim_adapters.failures import parse_rates

            try:
                parse_rates(self.failures)
            except ValueError as exc:
                raise SettingsError(f"failures: {exc}") from None

    def planner_config(self) -> PlannerConfig:
        return self.config

    def augmentation_factory(self):
        """None for ground-truth augmentation, else a picklable :class:`vlm.gam.AugmentationFactory`
        (``factory(planner_lm) -> GraphAugmentation``): the describer is ``vlm``; the parser
        ``parser_lm``, else the describer (vlm mode), else the planner's LM (parser mode)."""
        if self.augmentation == "ground_truth":
            return None
        from vlm.gam import AugmentationFactory

        return AugmentationFactory(self.augmentation, self.vlm, self.vlm_options, self.parser_lm)

    def as_dict(self) -> dict:
        """The run's keys and the planner's, as one flat table (what results files record)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "config"}
        return d | self.config.to_dict()


RUN_KEYS = tuple(f.name for f in fields(RunSettings) if f.name != "config")


def reference() -> str:
    """Every config key with its default and meaning, as TOML lines (generated from the classes)."""
    return "\n".join(reference_lines(RunSettings, skip=("config",))) + "\n" + settings_reference()


def _settle_prompt(s: RunSettings, note: Callable[[str], None]) -> None:
    """Settle the ``auto`` prompt settings from the LM's LoRA adapter before anything runs, so
    that results record the prompt used (:meth:`PlannerConfig.settled`); an explicit prompt other
    than the adapter's own is kept, with a note. Raises :class:`~lookplangraph.lm.AdapterError`
    for an adapter that cannot be read."""
    if s.planner != "lookplangraph":  # the prompt settings are LookPlanGraph's only
        return
    from lookplangraph.lm.base import AdapterError, LMError
    from lookplangraph.lm.specs import spec_adapter

    try:
        adapter = spec_adapter(s.lm, s.lm_options)
    except AdapterError:
        raise
    except LMError:
        adapter = None  # not a backend spec at all: make_backend says so when the run starts
    s.config, notes = s.config.settled(adapter)
    for line in notes:
        note(f"note: {line} (recorded in the results)")


def load_settings(path: str | None, overrides: dict, *, note: Callable[[str], None] | None = None) -> RunSettings:
    """Settings from ``path`` (TOML) with ``overrides`` (flags; ``None`` values are ignored; a
    planner key overrides the config's). Old flat keys load and ``note`` (default: stderr) is told
    how to write them now."""
    data: dict = {}
    if path:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise SettingsError(f"{path}: no such config file") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: not valid TOML ({exc})") from None
    data.update({k: v for k, v in overrides.items() if v is not None})
    run = {k: data.pop(k) for k in RUN_KEYS if k in data}
    if isinstance(data.get("correction"), bool):
        raise SettingsError(f"correction is one of rules, feedback, none (not {str(data['correction']).lower()}; "
                            "for feedback without corrections write feedback, for the paper's ablation none)")
    where = path or "settings"
    try:
        config, legacy = PlannerConfig.read(data, where=where, others=RUN_KEYS)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if legacy:
        (note or (lambda line: print(line, file=sys.stderr)))(legacy_note(legacy, where))
    try:
        s = RunSettings(**run, config=config)
    except (TypeError, ValueError) as exc:
        raise SettingsError(str(exc)) from None
    if "lm" not in run and s.planner != "lookplangraph":
        s.lm = BASE_LM
    from lookplangraph.planners import PLANNER_NAMES

    if s.planner not in PLANNER_NAMES:
        raise SettingsError(f"planner must be one of {', '.join(PLANNER_NAMES)}, not {s.planner!r}")
    _settle_prompt(s, note or (lambda line: print(line, file=sys.stderr)))
    if s.augmentation == "vlm" and not s.vlm:
        raise SettingsError("augmentation vlm needs a describer: --vlm SPEC (a model that sees images, e.g. "
                            "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 or openai:gpt-4o)")
    return s
