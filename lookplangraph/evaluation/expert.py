"""The expert policy: a **privileged** stand-in for an LM (it is **not** a language model), for the
harness proof and for training data. It reads what no planner may read — the environment's true
graph and the task's ground-truth plan — and answers the planner's prompts through ``complete()``
exactly where an LM would: its reply text is parsed, checked and executed like a model's. It is
never a default and never a row among models (``lookplangraph eval --lm expert`` labels every
result ``expert (privileged)``).

What it does, one reply per call, from the episode's current state:

* The goal is reached by the ground-truth plan's steps, in order (a step whose effect already
  holds is passed over). ``done()`` comes when every step is behind it and the goal holds.
* **Looking before touching.** The expert keeps what the planner's memory graph knows
  (:meth:`Expert.seen`): an object is seen once a node holding it was inspected (true graph's
  ``inspected``) or once the agent held it. Before a step acts on an unseen object the expert
  searches, acting only on what the robot knows — the map (the memory graph's assets and the
  objects' remembered places), what it has inspected, the instruction — and the object prior
  (:mod:`grasif.priors`). Two searches (:data:`SEARCHES`):

  - ``belief`` (the default, ``--lm expert``): the remembered holder first; then the unvisited
    asset with the highest ``P(here) / cost``, where ``P(here)`` is the belief that the object was
    moved there — half on its remembered room, half on the rest of the building, spread over the
    assets in proportion to the prior of the object's class, more on an asset or room the
    instruction names ("the cup on the shelf in the storage room") — and ``cost`` is one action
    for an asset in the agent's room, two (``go_to`` first) elsewhere
    (:func:`lookplangraph.agent.search.ranked_holders`, the order the loop's search hint shows).
    No holder is looked at twice.
  - ``rooms`` (``--lm expert-oracle``, the expert's earlier search, kept for the harness proofs
    and to reproduce older data): the remembered holder, the other assets of its room, then the
    assets of the other rooms in the map's order.
  - ``view`` (``--lm expert-view``): the ``belief`` search limited to what the planner's view
    shows. The view lists an object's remembered place only while the agent is in that room
    (:mod:`lookplangraph.agent.view`), or from anywhere when the planner's ``recall`` is
    ``named`` and the instruction names the object's class (:mod:`lookplangraph.agent.recall`).
    Until the view has shown where the map remembers the object, the expert does not use it: it
    walks to the unvisited room whose assets are likeliest to hold the object's class (the sum
    of the same weights), and searches
    as ``belief`` once the remembered room has been visited (or every room has). Its choices
    depend only on what a student sees, so a student can learn them; the other two jump to a
    remembered room the prompt never showed.

  The truth is used for the *goal* (which objects, where they must end), never to shortcut the
  search. ``belief`` and ``rooms`` do use the memory graph's remembered places of rooms the
  view has not shown (what the memory knows, not what the prompt shows); only ``view`` restricts
  itself to what a planner's prompt has shown, so only its trajectories can be imitated from the
  prompt alone.
* **Grounded reasons.** A reason names only nodes the step's prompt shows (the view, the
  instruction, the previous steps): a node it does not show is written as its class ("the
  stapler"), and a search says why in terms a reader can check ("staplers are usually on a desk;
  desk-3 is the most likely place not looked at yet").
* **Explicit steps where nothing corrects.** With correction ``rules`` a step is answered as the
  plan writes it (the SGS inserts the ``go_to``/``open`` it needs). With ``feedback`` and
  ``none`` the expert writes those steps itself: a ``rearrange`` is preceded by the destination's
  side (``go_to`` its room, ``open`` it), then the object's side.
* **Closing what it opened**: a container opened on the way (by the expert or by a correction)
  that the goal does not want open and no later step needs is closed again before the next step.
* **Recovery**: when an answer was refused (the true graph did not change), the same answer is
  not given again in the same state; the expert writes the step's first primitive instead, and
  failing that passes over the step. A *low-level failure* (:mod:`sim_adapters.failures`: the
  environment's failure log grew) is not a refusal: the expert tries the same answer again, and
  after one that did something else (an object that slipped) it goes on from the new state.

Planners it serves (:data:`PLANNERS`): ``lookplangraph`` in every correction mode (one action as
the decision's JSON); ``react`` (the same policy in primitives, written as ReAct's text commands:
``go to X``, ``take o from h``, ``put o in/on d``, ``open X`` ...; "Nothing happens." is a refusal);
``sayplan`` and ``sayplan-lite`` (``expand_node`` of each room the plan names, then the plan:
SayPlan's ``goto``/``access``/``pickup``/``release`` words, or primitives for the Lite planning
call); ``llm-as-p`` (the ground truth's primitive steps on the map). The last three write static
plans, which fail in dynamic mode by design. LLM+P needs no expert: its oracle PDDL problems
through Fast Downward are ``benchmarks/pddl_oracle.py``.

Use: the runner calls :meth:`Expert.begin_episode` before each episode (the expert needs the task,
the environment and the planner's settings); ``complete()`` without it raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

from grasif.goals import evaluate_goal
from grasif.priors import Priors, shipped
from grasif.task import Task
from sgs.actions import Action, make, parse_action, parse_plan
from sgs.graph import Layer, SceneGraph, affords, node_class
from sgs.simulator import check, run_plan

from lookplangraph.agent.recall import recall_classes, recalled, spoken
from lookplangraph.agent.search import hinted, holders, instruction_hints, ranked_holders, weight
from lookplangraph.evaluation.injection import rearrange_opens
from lookplangraph.lm import Completion, Usage
from lookplangraph.planners.episode import failures_of
from lookplangraph.planners.lookplangraph import state_key

#: the planners the expert can answer (module doc)
PLANNERS = ("lookplangraph", "react", "sayplan", "sayplan-lite", "llm-as-p")

#: how ReAct's text world answers a command it did not carry out (lookplangraph.planners.react)
REACT_REFUSED = "Nothing happens."

#: how LookPlanGraph's prompt says that the last answer was refused (lookplangraph.prompts)
FEEDBACK_MARK = "Feedback on your last answer:"

#: passes over the plan after the first, while the goal does not hold (dynamic mode)
MAX_PASSES = 3

#: what the expert calls itself in results: never to be mistaken for a model
NAME = "expert (privileged)"

#: how the expert searches for an object that is not where it was remembered (module doc), by the
#: ``--lm`` spec that selects it
SEARCHES = {"expert": "belief", "expert-oracle": "rooms", "expert-view": "view"}

#: a node's name in text (``shelf-2``, ``toms_office-1``)
NODE_NAME = re.compile(r"\b[a-z][a-z0-9_]*-\d+\b")


class ExpertError(RuntimeError):
    """The expert cannot answer: no episode begun, or a planner it does not serve."""


def _holder(g: SceneGraph, name: str) -> str:
    """The outermost non-object node holding ``name`` (what ``discover_objects`` must look at)."""
    node = g.parent[name][0]
    while node in g.nodes and g.nodes[node].layer is Layer.OBJECT and node in g.parent:
        node = g.parent[node][0]
    return node


class Expert:
    """The privileged expert (module doc). One instance serves any number of episodes in turn."""

    name = NAME

    def __init__(self, search: str = "belief", priors: Priors | None = None) -> None:
        if search not in SEARCHES.values():
            raise ExpertError(f"the expert searches by {' or '.join(SEARCHES.values())}, not {search!r}")
        self.search = search
        self.priors = priors
        self.name = {"belief": NAME, "rooms": f"{NAME}, room-by-room search", "view": f"{NAME}, view-limited search"}[search]
        self.task: Task | None = None
        self.env = None
        self.planner = "lookplangraph"
        self.explicit = False

    @property
    def constraints(self) -> frozenset[str]:
        return frozenset()  # it decodes nothing

    # -- episode ----------------------------------------------------------------------------------
    def begin_episode(self, task: Task, env, planner: str = "lookplangraph", config=None) -> None:
        """Bind the expert to one episode: ``env`` is read for its true graph (privileged) at each
        call; ``config.correction`` says whether the expert writes inserted steps itself."""
        if planner not in PLANNERS:
            raise ExpertError(f"the expert answers the planners {', '.join(PLANNERS)}, not {planner!r}")
        self.task, self.env, self.planner = task, env, planner
        self.explicit = getattr(config, "correction", "rules") != "rules" or planner == "react"
        self.steps = parse_plan(task.ground_truth_plan)
        self.expanded: list[str] = []  # SayPlan: the rooms the expert expanded
        self.cursor = 0
        self.initial: SceneGraph | None = None
        self.held: set[str] = set()
        self.inspected: set[str] = set()  # the discover_objects the planner accepted
        self.known: set[str] = set()  # nodes named by accepted answers: the planner's view keeps them
        self.visited: set[str] = set()  # rooms the agent has been in: their remembered objects were in view
        self.hints = instruction_hints(task.instruction, task.graph)  # the rooms and asset classes the instruction names
        self.told = _told_apart(task.instruction, task.graph)  # objects the instruction picks out by a property
        # the classes whose remembered places the view recalls from anywhere (planner setting recall = named)
        self.recall = recall_classes(getattr(config, "recall", "here"), task.instruction, task.graph)
        self.refused: set[tuple[Any, str]] = set()
        self.last: tuple[Any, str] | None = None
        self.failures_seen = _failures(env)  # low-level failures so far (sim_adapters.failures)
        self.target, _ = run_plan(task.graph, self.steps, correct=True)  # the map after the plan
        self.want_open = {n for n, v in self.target.nodes.items() if v.has("open")}
        if planner == "react":  # ReAct's commands have no rearrange: take, then put
            self.steps = [a for step in self.steps for a in _lowered(step)]
        self.plan = list(self.steps)
        self.passes = 0

    # -- the LM interface ---------------------------------------------------------------------------
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
        reason = grounded(reason, last)
        reply = action.model_dump()
        keys = _schema_keys(request.get("schema"))
        if not keys or "reason" in keys:  # free replies, or a schema with a reason (first or last)
            reply = {"reason": reason, **reply} if keys[:1] == ["reason"] else {**reply, "reason": reason}
        return self._reply(json.dumps(reply))

    # -- static plans -----------------------------------------------------------------------------
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

    # -- the policy -----------------------------------------------------------------------------------
    def next_action(self, refused: bool = False) -> tuple[Action, str]:
        """The next action and a one-sentence reason, from the environment's current true graph;
        ``refused``: the planner said the last answer was not accepted (its feedback line)."""
        g = self.env.true_graph()
        if self.initial is None:
            self.initial = g
        failures = _failures(self.env)
        failed = failures > self.failures_seen  # the robot's hands failed the last answer, not the answer itself
        self.failures_seen = failures
        if self.last is not None:
            last_key, last_action = self.last
            if failed:
                pass  # transient: the same answer may be given again, it is how a robot recovers
            elif refused or (last_key == state_key(g) and not last_action.startswith("discover_objects")):
                self.refused.add(self.last)
            else:
                done = parse_action(last_action)
                self.known.update(n for n in (done.node, done.destination) if n)  # memory keeps them in view
                if done.function_name == "discover_objects" or (self.planner == "react" and done.function_name == "open"):
                    self.inspected.add(done.node)  # ReAct looks inside what it opens
        g = g.evolve(inspected=g.inspected | self.inspected)  # what memory has inspected
        self.visited.add(g.agent.location)
        key = state_key(g)
        if g.agent.holding:
            self.held.add(g.agent.holding)
        action, reason = self._choose(g, key)
        self.last = (key, str(action))
        return action, reason

    def follow(self, answer: str | None) -> None:
        """The answer given in the state the expert last answered was ``answer`` (an action string;
        None: nothing the planner could read), not the expert's own: what it infers at the next
        call (what was inspected, what was refused) follows that answer. For labelling the states
        another policy visits (DAgger: :mod:`lookplangraph.evaluation.dagger`)."""
        if self.last is not None:
            self.last = None if answer is None else (self.last[0], answer)

    def seen(self, g: SceneGraph, name: str) -> bool:
        """Whether the planner's memory has seen object ``name`` where it truly is now."""
        if name in self.held or g.agent.holding == name:
            return True
        if self.initial is not None and g.parent.get(name) != self.initial.parent.get(name):
            return True  # the agent moved it (nothing else moves during an episode)
        node = name
        while node in g.parent:
            node = g.parent[node][0]
            if node in g.inspected:
                return True
            if node not in g.nodes or g.nodes[node].layer is not Layer.OBJECT:
                return False
        return False

    def _visible(self, g: SceneGraph, name: str) -> bool:
        """Whether the planner's view shows ``name`` (:mod:`lookplangraph.agent.view`): a room,
        what is in the agent's room, an object it has seen, a node an accepted answer named."""
        return (name not in g.nodes or g.nodes[name].layer is Layer.PLACE or g.place_of(name) == g.agent.location
                or name in self.known or (g.nodes[name].layer is Layer.OBJECT and self.seen(g, name)))

    def _ok(self, g: SceneGraph, key, action: Action) -> bool:
        """``action`` is feasible as written, changes the graph and was not refused here."""
        if (key, str(action)) in self.refused:
            return False
        out = check(g, action, correct=False)
        return out.ok and out.graph != g

    def _choose(self, g: SceneGraph, key) -> tuple[Action, str]:
        for _ in range((len(self.plan) + 2) * (MAX_PASSES + 2) + len(self.task.graph.nodes)):
            closing = self._cleanup(g, key)
            if closing is not None:
                return closing
            if self.cursor >= len(self.steps):
                if self.passes < MAX_PASSES and not evaluate_goal(self.task.goal, g, self.initial).success:
                    self.passes += 1  # another pass: repairs, then what was passed over
                    self.steps += self._repairs(g) + self.plan
                    continue
                return make("done"), self._done_reason(g)
            step = self.steps[self.cursor]
            corrected = check(g, step, correct=True)
            if step.function_name != "done" and corrected.ok and corrected.graph == g:
                self.cursor += 1  # its effect already holds
                continue
            if step.function_name == "done":
                self.cursor += 1
                continue
            for obj in self._objects(g, step):
                if not self.seen(g, obj):
                    found = self._search(g, key, obj)
                    if found is not None:
                        return found
            if step.function_name == "rearrange" and not self._visible(g, step.destination):
                # the destination is not in the view from here: take the object, then go and put it
                self.steps[self.cursor:self.cursor + 1] = _lowered(step)
                continue
            answer = self._write(g, key, step, corrected)
            if answer is not None:
                return answer
            self.cursor += 1  # nothing about this step can be done: pass it over
        return make("done"), self._done_reason(g)

    def _repairs(self, g: SceneGraph) -> list[Action]:
        """For a pass after the plan did not reach the goal (dynamic mode moved what the plan took
        as in place, or stacked one object on another): a ``rearrange`` of each moved object to
        where the plan leaves it on the map, holders before what they hold."""
        prior, target = self.task.graph, self.target
        moved = [n for n in target.names(Layer.OBJECT)
                 if n in g.parent and g.parent[n] != target.parent.get(n)
                 and (target.parent.get(n) != prior.parent.get(n) or self.initial.parent.get(n) != prior.parent.get(n))]
        moved.sort(key=lambda n: sum(1 for m in moved if target.is_ancestor(n, m)), reverse=True)
        repairs = [make("rearrange", n, target.parent[n][1].value, target.parent[n][0]) for n in moved
                   if target.parent[n][1].value in ("ontop", "inside")]
        return [a for r in repairs for a in _lowered(r)] if self.planner == "react" else repairs

    def _objects(self, g: SceneGraph, step: Action) -> list[str]:
        names = [step.node, step.destination]
        return [n for n in names if n in g.nodes and g.nodes[n].layer is Layer.OBJECT]

    def _write(self, g: SceneGraph, key, step: Action, corrected) -> tuple[Action, str] | None:
        """The step itself, or (explicit modes, or after a refusal) the first step it needs."""
        hidden = [n for n in (step.node, step.destination) if n and not self._visible(g, n)]
        if hidden:  # a name the prompt does not show (an asset of another room): go and see it first
            go = make("go_to", g.place_of(hidden[0]))
            if self._ok(g, key, go):
                return go, self._reason(g, go, step)
        plain = not self.explicit and (key, str(step)) not in self.refused and corrected.ok
        if plain or self._ok(g, key, step):
            return step, self._reason(g, step)
        if not corrected.ok:
            return None
        for pre in self._prerequisites(g, step, corrected.actions):
            if self._ok(g, key, pre):
                return pre, self._reason(g, pre, step)
        for prim in corrected.actions:  # last resort: the corrected expansion, one primitive at a time
            if self._ok(g, key, prim):
                return prim, self._reason(g, prim, step)
        return None

    def _prerequisites(self, g: SceneGraph, step: Action, prims) -> list[Action]:
        """``go_to``/``open`` steps before ``step``; for ``rearrange`` the destination's side first."""
        if step.function_name == "rearrange" and any(a.function_name == "pick_up" for a in prims):
            first, second = rearrange_opens(prims)
            out: list[Action] = []
            if second:
                out += [make("go_to", g.place_of(step.destination))] + second
            out += [make("go_to", g.place_of(step.node))] + first
            return out
        return [a for a in prims if a.function_name in ("go_to", "open")]

    def _search(self, g: SceneGraph, key, obj: str) -> tuple[Action, str] | None:
        """The next step of the search for ``obj`` (module doc), or None when nothing is left."""
        prior = self.task.graph
        start = _holder(prior, obj) if obj in prior.parent else None
        if self.search == "view" and start is not None and prior.place_of(start) not in self.visited \
                and not recalled(obj, self.recall):
            explore = self._explore(g, key, obj)
            if explore is not None:
                return explore
        if self.search == "rooms":
            candidates = self._rooms_order(g, obj, start)
        else:
            candidates = self._belief_order(g, obj, start)
        for c, why in candidates:
            if c is None or c in g.inspected or c not in g.nodes:
                continue
            look = make("discover_objects", c)
            where = g.place_of(c)
            if where != g.agent.location:
                go = make("go_to", where)
                if self._ok(g, key, go):
                    return go, f"{why}; go to {where} to look at {c}"
                continue
            if self._ok(g, key, look):
                return look, why
            opened = check(g, look, correct=True)
            if opened.ok:
                for pre in opened.actions:
                    if pre.function_name == "open" and self._ok(g, key, pre):
                        return pre, f"open {pre.node} to look for {obj} inside ({why})"
        return None

    def _remembered(self, obj: str) -> str:
        """Where the map puts ``obj``: ``inside box-1 on shelf-2``."""
        prior, node, words = self.task.graph, obj, []
        while node in prior.parent and prior.nodes.get(prior.parent[node][0]) is not None:
            parent, rel = prior.parent[node]
            if prior.nodes[parent].layer is Layer.PLACE:
                break
            words.append(f"{'inside' if rel.value == 'inside' else 'on'} {parent}")
            node = parent
        return " ".join(words) or "nowhere"

    def _rooms_order(self, g: SceneGraph, obj: str, start: str | None) -> list[tuple[str, str]]:
        """The ``rooms`` search (module doc): the remembered holder, its room, then the other rooms."""
        prior = self.task.graph
        first_room = prior.place_of(start) if start is not None else g.agent.location
        rooms = [first_room] + [p for p in g.places if p != first_room]
        out = [(start, f"{self._called(obj)} is remembered {self._remembered(obj)} but not seen yet")] \
            if start is not None else []
        for room in rooms:
            out += [(n, f"{obj} was not found where it was remembered; look at {n}") for n in g.children(room)
                    if g.nodes[n].layer is Layer.ASSET
                    and (affords(g.nodes[n], "put_on") or affords(g.nodes[n], "put_inside"))]
        return out

    def _usually(self, cls: str) -> str:
        """Where the prior usually puts class ``cls``, in words ("on a desk or inside a cabinet"; ""
        for a class the prior does not know)."""
        priors = self.priors or shipped()
        usual = priors.holders(cls, 2) if priors.resolve(cls) else []
        return " or ".join(f"{'on' if p.relation == 'ontop' else 'inside'} a {p.holder.replace('_', ' ')}" for p in usual)

    def _explore(self, g: SceneGraph, key, obj: str) -> tuple[Action, str] | None:
        """The ``view`` search before the room where the map remembers ``obj`` was visited: a
        ``go_to`` of the unvisited room whose holders are likeliest for its class, or None."""
        prior, cls = self.task.graph, node_class(obj)
        mass: dict[str, float] = {}
        for n in holders(prior):
            room = prior.place_of(n)
            if room not in self.visited:
                mass[room] = mass.get(room, 0.0) + weight(prior, cls, n, self.hints, self.priors)
        kept = self._usually(cls)
        for room in sorted(mass, key=lambda r: (-mass[r], r)):
            go = make("go_to", room)
            if self._ok(g, key, go):
                thing = cls.replace("_", " ")
                why = f"a {thing} is usually {kept}" if kept else f"no {thing} is in view yet"
                return go, f"{why}, and {room} is the likeliest room not visited yet"
        return None

    def _belief_order(self, g: SceneGraph, obj: str, start: str | None) -> list[tuple[str, str]]:
        """The ``belief`` search (module doc; :func:`lookplangraph.agent.search.ranked_holders`):
        the unvisited holders, most likely per action first, each with the reason it is looked at."""
        prior, cls = self.task.graph, node_class(obj)
        thing = cls.replace("_", " ")
        out: list[tuple[str, str]] = []
        if start is not None and start not in g.inspected:
            out.append((start, f"{self._called(obj)} is remembered {self._remembered(obj)} but not seen yet"))
        room = prior.place_of(start) if start is not None else g.agent.location
        assets = [n for n in holders(prior) if n != start and n not in g.inspected]
        ranked = ranked_holders(prior, cls, room, assets, self.hints, self.priors, here=g.agent.location)
        lead = (f"{self._called(obj)} is not {self._remembered(obj)}, where it was remembered" if start in g.inspected
                else f"{self._called(obj)} is not seen yet")
        kept = self._usually(cls)
        for n in ranked:
            why = (f"{lead}; the instruction points to {n}" if any(hinted(prior, n, self.hints)) else
                   f"{lead}; a {thing} is usually {kept}, and {n} is the most likely place not looked at yet"
                   if kept else f"{lead}; {n} is the most likely place not looked at yet")
            out.append((n, why))
        return out

    def _cleanup(self, g: SceneGraph, key) -> tuple[Action, str] | None:
        """Close a container opened on the way that the goal does not want open and that neither
        the current step nor a later one needs."""
        remaining = self.steps[self.cursor:]
        named = {n for a in remaining for n in (a.node, a.destination) if n}
        current = self.steps[self.cursor] if self.cursor < len(self.steps) else None
        involved = set(self._objects(g, current)) | {current.node, current.destination} if current else set()
        def depth(n: str) -> int:
            d = 0
            while n in g.parent:
                n, d = g.parent[n][0], d + 1
            return d

        for n in sorted(g.nodes, key=depth, reverse=True):  # the innermost first: closing an outer one hides it
            v = g.nodes[n]
            if not v.has("open") or n in self.want_open or n in named or self.initial.nodes.get(n) is None:
                continue
            if self.initial.nodes[n].has("open"):
                continue
            if any(m in g.nodes and g.is_ancestor(n, m) for m in involved if m):
                continue
            close = make("close", n)
            if self._ok(g, key, close):
                return close, f"{n} was opened on the way and should be left closed"
            way = check(g, close, correct=True)
            if not way.ok or any(a.function_name == "open" for a in way.actions):
                continue  # out of reach (inside something closed): nothing to do about it now
            go = make("go_to", g.place_of(n))
            if g.place_of(n) != g.agent.location and self._ok(g, key, go):
                return go, f"go back to {g.place_of(n)} to close {n}"
        return None

    def _reason(self, g: SceneGraph, action: Action, step: Action | None = None) -> str:
        """One short sentence a planner could have written: why this action now."""
        fn, node, dest = action.function_name, action.node, action.destination
        if step is not None and step != action:  # a step the plan's next step needs first
            target = step.node or step.destination
            if fn == "go_to":
                return f"{target} is in {node}; go there first"
            if fn == "open":
                return f"{node} is closed; open it for {step.function_name}({target})"
            return f"{action} comes before {step}"
        if fn == "go_to":
            return f"the next part of the task is in {node}"
        if fn == "rearrange":
            return f"{self._called(node)} is seen; put it {'on' if action.relation == 'ontop' else 'in'} {dest}"
        if fn in ("put_on", "put_inside"):
            return f"put what I hold {'on' if fn == 'put_on' else 'in'} {dest}"
        if fn == "pick_up":
            return f"{self._called(node)} is seen; take it"
        return f"{fn.replace('_', ' ')} {node}, as the instruction asks"

    def _called(self, obj: str) -> str:
        """``obj`` as a reason names it: with the properties the instruction picks it out by, as
        the view writes them (``stapler-2 (red)``), when the map holds others of its class."""
        props = self.told.get(obj)
        return f"{obj} ({', '.join(props)})" if props else obj

    def _done_reason(self, g: SceneGraph) -> str:
        result = evaluate_goal(self.task.goal, g, self.initial)
        if result.success:
            return "the instruction is carried out"
        return "nothing more can be done: " + "; ".join(result.not_met()[:3])


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


