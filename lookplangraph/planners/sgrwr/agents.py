"""SG-RwR's two agents on one LM, each with its own message history, and the code they run.

* :class:`Reasoner`: its history is the system prompt (:func:`.prompts.reasoner_system`), the
  task, then its own replies and what came back to it: the Retriever's *summaries* (never the
  Retriever's code or its outputs), its own code's output or error, messages about malformed
  replies and, in step mode, the result of each action.
* :class:`Retriever`: a **fresh** history per query: its system prompt, the query, then its own
  attempts until it replies with a summary and :data:`RETRIEVED` (the paper's context filtering).

Self-debugging: a failed run or code the assume-guard (:mod:`.guard`) sends back is answered
with the error; after ``sg_rwr.debug_attempts + 1`` failed attempts in a row the query (or the
Reasoner's code) is given up. A Retriever gets at most ``sg_rwr.retriever_turns`` replies per
query; a summary before any successful run is refused. Every LM call is one
:class:`~lookplangraph.planners.sgrwr.records.SGRwRStep`; a Reasoner record is emitted once the
answer to it is known, so a query's Retriever calls come before it (``call`` numbers the calls in
the order made). Docs: ``docs/guides/sg-rwr.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from lookplangraph.lm import Completion
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeLog
from lookplangraph.planners.sgrwr.records import SGRwRStep
from lookplangraph.planners.sgrwr.graphdata import ALLOWED_IMPORTS, prelude
from lookplangraph.planners.sgrwr.guard import assumption, invented_plan
from lookplangraph.planners.sgrwr.hints import NO_CODE, NO_CODE_YET, debug_hint
from lookplangraph.planners.sgrwr.messages import RETRIEVED, Reply, read_reasoner, read_retriever
from lookplangraph.planners.sgrwr.prompts import reasoner_system, retriever_system, task_message
from lookplangraph.sandbox import Sandbox, SandboxLimits, SandboxResult


#: Where a reply is cut: the openings of the messages the host sends back (a small model that
#: goes on to write "Answer from the retriever: ..." or "Output: ..." imagines what it should ask
#: for, and spends tokens on it), and, for the Reasoner, the start of a second message (its
#: replies hold one message of one form; a small model otherwise repeats the whole message until
#: the reply budget runs out: ``docs/guides/sg-rwr.md``, *Reply cut*).
STOPS = {"reasoner": ("Answer from the retriever", "Output of your code", "\nNo answer:", "\n[Explanation]"),
         "retriever": ("\nOutput:", "Your code failed")}

#: GBNF of a Retriever reply that must be code (``sg_rwr.code_grammar``): one ```python block of
#: lines without backticks. Enforced where the backend takes a grammar (llama.cpp in process and
#: llama.cpp servers); elsewhere the reply stays free.
CODE_GRAMMAR = r'''root ::= "```python\n" line+ "```"
line ::= [^`\n]* "\n"'''

#: GBNF of one Reasoner message per mode (``sg_rwr.reasoner_grammar``): ``[Explanation]`` with one to
#: three lines of text, then one form, each ending where its section ends: a one-line ``[Query]``,
#: a ``[Code]`` section of one ```python block, in step mode one ``[Action]`` call, in static mode
#: the solution (``[Summary]`` text, a one-line ``[Actions]`` list, ``TASK TERMINATE``). After the
#: form only the end of the reply is allowed, so a message cannot run on into a second one (the
#: 1.5B model's office replies repeated a whole message without a new ``[Explanation]``, past the
#: ``STOPS``, until the reply budget ran out). Lengths are bounded too (a query of 300 characters,
#: 40 code lines of 160): unbounded, one query line grew into the same sub-question over and over
#: until the budget ran out. The rules are shared; a mode's root leaves the other mode's form unused.
_REASONER_RULES = r'''text ::= line (line line?)?
line ::= [^\n\[`] [^\n]{0,200} "\n"
query ::= "[Query]\n" [^\n]{1,300}
code ::= "[Code]\n```python\n" codeline{1,40} "```"
codeline ::= [^`\n]{0,160} "\n"
action ::= "[Action]\n" [a-z_]{1,30} "(" [^()\n]{0,80} ")"
summary ::= "[Summary]\n" text "[Actions]\n[" [^\]\n]{0,1200} "]\nTASK TERMINATE"'''
REASONER_GRAMMAR = {
    "static": 'root ::= "[Explanation]\\n" text (query | code) | summary\n' + _REASONER_RULES,
    "step": 'root ::= "[Explanation]\\n" text (query | code | action)\n' + _REASONER_RULES,
}


@lru_cache(maxsize=8)
def sandbox_for(cpu_seconds: float, memory_mb: int, output_bytes: int, require_strong: bool) -> Sandbox:
    """One :class:`~lookplangraph.sandbox.Sandbox` per set of limits (its constructor starts a
    probe process; raises :class:`~lookplangraph.sandbox.SandboxUnavailable` when
    ``require_strong`` and only weak isolation is available). The wall-clock limit is twice the
    CPU limit plus 5 s (process start and the prelude included)."""
    limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=2 * cpu_seconds + 5, memory_mb=memory_mb,
                           output_bytes=output_bytes)
    return Sandbox(limits, allowed_imports=ALLOWED_IMPORTS, require_strong=require_strong)


def config_sandbox(cfg: PlannerConfig) -> Sandbox:
    """The sandbox of ``cfg``'s ``sg_rwr.code_seconds``, ``sg_rwr.code_memory_mb``,
    ``sg_rwr.output_bytes`` and ``sg_rwr.require_strong`` (:func:`sandbox_for`)."""
    return sandbox_for(float(cfg.sg_rwr.code_seconds), int(cfg.sg_rwr.code_memory_mb), int(cfg.sg_rwr.output_bytes),
                       bool(cfg.sg_rwr.require_strong))


@dataclass
class Session:
    """What one episode's agents share: the LM, the limits, the sandbox, the scene data their code
    runs on (replaced after each action in step mode), the trace and the counts."""

    lm: object
    cfg: PlannerConfig
    sandbox: Sandbox
    data: dict
    log: EpisodeLog = field(default_factory=EpisodeLog)
    runs: int = 0
    failures: int = 0
    sandbox_seconds: float = 0.0
    isolation: list[str] = field(default_factory=list)  # levels the runs achieved ("none": refused before a process)
    guard_refusals: int = 0
    repeated_queries: int = 0  # queries answered from an earlier answer (``sg_rwr.repeat_answers``)
    answers: dict = field(default_factory=dict)  # query key -> (answer text, answered), on the current data
    calling: str | None = None  # the agent of the call in progress (or the last one)

    def update(self, data: dict) -> None:
        """Replace the scene data the agents' code runs on (step mode, after an action); the
        answers given on the old data are forgotten."""
        self.data = data
        self.answers.clear()

    def earlier_answer(self, query: str) -> tuple[str, bool] | None:
        """The answer (text, answered) given to the same query, case and spacing aside, while the
        data was what it is now; None when there is none."""
        return self.answers.get(_query_key(query))

    def remember_answer(self, query: str, text: str, ok: bool) -> None:
        """Keep the answer to ``query`` on the current data (:meth:`earlier_answer`)."""
        self.answers[_query_key(query)] = (text, ok)

    def complete(self, agent: str, messages: list[dict], grammar: str | None = None) -> Completion:
        """One LM call for ``agent`` (``ContextOverflow`` and other :class:`LMError` go to the
        caller), stopped where the reply starts to imagine the other side (:data:`STOPS`),
        decoded under ``grammar`` (GBNF) when one is given."""
        self.calling = agent
        return self.lm.complete(messages, stop=STOPS[agent], max_tokens=self.cfg.sg_rwr.reply_tokens, grammar=grammar)

    @property
    def records(self) -> list[SGRwRStep]:
        return self.log.records  # type: ignore[return-value]

    def record(self, agent: str, c: Completion, reply: Reply) -> SGRwRStep:
        """A trace entry for one call of ``agent`` whose reply was read as ``reply``."""
        return self.log.add(SGRwRStep(len(self.log) + 1, None, None, False, c.text, prompt_tokens=c.usage.prompt_tokens,
                                      completion_tokens=c.usage.completion_tokens, cached_tokens=c.usage.cached_tokens,
                                      seconds=c.seconds, agent=agent, form=reply.form, code=reply.code))

    def run(self, agent: str, code: str, rec: SGRwRStep) -> SandboxResult:
        """Run ``code`` for ``agent`` on the current data; the result goes into ``rec.sandbox``."""
        r = self.sandbox.run(code, data=self.data, prelude=prelude(agent))
        self.runs += 1
        self.failures += not r.ok
        self.sandbox_seconds += r.seconds
        if r.isolation != "none" and r.isolation not in self.isolation:
            self.isolation.append(r.isolation)
        rec.sandbox = {"ok": r.ok, "kind": r.kind, "isolation": r.isolation, "seconds": round(r.seconds, 3),
                       "error": r.error}
        return r

    def overflow(self, exc: Exception) -> SGRwRStep:
        """The trace entry of a call whose prompt did not fit the model's context."""
        return self.log.add(SGRwRStep(len(self.log) + 1, None, None, False, "", feedback=f"prompt refused: {exc}",
                                      agent=self.calling, form="context_overflow"))

    def agent_calls(self) -> dict[str, int]:
        """LM calls per agent (an overflowing call included)."""
        out: dict[str, int] = {}
        for r in self.records:
            out[r.agent or "?"] = out.get(r.agent or "?", 0) + 1
        return out


