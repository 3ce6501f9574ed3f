"""ReAct (paper VI-A, appendix D and F5): the LM acts in an ALFWorld-style text environment laid
over the planner's environment, keeping the whole transcript.

:class:`TextWorld` tells the agent the places, its room and the task; its belief is a
:class:`~lookplangraph.agent.memory.MemoryGraph` of the map without priors (rooms and assets, no
objects), and objects enter it only through ``discover_objects`` observations, which go through
:class:`lookplangraph.agent.perception.Perception` as in LookPlanGraph. It reads one command per
reply line (``go to``, ``open``, ``take X from Y``, ``put X in/on Y``, ``turn on``, ``think:``,
``look``, ``inventory``, ``done``) and answers in text; a command that cannot be read, names
something not seen, or that the SGS or the environment refuses is answered "Nothing happens."
and changes nothing.

The episode ends on ``done``, after ``react_max_steps`` LM calls (``step_limit``),
``max_actions`` commands that acted (``max_actions``), or ``context_overflow``; it is judged on
the environment's final graph. ``actions`` are the commands that acted, ``executed`` their
primitive steps; tokens count every call. The command table and the transcript's turns:
``docs/guides/baselines.md`` (*ReAct*).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict

from sgs.actions import Action, make
from sgs.graph import Layer, Relation
from sgs.simulator import Infeasible, apply

from lookplangraph.lm import ContextOverflow
from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.perception import Perception, PerceptionError
from lookplangraph.planners.episode import EpisodeLog, StepRecord, episode_result
from lookplangraph.planners.sayplan import release_relation
from lookplangraph.agent.prompts import template

NOTHING = "Nothing happens."
STEP_MAX_TOKENS = 96  # one command or thought per reply


def as_chat(text: str) -> list[dict]:
    """A transcript as chat messages: each ``> command`` line an assistant turn (without the
    ``> ``), the lines between them user turns."""
    messages, user = [], []
    for line in text.splitlines():
        if line.startswith("> "):
            messages.append({"role": "user", "content": "\n".join(user).strip()})
            messages.append({"role": "assistant", "content": line[2:]})
            user = []
        else:
            user.append(line)
    messages.append({"role": "user", "content": "\n".join(user).strip()})
    return messages


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


class TextWorld:
    """The ALFWorld-style text environment over ``env`` (module doc)."""

    def __init__(self, graph, env, perceive: Perception):
        self.env, self.perceive = env, perceive
        self.memory = MemoryGraph(graph, priors=False)
        held = graph.agent.holding
        if held is not None:  # the agent knows what is in its hand
            g = self.memory.graph
            self.memory.graph = g.evolve(nodes={**g.nodes, held: graph.nodes[held]},
                                         parent={**g.parent, held: graph.parent[held]}, agent=graph.agent)
            self.memory.known.add(held)
        self.executed: list[str] = []  # this command's primitive steps
        self.observed: list[str] = []
        self.perceived: list[dict] = []
        self.failure: str | None = None  # this command's low-level failure (sim_adapters.failures)

    # -- what the agent is told ------------------------------------------------------------------
    def intro(self, instruction: str) -> str:
        g = self.memory.graph
        carrying = f" You are carrying {g.agent.holding}." if g.agent.holding else ""
        return template("react").format(places=", ".join(g.places), instruction=instruction,
                                        start=f"You are in the middle of {g.agent.location}. {self._around()}{carrying}")

    def _around(self) -> str:
        g = self.memory.graph
        assets = [c for c in g.children(g.agent.location) if g.nodes[c].layer is Layer.ASSET]
        return f"Looking quickly around you, you see {', '.join(assets) or 'nothing'}."

    def describe(self, node: str) -> str:
        g = self.memory.graph
        n = g.nodes[node]
        on = [c for c in g.children(node) if g.parent[c][1] is Relation.ONTOP]
        inside = [c for c in g.children(node) if g.parent[c][1] is Relation.INSIDE]
        parts = []
        if on or "put_on" in (n.affordances or ()):
            parts.append(f"On the {node}, you see {', '.join(on) or 'nothing'}.")
        if n.has("closed"):
            parts.append(f"The {node} is closed.")
        elif inside or "put_inside" in (n.affordances or ()):
            opened = f"The {node} is open. " if n.has("open") else ""
            parts.append(f"{opened}In it, you see {', '.join(inside) or 'nothing'}.")
        for state in ("on", "off"):
            if n.has(state):
                parts.append(f"The {node} is {state}.")
        return " ".join(parts) or f"You see nothing on or in the {node}."

    # -- commands --------------------------------------------------------------------------------
    def name(self, text: str) -> str | None:
        """The node the agent knows by ``text`` (case, spaces, ``_``/``-`` ignored), or None."""
        text = text.strip().strip(".'\"")
        g = self.memory.graph
        if text in g.nodes:
            return text
        matches = [n for n in g.nodes if _key(n) == _key(text)]
        return matches[0] if len(matches) == 1 else None

    def step(self, command: str) -> tuple[str, str, str]:
        """Carry out one command: ``(answer, kind, canonical command)``, kind ``think``,
        ``done``, ``acted``, ``looked`` (no step), ``failed`` (a low-level failure changed nothing;
        ``failure`` names its kind, also after one that did something else) or ``nothing``."""
        self.executed, self.observed, self.perceived, self.failure = [], [], [], None
        c = command.strip().rstrip(".").strip()
        low = c.lower()
        if re.match(r"^think\b", low):
            return "OK.", "think", c
        if low in ("done", "done()", "stop", "finish"):
            return "", "done", "done"
        if low in ("look", "look around"):
            g = self.memory.graph
            return f"You are in the middle of {g.agent.location}. {self._around()}", "looked", "look"
        if low in ("inventory", "i"):
            held = self.memory.graph.agent.holding
            return (f"You are carrying: {held}." if held else "You are not carrying anything."), "looked", "inventory"
        for pattern, handler in self._PATTERNS:
            m = re.match(pattern, low)
            if m:
                spans = [c[m.start(i):m.end(i)] if m.group(i) is not None else None for i in range(1, m.re.groups + 1)]
                return handler(self, *spans)
        return NOTHING, "nothing", c

    def _go(self, target: str):
        node = self.name(target)
        g = self.memory.graph
        if node is None or node == g.agent.holding:
            return NOTHING, "nothing", f"go to {target}"
        if g.nodes[node].layer is Layer.PLACE:
            if node == g.agent.location:
                return f"You are in the middle of {node}. {self._around()}", "looked", f"go to {node}"
            return self._act([make("go_to", node)], f"go to {node}",
                             lambda: f"You arrive at {node}. {self._around()}")
        if g.enclosing_closed(node):  # out of sight inside something closed
            return NOTHING, "nothing", f"go to {node}"
        steps = []
        room = g.place_of(node)
        if room != g.agent.location:
            steps.append(make("go_to", room))
        if node not in g.inspected:
            steps.append(make("discover_objects", node))
        if not steps:
            return self.describe(node), "looked", f"go to {node}"
        return self._act(steps, f"go to {node}", lambda: self.describe(node))

    def _toggle(self, fn: str, target: str):
        node = self.name(target)
        words = fn.replace("_", " ")
        if node is None:
            return NOTHING, "nothing", f"{words} {target}"
        steps = [make(fn, node)]
        if fn == "open" and node not in self.memory.graph.inspected:
            steps.append(make("discover_objects", node))

        def answer():
            if fn == "open":
                return f"You open the {node}. {self.describe(node)}"
            return f"You {words} the {node}."
        return self._act(steps, f"{words} {node}", answer)

    def _take(self, obj: str, holder: str | None):
        node = self.name(obj)
        g = self.memory.graph
        written = f"take {obj}" + (f" from {holder}" if holder else "")
        if node is None or g.nodes[node].layer is not Layer.OBJECT:
            return NOTHING, "nothing", written
        parent = g.parent[node][0]
        if holder is not None and self.name(holder) != parent:
            return NOTHING, "nothing", written
        return self._act([make("pick_up", node)], f"take {node} from {parent}",
                         lambda: f"You pick up the {node} from the {parent}.")

    def _put(self, obj: str | None, relation: str, dest: str):
        node = self.name(dest)
        g = self.memory.graph
        held = g.agent.holding
        written = f"put {obj + ' ' if obj else ''}{relation} {dest}"
        if node is None or held is None or (obj is not None and self.name(obj) != held):
            return NOTHING, "nothing", written
        if relation == "in/on":
            fn = release_relation(g, node)
        else:
            fn = "put_on" if relation in ("on", "onto", "on top of") else "put_inside"
        word = "on" if fn == "put_on" else "in"
        return self._act([make(fn, None, None, node)], f"put {held} {word} {node}",
                         lambda: f"You put the {held} {word} the {node}.")

    _PATTERNS = (
        (r"^go\s*to\s+(.+)$", _go),
        (r"^open\s+(.+)$", lambda self, x: self._toggle("open", x)),
        (r"^close\s+(.+)$", lambda self, x: self._toggle("close", x)),
        (r"^(?:turn|switch)\s+on\s+(.+)$", lambda self, x: self._toggle("turn_on", x)),
        (r"^(?:turn|switch)\s+off\s+(.+)$", lambda self, x: self._toggle("turn_off", x)),
        (r"^(?:take|pick\s*up|grab)\s+(.+?)(?:\s+from\s+(.+))?$", _take),
        (r"^put\s+(in/on|inside|into|in|onto|on)\s+(\S+)$", lambda self, rel, d: self._put(None, rel, d)),
        (r"^put\s+(.+?)\s+(in/on|inside of|inside|into|in|on top of|onto|on)\s+(.+)$", _put),
    )

    def _act(self, steps: list[Action], canonical: str, answer):
        """Run ``steps`` if the belief allows them all, then in the environment; ``answer()``
        after success, "Nothing happens." otherwise."""
        g = self.memory.graph
        try:
            for s in steps:
                g = apply(g, s)
        except Infeasible:
            return NOTHING, "nothing", canonical
        for s in steps:
            result = self.env.step(s)
            self.failure = result.failure
            if not result.ok:  # a low-level failure is observed as the controller reports it
                return (_sentence(result.feedback), "failed", canonical) if self.failure else (NOTHING, "nothing", canonical)
            happened = result.outcome or s
            try:
                self.memory.apply(happened)
            except Infeasible:
                return NOTHING, "nothing", canonical
            self.executed.append(str(happened))
            if result.outcome is not None:  # something else happened: that is what is observed
                self.failure = self.failure or "outcome"
                return _sentence(result.feedback), "acted", canonical
            if result.observation is not None:
                try:
                    observation, entry = self.perceive(result.observation, self.memory, self.env)
                except PerceptionError:
                    return f"You cannot make out what is on or in the {s.node}.", "acted", canonical
                if entry is not None:
                    self.perceived.append(asdict(entry))
                self.memory.discover(observation)
                self.observed = [f"{o.name} {o.relation} {o.parent}" for o in observation.objects]
        return answer(), "acted", canonical


class ReAct:
    """ALFWorld-style ReAct over any environment (module doc)."""

    name = "react"

    def run(self, task, env, lm, config, *, on_step=None, augmentation=None):
        t0 = time.perf_counter()
        perceive = Perception(augmentation)
        env.reset()
        initial = env.true_graph()
        world = TextWorld(task.graph, env, perceive)
        messages = as_chat(world.intro(task.instruction))
        log = EpisodeLog(on_step)
        actions: list[str] = []
        termination = "step_limit"
        for call in range(1, config.react.max_steps + 1):
            if len(actions) >= config.max_actions:
                termination = "max_actions"
                break
            try:
                c = lm.complete(messages, stop=["\n"], max_tokens=STEP_MAX_TOKENS)
            except ContextOverflow as exc:
                log.emit(log.add(StepRecord(call, None, None, False, "", feedback=f"prompt refused: {exc}")))
                termination = "context_overflow"
                break
            lines = [ln for ln in c.text.strip().splitlines() if ln.strip()]
            line = lines[0].strip() if lines else ""
            answer, kind, canonical = world.step(line.lstrip(">").strip())
            thought = re.sub(r"^>?\s*think\s*:?\s*", "", line, flags=re.I) if kind == "think" else None
            rec = StepRecord(call, thought,
                             canonical if line else None, kind not in ("nothing", "failed"), c.text,
                             executed=list(world.executed), feedback=answer or None, observed=list(world.observed),
                             prompt_tokens=c.usage.prompt_tokens, completion_tokens=c.usage.completion_tokens,
                             cached_tokens=c.usage.cached_tokens, seconds=c.seconds, perceived=list(world.perceived),
                             failure=world.failure)
            if kind in ("acted", "done"):
                actions.append(canonical)
            log.emit(log.add(rec))
            if kind == "done":
                termination = "done"
                break
            messages.append({"role": "assistant", "content": line or "(empty)"})
            messages.append({"role": "user", "content": answer})
        return episode_result(task, env, lm, config, log, initial=initial, t0=t0, termination=termination,
                              augmentation=perceive.mode, actions=actions,
                              executed=[s for r in log.records for s in r.executed], planner=self.name,
                              failure=None if termination == "done" else termination)


def _sentence(text: str | None) -> str:
    """A controller's report as an observation sentence."""
    text = (text or "Something went wrong.").strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")