def _told_apart(instruction: str, graph: SceneGraph) -> dict[str, list[str]]:
    """For each object whose class the map holds more than once, the properties it has that the
    instruction says and no other object of its class has ("the red stapler": ``{"stapler-2":
    ["red"]}``); objects without such a property are left out."""
    text = spoken(instruction)
    by_class: dict[str, list[str]] = {}
    for n in graph.names(Layer.OBJECT):
        by_class.setdefault(node_class(n), []).append(n)
    out: dict[str, list[str]] = {}
    for same in by_class.values():
        if len(same) < 2:
            continue
        for n in same:
            others = {p for o in same if o != n for p in (graph.nodes[o].properties or ())}
            said = [p for p in (graph.nodes[n].properties or ()) if p not in others and spoken(p) in text]
            if said:
                out[n] = said
    return out


def _failures(env) -> int:
    """How many low-level failures the environment's :class:`sim_adapters.failures.LowLevelFailures`
    (anywhere among its wrappers) has made this episode; 0 without one."""
    return len(failures_of(env))


def _lowered(step: Action) -> list[Action]:
    """``rearrange(o, r, d)`` as ``pick_up(o)`` and ``put_on``/``put_inside(d)``; other steps as they are."""
    if step.function_name != "rearrange":
        return [step]
    put = "put_on" if step.relation == "ontop" else "put_inside"
    return [make("pick_up", step.node), make(put, None, None, step.destination)]


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