def _query_key(query: str) -> str:
    """A query with case and spacing ignored."""
    return " ".join(query.lower().split())


def _hinted(error: str | None, cfg: PlannerConfig) -> str:
    """The debug hint for ``error`` as a line of its own, or nothing (``sg_rwr.debug_hints``)."""
    hint = debug_hint(error) if cfg.sg_rwr.debug_hints else None
    return f"Hint: {hint}\n" if hint else ""


def _output(r: SandboxResult) -> str:
    return r.stdout.strip() or "(the code printed nothing)"


class Retriever:
    """Answers one query at a time with code over ``G`` (module doc)."""

    def __init__(self, session: Session, mode: str):
        self.session = session
        self.system = retriever_system(mode)

    def answer(self, query: str) -> tuple[str, bool]:
        """The text for the Reasoner and whether anything was retrieved."""
        s, cfg = self.session, self.session.cfg
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": f"Query: {query}"}]
        known = query
        failed, last_output, last_problem = 0, None, None
        for _ in range(cfg.sg_rwr.retriever_turns):
            # until a run of its code has succeeded for this query, the reply may have to be code
            c = s.complete("retriever", messages,
                           grammar=CODE_GRAMMAR if cfg.sg_rwr.code_grammar and last_output is None else None)
            reply = read_retriever(c.text)
            rec = s.record("retriever", c, reply)
            messages.append({"role": "assistant", "content": c.text})
            if reply.form == "summary":
                if last_output is not None:
                    rec.accepted, rec.proposed = True, reply.summary
                    s.log.emit(rec)
                    return reply.summary, True
                message = NO_CODE_YET if cfg.sg_rwr.debug_hints else NO_CODE
            elif reply.form == "code":
                why = assumption(reply.code, known, reads_graph=True)
                if why is not None:
                    s.guard_refusals += 1
                    failed, last_problem = failed + 1, why
                    message = f"Your code was not run: {why}"
                else:
                    r = s.run("retriever", reply.code, rec)
                    if r.ok:
                        failed, last_output = 0, _output(r)
                        known += "\n" + r.stdout
                        rec.accepted = True
                        message = (f"Output:\n{last_output}\nIf this answers the query, reply with [Summary] and "
                                   f"{RETRIEVED}; otherwise send new code.")
                    else:
                        failed, last_problem = failed + 1, r.error
                        message = f"Your code failed ({r.kind}):\n{r.error}\n{_hinted(r.error, cfg)}Send corrected code."
                if failed > cfg.sg_rwr.debug_attempts:
                    rec.feedback = message
                    s.log.emit(rec)
                    return (f"the retriever could not answer: its code failed {failed} times in a row "
                            f"(last problem: {last_problem})"), False
            else:
                message = f"Your reply could not be used: {reply.error}"
            rec.feedback = message
            s.log.emit(rec)
            messages.append({"role": "user", "content": message})
        if last_output is not None:
            return f"(the retriever gave no summary; the output of its last code was)\n{last_output}", True
        return f"the retriever found no answer in {cfg.sg_rwr.retriever_turns} replies", False


