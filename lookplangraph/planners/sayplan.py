"""SayPlan and SayPlan Lite (paper VI-A, appendix D and F4): semantic search over a collapsed
scene graph, then a whole plan checked by the scene-graph simulator and replanned on its
executability feedback. SayPlan has no public code; this is our implementation of its description.

Both search the task's map (``task.graph``) collapsed to its rooms and the agent:
``expand_node(room)`` reveals a room's assets and objects, ``contract_node(room)`` hides them;
search feedback never names a hidden node. A submitted plan is checked step by step on the
searched graph (:func:`verify_sayplan`, :func:`verify_lite`: :func:`sgs.simulator.apply`, no
correction); the feedback is the first step that cannot be carried out, never whether the goal
is met. A plan that passes runs in the environment as written
(:func:`lookplangraph.planners.static.execute`).

``sayplan`` keeps one chat history with both APIs at every turn and SayPlan's plan functions
(``goto``, ``access``, ``pickup``, ``release``, ...) mapped onto our primitives; ``sayplan-lite``
searches, then plans, with separate prompts and our primitives. Limits:
``sayplan_search_steps`` and ``1 + sayplan_replans``. Failure kinds: ``context_overflow``,
``search_limit`` (SayPlan only), ``replan_limit``, ``infeasible_step``. The function mapping and
the two phases: ``docs/guides/baselines.md`` (*SayPlan*, *SayPlan Lite*).
"""

from __future__ import annotations

import re
import time

from sgs.actions import ActionSyntaxError, Action, make, parse_action
from sgs.graph import Layer, SceneGraph, affords
from sgs.simulator import Infeasible, apply

from lookplangraph.lm import ContextOverflow
from lookplangraph.planners.episode import EpisodeLog, EpisodeResult, StepRecord
from lookplangraph.planners.static import PLAN_FUNCTIONS, call_record, execute, scene_json
from lookplangraph.agent.prompts import template
from lookplangraph.lm import read_json

SEARCH_COMMANDS = ("expand_node", "contract_node", "verify_plan")
#: SayPlan's plan functions, in our canonical spelling after :func:`sgs.actions.parse_action`
#: (``goto`` → ``go_to``, ``pickup`` → ``pick_up``)
SAYPLAN_FUNCTIONS = ("go_to", "access", "pick_up", "release", "open", "close", "turn_on", "turn_off")
#: our names → SayPlan's, for feedback shown to the SayPlan LM
_SAYPLAN_SPELLING = (("go_to", "goto"), ("pick_up", "pickup"), ("put_on", "release"), ("put_inside", "release"))
REASON_MAX = 400  # characters of the reply's reasoning (a small model otherwise rambles to max_tokens)
GRAPH_SUPERSEDED = "(superseded: the current graph is in the latest message)"


# -- the searched graph ----------------------------------------------------------------------------
def searched_graph(graph: SceneGraph, expanded: list[str]) -> SceneGraph:
    """``graph`` with only the rooms, the agent (and what it holds) and the assets and objects of
    the ``expanded`` rooms."""
    held = graph.agent.holding
    keep_held = {held, *graph.descendants(held)} if held else set()
    rooms = set(expanded)
    nodes = {n: v for n, v in graph.nodes.items()
             if v.layer is Layer.PLACE or n in keep_held or graph.place_of(n) in rooms}
    parent = {n: e for n, e in graph.parent.items() if n in nodes}
    return graph.evolve(nodes=nodes, parent=parent)


def search_step(command: str, node: str, expanded: list[str], rooms: list[str]) -> tuple[bool, str]:
    """Apply one search command to ``expanded`` (in place); ``(ok, what to tell the LM)``."""
    if command not in ("expand_node", "contract_node"):
        return False, f"unknown command {command!r}; use one of {', '.join(SEARCH_COMMANDS)}"
    call = f"{command}({node})"
    if node not in rooms:
        return False, f"{call}: {node or 'no node'} is not a room; only rooms can be expanded or contracted"
    if command == "expand_node":
        if node in expanded:
            return False, f"{call}: {node} is already expanded"
        expanded.append(node)
        return True, f"{call}: done"
    if node not in expanded:
        return False, f"{call}: {node} is not expanded"
    expanded.remove(node)
    return True, f"{call}: done"


