"""VirtualHome as an environment for the GraSIF ``virtualhome`` split (:class:`VirtualHomeEnvironment`).

Each primitive action becomes VirtualHome script lines with VirtualHome's class names and node ids:
the character walks to the node first (``[Walk]``), then ``pick_up`` → ``[Grab]``, ``put_on``/
``put_inside`` → ``[PutBack]``/``[PutIn]``, ``open``/``close``/``turn_on``/``turn_off`` →
``[Open]``/``[Close]``/``[SwitchOn]``/``[SwitchOff]``, ``discover_objects`` → ``[TurnTo]``;
``go_to(room)`` is ``[Walk]`` alone. The lines run in a backend (:class:`VirtualHomeBackend`):
:class:`EvolvingGraphBackend` (VirtualHome's own ``ScriptExecutor``, a step atomic, no images) or
:class:`sim_adapters.unity.UnityBackend` (the Unity simulator, with camera images). The adapter
refuses only what VirtualHome cannot check (a name that does not bind, ``go_to`` of a non-room, a
node in another room, a second object in the hand, a put with an empty hand); VirtualHome's own
refusals are the feedback, its ids replaced by our names.

``discover_objects`` observes what VirtualHome's graph has on and inside the node (ground truth,
nested objects too); :meth:`VirtualHomeEnvironment.describe` says the same as text. The true graph
is VirtualHome's state converted by :func:`grasif.virtualhome.convert_state`. The initial graph is
first made consistent with the task's graph (:func:`consistent_vh_graph`); ``set_initial``
(dynamic mode) edits it so that it converts to the perturbed graph. A missing package or an
unusable simulator raises :class:`VirtualHomeError`. Concepts: ``docs/guides/environments.md``.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from grasif import virtualhome as vh
from grasif.dataset import SourceError
from grasif.goals import evaluate_goal
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import Action, parse_action
from sgs.graph import Layer, Relation, SceneGraph, affords, node_class
from sim_adapters.base import Observation, StepResult, check_options, graph_copy, observe
from sim_adapters.binding import BindingError, NameBinding


class VirtualHomeError(RuntimeError):
    """VirtualHome cannot be used (package missing, simulator unreachable, scene not as expected)."""


@dataclass(frozen=True)
class ScriptResult:
    """Outcome of script lines: ``ok``, else VirtualHome's ``message`` (its own words)."""

    ok: bool
    message: str | None = None


@runtime_checkable
class VirtualHomeBackend(Protocol):
    name: str

    def reset(self, graph: dict) -> None:
        """Start from a VirtualHome graph (``{"nodes": [...], "edges": [...]}``, one character)."""

    def execute(self, lines: list[str]) -> ScriptResult:
        """Run script lines for the character in order (``[Walk] <cup> (2009)``); stop at the first
        that fails and return VirtualHome's message."""

    def graph(self) -> dict:
        """VirtualHome's current graph."""

    def image(self, node_id: int) -> bytes | None:
        """A picture of the character's view (PNG bytes), or ``None`` when the backend has none."""


