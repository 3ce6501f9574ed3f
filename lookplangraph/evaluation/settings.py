"""Run settings for ``lookplangraph run`` / ``eval``: one flat table, read from a TOML config
file (``configs/*.toml``) and overridden by command-line flags.

Keys (all optional)::

    planner = "lookplangraph"            # lookplangraph | llm-as-p | llm+p | sayplan | sayplan-lite | react | sg-rwr (lookplangraph.planners)
    lm = "llamacpp:qwen2.5-coder-1.5b"   # backend spec, see lookplangraph.lm.make_backend
    lm_options = { n_ctx = 4096 }        # passed to the backend
    split = "office"                     # virtualhome | behavior | office
    tasks = ["office-01"]                # task ids (default: all of the split)
    limit = 12                           # first N tasks after selection
    selection = "strict"                 # only tasks tagged with this selection (virtualhome)
    dynamic = false                      # move task-relevant objects before the episode
    seed = 0                             # dynamic-mode seed
    env = "graph"                        # graph | virtualhome | virtualhome-unity[@URL] | omnigibson-bank@DIR (lookplangraph.evaluation.runner.make_env)
    augmentation = "ground_truth"        # ground_truth | parser | vlm (lookplangraph.agent.perception)
    vlm = "openai:gpt-4o"                # describer backend for vlm augmentation (a model that sees images)
    vlm_options = { structured = "json_schema" }
    parser_lm = "llamacpp:qwen2.5-coder-1.5b"  # parser backend (default: vlm in vlm mode, lm in parser mode)
    max_actions = 30
    max_unresolved = 3
    graph_style = "text"                 # text | json | full
    priors = true
    correction = "rules"                 # rules | feedback | none (lookplangraph.planners.lookplangraph: correction modes)
    vocabulary = "flat"                  # constrained decoding: flat (all visible names) | typed (per function)
    refuse_cycles = true                 # an action returning the memory to an earlier state is feedback
    exclude_refused = true               # a refused action cannot be decoded again in the same memory state
    exclude_inapplicable = true          # nor an action never accepted there (go_to the current room ...)
    done_hint = false                    # feedback on an action already in effect suggests done()
    reason_first = false                 # the decision's reply gives its reason before the action
    reason_max_length = 300              # cap of the reason in characters (default: 300 in process, none at servers)
    plan_max_tokens = 1536               # static baselines: the reply budget of the whole-plan call
    fd_time_limit_s = 60                 # llm+p: Fast Downward's overall time and memory limits
    fd_memory_limit_mb = 4096
    pddl_grammar = true                  # llm+p: decode the problem under the domain's and the scene's grammar (false: free text)
    pddl_declare = true                  # llm+p: rewrite (:objects ...) from the scene names the problem uses
    react_max_steps = 50                 # react: LM calls per episode (thoughts, refused commands included)
    sayplan_search_steps = 50            # sayplan, sayplan-lite: expand/contract commands
    sayplan_replans = 4                  # sayplan, sayplan-lite: plan resubmissions after a failed check
    sgrwr_mode = "static"                # sg-rwr: static (a whole plan, run as written) | step (one action at a time)
    sgrwr_max_rounds = 15                # sg-rwr: Reasoner replies per episode
    sgrwr_debug_attempts = 2             # sg-rwr: re-prompts after failed or refused code before it is given up
    sgrwr_retriever_turns = 4            # sg-rwr: Retriever replies per query
    sgrwr_code_seconds = 5.0             # sg-rwr: CPU seconds of one sandboxed code run
    sgrwr_code_memory_mb = 512           # sg-rwr: memory of one sandboxed code run
    sgrwr_output_bytes = 4000            # sg-rwr: bytes of a run's output shown to the LM
    sgrwr_reply_tokens = 512             # sg-rwr: reply budget of one LM call
    sgrwr_require_strong = true          # sg-rwr: refuse to run LM code when only weak isolation is available
    sgrwr_plan_guard = false             # sg-rwr (ours, not the paper's): send back a plan or action naming a node no answer contained
    sgrwr_debug_hints = false            # sg-rwr (ours): explain known code mistakes (iterators, holders as edges) when code is sent back
    sgrwr_code_grammar = false           # sg-rwr (ours): decode the Retriever's replies as a code block until its code has run
    sgrwr_repeat_answers = false         # sg-rwr (ours): a query repeated on unchanged data gets its earlier answer, no Retriever call
    sgrwr_reasoner_grammar = false       # sg-rwr (ours): decode each Reasoner reply as one message of one form
    concurrency = 1
    cache = false                        # true: record/replay LM replies in OUT/lm_cache.jsonl;
                                         # a path: use that cache file (replay another run's replies)
    out = "runs/office-qwen1.5b"         # output directory
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from lookplangraph.planners.config import CORRECTION_MODES, SGRWR_MODES, PlannerConfig

#: ``augmentation`` values (:mod:`lookplangraph.agent.perception`, :class:`vlm.gam.GraphAugmentation`)
AUGMENTATION_MODES = ("ground_truth", "parser", "vlm")

DEFAULT_LM = "llamacpp:qwen2.5-coder-1.5b"


class SettingsError(ValueError):
    """A config file or flag combination that cannot be used; the message names the problem."""


@dataclass
class RunSettings:
    planner: str = "lookplangraph"
    lm: str = DEFAULT_LM
    lm_options: dict = field(default_factory=dict)
    split: str | None = None
    tasks: list[str] | None = None
    limit: int | None = None
    selection: str | None = None
    dynamic: bool = False
    seed: int = 0
    env: str = "graph"
    augmentation: str = "ground_truth"
    vlm: str | None = None
    vlm_options: dict = field(default_factory=dict)
    parser_lm: str | None = None
    max_actions: int = 30
    max_unresolved: int = 3
    graph_style: str = "text"
    priors: bool = True
    correction: str = "rules"
    vocabulary: str = "flat"
    refuse_cycles: bool = True
    exclude_refused: bool = True
    exclude_inapplicable: bool = True
    done_hint: bool = False
    reason_first: bool = False
    reason_max_length: int | None = None
    plan_max_tokens: int = 1536
    fd_time_limit_s: int = 60
    fd_memory_limit_mb: int = 4096
    pddl_grammar: bool = True
    pddl_declare: bool = True
    react_max_steps: int = 50
    sayplan_search_steps: int = 50
    sayplan_replans: int = 4
    sgrwr_mode: str = "static"
    sgrwr_max_rounds: int = 15
    sgrwr_debug_attempts: int = 2
    sgrwr_retriever_turns: int = 4
    sgrwr_code_seconds: float = 5.0
    sgrwr_code_memory_mb: int = 512
    sgrwr_output_bytes: int = 4000
    sgrwr_reply_tokens: int = 512
    sgrwr_require_strong: bool = True
    sgrwr_plan_guard: bool = False
    sgrwr_debug_hints: bool = False
    sgrwr_code_grammar: bool = False
    sgrwr_repeat_answers: bool = False
    sgrwr_reasoner_grammar: bool = False
    concurrency: int = 1
    cache: bool | str = False
    out: str | None = None

    def planner_config(self) -> PlannerConfig:
        """The planner's fields of these settings (every :class:`PlannerConfig` field is one here)."""
        return PlannerConfig(**{f.name: getattr(self, f.name) for f in fields(PlannerConfig)})

    def as_dict(self) -> dict:
        return asdict(self)


