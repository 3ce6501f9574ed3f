"""Error-injection policy: a scripted stand-in for an LM (it is **not** a language model) that
replays a task's ground-truth plan and makes the mistakes the paper reports, at a given rate, so
that the value of the SGS's correction can be measured over every task in seconds.

The script is the ground-truth plan with the look-ups the memory graph demands: before the first
step that moves an object still known only as a prior, ``discover_objects`` of the asset that
holds it (after a ``go_to`` when that asset is in another room). Then, for each script step,
with probability ``rate`` one applicable error is made instead (seeded RNG):

* ``bare_name``: the node written as its bare class (``apple`` for ``apple-1``);
* ``discover_room``: a ``discover_objects`` of the current room before the step;
* ``redundant_discover``: a second ``discover_objects`` of an already inspected node before it;
* ``skipped_open``: an ``open`` step is left out;
* ``low_level``: ``rearrange(o, r, d)`` written as ``pick_up(o)`` + ``put_r(d)`` with no
  ``go_to``/``open`` around them.

When feedback comes back, the policy retries with the step as the script has it (an LM that reads
feedback but never infers a missing step); an omitted ``open`` is never recovered. It answers
the decision's ``complete()`` call like a backend (:attr:`constraints` empty: it decodes nothing):
the action as a JSON reply, read by the same parser as an LM's, with zero token usage.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from grasif.task import Task
from sgs.actions import Action, make, parse_plan
from sgs.graph import Layer, Relation, node_class
from sgs.simulator import check

from lookplangraph.lm import Completion, Usage

ERROR_KINDS = ("bare_name", "discover_room", "redundant_discover", "skipped_open", "low_level")


def script_for(task: Task) -> list[Action]:
    """The ground-truth plan made explicit enough to run without the SGS's corrections, with the
    discovers a memory graph of priors needs (module doc).

    Each ground-truth step is kept as written when it runs without correction; otherwise the
    ``go_to``/``open`` steps that correction would insert are written out before it (for a
    ``rearrange``: the destination's side first, then the object's, then the ``rearrange``), and
    failing that the step is replaced by its corrected primitive expansion."""
    g = task.graph
    seen: set[str] = {g.agent.holding} if g.agent.holding else set()
    inspected: set[str] = set()
    out: list[Action] = []

    def emit(steps: list[Action]) -> bool:
        nonlocal g
        trial, kept = g, []
        for step in steps:
            if step.function_name == "go_to" and step.node == trial.agent.location:
                continue  # already there: the planner would refuse it as changing nothing
            outcome = check(trial, step, correct=False)
            if not outcome.ok:
                return False
            trial = outcome.graph
            kept.append(step)
        g = trial
        out.extend(kept)
        return True

    for step in parse_plan(task.ground_truth_plan):
        obj = step.node if step.function_name in ("rearrange", "pick_up") else None
        if obj in g.nodes and g.nodes[obj].layer is Layer.OBJECT and obj not in seen:
            root = obj
            while g.parent[root][1] in (Relation.ONTOP, Relation.INSIDE) and g.nodes[g.parent[root][0]].layer is Layer.OBJECT:
                root = g.parent[root][0]
            holder = g.parent[root][0]
            if holder in g.nodes and g.nodes[holder].layer is not Layer.PLACE and holder not in inspected:
                look = [make("discover_objects", holder)]
                if g.place_of(holder) != g.agent.location:
                    look.insert(0, make("go_to", g.place_of(holder)))
                if emit(look):
                    inspected.add(holder)
                    seen.update(g.descendants(holder))
            seen.add(obj)
        if emit([step]):
            continue
        full = check(g, step, correct=True)
        if not full.ok:
            raise ValueError(f"task {task.id}: ground-truth step {step} is infeasible: {full.feedback}")
        prims = list(full.actions)
        if step.function_name == "rearrange" and any(a.function_name == "pick_up" for a in prims):
            first, second = rearrange_opens(prims)
            pre: list[Action] = []
            if second:
                pre += [make("go_to", g.place_of(step.destination))] + second
            if first:
                pre += [make("go_to", g.place_of(step.node))] + first
            if emit(pre + [step]):
                continue
        if not emit(prims):
            raise ValueError(f"task {task.id}: cannot write {step} out without correction")
    out.append(make("done"))
    return out


def rearrange_opens(prims) -> tuple[list[Action], list[Action]]:
    """The ``open`` steps of a corrected ``rearrange`` expansion that contains a ``pick_up``: those
    before it (the object's side) and those after it (the destination's side)."""
    k = next(i for i, a in enumerate(prims) if a.function_name == "pick_up")
    return ([a for a in prims[:k] if a.function_name == "open"],
            [a for a in prims[k + 1:] if a.function_name == "open"])


class ErrorInjectionPolicy:
    """Scripted replies with injected errors (module doc). ``name`` says what it is."""

    def __init__(self, task: Task, rate: float, seed: int = 0, kinds: tuple[str, ...] = ERROR_KINDS):
        self.name = f"error-injection(rate={rate}, seed={seed})"
        self.script = script_for(task)
        self.rng = random.Random(f"{task.id}:{seed}:{rate}")
        self.rate = rate
        self.kinds = kinds
        self.pos = 0  # index of the next script step
        self.current: Action | None = None  # the script step being attempted
        self.queue: list[Action] = []  # replies planned for the current step
        self.injected = 0
        self.inspected: set[str] = set()
        self.here = task.graph.agent.location

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        """The next scripted step as the reply to the decision's prompt (the schema and the rest
        of the request are ignored: a script does not decode); feedback in the last message
        makes it retry the step."""
        dynamic = messages[-1]["content"]
        failed = "Feedback on your last answer:" in dynamic
        if failed and self.current is not None and not self.queue:
            action = self.current  # retry the step as scripted
        else:
            while not self.queue:
                if self.pos >= len(self.script):
                    return self._reply(make("done"))
                self.current = self.script[self.pos]
                self.pos += 1
                self.queue = self._with_errors(self.current)
            action = self.queue.pop(0)
        if action.function_name == "discover_objects":
            self.inspected.add(action.node)
        if action.function_name == "go_to":
            self.here = action.node
        return self._reply(action)

    def _with_errors(self, step: Action) -> list[Action]:
        if self.rng.random() >= self.rate:
            return [step]
        options = []
        if step.node and re.search(r"-\d+$", step.node) and step.function_name != "go_to":
            options.append("bare_name")
        if self.here:
            options.append("discover_room")
        if self.inspected:
            options.append("redundant_discover")
        if step.function_name == "open":
            options.append("skipped_open")
        if step.function_name == "rearrange":
            options.append("low_level")
        options = [o for o in options if o in self.kinds]
        if not options:
            return [step]
        kind = self.rng.choice(options)
        self.injected += 1
        if kind == "bare_name":
            return [make(step.function_name, node_class(step.node), step.relation, step.destination)]
        if kind == "discover_room":
            return [make("discover_objects", self.here), step]
        if kind == "redundant_discover":
            return [make("discover_objects", sorted(self.inspected)[0]), step]
        if kind == "skipped_open":
            return []
        put = "put_on" if step.relation == "ontop" else "put_inside"
        return [make("pick_up", step.node), make(put, None, None, step.destination)]

    def _reply(self, action: Action) -> Completion:
        text = json.dumps({**action.model_dump(), "reason": "scripted step"})
        return Completion(text=text, usage=Usage(0, 0, None), seconds=0.0)
