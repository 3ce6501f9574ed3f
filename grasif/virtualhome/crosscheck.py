"""Cross-check with VirtualHome's own simulator (:func:`cross_check`).

Each program runs in virtualhome_eval's ``ScriptExecutor(EnvironmentGraph(init),
load_name_equivalence())``. (a) Its result is compared with the stored final graph on the nodes
that change in either (states and ON/INSIDE targets; the character aside). (b) That result,
converted with the same held and lost-support corrections as the stored final graph, is compared
with the SGS's final graph of the ground-truth plan (run without corrections) on the nodes that
change in either (parent and the states our actions change). A program VirtualHome cannot run
fails both. Errors: without virtualhome-eval's simulator, :class:`grasif.dataset.SourceError`.
Concepts and results: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grasif.dataset import SourceError
from grasif.task import Task
from grasif.virtualhome.convert import RawGraph, convert_graph, final_corrections, to_scene_graph
from grasif.virtualhome.goal import GOAL_STATES
from grasif.virtualhome.source import read_graphs
from grasif.virtualhome.tasks import SourceTask, load_source
from grasif.virtualhome.translate import translate_program
from sgs.actions import parse_plan
from sgs.graph import Layer, SceneGraph
from sgs.simulator import run_plan

@dataclass
class CrossCheckResult:
    """Per-task verdicts: ``vh_matches_stored`` (a), ``sgs_matches_vh`` (b), with differences."""

    task_id: str
    vh_executed: bool
    vh_matches_stored: bool
    sgs_matches_vh: bool
    stored_differences: list[str]
    sgs_differences: list[str]


@dataclass
class CrossCheckReport:
    """All tasks' verdicts; ``vh_vs_stored`` and ``sgs_vs_vh`` are the agreement rates (a), (b)."""

    results: list[CrossCheckResult]

    def rate(self, attr: str) -> float:
        return sum(getattr(r, attr) for r in self.results) / len(self.results) if self.results else 1.0

    @property
    def vh_vs_stored(self) -> float:
        return self.rate("vh_matches_stored")

    @property
    def sgs_vs_vh(self) -> float:
        return self.rate("sgs_matches_vh")


def _raw_view(graph: dict, char: int) -> dict[int, tuple[frozenset, frozenset]]:
    """Per node (the character aside): its states and its ON/INSIDE targets."""
    targets: dict[int, set] = {}
    for e in graph["edges"]:
        if e["relation_type"] in ("ON", "INSIDE") and char not in (e["from_id"], e["to_id"]):
            targets.setdefault(e["from_id"], set()).add((e["relation_type"], e["to_id"]))
    return {n["id"]: (frozenset(n["states"]), frozenset(targets.get(n["id"], ()))) for n in graph["nodes"] if n["id"] != char}


def _sgs_view(graph: SceneGraph) -> dict[str, tuple]:
    """Per non-place node: its parent edge and the states our actions change."""
    return {
        n: (graph.parent.get(n), frozenset(s for s in (node.states or ()) if s in GOAL_STATES))
        for n, node in graph.nodes.items() if node.layer is not Layer.PLACE
    }


def _diff(a: dict, b: dict, base: dict) -> list[str]:
    """Where ``a`` and ``b`` differ, among the keys where either differs from ``base``."""
    changed = {k for k in base if a.get(k) != base[k] or b.get(k) != base[k]}
    return [f"{k}: {a.get(k)} != {b.get(k)}" for k in sorted(changed, key=str) if a.get(k) != b.get(k)]


def cross_check(selection: str = "paper", *, source: Path | None = None,
                loaded: list[SourceTask] | None = None, tasks: list[Task] | None = None) -> CrossCheckReport:
    """Run every program through virtualhome_eval's ScriptExecutor and compare (see module doc).

    ``loaded``/``tasks`` reuse an earlier :func:`load_source`/:func:`build_tasks`.
    """
    try:
        from virtualhome_eval.simulation.evolving_graph.environment import EnvironmentGraph
        from virtualhome_eval.simulation.evolving_graph.execution import ScriptExecutor
        from virtualhome_eval.simulation.evolving_graph.scripts import read_script_from_list_string
        from virtualhome_eval.simulation.evolving_graph.utils import load_name_equivalence
    except Exception as exc:  # noqa: BLE001
        raise SourceError(f"virtualhome-eval's simulator cannot be imported: {exc}") from None
    loaded = loaded if loaded is not None else load_source(source, selection)
    plans = {t.id: t.ground_truth_plan for t in tasks} if tasks is not None else {}
    equivalence = load_name_equivalence()
    results = []
    for src in loaded:
        init, stored = read_graphs(src.graph_path)
        char = src.raw_init.char
        before = _raw_view(init, char)
        try:
            script = read_script_from_list_string(src.program.vh_lines())
            ok, state, _ = ScriptExecutor(EnvironmentGraph(init), equivalence).execute(script, w_graph_list=False)
            result = state.to_dict()
        except Exception as exc:  # noqa: BLE001 - report VirtualHome's failure as a disagreement
            failure = [f"VirtualHome cannot run {src.program.path.name}: {exc!r}"]
            results.append(CrossCheckResult(src.program.id, False, False, False, failure, failure))
            continue
        # (a) VirtualHome's own result vs the stored final graph
        stored_diff = _diff(_raw_view(result, char), _raw_view(stored, char), before)
        # (b) our SGS on the ground-truth plan vs VirtualHome's result, converted like the stored one
        raw_result = RawGraph(result, src.graph_path)
        held, placed = final_corrections(src.program, src.raw_init, src.naming, raw_result)
        vh_final = to_scene_graph(convert_graph(raw_result, src.naming, placed=placed, held=held), src.graph_path)
        plan = plans.get(src.program.id)
        if plan is None:
            plan = [str(a) for a in translate_program(src.program, src.initial, src.naming, src.raw_init)]
        sgs_final, _ = run_plan(src.initial, parse_plan(plan), correct=False)
        sgs_diff = _diff(_sgs_view(sgs_final), _sgs_view(vh_final), _sgs_view(src.initial))
        results.append(CrossCheckResult(src.program.id, ok, not stored_diff, not sgs_diff, stored_diff, sgs_diff))
    return CrossCheckReport(results)
