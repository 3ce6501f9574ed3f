"""SG-RwR's own records: a step that knows its agent, reply form, code and sandbox run
(:class:`SGRwRStep`), and a result that counts sandbox runs and the two agents' calls
(:class:`SGRwRResult`). They extend the episode contract of :mod:`lookplangraph.planners.episode`."""

from __future__ import annotations

from dataclasses import dataclass, field

from lookplangraph.planners.episode import EpisodeResult, StepRecord


@dataclass
class SGRwRStep(StepRecord):
    """One call of one of SG-RwR's agents: which agent made it (``reasoner``/``retriever``), the
    form of its reply (``query``, ``code``, ``action``, ``summary``, ``malformed`` ...), the code it
    wrote and what the sandbox made of it (``ok``, ``kind``, ``isolation``, ``seconds``, ``error``)."""

    agent: str | None = None
    form: str | None = None
    code: str | None = None
    sandbox: dict | None = None


@dataclass
class SGRwRResult(EpisodeResult):
    """An SG-RwR episode: sandbox runs, those that failed (error, timeout, limit, policy), their
    seconds and the isolation levels they ran under; LM calls per agent; code or plans sent back
    by the plan guard without running; queries answered from an earlier answer."""

    sandbox_runs: int = 0
    sandbox_failures: int = 0
    sandbox_seconds: float = 0.0
    sandbox_isolation: str | None = None
    agent_calls: dict = field(default_factory=dict)
    guard_refusals: int = 0
    repeated_queries: int = 0