# -- plan checks -----------------------------------------------------------------------------------
def _sayplan_words(text: str) -> str:
    for ours, theirs in _SAYPLAN_SPELLING:
        text = re.sub(rf"\b{ours}\b", theirs, text)
    return text


def _within(graph: SceneGraph, node: str, accessed: str | None) -> bool:
    return accessed is not None and (node == accessed or graph.is_ancestor(accessed, node))


def release_relation(graph: SceneGraph, dest: str) -> str:
    """``put_inside`` or ``put_on`` for releasing at ``dest`` (module doc)."""
    node = graph.nodes[dest]
    if affords(node, "put_inside") and not node.has("closed"):
        return "put_inside"
    return "put_on" if affords(node, "put_on") else "put_inside"


def verify_sayplan(graph: SceneGraph, steps: list) -> tuple[list[Action] | None, str | None]:
    """SayPlan's plan (its functions, module doc) checked on ``graph``: the primitive actions, or
    None and the first failing step's feedback in SayPlan's words."""
    if not isinstance(steps, list):
        return None, "the plan must be a JSON list of function calls"
    g, accessed, prims = graph, None, []
    for i, text in enumerate(steps, 1):
        where = f"step {i} {text}"
        try:
            a = parse_action(text)
        except ActionSyntaxError as exc:
            return None, f"{where}: {exc}"
        fn, node = a.function_name, a.node or a.destination
        if fn not in SAYPLAN_FUNCTIONS:
            return None, f"{where}: not a plan function; use goto, access, pickup, release, open, close, turn_on, turn_off"
        try:
            if node is None:
                raise Infeasible(f"{text} needs a node")
            if node not in g.nodes:
                apply(g, make("open", node))  # raises the SGS's unknown-node feedback
            if fn == "access":
                if g.nodes[node].layer is Layer.PLACE:
                    raise Infeasible(f"{node} is a room; access an asset or object in it")
                if g.place_of(node) != g.agent.location:
                    raise Infeasible(f"{node} is in {g.place_of(node)} but you are in {g.agent.location}; goto({g.place_of(node)}) first")
                accessed = node
                continue
            if fn == "go_to":
                step = make("go_to", node)
                accessed = None
            elif fn == "release":
                if accessed is None:
                    raise Infeasible("release puts the held object down at the accessed node; access a node first")
                dest = accessed if node == g.agent.holding or _within(g, node, accessed) else node
                if dest != accessed:
                    raise Infeasible(f"release puts the held object down at the accessed {accessed}; access({dest}) first")
                step = make(release_relation(g, dest), None, None, dest)
            else:
                if not _within(g, node, accessed):
                    raise Infeasible(f"access {node} (or what holds it) first" if accessed is None
                                     else f"{node} is not at the accessed {accessed}; access the node that holds it first")
                step = make(fn, node)
            g = apply(g, step)
        except Infeasible as exc:
            return None, f"{where}: {_sayplan_words(str(exc))}"
        prims.append(step)
    return prims, None


def verify_lite(graph: SceneGraph, steps: list) -> tuple[list[Action] | None, str | None]:
    """A plan of our primitive functions checked on ``graph``: the actions, or None and the first
    failing step's feedback."""
    if not isinstance(steps, list):
        return None, "the plan must be a JSON list of function calls"
    g, actions = graph, []
    for i, text in enumerate(steps, 1):
        where = f"step {i} {text}"
        try:
            a = parse_action(text)
        except ActionSyntaxError as exc:
            return None, f"{where}: {exc}"
        if a.function_name not in PLAN_FUNCTIONS:
            return None, f"{where}: not a plan function; use {', '.join(PLAN_FUNCTIONS)}"
        if a.function_name in ("put_on", "put_inside") and a.destination is None:
            a = make(a.function_name, None, None, a.node)
        try:
            g = apply(g, a)
        except Infeasible as exc:
            return None, f"{where}: {exc}"
        actions.append(a)
    return actions, None


# -- replies ---------------------------------------------------------------------------------------
def reply_schema(rooms: list[str], with_plan: bool) -> dict:
    props = {"reasoning": {"type": "string", "maxLength": REASON_MAX},
             "command": {"type": "string", "enum": list(SEARCH_COMMANDS)},
             "node": {"type": "string", "enum": [*rooms, ""]}}
    if with_plan:
        props["plan"] = {"type": "array", "items": {"type": "string"}}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


