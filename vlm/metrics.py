"""How well an augmentation matches the truth (paper Table III): node F1, edge F1, success.

For one observation of a node, ``predicted`` and ``truth`` are :class:`Observation` s (the
objects on and inside the node, nested ones included). Names of new objects are the
augmentation's own (``apple-7`` for an apple the memory did not know), so instances are
**aligned by class** first: within each class, predicted and true instances are paired one to
one, choosing the pairing that agrees best on relation, parent and states (an optimal
assignment, refined once the parents' own pairing is known). Then

* nodes: TP = aligned pairs; **F1_N** = 2 TP / (|P| + |G|);
* edges: each object's edge (child, relation, parent) with predicted names renamed to the
  aligned true names (an unaligned one matches nothing); **F1_E** = 2 TP / (|P| + |G|);
* **success**: F1_N = F1_E = 1 (an empty prediction of an empty truth counts as 1);
* **state accuracy**, apart: over aligned pairs where the truth or the prediction has a state
  of the vocabulary (default open/closed/on/off; other states, such as VirtualHome's clean or
  plugged_in, are not judged), the share whose states agree. None when no pair has one.

:func:`summarize` gives the mean over observations and the micro totals (TP and sizes summed
over all observations before the ratio).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from statistics import mean
from typing import Iterable, Sequence

from sgs.graph import node_class as _node_class
from sim_adapters.base import Observation, SeenObject
from vlm.binding import DEFAULT_STATES


@dataclass(frozen=True)
class Score:
    """Counts for one observation; the ratios are properties."""

    nodes_tp: int
    nodes_pred: int
    nodes_true: int
    edges_tp: int
    edges_pred: int
    edges_true: int
    states_correct: int
    states_judged: int

    @property
    def node_f1(self) -> float:
        return _f1(self.nodes_tp, self.nodes_pred, self.nodes_true)

    @property
    def edge_f1(self) -> float:
        return _f1(self.edges_tp, self.edges_pred, self.edges_true)

    @property
    def success(self) -> bool:
        return self.node_f1 == 1.0 and self.edge_f1 == 1.0

    @property
    def state_accuracy(self) -> float | None:
        return self.states_correct / self.states_judged if self.states_judged else None

    def to_dict(self) -> dict:
        return {**asdict(self), "node_f1": self.node_f1, "edge_f1": self.edge_f1, "success": self.success,
                "state_accuracy": self.state_accuracy}


def node_class(name: str) -> str:
    """The class a name is aligned by: :func:`sgs.graph.node_class` with runs of ``_`` read as one
    (BEHAVIOR's ``bottle__of__lotion`` and a parser's ``bottle_of_lotion`` are one class)."""
    return re.sub(r"_+", "_", _node_class(name))


def _f1(tp: int, n_pred: int, n_true: int) -> float:
    return 1.0 if n_pred + n_true == 0 else 2 * tp / (n_pred + n_true)


# ---------------------------------------------------------------------------------------------
# Alignment
# ---------------------------------------------------------------------------------------------

def _assign(weights: list[list[float]]) -> list[tuple[int, int]]:
    """Maximum-weight one-to-one pairing of rows and columns (every row paired when rows <=
    columns, and the other way round): the Hungarian method on costs -w, O(n^2 m)."""
    if not weights or not weights[0]:
        return []
    flip = len(weights) > len(weights[0])
    w = [list(col) for col in zip(*weights)] if flip else weights
    n, m = len(w), len(w[0])
    INF = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    p, way = [0] * (m + 1), [0] * (m + 1)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = [INF] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = p[j0], INF, 0
            for j in range(1, m + 1):
                if not used[j]:
                    cur = -w[i0 - 1][j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    pairs = [(p[j] - 1, j - 1) for j in range(1, m + 1) if p[j]]
    return sorted((b, a) for a, b in pairs) if flip else sorted(pairs)


def _observable(states: Iterable[str], vocabulary: Sequence[str]) -> frozenset[str]:
    return frozenset(s for s in states if s in vocabulary)


def align(predicted: Observation, truth: Observation, states: Sequence[str] = DEFAULT_STATES) -> dict[str, str]:
    """Predicted name → true name, one to one within each class (module doc)."""
    node = truth.node
    pred_by_class: dict[str, list[SeenObject]] = {}
    true_by_class: dict[str, list[SeenObject]] = {}
    for o in predicted.objects:
        pred_by_class.setdefault(node_class(o.name), []).append(o)
    for o in truth.objects:
        true_by_class.setdefault(node_class(o.name), []).append(o)

    def held(o: Observation) -> dict[str, dict[tuple[str, str], int]]:
        """name → how many children of each (class, relation) it holds."""
        out: dict[str, dict[tuple[str, str], int]] = {}
        for c in o.objects:
            key = (node_class(c.name), c.relation)
            out.setdefault(c.parent, {}).setdefault(key, 0)
            out[c.parent][key] += 1
        return out

    pred_held, true_held = held(predicted), held(truth)

    def common_children(p: SeenObject, t: SeenObject) -> int:
        mine, theirs = pred_held.get(p.name, {}), true_held.get(t.name, {})
        return sum(min(n, theirs.get(k, 0)) for k, n in mine.items())

    def same_parent(p: SeenObject, t: SeenObject, mapping: dict[str, str] | None) -> bool:
        if p.parent == node or t.parent == node:
            return p.parent == t.parent
        if mapping is None:  # first round: parents compared by class
            return node_class(p.parent) == node_class(t.parent)
        return mapping.get(p.parent) == t.parent

    mapping: dict[str, str] | None = None
    for _ in range(4):  # first by parent classes, then by the parents' pairing until it settles
        new: dict[str, str] = {}
        for cls, preds in pred_by_class.items():
            trues = true_by_class.get(cls, [])
            if not trues:
                continue
            weights = []
            for p in preds:
                row = []
                for t in trues:
                    parent_ok = same_parent(p, t, mapping)
                    row.append(4.0 * (parent_ok and p.relation == t.relation) + 2.0 * (p.relation == t.relation)
                               + 1.0 * parent_ok
                               + 1.0 * (_observable(p.states, states) == _observable(t.states, states))
                               + 4.0 * common_children(p, t)  # each lets a child's edge be right
                               + 0.5 * (p.name == t.name))
                weights.append(row)
            for i, j in _assign(weights):
                new[preds[i].name] = trues[j].name
        if new == mapping:
            break
        mapping = new
    return mapping or {}


def score(predicted: Observation, truth: Observation, states: Sequence[str] = DEFAULT_STATES) -> Score:
    """The :class:`Score` of ``predicted`` against ``truth`` (module doc)."""
    mapping = align(predicted, truth, states)
    node = truth.node

    def renamed(name: str) -> str:
        return node if name == node else mapping.get(name, "unaligned:" + name)

    true_edges = {(o.name, o.relation, o.parent) for o in truth.objects}
    pred_edges = {(renamed(o.name), o.relation, renamed(o.parent)) for o in predicted.objects}
    true_states = {o.name: _observable(o.states, states) for o in truth.objects}
    judged = correct = 0
    for o in predicted.objects:
        t = mapping.get(o.name)
        if t is None:
            continue
        mine = _observable(o.states, states)
        if mine or true_states[t]:
            judged += 1
            correct += mine == true_states[t]
    return Score(len(mapping), len(predicted.objects), len(truth.objects),
                 len(true_edges & pred_edges), len(predicted.objects), len(truth.objects), correct, judged)


def summarize(scores: Sequence[Score]) -> dict:
    """Mean over observations and micro totals: ``n``, ``node_f1``, ``edge_f1``, ``success``,
    ``state_accuracy`` (means; state accuracy over observations that judged a state), and
    ``node_f1_micro``, ``edge_f1_micro``, ``state_accuracy_micro``, ``states_judged``."""
    if not scores:
        return {"n": 0}
    judged = [s.state_accuracy for s in scores if s.state_accuracy is not None]
    total = Score(*(sum(getattr(s, f) for s in scores) for f in Score.__dataclass_fields__))
    return {
        "n": len(scores),
        "node_f1": mean(s.node_f1 for s in scores),
        "edge_f1": mean(s.edge_f1 for s in scores),
        "success": mean(float(s.success) for s in scores),
        "state_accuracy": mean(judged) if judged else None,
        "node_f1_micro": total.node_f1,
        "edge_f1_micro": total.edge_f1,
        "state_accuracy_micro": total.state_accuracy,
        "states_judged": total.states_judged,
    }