class Reasoner:
    """Plans with queries, its own code and, at the end, a summary or one action at a time."""

    def __init__(self, session: Session, mode: str, instruction: str):
        self.session, self.mode = session, mode
        first = task_message(instruction, mode)
        self.messages = [{"role": "system", "content": reasoner_system(mode)}, {"role": "user", "content": first}]
        self.known = first  # what it was told (for the assume-guard)
        self.failed = 0  # failed or refused code attempts in a row

    def ask(self) -> tuple[Reply, SGRwRStep]:
        """One Reasoner call, read as a form; the reply joins its history."""
        grammar = REASONER_GRAMMAR[self.mode] if self.session.cfg.sg_rwr.reasoner_grammar else None
        c = self.session.complete("reasoner", self.messages, grammar=grammar)
        reply = read_reasoner(c.text, step_mode=self.mode == "step")
        rec = self.session.record("reasoner", c, reply)
        self.messages.append({"role": "assistant", "content": c.text})
        if reply.form != "code":
            self.failed = 0
        return reply, rec

    def tell(self, rec: SGRwRStep, text: str, *, learned: bool = True) -> None:
        """Answer the Reasoner's last reply with ``text`` (and write its record to the trace).
        ``learned``: the text reports the scene (an answer, its code's output, an action's result)
        and joins what the guards count as known; a refusal or an error message, which may quote
        the Reasoner's own guesses back to it, does not."""
        rec.feedback = text
        self.messages.append({"role": "user", "content": text})
        if learned:
            self.known += "\n" + text
        self.session.log.emit(rec)

    def send_back_guesses(self, rec: SGRwRStep, actions, what: str) -> bool:
        """The plan guard (:func:`.guard.invented_plan`): when ``actions`` name a node no answer
        contained, tell the Reasoner "``what`` was not run: ..." (not learned), count a guard
        refusal and return True; otherwise False."""
        why = invented_plan(actions, self.known)
        if why is None:
            return False
        self.session.guard_refusals += 1
        self.tell(rec, f"{what} was {why}", learned=False)
        return True

    def run_code(self, code: str, rec: SGRwRStep) -> str:
        """Guard and run the Reasoner's code; the message that answers it."""
        s, limit = self.session, self.session.cfg.sg_rwr.debug_attempts
        given_up = (f"Your code has failed {limit + 1} times in a row, so it is given up: do not send code for this "
                    "again. Ask the retriever, or go on without code.")
        if self.failed > limit:
            return "Your code was not run. " + given_up
        why = assumption(code, self.known)
        if why is not None:
            s.guard_refusals += 1
            self.failed += 1
            message = f"Your code was not run: {why}"
        else:
            r = s.run("reasoner", code, rec)
            if r.ok:
                self.failed = 0
                rec.accepted = True
                return f"Output of your code:\n{_output(r)}"
            self.failed += 1
            message = f"Your code failed ({r.kind}):\n{r.error}\n{_hinted(r.error, s.cfg)}Fix it and send the corrected code."
            if r.error and re.search(r"NameError: name '(G|nx|DATA)' is not defined", r.error):
                message += " The graph is not in your namespace: ask the retriever a query to read it."
        if self.failed > limit:
            message += "\n" + given_up
        return message