PLAN_SCHEMA = {"type": "object", "properties": {"reasoning": {"type": "string", "maxLength": REASON_MAX},
                                                "plan": {"type": "array", "items": {"type": "string"}}},
               "required": ["reasoning", "plan"], "additionalProperties": False}


def read_command(c) -> tuple[str | None, str, object, str | None]:
    """``(command, node, plan, reasoning)`` of a search/plan reply; command None if unreadable.
    Also reads ``"command": "expand_node(kitchen-1)"``."""
    data = c.parsed if c.parsed is not None else read_json(c.text)
    if not isinstance(data, dict):
        return None, "", None, None
    command, node = data.get("command"), data.get("node") or ""
    if isinstance(command, dict):  # {"command_name": ..., "node_name": ...}
        command, node = command.get("command_name") or command.get("name"), command.get("node_name") or node
    if not isinstance(command, str):
        return None, "", None, None
    m = re.match(r"^\s*([\w]+)\s*\((.*)\)\s*$", command)
    if m:
        command, node = m.group(1), m.group(2).strip() or node
    node = node.strip().strip("'\"") if isinstance(node, str) else ""
    reason = data.get("reasoning") if isinstance(data.get("reasoning"), str) else None
    return command.strip(), node, data.get("plan"), reason


def _overflow(log: EpisodeLog, exc: Exception) -> None:
    log.emit(log.add(StepRecord(len(log) + 1, None, None, False, "", feedback=f"prompt refused: {exc}")))


def _finish(task, env, planner: str, lm, config, log: EpisodeLog, plan_text, prims, failure, t0) -> EpisodeResult:
    result = execute(task, env, planner, lm, config, log.records, prims, failure, t0)
    if prims is not None:
        result.actions = [str(s) for s in plan_text]  # the plan as the LM wrote it (access included)
    log.flush()  # the accepted plan's record, emitted last: it carries what execution did
    return result


class SayPlan:
    """Search and planning in one chat history (module doc)."""

    name = "sayplan"

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        t0 = time.perf_counter()
        rooms = task.graph.places
        expanded: list[str] = []
        log = EpisodeLog(on_step)
        intro = template("sayplan").format(instruction=task.instruction, search_steps=config.sayplan.search_steps,
                                           attempts=1 + config.sayplan.replans)
        turns: list[tuple[str, str]] = [("user", intro + "\n")]  # (role, text); user turns get the graph appended
        graphs: list[str] = [scene_json(searched_graph(task.graph, expanded))]
        expanded_line = ["Expanded rooms: none"]
        searches = submissions = 0
        failure = plan = prims = None
        schema = reply_schema(rooms, with_plan=True)
        while True:
            messages = self._messages(turns, graphs, expanded_line)
            try:
                c = lm.complete(messages, schema=schema, max_tokens=config.plan_max_tokens)
            except ContextOverflow as exc:
                _overflow(log, exc)
                failure = "context_overflow"
                break
            command, node, steps, reason = read_command(c)
            if command == "verify_plan":
                submissions += 1
                prims, why = verify_sayplan(searched_graph(task.graph, expanded), steps)
                rec = call_record(len(log) + 1, c, f"verify_plan: {len(steps) if isinstance(steps, list) else 0} actions",
                                  prims is not None, why or "the plan can be carried out on the searched graph")
                rec.reason = reason
                log.add(rec)
                if prims is not None:
                    plan = steps
                    break
                log.emit(rec)
                if submissions > config.sayplan.replans:
                    failure = "replan_limit"
                    break
                answer = f"verify_plan: the plan cannot be carried out: {why}. Correct the plan, or search further."
            else:
                searches += 1
                if searches > config.sayplan.search_steps:
                    rec = call_record(len(log) + 1, c, f"{command}({node})" if command else None, False,
                                      f"search limit of {config.sayplan.search_steps} commands reached")
                    log.emit(log.add(rec))
                    failure = "search_limit"
                    break
                if command is None:
                    ok, answer = False, ("your answer could not be read: reply with the JSON object "
                                         f"{{\"reasoning\", \"command\", \"node\", \"plan\"}} ({c.error or 'not JSON'})")
                else:
                    ok, answer = search_step(command, node, expanded, rooms)
                rec = call_record(len(log) + 1, c, f"{command}({node})" if command else None, ok, answer)
                rec.reason = reason
                log.emit(log.add(rec))
            turns.append(("assistant", c.text))
            turns.append(("user", answer + "\n"))
            graphs.append(scene_json(searched_graph(task.graph, expanded)))
            expanded_line.append("Expanded rooms: " + (", ".join(expanded) or "none"))
        return _finish(task, env, self.name, lm, config, log, plan, prims, failure, t0)

    @staticmethod
    def _messages(turns, graphs, expanded_line) -> list[dict]:
        """The chat so far; only the latest user turn carries the graph."""
        out, k = [], 0
        last_user = sum(1 for role, _ in turns if role == "user") - 1
        for role, text in turns:
            if role == "user":
                graph = graphs[k] if k == last_user else GRAPH_SUPERSEDED
                text = f"{text}{expanded_line[k]}\nScene graph: {graph}"
                k += 1
            out.append({"role": role, "content": text})
        return out


