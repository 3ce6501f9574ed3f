"""Label-preserving transforms of a GraSIF task, for training data.

Training data for a small planner is built from an expert's episodes on GraSIF tasks. So that
the model learns to read the scene rather than memorise instance numbers or listing orders, a
train task is also used in transformed copies whose ground-truth plan still solves them:

* ``rename`` (:func:`rename_instances`) gives every asset and object named ``<class>-<number>``
  a new number, the same one everywhere it is named: the initial graph, the goal (node goals,
  count-goal destinations, formula constants), the ground-truth plan, the instruction and the
  name-keyed maps of the provenance (VirtualHome ``ids``, BDDL ``instances``). Places and the
  agent keep their names. The label stays true because the renaming is one bijection applied
  to every string at once and keeps each class (``node_class`` of the new name is the old one),
  so the scene, the plan and the goal are the same up to names, and goals by class (count goals,
  formula quantifiers) see the same instances.
* ``shuffle`` (:func:`shuffle_listing`) permutes the listing of the initial graph inside each
  group of siblings (nodes of one layer with the same parent; the places form one group). The
  graph is the same :class:`~sgs.graph.SceneGraph` (``==``): only the order the planner's view
  lists nodes in changes, and neither the simulator nor a goal depends on it (the one order-
  sensitive construct, a BDDL ``forpairs`` over one category, is caught by the check below).
* ``distract`` (:func:`add_distractors`) adds objects of household classes that the goal, the
  plan and the instruction never mention, on or inside existing assets; one of them is a device
  (``off``, toggles). The plan never touches them and no goal counts or quantifies their class,
  so the goal still holds after the plan, and an untouched distractor is no side effect.

:func:`augment` applies one transform with a seed derived from the task, kind and seed, and
returns the copy only when :func:`check_label` confirms that the ground-truth plan still solves
it (strict success, rule-based corrections on); otherwise it raises :class:`AugmentError`.
"""

from __future__ import annotations

import random
import re
from typing import Any, Callable

from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import ActionSyntaxError, parse_plan
from sgs.graph import GraphError, Layer, Node, Relation, SceneGraph, affords
from sgs.io import graph_to_dict


class AugmentError(ValueError):
    """A transform that cannot keep the task's label: the copy's ground-truth plan no longer solves
    it, or (distract) no unmentioned class or no asset is left to use. The message says why."""


# ---------------------------------------------------------------------------------------------
# the label check
# ---------------------------------------------------------------------------------------------
def check_label(task: Task) -> Task:
    """Return ``task`` if its ground-truth plan succeeds on its initial graph (every step feasible
    with corrections on, every goal unit met, no side effect); else raise :class:`AugmentError`
    listing the infeasible steps and unmet goal units."""
    where = f"{task.split}/{task.id}"
    try:
        graph = task.graph
        plan = parse_plan(task.ground_truth_plan)
    except (GraphError, ActionSyntaxError) as exc:
        raise AugmentError(f"{where}: not a usable task: {exc}") from None
    report = validate_plan(graph, plan, task.goal, correct=True)
    if not report.success:
        problems = [f"step {s.index} {s.action}: {s.feedback}" for s in report.infeasible]
        problems += report.goal.not_met()
        raise AugmentError(f"{where}: the ground-truth plan no longer solves the task: " + "; ".join(problems))
    return task


def _task_with(task: Task, **fields: Any) -> Task:
    """A fresh :class:`Task` (its graph parsed anew) with ``fields`` replaced."""
    return Task.model_validate({**task.model_dump(mode="json"), **fields})


# ---------------------------------------------------------------------------------------------
# rename
# ---------------------------------------------------------------------------------------------
_INSTANCE_RE = re.compile(r"^(?P<cls>.+)-(?P<num>\d+)$")
#: a name starts after anything but a name character and ends before anything but a name
#: character (a dot ends it only when no word follows: "cup-1." but not "cup-1.n")
_BEFORE, _AFTER = r"(?<![\w.-])", r"(?![\w-]|\.\w)"


