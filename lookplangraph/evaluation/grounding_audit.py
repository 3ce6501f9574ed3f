"""Whether the planner's grounding check (:mod:`lookplangraph.agent.grounding`) would refuse a step
of a task's own ground-truth plan: its false refusals.

:func:`false_refusals` replays the plan as :func:`lookplangraph.evaluation.injection.script_for`
writes it out (with the discovers a memory of priors needs) in the memory graph, step by step,
and asks the check about each step in the graph of that step, as the loop does
(:func:`~lookplangraph.agent.grounding.refusal`'s readings and mismatch): the descriptors
said before a class (not for a destination said only as a place to leave) and, with ``places``,
where an object stands (objects the plan has picked up
are no longer described by it). Every refusal is one the check must not make; the benchmark
``benchmarks/grounding_refusals.py`` counts them over whole splits, the tests assert none.
See ``docs/concepts/loop.md#two-rules``.
"""

from __future__ import annotations

from dataclasses import dataclass

from grasif.task import Task
from sgs.simulator import check

from lookplangraph.agent.grounding import mismatch, readings
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.evaluation.injection import script_for


@dataclass(frozen=True)
class Audit:
    """One task's replay: its steps, whether the instruction describes a node by a descriptor
    (``described``) or by where it stands (``placed``), and the steps refused with their feedback."""

    task_id: str
    steps: int
    described: bool
    placed: bool
    refused: tuple[tuple[str, str], ...]


def false_refusals(task: Task, places: bool = True) -> Audit:
    """Replay ``task``'s ground-truth script and collect what the grounding check refuses (module
    doc). ``ValueError`` if the script itself cannot run (a broken task)."""
    graph = MemoryGraph(task.graph).graph
    moved: set[str] = set()
    refused: list[tuple[str, str]] = []
    described = was_placed = False
    script = script_for(task)
    for step in script:
        wanted, where, away = readings(task.instruction, graph, places)  # what refusal() reads, once
        described |= bool(wanted)
        was_placed |= bool(where)
        feedback = mismatch(step, graph, wanted, where, moved, away)
        if feedback is not None:
            refused.append((str(step), feedback))
        if step.function_name == "done":
            break
        outcome = check(graph, step, correct=False)
        if not outcome.ok:
            raise ValueError(f"task {task.id}: script step {step} does not run: {outcome.feedback}")
        graph = outcome.graph
        if step.function_name == "pick_up":
            moved.add(step.node)
    return Audit(task.id, len(script), described, was_placed, tuple(refused))
