"""The GraSIF task file format.

A task is one JSON file::

    {
      "id": "gift_basket",                 # unique within its split
      "split": "examples",                 # virtualhome | behavior | office | any other name
      "instruction": "Put one candle, ...",
      "initial_graph": {"nodes": {...}},   # scene graph in the paper's JSON format (sgs.io)
      "goal": {"node_goals": [...], "count_goals": [...], "formula": "(and ...)"},
      "ground_truth_plan": ["rearrange(candle-1, inside, wicker_basket-1)", ...],
      "provenance": {"source": "...", ...}  # free-form: where the task came from
    }

Instead of ``goal`` a file may give ``goal_graph`` (a full graph in the paper's format, optionally
with ``"goal_by_class": true``); it is turned into node (or count) goals for the changed nodes,
with ``unchanged_elsewhere`` (a goal graph describes the whole final scene: what it keeps as in
the initial graph must stay so; :func:`grasif.goals.goal_from_graphs`).
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from grasif.goals import GoalSpec, goal_from_graphs
from sgs.graph import GraphError, SceneGraph
from sgs.io import graph_from_dict


class TaskError(ValueError):
    """A task file that cannot be used; the message names the file and the problem."""


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    split: str = ""
    instruction: str
    initial_graph: dict[str, Any]
    goal: GoalSpec
    ground_truth_plan: list[Any] = Field(default_factory=list)
    provenance: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _goal_from_goal_graph(cls, data: Any) -> Any:
        if isinstance(data, dict) and "goal_graph" in data:
            data = dict(data)
            if "goal" in data:
                raise ValueError("give either goal or goal_graph, not both")
            by_class = bool(data.pop("goal_by_class", False))
            goal = graph_from_dict(data.pop("goal_graph"))
            data["goal"] = goal_from_graphs(graph_from_dict(data["initial_graph"]), goal, by_class=by_class)
        return data

    @cached_property
    def graph(self) -> SceneGraph:
        """The initial scene graph (parsed once)."""
        return graph_from_dict(self.initial_graph)


def load_task(path: str | Path) -> Task:
    """Read and check a task file; every failure is a :class:`TaskError` naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TaskError(f"{path}: no such task file") from None
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON ({exc})") from None
    try:
        task = Task.model_validate(data)
        graph = task.graph
    except (ValidationError, GraphError, ValueError) as exc:
        raise TaskError(f"{path}: {exc}") from None
    problems = task.goal.check_names(graph)
    if problems:
        raise TaskError(f"{path}: " + "; ".join(problems))
    return task


def save_task(task: Task, path: str | Path) -> None:
    Path(path).write_text(json.dumps(task.model_dump(mode="json"), indent=1, sort_keys=False) + "\n")