def rename_instances(task: Task, rng: random.Random) -> Task:
    """Copy of ``task`` whose assets and objects named ``<class>-<number>`` have new numbers.

    Every such name changes; new names keep their class, are unique, and collide with no name of
    the initial graph (places included). Every string of the task but its id and split goes
    through :func:`substitute_names` with that one mapping. Node order is unchanged, so
    ``zip(task.graph.nodes, new.graph.nodes)`` pairs each old name with its new one.
    """
    mapping = _rename_mapping(task.graph, rng)
    data = task.model_dump(mode="json")
    return _task_with(task, **{k: substitute_names(v, mapping) for k, v in data.items() if k not in ("id", "split")})


def substitute_names(value: Any, mapping: dict[str, str]) -> Any:
    """``value`` (JSON data: strings, lists, dicts, keys included) with every whole occurrence of
    a name of ``mapping`` replaced by its image, all at once (one regex, so a swap
    ``{"cup-1": "cup-2", "cup-2": "cup-1"}`` works). A name is whole when no name character
    (``\\w``, ``-``, ``.``) precedes it and none follows but a sentence's final dot: ``cup-1`` is
    never found in ``cup-10``, ``teacup-1`` or ``cup-1.n.01``."""
    if not mapping:
        return value
    pattern = re.compile(_BEFORE + "(?:" + "|".join(map(re.escape, mapping)) + ")" + _AFTER)
    return _substitute(value, pattern, mapping)


def _rename_mapping(graph: SceneGraph, rng: random.Random) -> dict[str, str]:
    """Old name → new name for every non-place node ``<class>-<number>``; the new numbers of a
    class are drawn from those no node of that class uses."""
    members: dict[str, list[str]] = {}
    used: dict[str, set[int]] = {}
    for name, node in graph.nodes.items():
        match = _INSTANCE_RE.match(name)
        if match is None:
            continue
        used.setdefault(match["cls"], set()).add(int(match["num"]))
        if node.layer is not Layer.PLACE:
            members.setdefault(match["cls"], []).append(name)
    mapping = {}
    for cls, names in members.items():
        free = [i for i in range(1, max(used[cls]) + 2 * len(names) + 1) if i not in used[cls]]
        mapping.update({name: f"{cls}-{num}" for name, num in zip(names, rng.sample(free, len(names)))})
    return mapping