# ---------------------------------------------------------------------------------------------
# the evolving-graph backend
# ---------------------------------------------------------------------------------------------
class EvolvingGraphBackend:
    """VirtualHome's evolving graph (``virtualhome-eval``): ``ScriptExecutor.execute_one_step`` per
    line on an ``EnvironmentState`` with instance selection (ids name nodes). Atomic steps."""

    name = "virtualhome"

    def __init__(self):
        try:
            from virtualhome_eval.simulation.evolving_graph import environment, execution, scripts, utils
        except Exception as exc:  # noqa: BLE001 - any import failure means the package is unusable
            raise VirtualHomeError(
                f"VirtualHome's evolving graph cannot be imported ({exc}); "
                "install it with: pip install --no-deps virtualhome-eval==0.1.1") from None
        self._env, self._ex, self._scripts = environment, execution, scripts
        self._equivalence = utils.load_name_equivalence()
        self._state = None
        self._source: dict | None = None
        self._dict: dict | None = None

    def reset(self, graph: dict) -> None:
        env = self._env
        if graph is not self._source:  # VirtualHome never changes its base graph: reuse it
            self._source, self._base = graph, env.EnvironmentGraph(graph)
            self._executor = self._ex.ScriptExecutor(self._base, self._equivalence)
        self._state = env.EnvironmentState(self._base, self._equivalence, instance_selection=True)
        self._dict = None

    def execute(self, lines: list[str]) -> ScriptResult:
        if self._state is None:
            raise VirtualHomeError("reset the backend with a graph before executing lines")
        state = self._state
        for line in lines:
            try:
                script = self._scripts.read_script_from_list_string([line])
            except self._scripts.ScriptParseException as exc:
                return ScriptResult(False, f"VirtualHome cannot parse {line!r}: {exc}")
            if len(script) != 1:
                return ScriptResult(False, f"VirtualHome cannot parse {line!r} as one script line")
            missing = [p.instance for p in script[0].parameters if state.get_node(p.instance) is None]
            if missing:  # [Walk] to a missing id raises inside VirtualHome
                return ScriptResult(False, f"{line}: no node with id {', '.join(map(str, missing))} in VirtualHome's graph")
            self._executor.info = self._ex.ExecutionInfo()  # messages accumulate otherwise
            ok, new = self._executor.execute_one_step(script, state)
            if not ok:
                return ScriptResult(False, self._executor.info.get_error_string() or f"VirtualHome refused {line}")
            state = new
        self._state, self._dict = state, None
        return ScriptResult(True)

    def graph(self) -> dict:
        if self._state is None:
            raise VirtualHomeError("reset the backend with a graph first")
        if self._dict is None:
            self._dict = self._state.to_dict()
        return self._dict

    def image(self, node_id: int) -> bytes | None:
        return None


# ---------------------------------------------------------------------------------------------
# the environment
# ---------------------------------------------------------------------------------------------
#: RobotHow programs that plug a device in (``[PlugIn]``) before switching it on: the GraSIF
#: translation drops that step (the action set has no plug action), and VirtualHome refuses
#: ``[SwitchOn]`` on an unplugged device, so their ground truth cannot reach the goal here.
UNPLUGGED_TASKS = frozenset({"file125_2", "file173_1", "file202_2", "file567_2", "file688_2", "file715_2",
                             "file721_2"})

_STATE_VERBS = {"open": "Open", "close": "Close", "turn_on": "SwitchOn", "turn_off": "SwitchOff"}
_PUT_VERBS = {"put_on": ("PutBack", Relation.ONTOP), "put_inside": ("PutIn", Relation.INSIDE)}
_VH_NODE = re.compile(r"<([^<>]+)>\s*\((\d+)\)")


class _Refused(Exception):
    """A step the adapter refuses before VirtualHome sees it; the message is the feedback."""


