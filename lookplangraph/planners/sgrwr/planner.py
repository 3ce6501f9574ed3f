"""SG-RwR (Chen et al., schema-guided reason-while-retrieve) over GraSIF tasks.

A Reasoner and a Retriever (:mod:`.agents`) share one LM. The Reasoner knows the scene graph's
schema but never its data; it asks the Retriever, which answers by writing Python over the
networkx graph ``G`` in the sandbox (:mod:`lookplangraph.sandbox`), and it may write code itself
that calls its reasoning tools (:mod:`.graphdata`). Each reply is read as one message form
(:mod:`.messages`); code that assumes facts is sent back (:mod:`.guard`), and so, with
``sg_rwr.plan_guard``, is a plan or an action naming a node no answer contained.

``sg_rwr.mode = "static"`` (the paper's setting): the Retriever reads the task's map and the
Reasoner's summary plan runs as written (:func:`lookplangraph.planners.static.execute`).
``"step"`` (appendix E): one action at a time, checked on a memory graph with correction
``feedback`` and executed, the Retriever reading the updated memory graph. Failure kinds:
``round_limit``, ``context_overflow``, ``infeasible_step`` (static), ``max_actions`` (step).
The sandbox is built before the first LM call: with ``sg_rwr.require_strong`` and only weak
isolation, :class:`WeakIsolation` (a :class:`~lookplangraph.sandbox.SandboxUnavailable` and a
``ValueError``) is raised and no LM call is made. With ``sg_rwr.repeat_answers`` a query asked
before on unchanged scene data gets its earlier answer back. Counts (LM calls, sandbox runs,
guard refusals, repeated queries) are kept in the result. Docs: ``docs/guides/sg-rwr.md``.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from types import SimpleNamespace


from lookplangraph.lm import ContextOverflow
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.perception import Perception
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.episode import EpisodeLog, EpisodeResult, episode_result, extend
from lookplangraph.planners.lookplangraph import attempt_action, state_key
from lookplangraph.planners.sgrwr.agents import Reasoner, Retriever, Session, config_sandbox
from lookplangraph.planners.sgrwr.graphdata import graph_data
from lookplangraph.planners.sgrwr.records import SGRwRResult, SGRwRStep
from lookplangraph.planners.static import execute
from lookplangraph.sandbox import SandboxUnavailable


#: How a repeated query's earlier answer is given back (``sg_rwr.repeat_answers``).
REPEATED = "You asked this query before and the scene data has not changed since"
GO_ON = "Do not ask it again: act on what you know, or ask something else."


class WeakIsolation(SandboxUnavailable, ValueError):
    """The sandbox offers only weak isolation and ``sg_rwr.require_strong`` is set; a ValueError
    too, so ``lookplangraph run``/``eval`` report it as an input problem, not a crash."""


class SGRwR:
    """SG-RwR under the planner protocol (module doc)."""

    name = "sg-rwr"

    def run(self, task, env, lm, config: PlannerConfig, *, on_step=None, augmentation=None) -> EpisodeResult:
        t0 = time.perf_counter()
        try:
            sandbox = config_sandbox(config)
        except SandboxUnavailable as exc:
            raise WeakIsolation(f"sg-rwr runs LM-written code: {exc} (config: [sg_rwr] require_strong = false)") from None
        if config.sg_rwr.mode == "step":
            return self._step(task, env, lm, config, sandbox, on_step, augmentation, t0)
        return self._static(task, env, lm, config, sandbox, on_step, t0)

    # -- static: a whole plan -----------------------------------------------------------------
    def _static(self, task, env, lm, cfg, sandbox, on_step, t0) -> EpisodeResult:
        s = Session(lm, cfg, sandbox, graph_data(task.graph), EpisodeLog(on_step))
        reasoner, retriever = Reasoner(s, "static", task.instruction), Retriever(s, "static")
        plan, failure = None, "round_limit"
        try:
            for _ in range(cfg.sg_rwr.max_rounds):
                reply, rec = reasoner.ask()
                guarded = reply.form == "summary" and cfg.sg_rwr.plan_guard
                if guarded and reasoner.send_back_guesses(rec, reply.actions, "Your plan"):
                    continue
                if reply.form == "summary":
                    plan, failure = reply.actions, None
                    rec.accepted, rec.proposed = True, f"plan of {len(plan)} actions"
                    rec.reason = reply.summary or None
                    break
                reasoner.tell(rec, self._answer(reply, rec, reasoner, retriever), learned=rec.accepted)
        except ContextOverflow as exc:
            failure = "context_overflow"
            s.overflow(exc)
        result = execute(task, env, self.name, lm, cfg, s.records, plan, failure, t0)
        s.log.flush()
        return self._counted(result, s)

    def _answer(self, reply, rec: SGRwRStep, reasoner: Reasoner, retriever: Retriever) -> str:
        """The message that answers a query, code or malformed reply of the Reasoner;
        ``rec.accepted`` says whether it reports the scene (an answer, a successful code run)."""
        if reply.form == "query":
            rec.proposed = reply.query
            s = retriever.session
            earlier = s.earlier_answer(reply.query) if s.cfg.sg_rwr.repeat_answers else None
            if earlier is not None:
                s.repeated_queries += 1
                text, rec.accepted = earlier
                if rec.accepted:
                    return f"{REPEATED}, so the answer is the same (the retriever was not asked again):\n{text}\n{GO_ON}"
                return f"{REPEATED}; it could not be answered then: {text}. {GO_ON}"
            text, ok = retriever.answer(reply.query)
            s.remember_answer(reply.query, text, ok)
            rec.accepted = ok
            return f"Answer from the retriever:\n{text}" if ok else f"No answer: {text}. Ask differently."
        if reply.form == "code":
            return reasoner.run_code(reply.code, rec)
        return f"Your reply could not be used: {reply.error}"

    # -- step: one action at a time (appendix E) ------------------------------------------------
    def _step(self, task, env, lm, cfg, sandbox, on_step, augmentation, t0) -> EpisodeResult:
        perceive = Perception(augmentation)
        env.reset()
        initial = env.true_graph()
        memory = MemoryGraph(task.graph, priors=cfg.priors)
        s = Session(lm, cfg, sandbox, graph_data(memory.graph, memory.unseen), EpisodeLog(on_step))
        reasoner, retriever = Reasoner(s, "step", task.instruction), Retriever(s, "step")
        act_cfg = replace(cfg, correction="feedback")  # the SGS checks, nothing is corrected
        visited = Counter([state_key(memory.graph)])
        last_accepted, actions, executed = None, [], []
        termination = "round_limit"
        try:
            for _ in range(cfg.sg_rwr.max_rounds):
                if len(actions) >= cfg.max_actions:
                    termination = "max_actions"
                    break
                reply, rec = reasoner.ask()
                if reply.form == "summary" or (reply.form == "action" and reply.action.function_name == "done"):
                    rec.accepted, rec.proposed = True, "done()"
                    actions.append("done()")
                    s.log.emit(rec)
                    termination = "done"
                    break
                if reply.form != "action":
                    reasoner.tell(rec, self._answer(reply, rec, reasoner, retriever), learned=rec.accepted)
                    continue
                rec.proposed = str(reply.action)
                if cfg.sg_rwr.plan_guard and reasoner.send_back_guesses(rec, [reply.action], rec.proposed):
                    continue
                feedback = attempt_action(SimpleNamespace(action=reply.action, error=None), memory, env, act_cfg, rec,
                                    last_accepted, visited, perceive)
                if rec.accepted:
                    visited[state_key(memory.graph)] += 1
                    last_accepted = rec.proposed
                    actions.append(rec.proposed)
                    executed.extend(rec.executed)
                    s.update(graph_data(memory.graph, memory.unseen))
                reasoner.tell(rec, self._result(rec, feedback, memory))
        except ContextOverflow as exc:
            termination = "context_overflow"
            s.overflow(exc)
        s.log.flush()
        result = episode_result(task, env, lm, cfg, s.records, initial=initial, t0=t0, termination=termination,
                                augmentation=perceive.mode, actions=actions, executed=executed, planner=self.name,
                                failure=None if termination == "done" else termination)
        return self._counted(result, s)

    @staticmethod
    def _result(rec: SGRwRStep, feedback: str | None, memory: MemoryGraph) -> str:
        """What the Reasoner is told after an action: whether it worked, where the robot is, what it holds."""
        g = memory.graph
        where = f"The robot is in {g.agent.location} and holds {g.agent.holding or 'nothing'}."
        if rec.accepted and feedback is None:
            seen = " What it saw is now in the graph (ask the retriever)." if rec.observed else ""
            return f"{rec.proposed}: done. {where}{seen}"
        why = feedback.removeprefix(f"{rec.proposed}: ") if feedback else "refused"
        if rec.accepted:  # some steps ran before the environment refused one
            return f"{rec.proposed}: only partly done ({', '.join(rec.executed)}): {why}. {where}"
        return f"{rec.proposed}: failed: {why}. {where}"

    @staticmethod
    def _counted(result: EpisodeResult, s: Session) -> SGRwRResult:
        return extend(result, SGRwRResult, sandbox_runs=s.runs, sandbox_failures=s.failures,
                       sandbox_seconds=round(s.sandbox_seconds, 3),
                       sandbox_isolation=" | ".join(s.isolation) or None, agent_calls=s.agent_calls(),
                       guard_refusals=s.guard_refusals, repeated_queries=s.repeated_queries)
