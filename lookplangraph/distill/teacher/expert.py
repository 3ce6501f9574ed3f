"""The expert: the privileged teacher (:class:`~lookplangraph.distill.teacher.policy.Policy`) behind
an LM's ``complete()``. A harness tool and the source of training labels, **not** a language model
and never a default (results say ``expert (privileged)``): it reads the environment's true graph
and the task's ground-truth plan, and answers each planner's prompts where an LM would, so its
reply is parsed, checked and executed like a model's.

The reply formats, by planner (:data:`~lookplangraph.distill.teacher.policy.PLANNERS`):
``lookplangraph`` one action as the decision's JSON, with a reason where the schema has one that
names only nodes the prompt shows (:func:`grounded`); ``react`` ReAct's text commands (``go to X``,
``take o from h``, ...; "Nothing happens." is a refusal); ``sayplan`` and ``sayplan-lite`` the
rooms the plan needs expanded, then the plan; ``llm-as-p`` the ground truth's primitive steps on
the map. Of the prompt it reads only whether its last answer was refused.

The runner calls ``begin_episode`` before each episode; ``complete()`` without it raises. See
``docs/guides/expert.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sgs.actions import Action, parse_plan
from sgs.graph import SceneGraph, node_class
from sgs.simulator import run_plan

from lookplangraph.agent.prompts import FEEDBACK
from lookplangraph.distill.teacher.policy import TEACHERS, ExpertError, Policy
from lookplangraph.lm import Completion, Usage

#: how ReAct's text world answers a command it did not carry out (lookplangraph.planners.react)
REACT_REFUSED = "Nothing happens."

#: how LookPlanGraph's prompt says that the last answer was refused
FEEDBACK_MARK = FEEDBACK

#: a node's name in text (``shelf-2``, ``toms_office-1``)
NODE_NAME = re.compile(r"\b[a-z][a-z0-9_]*-\d+\b")


def expert_for(spec: str) -> "Expert":
    """The expert an ``--expert``/``--lm`` spec names (:data:`~lookplangraph.distill.teacher.policy.TEACHERS`)."""
    if spec not in TEACHERS:
        raise ExpertError(f"the teacher is one of {', '.join(TEACHERS)}, not {spec!r}")
    return Expert(**TEACHERS[spec])


class Expert(Policy):
    """The privileged expert (module doc): the policy's actions in each planner's reply format."""

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()  # it decodes nothing

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        """The next answer as the planner's reply text. The expert works from the true state (module
        doc); of the prompt it reads only whether its last answer was refused (the planner's
        feedback line, ReAct's "Nothing happens."), and of the request only SayPlan's schema and
        whether (and where) a decision's schema has a ``reason`` (the answer format); a reason names
        only nodes the prompt shows (:func:`grounded`)."""
        if self.task is None:
            raise ExpertError("the expert answers only inside an episode: call begin_episode(task, env, planner, "
                              "config) first (the runner does)")
        last = str(messages[-1].get("content", "")) if messages else ""
        if self.planner == "llm-as-p":
            return self._reply(json.dumps({"plan": [str(a) for a in self._static_plan()]}))
        if self.planner in ("sayplan", "sayplan-lite"):
            return self._reply(json.dumps(self._sayplan_reply(request.get("schema") or {})))
        if self.planner == "react":
            action, _ = self.next_action(last.startswith(REACT_REFUSED))
            return self._reply(self._react_command(action))
        # the feedback after the last answer (the journal layout keeps earlier ones above it)
        action, reason = self.next_action(FEEDBACK_MARK in last.rpartition("\n- ")[2])
        # what the prompt shows: its user message, or every user turn of a conversation
        reason = grounded(reason, "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "user"))
        reply = action.model_dump()
        keys = _schema_keys(request.get("schema"))
        if not keys or "reason" in keys:  # free replies, or a schema with a reason (first or last)
            reply = {"reason": reason, **reply} if keys[:1] == ["reason"] else {**reply, "reason": reason}
        return self._reply(json.dumps(reply))

    def _static_plan(self) -> list[Action]:
        """The ground-truth plan's primitive steps on the map (what a static planner can write)."""
        _, outcomes = run_plan(self.task.graph, parse_plan(self.task.ground_truth_plan), correct=True)
        return [a for out in outcomes for a in out.actions if a.function_name not in ("discover_objects", "done")]

    def _sayplan_reply(self, schema: dict) -> dict:
        """SayPlan's and SayPlan Lite's JSON: expand each room the plan needs, then the plan
        (SayPlan's access/release language for ``sayplan``, primitives for the Lite planning call)."""
        props = schema.get("properties", {})
        plan = self._static_plan()
        if "command" in props:
            g = self.task.graph
            needed = []
            for a in plan:
                for n in (a.node, a.destination):
                    room = g.place_of(n) if n in g.nodes else None
                    if room is not None and room not in needed and n != room:
                        needed.append(room)
            todo = [r for r in needed if r not in self.expanded]
            if todo:
                self.expanded.append(todo[0])
                return {"reasoning": f"the plan needs what is in {todo[0]}", "command": "expand_node",
                        "node": todo[0], **({"plan": []} if "plan" in props else {})}
            if self.planner == "sayplan":
                return {"reasoning": "every room the plan needs is expanded", "command": "verify_plan", "node": "",
                        "plan": _sayplan_words(self.task.graph, plan)}
            return {"reasoning": "every room the plan needs is expanded", "command": "verify_plan", "node": ""}
        return {"reasoning": "the ground-truth plan's steps", "plan": [str(a) for a in plan]}

    def _react_command(self, action: Action) -> str:
        """``action`` (a primitive) as ReAct's text command."""
        fn, node, g = action.function_name, action.node, self.env.true_graph()
        if fn == "done":
            return "done"
        if fn in ("go_to", "discover_objects"):
            return f"go to {node}"
        if fn == "pick_up":
            return f"take {node} from {g.parent[node][0]}"
        if fn in ("put_on", "put_inside"):
            return f"put {g.agent.holding} {'on' if fn == 'put_on' else 'in'} {action.destination}"
        return f"{fn.replace('_', ' ')} {node}"

    def _reply(self, text: str) -> Completion:
        return Completion(text=text, usage=Usage(0, 0, None), seconds=0.0)


def grounded(reason: str, prompt: str) -> str:
    """``reason`` with every node name the ``prompt`` does not show written as its class
    (``shelf-2`` -> ``the shelf``): a reason names only what the planner can see."""
    shown = set(NODE_NAME.findall(prompt))

    def word(m: re.Match) -> str:
        name = m.group(0)
        return name if name in shown else "the " + node_class(name).replace("_", " ")
    text = NODE_NAME.sub(word, reason)
    return re.sub(r"\bthe the\b", "the", text)


def ungrounded(reason: str, prompt: str) -> list[str]:
    """The node names in ``reason`` that ``prompt`` does not show (what :func:`grounded` removes)."""
    shown = set(NODE_NAME.findall(prompt))
    return [n for n in NODE_NAME.findall(reason) if n not in shown]


def _sayplan_words(graph: SceneGraph, plan: list[Action]) -> list[str]:
    """Primitive steps in SayPlan's plan language (:mod:`lookplangraph.planners.sayplan`):
    ``goto``, and ``access(n)`` before what acts on ``n`` (``pickup``, ``release``, toggles)."""
    out: list[str] = []
    for a in plan:
        fn = a.function_name
        if fn == "go_to":
            out.append(f"goto({a.node})")
        elif fn == "pick_up":
            out += [f"access({a.node})", f"pickup({a.node})"]
        elif fn in ("put_on", "put_inside"):
            out += [f"access({a.destination})", f"release({a.destination})"]
        else:
            out += [f"access({a.node})", f"{fn}({a.node})"]
    return out


def _schema_keys(schema: Any) -> list[str]:
    """The property names of a decision's reply schema in order (of its first variant)."""
    if isinstance(schema, dict):
        if "anyOf" in schema and schema["anyOf"]:
            return _schema_keys(schema["anyOf"][0])
        return list((schema.get("properties") or {}))
    return []