class VirtualHomeEnvironment:
    """A GraSIF ``virtualhome`` task in VirtualHome (module doc). ``backend`` defaults to the
    evolving graph; ``source`` is the dataset directory the task was built from (default: the
    installed ``virtualhome-eval``); ``image_dir`` receives the backend's images (default: a
    temporary directory)."""

    def __init__(self, task: Task, backend: VirtualHomeBackend | None = None, *, source: Path | None = None,
                 image_dir: Path | None = None):
        try:
            init, self._where = vh.task_source_graph(task, source)
            self.naming = vh.task_naming(init, self._where, task.provenance.get("ids"))
        except SourceError as exc:
            raise VirtualHomeError(str(exc)) from None
        self.task_id = task.id
        self.backend = backend if backend is not None else EvolvingGraphBackend()
        self.binding = NameBinding(self.naming.ids, order=self.naming.ids.get, scene="this VirtualHome scene")
        self._classes = {int(n["id"]): n["class_name"] for n in init["nodes"]}
        self._image_dir = Path(image_dir) if image_dir is not None else None
        self._init, self.rewired = consistent_vh_graph(init, task.graph, self.naming, self._where)
        self.initial = self._convert(vh.raw_index(self._init, self._where), self._support_of(task.graph))
        if _differences(task.graph, self.initial):
            raise VirtualHomeError(f"{self._where}: converts to a graph other than task {task.id}'s initial graph "
                                   "(the task was built from another virtualhome-eval version?)")
        self._images = 0
        self.reset()

    # -- protocol ------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start VirtualHome from the (possibly edited) initial graph; nothing is random, so
        ``seed`` is ignored (module :mod:`sim_adapters.base`)."""
        check_options(options)
        self.backend.reset(self._init)
        self.binding.clear()
        self._support = self._support_of(self.initial)
        self._inspected: set[str] = set()
        self._truth: SceneGraph | None = None
        found = self._true()
        if _differences(self.initial, found):
            raise VirtualHomeError(f"after reset, {self.backend.name}'s scene is not task {self.task_id}'s initial "
                                   f"state: {', '.join(_differences(self.initial, found)[:5])}")

    def true_graph(self) -> SceneGraph:
        return graph_copy(self._true())

    def _true(self) -> SceneGraph:
        """VirtualHome's state converted (cached until the next step changes it); not a copy."""
        if self._truth is None:
            raw = self._raw = vh.raw_index(self.backend.graph(), self._where)
            try:
                graph = self._convert(raw, self._support)
            except SourceError as exc:
                raise VirtualHomeError(f"{self.backend.name}'s graph cannot be converted: {exc}") from None
            self._truth = graph.evolve(inspected=frozenset(self._inspected))
        return self._truth

    def step(self, action: Action) -> StepResult:
        fn = action.function_name
        if fn == "done":
            return StepResult(True)
        before = self._true()
        try:
            lines, node_id = self.lines(action)
        except (_Refused, BindingError) as exc:
            return StepResult(False, f"{action} failed: {exc}")
        result = self.backend.execute(lines)
        info = {"lines": lines}
        if not result.ok:
            info["virtualhome"] = result.message
            return StepResult(False, f"{action} failed in VirtualHome: {self._readable(result.message)}", info=info)
        self._truth = None
        if fn in _PUT_VERBS:
            self._support[self.naming.ids[before.agent.holding]] = (_PUT_VERBS[fn][1], node_id)
        observation = None
        if fn == "discover_objects":
            name = self.naming.names[node_id]
            self._inspected.add(name)
            observation = observe(self._true(), name, action.node)
            image = self.backend.image(node_id)
            if image is not None:
                observation = Observation(observation.node, observation.objects, str(self._save_image(image, action.node)))
        return StepResult(True, None, observation, info=info)

    def note_seen(self, name: str, parent: str) -> None:
        """An augmentation reported ``name`` on or inside ``parent`` (planner names): actions on
        ``name`` bind to an unbound instance of its class there (:class:`NameBinding`)."""
        self.binding.note(name, parent)

    def set_initial(self, graph: SceneGraph) -> None:
        """Start from ``graph`` (the initial graph with objects moved): the VirtualHome initial graph
        is edited to convert to it (module doc); anything else that differs raises ``ValueError``."""
        edited = edit_vh_graph(self._init, self.initial, graph, self.naming)
        converted = self._convert(vh.raw_index(edited, self._where), self._support_of(graph))
        if _differences(graph, converted):
            raise ValueError(f"VirtualHome's graph cannot be made to match: {', '.join(_differences(graph, converted)[:5])}")
        self._init, self.initial = edited, graph
        self.reset()

    # -- lines ---------------------------------------------------------------------------------
    def lines(self, action: Action) -> tuple[list[str], int]:
        """The script lines for a primitive action and the id of the node it acts on (raises
        :class:`BindingError` or ``_Refused`` with the feedback)."""
        fn = action.function_name
        truth = self._true()
        if fn in _PUT_VERBS:
            held = truth.agent.holding
            if held is None:
                raise _Refused(f"{fn} puts down the object the agent holds, but it holds nothing")
            if action.node is not None and action.destination is not None:
                if self.binding.bind(action.node, truth) != held:
                    raise _Refused(f"the agent holds {held}, not {action.node}")
            target = action.destination if action.destination is not None else action.node
        else:
            target = action.node
        name = self.binding.bind(target, truth)
        node_id = self.naming.ids[name]
        layer = truth.nodes[name].layer
        this = self._vh(node_id)
        # a character sitting or lying (so in some initial graphs) cannot walk: it stands up first
        stand = ["[StandUp]"] if {"SITTING", "LYING"} & set(self._raw.nodes[self._raw.char]["states"]) else []
        if fn == "go_to":
            if layer is not Layer.PLACE:
                raise _Refused(f"go_to takes a room; {target} is not one")
            return [*stand, f"[Walk] {this}"], node_id
        if layer is Layer.PLACE:
            raise _Refused(f"{target} is a room; {fn} acts on an asset or object")
        place = truth.place_of(name)
        if place != truth.agent.location:
            raise _Refused(f"{target} is in {place} but the agent is in {truth.agent.location}; go_to({place}) first")
        walk = [*stand, f"[Walk] {this}"]
        if fn == "pick_up":
            if layer is not Layer.OBJECT:
                raise _Refused(f"{target} is an {layer.value} and cannot be picked up; only objects can")
            if truth.agent.holding is not None:
                raise _Refused(f"the agent holds {truth.agent.holding} and has one hand; put it somewhere first")
            return [*walk, f"[Grab] {this}"], node_id
        if fn in _PUT_VERBS:
            verb = _PUT_VERBS[fn][0]
            return [*walk, f"[{verb}] {self._vh(self.naming.ids[truth.agent.holding])} {this}"], node_id
        if fn in _STATE_VERBS:
            return [*walk, f"[{_STATE_VERBS[fn]}] {this}"], node_id
        if fn == "discover_objects":
            return [*walk, f"[TurnTo] {this}"], node_id
        raise _Refused(f"{fn} is not a primitive action of the VirtualHome adapter")

    # -- descriptions --------------------------------------------------------------------------
    def describe(self, node: str) -> str:
        """What is on and inside ``node`` now, as deterministic text without node names (for a
        parser augmentation): ``On the freezer: nothing. Inside the freezer: a food (clean), a food
        (clean), a food kiwi (clean).`` Raises :class:`BindingError` for an unknown name."""
        truth = self._true()
        return describe(truth, self.binding.bind(node, truth))

    # -- helpers -------------------------------------------------------------------------------
    def _vh(self, node_id: int) -> str:
        return f"<{self._classes[node_id]}> ({node_id})"

    def _support_of(self, graph: SceneGraph) -> dict[int, tuple[Relation, int]]:
        ids = self.naming.ids
        return {ids[n]: (rel, ids[par]) for n, (par, rel) in graph.parent.items()
                if rel in (Relation.ONTOP, Relation.INSIDE)}

    def _convert(self, raw, support) -> SceneGraph:
        return vh.convert_state(raw, self.naming, support)

    def _readable(self, message: str | None) -> str:
        """VirtualHome's message with ``<cup> (2009)`` replaced by our name (``cup-3``) and the
        character by "the agent"."""
        def name(m: re.Match) -> str:
            i = int(m.group(2))
            if i in self.naming.names:
                return self.naming.names[i]
            return "the agent" if m.group(1) == "character" else m.group(0)
        return _VH_NODE.sub(name, message or "refused without a message")

    def _save_image(self, data: bytes, node: str) -> Path:
        if self._image_dir is None:
            self._image_dir = Path(tempfile.mkdtemp(prefix="lookplangraph_vh_"))
        self._image_dir.mkdir(parents=True, exist_ok=True)
        self._images += 1
        path = self._image_dir / f"{self.task_id}_{self._images:03d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', node)}.png"
        path.write_bytes(data)
        return path


