"""The split's tasks: :func:`load_source` (programs with their converted graphs), :func:`make_task`
and :func:`build_tasks`.

A task holds the converted initial graph (:mod:`.convert`), the goal (:mod:`.goal`), the
instruction (:mod:`.instruction`), the ground-truth plan (:mod:`.translate`) and its provenance:
package and dataset, program and graph files, scene, title, description, program steps,
selections and the map node name → VirtualHome id (``ids``).

Errors: anything missing or malformed raises :class:`grasif.dataset.SourceError` naming the file;
an unknown selection raises ``ValueError``.
Concepts: ``docs/benchmark/splits.md`` (VirtualHome RobotHow split).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grasif.dataset import SourceError
from grasif.task import Task
from grasif.virtualhome.convert import Naming, RawGraph, convert_graph, final_corrections, make_naming, to_scene_graph
from grasif.virtualhome.goal import task_goal
from grasif.virtualhome.instruction import instruction
from grasif.virtualhome.source import (
    DATASET, GRAPHS, PROGRAMS, SELECTIONS, SPLIT, Program, action_arity, program_paths, read_graphs, read_program,
    source_version,
)
from grasif.virtualhome.translate import TranslationError, translate_program
from sgs.graph import SceneGraph

@dataclass
class SourceTask:
    """One program with its converted graphs (what :func:`build_tasks` and :func:`cross_check` share)."""

    program: Program
    graph_path: Path
    naming: Naming
    raw_init: RawGraph
    initial: SceneGraph
    final: SceneGraph
    initial_data: dict


def load_source_task(program_path: Path, graph_path: Path, arity: dict[str, int] | None = None) -> SourceTask:
    """Read and convert one task's program and graphs; :class:`SourceError` names a bad file."""
    program = read_program(program_path, arity)
    init, final = read_graphs(graph_path)
    try:
        raw_init, raw_final = RawGraph(init, graph_path), RawGraph(final, graph_path)
        if raw_init.held:
            raise SourceError(f"{graph_path}: the character holds something in the initial graph")
        for s in program.steps:
            for _, i in s.args:
                if i not in raw_init.nodes:
                    raise SourceError(f"{program_path}: {s.text}: node {i} is not in {graph_path.name}")
        naming = make_naming(raw_init)
        init_data = convert_graph(raw_init, naming)
        held, placed = final_corrections(program, raw_init, naming, raw_final)
        final_data = convert_graph(raw_final, naming, placed=placed, held=held)
        initial, final_graph = to_scene_graph(init_data, graph_path), to_scene_graph(final_data, graph_path)
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:  # data we did not foresee
        raise SourceError(f"{graph_path} ({program_path.name}): cannot convert ({exc!r})") from exc
    return SourceTask(program, graph_path, naming, raw_init, initial, final_graph, init_data)


def load_source(source: Path | None = None, selection: str | None = None) -> list[SourceTask]:
    """Every program under ``source`` (default: the package) in ``selection`` (default: all)."""
    if selection is not None and selection not in SELECTIONS:
        raise ValueError(f"unknown selection {selection!r}; selections are {', '.join(SELECTIONS)}")
    paths = program_paths(source)
    arity = action_arity()
    out = []
    for program_path, graph_path in paths:
        program = read_program(program_path, arity)
        if selection is not None and selection not in program.selections():
            continue
        out.append(load_source_task(program_path, graph_path, arity))
    return out


def make_task(src: SourceTask) -> Task:
    """The GraSIF task of one program (see the module doc)."""
    program = src.program
    goal = task_goal(src.initial, src.final)
    try:
        plan = translate_program(program, src.initial, src.naming, src.raw_init)
    except (TranslationError, KeyError, ValueError, TypeError, IndexError) as exc:
        raise SourceError(f"{program.path}: cannot translate the program ({exc!r})") from exc
    return Task(
        id=program.id,
        split=SPLIT,
        instruction=instruction(program, src.initial, goal),
        initial_graph=src.initial_data,
        goal=goal,
        ground_truth_plan=[str(a) for a in plan],
        provenance={
            "source": f"virtualhome-eval=={source_version()} {DATASET}",
            "program": f"{PROGRAMS}/{program.path.name}",
            "graphs": f"{GRAPHS}/{src.graph_path.name}",
            "scene": "TrimmedTestScene1",
            "title": program.title,
            "description": program.description,
            "program_steps": [s.text for s in program.steps],
            "selections": program.selections(),
            "ids": src.naming.ids,
        },
    )


def build_tasks(selection: str = "paper", *, source: Path | None = None) -> list[Task]:
    """The split's tasks in ``selection`` (see :data:`SELECTIONS`), sorted by id.

    ``source``: a directory laid out like the package's dataset (default: the installed package).
    Raises :class:`SourceError` naming the package or file when the source is missing or broken.
    """
    return [make_task(src) for src in load_source(source, selection)]
