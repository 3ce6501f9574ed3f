"""Planner settings: :class:`PlannerConfig`, the loop limits and ablation switches of
LookPlanGraph (:mod:`lookplangraph.planners.lookplangraph`) and the options of the baselines
(:mod:`lookplangraph.planners`)."""

from __future__ import annotations

from dataclasses import dataclass


#: ``PlannerConfig.correction`` values (module doc).
CORRECTION_MODES = ("rules", "feedback", "none")
#: ``PlannerConfig.sgrwr_mode`` values (:mod:`lookplangraph.planners.sgrwr`)
SGRWR_MODES = ("static", "step")


@dataclass
class PlannerConfig:
    """Loop limits and ablation switches (module doc)."""

    max_actions: int = 30
    max_unresolved: int = 3
    graph_style: str = "text"
    priors: bool = True
    correction: str = "rules"  # rules | feedback | none (module doc)
    vocabulary: str = "flat"  # flat: one list of visible names; typed: names per function
    refuse_cycles: bool = True  # an action that returns the memory to an earlier state is feedback
    exclude_refused: bool = True  # a refused action cannot be decoded again in the same memory state
    exclude_inapplicable: bool = True  # nor can an action that is never accepted there
    done_hint: bool = False  # feedback on an action already in effect suggests done() (measured: worse)
    # the reply format of a decision (lookplangraph.agent.decide): reason before the action, and
    # the reason's cap in characters (None: the backend kind's default, 300 in process)
    reason_first: bool = False
    reason_max_length: int | None = None
    # baselines (lookplangraph.planners): the reply budget of a whole-plan call, Fast Downward's limits
    plan_max_tokens: int = 1536
    fd_time_limit_s: int = 60
    fd_memory_limit_mb: int = 4096
    # LLM+P: decode the problem under a grammar of the domain's syntax, predicates and the scene's
    # names (lookplangraph.planners.pddl.grammar) where the backend can enforce one
    pddl_grammar: bool = True
    # LLM+P: rewrite the problem's (:objects ...) from the scene names it uses (complete_declarations)
    pddl_declare: bool = True
    # dynamic baselines (the paper names no values): ReAct's LM calls per episode (thoughts and
    # refused commands included), SayPlan's search commands and plan resubmissions after the first
    react_max_steps: int = 50
    sayplan_search_steps: int = 50
    sayplan_replans: int = 4
    # SG-RwR (lookplangraph.planners.sgrwr; the paper leaves these open): static (a whole plan, run
    # as written) or step (one action at a time); Reasoner replies per episode; re-prompts after a
    # failed or refused code run before the code is given up; Retriever replies per query; limits of
    # one sandboxed code run (CPU seconds, memory, bytes of output kept); the reply budget of one
    # LM call; refuse to run LM code when the sandbox offers only weak isolation
    sgrwr_mode: str = "static"
    sgrwr_max_rounds: int = 15
    sgrwr_debug_attempts: int = 2
    sgrwr_retriever_turns: int = 4
    sgrwr_code_seconds: float = 5.0
    sgrwr_code_memory_mb: int = 512
    sgrwr_output_bytes: int = 4000
    sgrwr_reply_tokens: int = 512
    sgrwr_require_strong: bool = True
    sgrwr_plan_guard: bool = False  # (ours) send back a plan/action naming a node no answer contained
    sgrwr_debug_hints: bool = False  # (ours) explain known code mistakes when code is sent back (planners/sgrwr/hints.py)
    sgrwr_code_grammar: bool = False  # (ours) the Retriever's replies are a code block until its code has run
    sgrwr_repeat_answers: bool = False  # (ours) a repeated query on unchanged data gets its earlier answer back
    sgrwr_reasoner_grammar: bool = False  # (ours) each Reasoner reply is decoded as one message of one form

    def __post_init__(self):
        if self.correction not in CORRECTION_MODES:
            raise ValueError(f"correction must be one of {', '.join(CORRECTION_MODES)}, not {self.correction!r}")
        if self.sgrwr_mode not in SGRWR_MODES:
            raise ValueError(f"sgrwr_mode must be one of {', '.join(SGRWR_MODES)}, not {self.sgrwr_mode!r}")