def edit_vh_graph(data: dict, old: SceneGraph, new: SceneGraph, naming) -> dict:
    """A copy of the VirtualHome graph ``data`` (which converts to ``old``) in which every object
    whose parent differs in ``new``, and everything on or in it, is rewired to its place in
    ``new`` (:func:`_rewire`). ``ValueError`` for other differences (states, the agent, assets)."""
    problems = [n for n in new.nodes if n in old.nodes and old.nodes[n] != new.nodes[n]]
    problems += [n for n in old.nodes if n not in new.nodes] + [n for n in new.nodes if n not in old.nodes]
    problems += [n for n, edge in new.parent.items()
                 if old.parent.get(n) != edge and new.nodes[n].layer is not Layer.OBJECT]
    if new.agent != old.agent:
        problems.append(new.agent.name)
    if problems:
        raise ValueError(f"only moved objects can be mirrored into VirtualHome; these differ otherwise: {', '.join(problems)}")
    rewire: list[str] = []
    for n, edge in new.parent.items():
        if old.parent.get(n) != edge:
            rewire += [m for m in (n, *new.descendants(n)) if m not in rewire]
    return _rewire(data, rewire, new, naming)


def consistent_vh_graph(data: dict, graph: SceneGraph, naming, where: Path) -> tuple[dict, list[str]]:
    """``data`` (which converts to ``graph``) with the objects whose VirtualHome edges contradict
    ``graph`` rewired (:func:`_rewire`), and their names. Two dataset artifacts contradict it: an
    object ON one node and INSIDE another unrelated one (a plate on the counter and in the closed
    dishwasher; the converter keeps the surface, VirtualHome would refuse to grab it), and an object
    whose own room edge names another room than its holder's (VirtualHome would walk there)."""
    raw = vh.raw_index(data, where)
    ids = naming.ids
    bad = []
    for name, (par, rel) in graph.parent.items():
        if rel not in (Relation.ONTOP, Relation.INSIDE):
            continue
        i, holder = ids[name], ids[par]
        targets = {naming.canonical(raw, t) for _, t in raw.targets.get(i, [])} - {None, holder}
        if any(not vh.is_under(raw, holder, t) for t in targets) or raw.room_of.get(i) != ids[graph.place_of(name)]:
            bad.append(name)
    return (_rewire(data, bad, graph, naming) if bad else data), bad