def load_settings(path: str | None, overrides: dict) -> RunSettings:
    """Settings from ``path`` (TOML) with ``overrides`` (flags; ``None`` values are ignored)."""
    data: dict = {}
    if path:
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise SettingsError(f"{path}: no such config file") from None
        except tomllib.TOMLDecodeError as exc:
            raise SettingsError(f"{path}: not valid TOML ({exc})") from None
    known = {f.name for f in fields(RunSettings)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SettingsError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        s = RunSettings(**data)
    except TypeError as exc:
        raise SettingsError(str(exc)) from None
    if isinstance(s.correction, bool):
        raise SettingsError(f"correction is one of rules, feedback, none (not {str(s.correction).lower()}; "
                            "correction = false used to mean feedback, the paper's ablation is none)")
    if s.correction not in CORRECTION_MODES:
        raise SettingsError(f"correction must be one of {', '.join(CORRECTION_MODES)}, not {s.correction!r}")
    from lookplangraph.planners import PLANNER_NAMES

    if s.planner not in PLANNER_NAMES:
        raise SettingsError(f"planner must be one of {', '.join(PLANNER_NAMES)}, not {s.planner!r}")
    if s.augmentation not in AUGMENTATION_MODES:
        raise SettingsError(f"augmentation must be one of {', '.join(AUGMENTATION_MODES)}, not {s.augmentation!r}")
    if s.augmentation == "vlm" and not s.vlm:
        raise SettingsError("augmentation vlm needs a describer: --vlm SPEC (a model that sees images, e.g. "
                            "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 or openai:gpt-4o)")
    if s.vocabulary not in ("typed", "flat"):
        raise SettingsError(f"vocabulary must be typed or flat, not {s.vocabulary!r}")
    if s.sgrwr_mode not in SGRWR_MODES:
        raise SettingsError(f"sgrwr_mode must be one of {', '.join(SGRWR_MODES)}, not {s.sgrwr_mode!r}")
    if s.graph_style not in ("text", "json", "full"):
        raise SettingsError(f"graph_style must be text, json or full, not {s.graph_style!r}")
    return s
