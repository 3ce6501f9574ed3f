"""SG-RwR's prompts, filled from the template files ``lookplangraph/agent/prompts/sgrwr_*.txt``.

Both system prompts start with the same text, the environment description and the graph *schema*
(never the graph's data; :func:`shared`). The Reasoner's then holds the actions with their conditions, its reasoning tools, the guidance, the message
forms and task-level examples (tasks and their final solutions, no agent-level dialogue, as in the
paper's few-shot setting). The Retriever's holds the environment, the schema and its guidance.
Both differ between ``static`` mode (a whole plan; the schema of the task's map) and ``step`` mode
(one action at a time; the memory graph, whose objects carry ``seen``).
"""

from __future__ import annotations

from lookplangraph.planners.sgrwr.graphdata import ALLOWED_IMPORTS
from lookplangraph.agent.prompts import template

_GOAL = {"static": "write the robot's whole plan", "step": "command the robot one action at a time"}
_FINISH = {
    "static": ("- When you have the whole plan, send the solution: a short summary, every action in order under "
               "[Actions], then TASK TERMINATE on its own line. Do this only when the plan is complete."),
    "step": ("- When you know the next action, send it as an action. You are told whether it worked, and the graph "
             "then shows the scene as the robot knows it. When the task is carried out, send the action done()."),
}
_WHEN = {"static": "at the start, before any action", "step": "now, as the robot knows it"}


def schema(mode: str) -> str:
    """The scene graph schema; in step mode with the ``seen`` attribute of remembered objects."""
    return template("sgrwr_schema").format(seen=template("sgrwr_seen") if mode == "step" else "")


def shared(mode: str) -> str:
    """The start both system prompts share (environment and schema): with one LM in process, the
    KV cache keeps it when the conversation switches from one agent to the other."""
    return template("sgrwr_shared").format(environment=template("sgrwr_environment").strip(),
                                           schema=schema(mode).strip()).strip()


def reasoner_system(mode: str) -> str:
    """The Reasoner's system prompt for ``mode`` (``static`` or ``step``)."""
    return template("sgrwr_reasoner").format(
        shared=shared(mode), goal=_GOAL[mode],
        actions=template(f"sgrwr_actions_{mode}").strip(),
        tools=template("sgrwr_tools").format(when=_WHEN[mode]).strip(), finish=_FINISH[mode],
        forms=template(f"sgrwr_forms_{mode}").strip(),
        examples="Examples of tasks and their solutions (other scenes):\n" + template(f"sgrwr_examples_{mode}").strip(),
    ).strip()


def retriever_system(mode: str) -> str:
    """The Retriever's system prompt for ``mode``."""
    return template("sgrwr_retriever").format(
        shared=shared(mode), imports=", ".join(sorted(ALLOWED_IMPORTS)),
    ).strip()


def task_message(instruction: str, mode: str) -> str:
    """The Reasoner's first user message."""
    if mode == "step":
        return f"Task: {instruction}\nThe robot has not acted yet."
    return f"Task: {instruction}"