def _ancestors(graph: SceneGraph, name: str) -> list[str]:
    """Assets and objects ``name`` is on or in, through its holders (itself included)."""
    out = []
    while name in graph.parent and graph.nodes[name].layer is not Layer.PLACE:
        out.append(name)
        par, rel = graph.parent[name]
        if rel not in (Relation.ONTOP, Relation.INSIDE):
            break
        name = par
    return out


def _rewire(data: dict, names: list[str], graph: SceneGraph, naming) -> dict:
    """A copy of ``data`` where each object of ``names`` has the ON/INSIDE edges of its place in
    ``graph`` as VirtualHome writes them: one to its holder, INSIDE every container that encloses
    it through its holders (VirtualHome checks only direct INSIDE edges for closed containers), and
    INSIDE its room."""
    ids = naming.ids
    rewired = {ids[m] for m in names}
    out = {**data, "edges": [e for e in data["edges"]
                             if not (e["from_id"] in rewired and e["relation_type"] in ("ON", "INSIDE"))]}
    for m in names:
        par, rel = graph.parent[m]
        if rel not in (Relation.ONTOP, Relation.INSIDE):
            raise ValueError(f"{m}: only objects on or inside something can be placed in VirtualHome")
        out["edges"].append({"from_id": ids[m], "relation_type": "ON" if rel is Relation.ONTOP else "INSIDE",
                             "to_id": ids[par]})
        below = par
        for holder in _ancestors(graph, par)[1:]:
            if graph.parent[below][1] is Relation.INSIDE:
                out["edges"].append({"from_id": ids[m], "relation_type": "INSIDE", "to_id": ids[holder]})
            below = holder
        out["edges"].append({"from_id": ids[m], "relation_type": "INSIDE", "to_id": ids[graph.place_of(m)]})
    return out