def _substitute(value: Any, pattern: re.Pattern[str], mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: mapping[m[0]], value)
    if isinstance(value, list):
        return [_substitute(v, pattern, mapping) for v in value]
    if isinstance(value, dict):
        return {_substitute(k, pattern, mapping): _substitute(v, pattern, mapping) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------------
# shuffle
# ---------------------------------------------------------------------------------------------
def shuffle_listing(task: Task, rng: random.Random) -> Task:
    """Copy of ``task`` whose initial graph lists the nodes of each sibling group (one layer, one
    parent; the places are one group) in a random order. Each sibling group keeps the positions it
    had in the listing. The new graph is ``==`` the old one (only order-only metadata differs)."""
    graph = task.graph
    groups: dict[tuple[Layer, str | None], list[str]] = {}
    for name in graph.nodes:
        groups.setdefault(_sibling_key(graph, name), []).append(name)
    queues = {key: iter(rng.sample(names, len(names))) for key, names in groups.items()}
    order = [next(queues[_sibling_key(graph, name)]) for name in graph.nodes]
    shuffled = SceneGraph({n: graph.nodes[n] for n in order}, graph.parent, graph.agent, graph.inspected, graph.meta)
    return _task_with(task, initial_graph=graph_to_dict(shuffled))


def _sibling_key(graph: SceneGraph, name: str) -> tuple[Layer, str | None]:
    edge = graph.parent.get(name)
    return graph.nodes[name].layer, edge[0] if edge else None


# ---------------------------------------------------------------------------------------------
# distract
# ---------------------------------------------------------------------------------------------
#: household object classes a distractor is drawn from
DISTRACTOR_CLASSES = (
    "sponge", "candle", "notebook", "scissors", "comb", "wallet", "tissue_box", "coaster", "vase",
    "pillow", "magazine", "toothbrush", "umbrella", "sunglasses", "stapler", "ruler", "jar", "dice",
    "thermometer", "paintbrush", "hairbrush", "keychain", "envelope", "puzzle_box", "yarn_ball",
)
#: classes of the distractor device (an object with ``off`` and turn_on/turn_off)
DEVICE_CLASSES = ("radio", "desk_lamp", "alarm_clock", "hair_dryer", "electric_fan", "night_light")


def add_distractors(task: Task, rng: random.Random, n: int = 3) -> Task:
    """Copy of ``task`` with ``n`` (at least 1) new objects, the first of them a device (state ``off``,
    affordances pick_up/turn_on/turn_off), the others plain objects (affordance pick_up).

    Each is named ``<class>-<k>`` with ``k`` the first number free in its class, its class one
    of :data:`DEVICE_CLASSES` / :data:`DISTRACTOR_CLASSES` that the goal, the plan and the
    instruction do not mention (plurals and spaced spellings included), and it lies on or inside
    a random asset that affords it, inserted at a random position of the listing. Raises
    :class:`AugmentError` when too few classes are left or no asset takes objects.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    graph = task.graph
    mentioned = _mentioned_text(task)
    devices = [c for c in DEVICE_CLASSES if not _mentions(mentioned, c)]
    plain = [c for c in DISTRACTOR_CLASSES if not _mentions(mentioned, c)]
    hosts = _hosts(graph)
    if not devices or len(plain) < n - 1 or not hosts:
        raise AugmentError(f"{task.split}/{task.id}: no room for {n} distractors of unmentioned classes")
    classes = [rng.choice(devices)] + rng.sample(plain, n - 1)
    nodes, parent = list(graph.nodes.items()), dict(graph.parent)
    for i, cls in enumerate(classes):
        node = _distractor(_free_name(graph, cls), device=i == 0)
        nodes.insert(rng.randrange(len(nodes) + 1), (node.name, node))
        parent[node.name] = rng.choice(hosts)
    grown = SceneGraph(dict(nodes), parent, graph.agent, graph.inspected, graph.meta).check()
    return _task_with(task, initial_graph=graph_to_dict(grown))


def _mentioned_text(task: Task) -> str:
    """The goal, plan and instruction as one lower-case text, ``_``/``-`` read as spaces."""
    text = " ".join([task.goal.model_dump_json(), " ".join(map(str, task.ground_truth_plan)), task.instruction])
    return re.sub(r"[_\-]", " ", text.lower())


def _mentions(text: str, cls: str) -> bool:
    """Whether ``cls`` (or its plural) occurs as whole words in ``text`` (see :func:`_mentioned_text`)."""
    words = re.escape(cls.replace("_", " "))
    return re.search(rf"\b{words}(?:e?s)?\b", text) is not None


def _hosts(graph: SceneGraph) -> list[tuple[str, Relation]]:
    """Every (asset, relation) an object may be put in: ontop where it affords put_on, inside
    where it affords put_inside."""
    offers = ((Relation.ONTOP, "put_on"), (Relation.INSIDE, "put_inside"))
    return [(name, rel) for name in graph.names(Layer.ASSET) for rel, act in offers if affords(graph.nodes[name], act)]


def _free_name(graph: SceneGraph, cls: str) -> str:
    k = 1
    while f"{cls}-{k}" in graph.nodes:
        k += 1
    return f"{cls}-{k}"


def _distractor(name: str, *, device: bool) -> Node:
    if device:
        return Node(name, Layer.OBJECT, states=("off",), affordances=("pick_up", "turn_on", "turn_off"), properties=())
    return Node(name, Layer.OBJECT, states=(), affordances=("pick_up",), properties=())


# ---------------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------------
_TRANSFORMS: dict[str, Callable[[Task, random.Random], Task]] = {
    "rename": rename_instances,
    "shuffle": shuffle_listing,
    "distract": add_distractors,
}
KINDS = tuple(_TRANSFORMS)


def augment(task: Task, kind: str, seed: int) -> Task:
    """``task`` transformed by ``kind`` (one of :data:`KINDS`) with the random generator seeded by
    ``"{task.id}:{kind}:{seed}"``: same arguments, same copy. The copy keeps ``id`` and ``split``
    and records ``provenance["augmentation"] = {"kind": kind, "seed": seed}``. Raises
    :class:`AugmentError` when its ground-truth plan no longer solves it (:func:`check_label`),
    ``ValueError`` for an unknown kind."""
    transform = _TRANSFORMS.get(kind)
    if transform is None:
        raise ValueError(f"unknown augmentation {kind!r}; kinds are {', '.join(KINDS)}")
    new = transform(task, random.Random(f"{task.id}:{kind}:{seed}"))
    provenance = {**new.provenance, "augmentation": {"kind": kind, "seed": seed}}
    return check_label(_task_with(new, provenance=provenance))
