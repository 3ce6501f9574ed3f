"""A task's goal (:func:`task_goal`): what changes from the initial to the final graph that our
actions can make.

Node goals of :func:`grasif.goals.goal_from_graphs` keep a parent when the destination affords the
relation, and the states in :data:`GOAL_STATES` (``plugged_in``/``plugged_out`` have no action
here). The goal is strict (``unchanged_elsewhere``); an empty one makes a no-change task.
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from grasif.goals import GoalSpec, NodeGoal, goal_from_graphs
from grasif.virtualhome.convert import affords_relation
from sgs.graph import Relation, SceneGraph

#: States our action set changes; goals keep only these (and parent relations).
GOAL_STATES = frozenset({"open", "closed", "on", "off"})


def task_goal(initial: SceneGraph, final: SceneGraph) -> GoalSpec:
    """Node goals for the changed nodes, keeping parents and the states in :data:`GOAL_STATES`."""
    goals = []
    for g in goal_from_graphs(initial, final).node_goals:
        states = [s for s in g.states if s in GOAL_STATES]
        absent = [s for s in g.absent_states if s in GOAL_STATES]
        relation, destination = g.relation, g.destination
        if destination is not None and not affords_relation(initial.nodes[destination], Relation(relation)):
            relation = destination = None  # VirtualHome put it on something that affords no put
        if relation is None and not states and not absent:
            continue
        goals.append(NodeGoal(node=g.node, relation=relation, destination=destination, states=states, absent_states=absent))
    return GoalSpec(node_goals=goals, unchanged_elsewhere=True)
