"""LLM-as-P (paper VI-A, appendix F1): one call, the whole scene graph, a whole plan, no feedback.

The prompt (``prompts/llm_as_p.txt``) gives the plan functions, one worked example, the task's
map as compact JSON and then the instruction (map first: tasks of one scene share the prompt up
to the instruction, and llama.cpp keeps that prefix evaluated between calls); the reply is
``{"plan": ["go_to(kitchen-1)", ...]}`` (JSON constrained by :data:`PLAN_SCHEMA`, and read leniently if a server ignores the schema).
The plan runs as written (:func:`lookplangraph.planners.static.execute`). Failure kinds:
``context_overflow`` (the scene does not fit the model's context: raise ``n_ctx``),
``unreadable_plan`` (no plan list, or a step that is not an action), then the executor's.
"""

from __future__ import annotations

import time

from sgs.actions import ActionSyntaxError, parse_action

from lookplangraph.lm import ContextOverflow, read_json
from lookplangraph.planners.episode import EpisodeLog, StepRecord
from lookplangraph.planners.static import call_record, execute, scene_json
from lookplangraph.agent.prompts import template

PLAN_SCHEMA = {"type": "object", "properties": {"plan": {"type": "array", "items": {"type": "string"}}},
               "required": ["plan"], "additionalProperties": False}


def read_plan(c) -> tuple[list | None, str | None]:
    """The actions of a reply, or None and why not."""
    data = c.parsed if c.parsed is not None else read_json(c.text)
    steps = data.get("plan") if isinstance(data, dict) else data
    if not isinstance(steps, list):
        return None, f"no plan list in the reply ({c.error or 'not JSON'})"
    try:
        return [parse_action(s) for s in steps], None
    except ActionSyntaxError as exc:
        return None, f"a plan step is not an action: {exc}"


class LLMAsPlanner:
    name = "llm-as-p"

    def prompt(self, task) -> str:
        return template("llm_as_p").format(instruction=task.instruction, scene=scene_json(task.graph))

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        t0 = time.perf_counter()
        log = EpisodeLog(on_step)
        messages = [{"role": "user", "content": self.prompt(task)}]
        try:
            c = lm.complete(messages, schema=PLAN_SCHEMA, max_tokens=config.plan_max_tokens)
        except ContextOverflow as exc:
            log.emit(log.add(StepRecord(1, None, None, False, "", feedback=str(exc))))
            return execute(task, env, self.name, lm, config, log.records, None, "context_overflow", t0)
        plan, why = read_plan(c)
        log.add(call_record(1, c, f"plan of {len(plan)} actions" if plan is not None else None, plan is not None, why))
        result = execute(task, env, self.name, lm, config, log.records, plan,
                         None if plan is not None else "unreadable_plan", t0)
        log.flush()
        return result
