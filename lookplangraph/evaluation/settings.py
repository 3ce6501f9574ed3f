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
from sim_adapters.failures import parse_rates
from vlm.gam import AugmentationFactory

from lookplangraph.lm.base import AdapterError, LMError
from lookplangraph.lm.embedded import DEFAULT_MODEL, default_lm
from lookplangraph.lm.specs import spec_adapter
from lookplangraph.planners import PLANNER_NAMES

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
    """What to run, and the planner's settings (``config``). A field's help is also the help of its
    flag of ``run``/``eval`` (:data:`lookplangraph.cli.episodes.RUN_FLAGS`), so it is written for
    both."""

    planner: str = setting("lookplangraph", "lookplangraph (default), a baseline of the paper (llm-as-p, llm+p, sayplan, "
                                            "sayplan-lite, react) or sg-rwr; see lookplangraph.planners")
    lm: str = setting(DEFAULT_LM, f"the planner's LM backend (lookplangraph.lm.make_backend): {DEFAULT_LM} (default "
                                  "for lookplangraph: the embedded model with its trained adapter), "
                                  f"{BASE_LM} (the base; default for the other planners, as the adapter learned "
                                  "LookPlanGraph's decisions only), llamacpp:PATH.gguf[+ADAPTER.gguf], "
                                  "openai:MODEL[@BASE_URL]; harness tools, not models: expert (the privileged expert, "
                                  "belief-space search), expert-oracle (its older room-by-room search), expert-view "
                                  "(its search limited to what the planner's view shows), expert-walk (expert-view "
                                  "putting only in the room it stands in)")
    lm_options: dict = field(default_factory=dict, metadata={"help": "passed to the backend, e.g. { n_ctx = 4096 }"})
    split: str | None = setting(None, "the split: virtualhome, behavior, office, dev")
    tasks: list | None = setting(None, "task ids in the split")
    limit: int | None = setting(None, "only the first N tasks (after the selection)")
    selection: str | None = setting(None, "only tasks tagged with this selection (virtualhome: strict or paper)")
    dynamic: bool = setting(False, "dynamic mode: move task-relevant objects before the episode (how: the dynamic "
                                   "mode; seeded by the dynamic seed)")
    seed: int = setting(0, "the seed of dynamic mode")
    dynamic_mode: str = setting(DEFAULT_MODE, "how dynamic mode moves objects: paper (default; a seeded half of the "
                                              "tasks, objects moved to holders drawn from the object prior, in the same "
                                              "room with probability 0.5) or anywhere (every task, holders drawn "
                                              "uniformly from the whole building); sim_adapters.dynamic",
                                choices=tuple(DYNAMIC_MODES))
    env: str = setting("graph", "environment: graph (default; the SGS on the true graph), virtualhome (VirtualHome's "
                                "evolving graph; virtualhome split only), virtualhome-unity[@URL] (a running VirtualHome "
                                "Unity simulator, default http://127.0.0.1:8080), omnigibson-bank@DIR (the SGS with "
                                "images captured in OmniGibson; behavior split); lookplangraph.evaluation.runner.make_env")
    augmentation: str = setting("ground_truth", "what discover_objects adds to memory: ground_truth (default; the "
                                                "true objects), parser (the environment's text description, parsed by "
                                                "an LM), vlm (the image, described by the vlm backend, then parsed); "
                                                "lookplangraph.agent.perception",
                                choices=AUGMENTATION_MODES)
    vlm: str | None = setting(None, "describer backend for vlm augmentation, a model that sees images "
                                    "(openai:MODEL@BASE_URL, openai:gpt-4o, llamacpp:PATH.gguf with mmproj in vlm_options)")
    vlm_options: dict = field(default_factory=dict, metadata={"help": "passed to the describer backend"})
    parser_lm: str | None = setting(None, "parser backend (default: the vlm backend in vlm mode, the planner's LM in "
                                          "parser mode)")
    failures: float | dict = setting(0.0, "low-level execution failures: each kind (a grasp that fails, a blocked "
                                          "door, a device that does not switch, an object that slips, a placement on "
                                          "top instead of inside) at this rate (default 0: none), or in a config a "
                                          "table of rates per kind { grasp = 0.1, navigation = 0.05, device = 0.1, "
                                          "slip = 0.05, placement = 0.1 }; sim_adapters.failures")
    failure_seed: int = setting(0, "the seed of the failures' draws")
    concurrency: int = setting(1, "episodes in flight at once")
    processes: int = setting(1, "worker processes the episodes in flight are spread over (1: threads of one "
                                "process; more for many episodes in flight against LM servers)")
    cache: bool | str = setting(False, "record LM replies in OUT/lm_cache.jsonl and replay identical calls; given "
                                       "a file (e.g. another run's cache), in that file instead")
    out: str | None = setting(None, "output directory")
    config: PlannerConfig = field(default_factory=PlannerConfig,
                                  metadata={"help": "the planner's settings: top-level keys and tables"})

    def __post_init__(self):
        check_choices(self)
        if self.failures:
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
    if s.planner not in PLANNER_NAMES:
        raise SettingsError(f"planner must be one of {', '.join(PLANNER_NAMES)}, not {s.planner!r}")
    _settle_prompt(s, note or (lambda line: print(line, file=sys.stderr)))
    if s.augmentation == "vlm" and not s.vlm:
        raise SettingsError("augmentation vlm needs a describer: --vlm SPEC (a model that sees images, e.g. "
                            "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 or openai:gpt-4o)")
    return s
