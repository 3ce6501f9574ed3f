"""SG-RwR: a Reasoner and a Retriever that write code over the scene graph in a sandbox
(:mod:`.planner` has the episode; :mod:`.agents`, :mod:`.messages`, :mod:`.guard`,
:mod:`.graphdata`, :mod:`.prompts` its parts)."""

from lookplangraph.planners.sgrwr.planner import SGRwR

__all__ = ["SGRwR"]
