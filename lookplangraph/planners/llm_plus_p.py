"""LLM+P (paper VI-A, appendix D and F2): the LM writes a PDDL problem, Fast Downward plans.

The prompt (``prompts/llm_plus_p.txt``) gives the appendix-D domain, an example problem in that
domain's own vocabulary, the task's map as compact JSON and then the instruction. The problem is
cut from the reply (from ``(define`` to its closing parenthesis); Fast Downward (``lama-first``,
the config's time and memory limits) solves it as a separate program; the plan's names map back
to the scene's and the actions run as written (:func:`lookplangraph.planners.static.execute`).
``llm_plus_p.grammar`` (default on) decodes the reply under
:func:`~lookplangraph.planners.pddl.grammar.problem_grammar` where the backend enforces one;
``llm_plus_p.declare`` (default on) rewrites the problem's ``(:objects ...)`` from the scene
names it uses, and the record's ``feedback`` says what was changed.

Failure kinds, each its own value of ``EpisodeResult.failure``: ``context_overflow``,
``no_problem``, Fast Downward's ``parse_error`` / ``undefined`` / ``unsolvable`` / ``timeout`` /
``out_of_memory`` / ``planner_error``, ``plan_unmappable``, then ``infeasible_step``. The trace's
``text`` is the LM's reply; the record's ``feedback`` quotes Fast Downward.
Docs: ``docs/guides/baselines.md`` (*LLM+P*).
"""

from __future__ import annotations

import re
import time

from lookplangraph.lm import ContextOverflow
from lookplangraph.planners.episode import EpisodeLog, StepRecord
from lookplangraph.planners.pddl.fast_downward import solve
from lookplangraph.planners.pddl.grammar import problem_grammar
from lookplangraph.planners.pddl.problem import PddlNames, PlanError, complete_declarations, domain, plan_actions
from lookplangraph.planners.static import call_record, execute, scene_json
from lookplangraph.agent.prompts import template


def extract_problem(text: str) -> str | None:
    """The first balanced ``(define ...)`` form in ``text``, or None."""
    start = text.find("(define")
    if start < 0:
        return None
    depth = 0
    for i, ch in enumerate(text[start:], start):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None  # cut off before the end


class LLMPlusP:
    name = "llm+p"

    def prompt(self, task) -> str:
        text = "\n".join(line for line in domain().splitlines() if not line.startswith(";"))
        return template("llm_plus_p").format(domain=text.strip(), instruction=task.instruction,
                                             scene=scene_json(task.graph))

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        t0 = time.perf_counter()
        log = EpisodeLog(on_step)
        messages = [{"role": "user", "content": self.prompt(task)}]
        names = PddlNames(task.graph.nodes)
        try:
            extra = {"grammar": problem_grammar(task.graph, names)} if config.llm_plus_p.grammar else {}
            c = lm.complete(messages, max_tokens=config.plan_max_tokens, **extra)
        except ContextOverflow as exc:
            log.emit(log.add(StepRecord(1, None, None, False, "", feedback=str(exc))))
            return execute(task, env, self.name, lm, config, log.records, None, "context_overflow", t0)
        plan, failure, feedback = None, None, None
        problem = extract_problem(re.sub(r"```[a-z]*", "", c.text))
        declared = ""
        if problem is not None and config.llm_plus_p.declare:
            problem, added, twice = complete_declarations(problem, task.graph, names)
            declared = "".join([f"; declared for the LM: {', '.join(added)}" if added else "",
                                f"; declared twice by the LM: {', '.join(twice)}" if twice else ""])
        if problem is None:
            failure, feedback = "no_problem", "the reply holds no complete (define (problem ...)) form"
        else:
            sol = solve(domain(), problem, time_limit_s=config.llm_plus_p.fd_time_limit_s, memory_limit_mb=config.llm_plus_p.fd_memory_limit_mb)
            if not sol.solved:
                failure, feedback = sol.kind, f"Fast Downward: {sol.kind}: {sol.message}"
            else:
                try:
                    plan = plan_actions(sol.plan, names)
                    feedback = f"Fast Downward found {len(plan)} actions in {sol.seconds:.1f} s"
                except PlanError as exc:
                    failure, feedback = "plan_unmappable", str(exc)
            feedback += declared
        log.add(call_record(1, c, f"plan of {len(plan)} actions" if plan is not None else None, plan is not None,
                            feedback))
        result = execute(task, env, self.name, lm, config, log.records, plan, failure, t0)
        log.flush()
        return result
