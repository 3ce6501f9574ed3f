"""Planner settings, written once: :class:`PlannerConfig` (LookPlanGraph's loop limits and ablation
switches, which every planner's episode shares) with one typed section per baseline that has
options of its own (:class:`LLMPlusPConfig`, :class:`ReActConfig`, :class:`SayPlanConfig`,
:class:`SGRwRConfig`).

Each field carries its help text (and its choices) as metadata: the run settings
(:mod:`lookplangraph.evaluation.settings`), their documentation (:func:`settings_reference`) and the
command-line flags of ``run``/``eval`` are derived from these classes. In a TOML config the loop's
fields are top-level keys and each section is a table named after it::

    correction = "rules"
    max_actions = 30

    [sg_rwr]
    mode = "step"
    max_rounds = 20

:meth:`PlannerConfig.from_dict` also reads the flat keys of configs written before the sections
(``sgrwr_max_rounds = 20``, ``react_max_steps = 50`` ...) and says which they were
(:data:`LEGACY_KEYS` maps each to its section and field).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any, Iterable

from lookplangraph.agent.decoding import ANSWER_FORMATS, answer_format  # noqa: F401 - the settings' reply formats
from lookplangraph.agent.prompts import PROMPT_LAYOUTS, SYSTEM_PROMPTS, system_prompt
from lookplangraph.lm.base import AdapterError
from lookplangraph.lm.embedded import registered_settings

#: The view's recall of unseen priors (:mod:`lookplangraph.agent.recall`): the agent's room only
#: (the paper's), or also those of the classes the instruction names, from anywhere; with
#: ``named-assets`` also the assets of the classes it names, in other rooms.
RECALL_MODES = ("here", "named", "named-assets")


#: the most actions one LookPlanGraph answer may hold (``PlannerConfig.actions_per_answer``)
MAX_ACTIONS_PER_ANSWER = 3

#: The loop's rules beyond the paper's Algorithm 1 (``docs/concepts/loop.md#two-rules``): the
#: paper's tables (``configs/table*.toml``) run LookPlanGraph with each of them off.
BEYOND_THE_PAPER = ("grounding_check", "place_descriptors", "refusal_situation", "held_slot", "search_hint",
                    "discover_holders", "close_opened", "close_at_once", "remind_open", "remind_switch")

#: ``PlannerConfig.correction`` values (:mod:`lookplangraph.planners.lookplangraph`)
CORRECTION_MODES = ("rules", "feedback", "none")
#: ``SGRwRConfig.mode`` values (:mod:`lookplangraph.planners.sgrwr`)
SGRWR_MODES = ("static", "step")


def setting(default: Any, help: str, *, choices: tuple | None = None) -> Any:
    """A config field with its help text and, where it has them, its allowed values."""
    return field(default=default, metadata={"help": help, "choices": choices})


def check_choices(obj: Any, prefix: str = "") -> None:
    """``ValueError`` naming the first field of ``obj`` whose value is not one of its choices."""
    for f in fields(obj):
        choices = f.metadata.get("choices")
        value = getattr(obj, f.name)
        if choices and value not in choices:
            raise ValueError(f"{prefix}{f.name} must be one of {', '.join(map(str, choices))}, not {value!r}")


@dataclass
class LLMPlusPConfig:
    """LLM+P (:mod:`lookplangraph.planners.llm_plus_p`)."""

    fd_time_limit_s: int = setting(60, "Fast Downward's overall time limit in seconds")
    fd_memory_limit_mb: int = setting(4096, "Fast Downward's memory limit in MB")
    grammar: bool = setting(True, "decode the problem under a grammar of the domain's syntax, predicates and the "
                                  "scene's names where the backend can enforce one (false: free text)")
    declare: bool = setting(True, "rewrite the problem's (:objects ...) from the scene names it uses")

    def __post_init__(self):
        check_choices(self, "llm_plus_p.")


@dataclass
class ReActConfig:
    """ReAct (:mod:`lookplangraph.planners.react`); the paper names no values."""

    max_steps: int = setting(50, "LM calls per episode (thoughts and refused commands included)")

    def __post_init__(self):
        check_choices(self, "react.")


@dataclass
class SayPlanConfig:
    """SayPlan and SayPlan Lite (:mod:`lookplangraph.planners.sayplan`); the paper names no values."""

    search_steps: int = setting(50, "expand/contract commands per episode")
    replans: int = setting(4, "plan resubmissions after a failed check")

    def __post_init__(self):
        check_choices(self, "sayplan.")


@dataclass
class SGRwRConfig:
    """SG-RwR (:mod:`lookplangraph.planners.sgrwr`); the paper leaves these open. Options marked
    (ours) are not the paper's and are off by default."""

    mode: str = setting("static", "static (a whole plan, run as written) or step (one action at a time)",
                        choices=SGRWR_MODES)
    max_rounds: int = setting(15, "Reasoner replies per episode")
    debug_attempts: int = setting(2, "re-prompts after failed or refused code before it is given up")
    retriever_turns: int = setting(4, "Retriever replies per query")
    code_seconds: float = setting(5.0, "CPU seconds of one sandboxed code run")
    code_memory_mb: int = setting(512, "memory of one sandboxed code run in MB")
    output_bytes: int = setting(4000, "bytes of a code run's output shown to the LM")
    reply_tokens: int = setting(512, "reply budget of one LM call")
    require_strong: bool = setting(True, "refuse to run LM code when only weak isolation is available")
    plan_guard: bool = setting(False, "(ours) send back a plan or action naming a node no answer contained")
    debug_hints: bool = setting(False, "(ours) explain known code mistakes (iterators, holders as edges) when code "
                                       "is sent back")
    code_grammar: bool = setting(False, "(ours) decode the Retriever's replies as a code block until its code has run")
    repeat_answers: bool = setting(False, "(ours) a query repeated on unchanged data gets its earlier answer, no "
                                          "Retriever call")
    reasoner_grammar: bool = setting(False, "(ours) decode each Reasoner reply as one message of one form")

    def __post_init__(self):
        check_choices(self, "sg_rwr.")