def describe(graph: SceneGraph, node: str) -> str:
    """What is on and inside ``node`` in ``graph``, as sentences by class (see
    :meth:`VirtualHomeEnvironment.describe`): one for each way ``node`` holds things (or holds
    something), then one for each object below it that holds something."""
    def item(name: str) -> str:
        word = vh.label(name)
        states = list(graph.nodes[name].states or ())
        return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}" + (f" ({', '.join(states)})" if states else "")

    def sentence(holder: str, relation: Relation, always: bool) -> str | None:
        kids = sorted(c for c in graph.children(holder) if graph.parent[c][1] is relation)
        if not kids and not always:
            return None
        where = "On" if relation is Relation.ONTOP else "Inside"
        return f"{where} the {vh.label(holder)}: {', '.join(item(k) for k in kids) if kids else 'nothing'}."

    n = graph.nodes[node]
    parts = [sentence(node, Relation.ONTOP, affords(n, "put_on")), sentence(node, Relation.INSIDE, affords(n, "put_inside"))]
    for d in graph.descendants(node):
        if graph.nodes[d].layer is Layer.OBJECT:
            parts += [sentence(d, Relation.ONTOP, False), sentence(d, Relation.INSIDE, False)]
    return " ".join(p for p in parts if p) or f"Nothing is on or inside the {vh.label(node)}."


def _differences(want: SceneGraph, found: SceneGraph) -> list[str]:
    """Where two graphs differ (states compared as sets; ``inspected`` aside), one line per node."""
    def view(node):
        return node and (node.layer, frozenset(node.states or ()), node.affordances)

    out = []
    for n in sorted(set(want.nodes) | set(found.nodes)):
        a, b = want.nodes.get(n), found.nodes.get(n)
        if view(a) != view(b):
            out.append(f"{n}: states {sorted(a.states or ()) if a else None} != {sorted(b.states or ()) if b else None}")
        pa, pb = want.parent.get(n), found.parent.get(n)
        if pa != pb:
            out.append(f"{n}: {pa and f'{pa[1].value} {pa[0]}'} != {pb and f'{pb[1].value} {pb[0]}'}")
    if want.agent != found.agent:
        out.append(f"agent: in {want.agent.location} holding {want.agent.holding} != "
                   f"in {found.agent.location} holding {found.agent.holding}")
    return out


# ---------------------------------------------------------------------------------------------
# ground-truth plans in VirtualHome
# ---------------------------------------------------------------------------------------------
@dataclass
class PlanCheck:
    """One task's ground-truth plan run both ways: ``sgs_success`` is GraSIF's validator verdict
    (strict), ``vh_success`` the same goal judged on VirtualHome's final graph after the SGS's
    primitive steps ran in VirtualHome (every step accepted). ``failures``: steps VirtualHome
    refused, with the feedback; ``differences``: where the two final graphs differ."""

    task_id: str
    sgs_success: bool
    vh_success: bool
    steps: int
    failures: list[str]
    differences: list[str]
    not_met: list[str]

    @property
    def agree(self) -> bool:
        return self.sgs_success == self.vh_success


def check_plan(task: Task, env: VirtualHomeEnvironment | None = None, plan: list | None = None) -> PlanCheck:
    """Run ``plan`` (default: the task's ground truth) through the SGS (GraSIF's validator) and its
    primitive steps through VirtualHome, and compare the verdicts (:class:`PlanCheck`). A refused
    step leaves VirtualHome unchanged and the rest still run, as in the validator."""
    plan = task.ground_truth_plan if plan is None else plan
    report = validate_plan(task.graph, plan, task.goal)
    env = env if env is not None else VirtualHomeEnvironment(task)
    env.reset()
    initial = env.true_graph()
    failures = []
    primitives = [parse_action(p) for s in report.steps for p in s.primitives]
    for a in primitives:
        r = env.step(a)
        if not r.ok:
            failures.append(r.feedback)
    final = env.true_graph()
    goal = evaluate_goal(task.goal, final, initial)
    differences = _differences(report.final_graph, final)
    return PlanCheck(task.id, report.success, goal.success and not failures, len(primitives), failures,
                     differences, goal.not_met())