class SayPlanLite:
    """A search phase with only the search API, then a planning phase with only the planning API
    (module doc)."""

    name = "sayplan-lite"

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        t0 = time.perf_counter()
        rooms = task.graph.places
        expanded: list[str] = []
        log = EpisodeLog(on_step)
        previous = "none (this is the first)"
        schema = reply_schema(rooms, with_plan=False)
        for _ in range(config.sayplan.search_steps):
            prompt = template("sayplan_lite_search").format(
                instruction=task.instruction, previous=previous, expanded=", ".join(expanded) or "none",
                scene=scene_json(searched_graph(task.graph, expanded)), search_steps=config.sayplan.search_steps)
            try:
                c = lm.complete([{"role": "user", "content": prompt}], schema=schema, max_tokens=config.plan_max_tokens)
            except ContextOverflow as exc:
                _overflow(log, exc)
                return execute(task, env, self.name, lm, config, log.records, None, "context_overflow", t0)
            command, node, _, reason = read_command(c)
            if command == "verify_plan":
                rec = call_record(len(log) + 1, c, "verify_plan()", True, "search finished")
                rec.reason = reason
                log.emit(log.add(rec))
                break
            if command is None:
                ok, answer = False, f"(unreadable answer: {c.error or 'not JSON'})"
            else:
                ok, answer = search_step(command, node, expanded, rooms)
            rec = call_record(len(log) + 1, c, f"{command}({node})" if command else None, ok, answer)
            rec.reason = reason
            log.emit(log.add(rec))
            previous = answer
        scene = scene_json(searched_graph(task.graph, expanded))
        feedback = ""
        for attempt in range(1 + config.sayplan.replans):
            prompt = template("sayplan_lite_plan").format(instruction=task.instruction, scene=scene, feedback=feedback)
            try:
                c = lm.complete([{"role": "user", "content": prompt}], schema=PLAN_SCHEMA, max_tokens=config.plan_max_tokens)
            except ContextOverflow as exc:
                _overflow(log, exc)
                return execute(task, env, self.name, lm, config, log.records, None, "context_overflow", t0)
            data = c.parsed if c.parsed is not None else read_json(c.text)
            steps = data.get("plan") if isinstance(data, dict) else data
            if steps is None:
                actions, why = None, f"no plan list in the answer ({c.error or 'not JSON'})"
            else:
                actions, why = verify_lite(searched_graph(task.graph, expanded), steps)
            rec = call_record(len(log) + 1, c, f"plan of {len(steps) if isinstance(steps, list) else 0} actions",
                              actions is not None, why or "the plan can be carried out on the searched graph")
            rec.reason = data.get("reasoning") if isinstance(data, dict) and isinstance(data.get("reasoning"), str) else None
            log.add(rec)
            if actions is not None:
                return _finish(task, env, self.name, lm, config, log, actions, actions, None, t0)
            log.emit(rec)
            shown = steps if isinstance(steps, list) else c.text[:500]
            feedback = f"Your previous plan: {shown}\nThe simulator rejected it: {why}\nWrite a corrected plan.\n"
        return execute(task, env, self.name, lm, config, log.records, None, "replan_limit", t0)