#: the sections of :class:`PlannerConfig`: TOML table name -> class
SECTIONS: dict[str, type] = {"llm_plus_p": LLMPlusPConfig, "react": ReActConfig, "sayplan": SayPlanConfig,
                             "sg_rwr": SGRwRConfig}

#: flat keys of configs written before the sections -> (section, field)
LEGACY_KEYS: dict[str, tuple[str, str]] = {
    "fd_time_limit_s": ("llm_plus_p", "fd_time_limit_s"), "fd_memory_limit_mb": ("llm_plus_p", "fd_memory_limit_mb"),
    "pddl_grammar": ("llm_plus_p", "grammar"), "pddl_declare": ("llm_plus_p", "declare"),
    "react_max_steps": ("react", "max_steps"),
    "sayplan_search_steps": ("sayplan", "search_steps"), "sayplan_replans": ("sayplan", "replans"),
    **{f"sgrwr_{f.name}": ("sg_rwr", f.name) for f in fields(SGRwRConfig)},
}


@dataclass
class PlannerConfig:
    """LookPlanGraph's loop limits and ablation switches, shared by every planner's episode, and
    one section per baseline with options of its own (module doc)."""

    max_actions: int = setting(30, "action limit of an episode")
    max_unresolved: int = setting(3, "unresolved answers in a row that end an episode")
    actions_per_answer: int | None = setting(None, "LookPlanGraph, conversation layout: the most actions one "
                                                   f"answer may hold (1 to {MAX_ACTIONS_PER_ANSWER}; default: the "
                                                   "LM adapter's own, else 1); they are carried out in order until "
                                                   "one is refused, corrected, observes something or ends the task, "
                                                   "and the rest are reported as not carried out")
    graph_style: str = setting("text", "memory-graph serialization (ablations)", choices=("text", "json", "full"))
    priors: bool = setting(True, "the memory graph starts with the map's objects as unseen priors (false: the "
                                 "No Priors ablation)")
    correction: str = setting("rules", "rules: feedback and rule-based correction; feedback: feedback only; none: "
                                       "the paper's No-Correction ablation", choices=CORRECTION_MODES)
    vocabulary: str = setting("flat", "constrained decoding: every visible name (flat) or names per function (typed)",
                              choices=("flat", "typed"))
    refuse_cycles: bool = setting(True, "an action that brings the memory back to an earlier state is feedback")
    exclude_refused: bool = setting(True, "a refused action cannot be decoded again in the same memory state")
    exclude_inapplicable: bool = setting(True, "nor can an action that is never accepted there (go_to the current "
                                               "room ...)")
    grounding_check: bool = setting(True, "an action on a node of a class the instruction picks out by a property, "
                                          "room or owner (\"the red stapler\", \"the kitchen fridge\", \"Tom's "
                                          "desk\") that the node lacks, while another of the class has it, is "
                                          "feedback, and stays excluded (lookplangraph.agent.grounding; not with "
                                          "correction none)")
    place_descriptors: bool = setting(True, "the grounding check also refuses an object of a class the instruction "
                                             "names by where it stands (\"the mug on the table\", \"the gloves "
                                             "from the kit\") that stands elsewhere while one there is remembered")
    refusal_situation: bool = setting(True, "feedback on an action the SGS refuses adds where the agent is, what "
                                             "it holds and where in the room that can go (lookplangraph.agent."
                                             "situation)")
    held_slot: bool = setting(True, "correction rules: put_on/put_inside naming a room, an asset or the destination "
                                     "in the object slot, with a destination, puts the held object there "
                                     "(lookplangraph.agent.situation.held_put)")
    search_hint: bool = setting(True, "the view names each object discover_objects did not find where it was "
                                      "remembered and the places likeliest to hold it now (lookplangraph.agent."
                                      "search)")
    discover_holders: bool = setting(True, "discover_objects of an object that nothing can be put on or in cannot "
                                           "be decoded (with exclude_inapplicable)")
    close_opened: bool = setting(True, "correction rules: done() first closes the containers that a correction "
                                       "opened and nothing closed since (what the LM opened itself stays open)")
    close_at_once: bool = setting(True, "correction rules: a container that a correction opened for an action's "
                                         "put_inside, or for a pick_up of what is in it, is closed again right "
                                         "after that step, in the same action")
    remind_open: bool = setting(False, "a done() while a container the LM opened itself is still open is sent back "
                                       "once, naming it (close it unless the instruction wants it open); not with "
                                       "correction none")
    remind_switch: bool = setting(True, "a done() while a device the instruction asks on or off (\"start the "
                                         "dishwasher\", \"leave the night light on\") is remembered the other way is "
                                         "sent back once, naming it, and refused until the memory changes "
                                         "(lookplangraph.agent.switches); not with correction none")
    done_hint: bool = setting(False, "feedback on an action already in effect suggests done()")
    explain: bool = setting(False, "with answers without a reason (reason_max_length 0), ask the LM for each "
                                   "step's reason after the decision, for the trace only (the prompts stay "
                                   "the same; lookplangraph.agent.decide.explain)")
    reason_first: bool = setting(False, "the decision's reply gives its reason before the action")
    reason_max_length: int | None = setting(None, "cap of the reason in characters (default: 300 in process, none "
                                                  "at servers; 0: no reason, the action alone)")
    system_prompt: str = setting("auto", "LookPlanGraph's system message: auto (the one the LM's LoRA adapter was "
                                         "trained with, else full), full (role, action contracts, answer format, "
                                         "examples) or compact (two sentences, for a model fine-tuned with distill "
                                         "train --system-prompt compact); a prompt other than an adapter's own only "
                                         "when set explicitly", choices=("auto", "full", "compact"))
    prompt_layout: str = setting("auto", "LookPlanGraph's user message: auto (the LM adapter's own, else "
                                          "scene-history), scene-history (instruction, scene, steps), history-scene "
                                          "(instruction, places, steps, then the scene: the KV cache serves the steps), "
                                          "journal (one append-only user message) or conversation (the episode as "
                                          "one chat: each answer an assistant turn, what happened the next user turn)",
                                 choices=("auto", *PROMPT_LAYOUTS))
    recall: str = setting("auto", "LookPlanGraph's view of unseen priors: auto (the LM adapter's own, else here), "
                                  "here (the paper's: only those in the agent's room), named (also those of the "
                                  "classes the instruction names, in other rooms) or named-assets (named, and the "
                                  "assets of the classes the instruction names, in other rooms)",
                          choices=("auto", *RECALL_MODES))
    demonstrations: int = setting(0, "LookPlanGraph: the k train-pool expert trajectories most like the task "
                                     "(BM25), written before it in the system message (0: none)")
    demonstration_file: str | None = setting(None, "demonstrations to retrieve from (default: the shipped "
                                                   "demonstrations_v1.jsonl.gz; build others with distill data)")
    demonstration_chars: int = setting(2400, "the demonstrations' text is cut to this many characters")
    plan_max_tokens: int = setting(1536, "static baselines and SayPlan: the reply budget of a whole-plan call")
    llm_plus_p: LLMPlusPConfig = field(default_factory=LLMPlusPConfig)
    react: ReActConfig = field(default_factory=ReActConfig)
    sayplan: SayPlanConfig = field(default_factory=SayPlanConfig)
    sg_rwr: SGRwRConfig = field(default_factory=SGRwRConfig)

    def __post_init__(self):
        check_choices(self)
        if self.reason_max_length is not None and self.reason_max_length < 0:
            raise ValueError(f"reason_max_length must be 0 (no reason) or more, not {self.reason_max_length}")
        if self.actions_per_answer is not None and not 1 <= self.actions_per_answer <= MAX_ACTIONS_PER_ANSWER:
            raise ValueError(f"actions_per_answer must be 1 to {MAX_ACTIONS_PER_ANSWER}, not {self.actions_per_answer}")
        if self.demonstrations < 0 or self.demonstration_chars < 200:
            raise ValueError(f"demonstrations must be >= 0 and demonstration_chars >= 200, not "
                             f"{self.demonstrations} and {self.demonstration_chars}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def settled(self, adapter=None) -> "tuple[PlannerConfig, list[str]]":
        """This config with every ``auto`` prompt setting replaced by what the LM's LoRA
        ``adapter`` (a :class:`lookplangraph.lm.lora.AdapterInfo`, None for a model without one)
        was trained with: its system prompt, its prompt layout, its recall, and its answer format where
        ``reason_max_length`` is not set (``action``: 0, no reason), and its actions per answer where
        ``actions_per_answer`` is not set (else 1). Where the adapter registry
        chooses settings for the adapter (its entry's ``run``, picked on the dev split:
        :func:`lookplangraph.lm.embedded.registered_settings`), those fill the unset ones first.
        Returns the settled copy and one note per explicit setting that differs from the adapter's
        own (kept: a prompt other than the adapter's is a choice, recorded with the results). Raises
        :class:`~lookplangraph.lm.AdapterError` when the adapter's recorded system prompt is not
        this version's text of that name."""
        meta = adapter.metadata if adapter is not None else {}
        chosen = registered_settings(adapter.path) if adapter is not None else {}
        own = {"system_prompt": meta.get("lookplangraph.system_prompt_name"),
               "prompt_layout": meta.get("lookplangraph.prompt_layout"),
               "recall": meta.get("lookplangraph.recall"),
               "answer_format": meta.get("lookplangraph.answer_format"),
               "actions_per_answer": meta.get("lookplangraph.actions_per_answer")}
        name = own["system_prompt"]
        if name is not None:
            recorded = meta.get("lookplangraph.system_prompt")
            if name not in SYSTEM_PROMPTS or (recorded is not None and recorded.strip() != system_prompt(name).strip()):
                if self.system_prompt == "auto":
                    raise AdapterError(
                        f"{adapter.path} was trained with a system prompt ({name!r}) that this version does not have "
                        f"as it was; set system_prompt (--system-prompt) to {' or '.join(SYSTEM_PROMPTS)} to run it anyway")
                own["system_prompt"] = None
        notes = [f"{adapter.path.name} was trained with {key} = {own[key]}; running it with {getattr(self, key)} as set"
                 for key in ("system_prompt", "prompt_layout", "recall")
                 if own[key] and getattr(self, key) not in ("auto", own[key])]
        fallback = {"system_prompt": "full", "prompt_layout": "scene-history", "recall": "here"}
        changes: dict[str, Any] = {key: chosen.get(key) or own[key] or fallback[key] if getattr(self, key) == "auto"
                                   else getattr(self, key) for key in fallback}
        registry_reason = self.reason_max_length is None and "reason_max_length" in chosen
        if registry_reason:
            changes["reason_max_length"] = chosen["reason_max_length"]
        if self.actions_per_answer is None:
            changes["actions_per_answer"] = int(own["actions_per_answer"] or 1)
        elif own["actions_per_answer"] and int(own["actions_per_answer"]) != self.actions_per_answer:
            notes.append(f"{adapter.path.name} was trained with answers of up to {own['actions_per_answer']} actions; "
                         f"running it with {self.actions_per_answer} as set")
        fmt = own["answer_format"]
        if fmt:
            if self.reason_max_length is None and fmt == "action":
                changes["reason_max_length"] = 0
            have = answer_format(self.reason_first, changes.get("reason_max_length", self.reason_max_length))
            if have != fmt and not registry_reason:
                notes.append(f"{adapter.path.name} was trained with answers {fmt}; running it with {have} as set")
        return replace(self, **changes), notes

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "config") -> "PlannerConfig":
        """A config from top-level keys and section tables (dicts); the flat keys of older
        configs (:data:`LEGACY_KEYS`) are read into their sections. Raises ``ValueError`` naming
        an unknown key (and the known ones) or a bad value."""
        config, _ = cls.read(data, where=where)
        return config

    @classmethod
    def read(cls, data: dict[str, Any], *, where: str = "config",
             others: Iterable[str] = ()) -> "tuple[PlannerConfig, list[str]]":
        """:meth:`from_dict`, and the legacy flat keys it met. ``others``: the keys that may stand
        beside the planner's where ``data`` came from (named when a key is unknown)."""
        top = {f.name for f in fields(cls)} - set(SECTIONS)
        unknown = sorted(set(data) - top - set(SECTIONS) - set(LEGACY_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                             f"{', '.join([*others, *(f.name for f in fields(cls) if f.name in top)])} and the "
                             f"tables {', '.join(f'[{s}]' for s in SECTIONS)}")
        flat: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        legacy = []
        for key, value in data.items():
            if key in SECTIONS:
                if isinstance(value, SECTIONS[key]):
                    value = asdict(value)
                if not isinstance(value, dict):
                    raise ValueError(f"{where}: {key} is a table of settings ([{key}]), not {value!r}")
                known = {f.name for f in fields(SECTIONS[key])}
                unknown = sorted(set(value) - known)
                if unknown:
                    raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} in [{key}]; known: "
                                     f"{', '.join(sorted(known))}")
                sections[key].update(value)
            elif key in LEGACY_KEYS:
                section, name = LEGACY_KEYS[key]
                sections[section].setdefault(name, value)
                legacy.append(key)
            else:
                flat[key] = value
        try:
            built = {name: SECTIONS[name](**values) for name, values in sections.items()}
            return cls(**flat, **built), legacy
        except TypeError as exc:
            raise ValueError(f"{where}: {exc}") from None


def legacy_note(keys: list[str], where: str) -> str:
    """One line that says how to write ``keys`` (old flat keys) today."""
    moved = ", ".join(f"{k} -> [{LEGACY_KEYS[k][0]}] {LEGACY_KEYS[k][1]}" for k in keys)
    return f"{where}: old flat key(s) read into their tables; write instead: {moved}"


def _default(f) -> Any:
    if f.default is not MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


def reference_lines(cls: type, skip: Iterable[str] = ()) -> list[str]:
    """One TOML line per field of the config class ``cls`` (but those in ``skip``): the key, its
    default and its help."""
    out = []
    for f in fields(cls):
        if f.name in skip:
            continue
        value = _default(f)
        shown = "# (none)" if value is None else _toml(value)
        out.append(f"{f.name} = {shown}".ljust(36) + f"  # {f.metadata.get('help', '')}")
    return out


def settings_reference() -> str:
    """Every planner setting as TOML lines with its default and help (generated from the classes)."""
    text = reference_lines(PlannerConfig, skip=SECTIONS)
    for name, cls in SECTIONS.items():
        text += ["", f"[{name}]  # {(cls.__doc__ or '').splitlines()[0]}"] + reference_lines(cls)
    return "\n".join(text)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
