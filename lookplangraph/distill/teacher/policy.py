"""The privileged teacher's policy (:class:`Policy`): the next action of the task's ground-truth
plan, read from the environment's true graph, which no planner may read.

* The plan's steps in order; a step whose effect already holds is passed over; ``done()`` once
  every step is behind it and the goal holds, else another pass (moved objects back to where the
  plan leaves them, then the plan again), at most :data:`MAX_PASSES`.
* Before a step acts on an object the planner's memory has not seen, it searches (:mod:`.search`).
* With ``walk`` (``expert-walk``: :data:`TEACHERS`) it puts only into what is in the room it stands
  in: a ``rearrange`` to another room is a ``pick_up``, a ``go_to`` of its own and the put, even
  where the view lists the destination from afar (``recall = named-assets``).
* Where nothing corrects (correction ``feedback``/``none``, ReAct) it writes the ``go_to``/``open``
  steps itself; it closes what it opened on the way; a refused answer is not given again in the
  same state, while a low-level failure (:mod:`sim_adapters.failures`) is tried again.
* Each action comes with a one-sentence reason a planner could have written.

:class:`~lookplangraph.distill.teacher.expert.Expert` puts it behind ``complete()``;
:meth:`Policy.begin_episode` binds it to one episode. What it reads of the truth and why:
``docs/guides/expert.md``.
"""

from __future__ import annotations

from typing import Any

from grasif.goals import evaluate_goal
from grasif.priors import Priors
from grasif.task import Task
from sgs.actions import Action, make, parse_action, parse_plan
from sgs.graph import Layer, SceneGraph, node_class
from sgs.simulator import check, run_plan

from lookplangraph.agent.recall import recall_asset_classes, recall_classes, recalled, spoken
from lookplangraph.agent.search import instruction_hints
from lookplangraph.distill.teacher.search import SEARCHES, Search
from lookplangraph.evaluation.injection import rearrange_opens
from lookplangraph.planners.episode import failures_of
from lookplangraph.planners.lookplangraph import state_key

#: the planners the expert can answer (module doc)
PLANNERS = ("lookplangraph", "react", "sayplan", "sayplan-lite", "llm-as-p")

#: passes over the plan after the first, while the goal does not hold (dynamic mode)
MAX_PASSES = 3

#: what the expert calls itself in results: never to be mistaken for a model
NAME = "expert (privileged)"

#: the ``--expert``/``--lm`` specs of the teacher and the :class:`Policy` each builds (module doc;
#: the searches: :data:`~lookplangraph.distill.teacher.search.SEARCHES`)
TEACHERS = {spec: {"search": search} for spec, search in SEARCHES.items()}
TEACHERS["expert-walk"] = {"search": "view", "walk": True}


class ExpertError(RuntimeError):
    """The expert cannot answer: no episode begun, or a planner it does not serve."""


class Policy(Search):
    """The privileged policy (module doc). One instance serves any number of episodes in turn."""

    name = NAME

    def __init__(self, search: str = "belief", priors: Priors | None = None, walk: bool = False) -> None:
        if search not in SEARCHES.values():
            raise ExpertError(f"the expert searches by {' or '.join(SEARCHES.values())}, not {search!r}")
        self.search = search
        self.priors = priors
        self.walk = walk
        self.name = {"belief": NAME, "rooms": f"{NAME}, room-by-room search", "view": f"{NAME}, view-limited search"}[search]
        if walk:
            self.name += ", puts from the destination's room"
        self.task: Task | None = None
        self.env = None
        self.planner = "lookplangraph"
        self.explicit = False

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
        recall = getattr(config, "recall", "here")
        self.recall = recall_classes(recall, task.instruction, task.graph)
        # the asset classes whose assets in other rooms the view lists too (recall = named-assets)
        self.asset_recall = recall_asset_classes(recall, task.instruction, task.graph)
        self.refused: set[tuple[Any, str]] = set()
        self.last: tuple[Any, str] | None = None
        self.failures_seen = _failures(env)  # low-level failures so far (sim_adapters.failures)
        self.target, _ = run_plan(task.graph, self.steps, correct=True)  # the map after the plan
        self.want_open = {n for n, v in self.target.nodes.items() if v.has("open")}
        if planner == "react":  # ReAct's commands have no rearrange: take, then put
            self.steps = [a for step in self.steps for a in _lowered(step)]
        self.plan = list(self.steps)
        self.passes = 0

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
        another policy visits (DAgger: :mod:`lookplangraph.distill.planning.dagger`)."""
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
        what is in the agent's room, an object it has seen, a node an accepted answer named, an
        asset of a class the instruction names (``recall = named-assets``: listed from anywhere)."""
        if name not in g.nodes:
            return True
        layer = g.nodes[name].layer
        return (layer is Layer.PLACE or g.place_of(name) == g.agent.location or name in self.known
                or (layer is Layer.OBJECT and self.seen(g, name))
                or (layer is Layer.ASSET and recalled(name, self.asset_recall)))

    def _afar(self, g: SceneGraph, name: str | None) -> bool:
        """Walking (``walk``): ``name`` is a destination in another room than the agent's."""
        return self.walk and name in g.nodes and g.place_of(name) != g.agent.location

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
            if step.function_name == "rearrange" and (
                    not self._visible(g, step.destination) or self._afar(g, step.destination)
                    or (self.walk and g.agent.holding == step.node)):
                # the destination is not in the view from here (walking: not in this room, or the
                # object is in hand): take the object, then go and put it; the step stays, so that
                # once its effect holds (however it came about) it is passed over
                take, put = _lowered(step)
                part = put if g.agent.holding == step.node else take
                answer = self._write(g, key, part, check(g, part, correct=True))
                if answer is not None:
                    return answer
                self.cursor += 1
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
        if not hidden and step.function_name in ("put_on", "put_inside") and self._afar(g, step.destination):
            hidden = [step.destination]  # walking: put only in the room it stands in
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
