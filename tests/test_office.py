"""GraSIF office split (grasif/office.py, grasif/data/office/): the building, the tasks, their
ground-truth plans through the SGS, and errors in the source files."""
import json
import shutil
from functools import lru_cache
from pathlib import Path

import pytest

from grasif import dataset, office
from grasif.dataset import SourceError
from grasif.goals import evaluate_goal
from grasif.validate import validate_plan
from sgs.actions import parse_action
from sgs.graph import Layer, Relation, affords, node_class
from sgs.io import graph_from_dict

STATE_CHANGING = {"rearrange", "pick_up", "put_on", "put_inside", "open", "close", "turn_on", "turn_off"}


@lru_cache(maxsize=1)
def _tasks():
    return tuple(office.build_tasks())


def _by_id():
    return {t.id: t for t in _tasks()}


TASK_IDS = [t.id for t in _tasks()]


@pytest.fixture(scope="module")
def building():
    return graph_from_dict(office.load_building())


@pytest.fixture
def source_copy(tmp_path):
    """A writable copy of the split's source directory."""
    dst = tmp_path / "office"
    shutil.copytree(office.SOURCE_DIR, dst)
    return dst


def _edit_tasks(source_dir: Path, change) -> Path:
    path = source_dir / office.TASKS_FILE
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=1))
    return path


def _task_entry(doc, task_id):
    return next(t for t in doc["tasks"] if t["id"] == task_id)


# -- the building ---------------------------------------------------------------------------------
def test_building_size_is_that_of_the_sayplan_office(building):
    rooms = building.names(Layer.PLACE)
    assets, objects = building.names(Layer.ASSET), building.names(Layer.OBJECT)
    assert len(rooms) == office.PAPER["rooms"] == 37
    assert len(assets) + len(objects) >= 150
    assert abs(len(building.nodes) - office.PAPER["nodes"]) < 10
    assert building.agent.location in rooms and building.agent.holding is None


def test_building_has_private_offices_and_shared_spaces(building):
    rooms = set(building.places)
    private = sorted(r for r in rooms if node_class(r).endswith("s_office"))
    assert len(private) >= 10 and "toms_office-1" in private
    for shared in ("kitchen-1", "cafeteria-1", "meeting_room-1", "boardroom-1", "printing_room-1", "supply_room-1",
                   "storage_room-1", "robotics_lab-1", "bathroom-1", "lobby-1", "corridor-1", "lounge-1"):
        assert shared in rooms
    for room in private:  # every private office has its occupant's desk
        assert any(node_class(a) == "desk" for a in building.children(room)), room


def test_building_has_openable_containers_and_switchable_devices(building):
    def openable(n):
        node = building[n]
        return (node.has("closed") or node.has("open")) and affords(node, "open") and affords(node, "put_inside")

    def switchable(n):
        node = building[n]
        return (node.has("on") or node.has("off")) and affords(node, "turn_on") and affords(node, "turn_off")

    containers = {node_class(n) for n in building.nodes if openable(n)}
    devices = {node_class(n) for n in building.nodes if switchable(n)}
    assert {"fridge", "cabinet", "drawer", "locker", "dishwasher", "microwave", "filing_cabinet"} <= containers
    assert {"coffee_machine", "light", "printer", "monitor", "kettle", "microwave", "projector"} <= devices
    assert building["printer-1"].has("on") and building["coffee_machine-1"].has("off")


def test_building_nests_objects_on_and_inside_assets_and_other_objects(building):
    parent = building.parent
    assert parent["pen-1"][0] == "pen_holder-1" and parent["pen_holder-1"][0] == "desk-5"  # a pen in a holder on a desk
    assert parent["mug-1"][0] == "cabinet-1"  # a mug inside a cabinet
    # closed boxes inside closed containers: reaching the sandwich takes two opens
    assert building.enclosing_closed("sandwich-1") == ["fridge-1", "lunch_box-1"]
    assert building.enclosing_closed("screwdriver-1") == ["cabinet-3", "toolbox-1"]
    on_objects = [n for n, (p, _) in parent.items() if p in building.nodes and building[p].layer is Layer.OBJECT]
    assert len(on_objects) >= 8


# -- the tasks ------------------------------------------------------------------------------------
def test_task_list_matches_the_paper_row():
    tasks = _tasks()
    assert len(tasks) >= 25
    assert len(tasks) == office.PAPER["tasks"]
    ids = [t.id for t in tasks]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(i.startswith("office-") for i in ids)
    assert len({t.instruction for t in tasks}) == len(tasks)
    stats = dataset.split_stats(list(tasks))
    assert stats["rooms"] == 37 and stats["no_change"] == 0
    assert abs(stats["nodes"] - office.PAPER["nodes"]) < 5
    assert 3.0 <= stats["actions"] <= 5.0


def test_tasks_cover_every_kind_and_goal_type():
    tasks = _tasks()
    assert {t.provenance["kind"] for t in tasks} == set(office.KINDS)
    assert any(t.goal.count_goals for t in tasks)
    assert any(t.goal.formula for t in tasks)
    assert any(g.states and g.relation is None for t in tasks for g in t.goal.node_goals)
    assert any(t.provenance.get("edits") for t in tasks) and any(not t.provenance.get("edits") for t in tasks)


def test_tasks_are_tagged_as_authored_office_tasks():
    for t in _tasks():
        assert t.split == "office"
        assert "authored for the LookPlanGraph project" in t.provenance["source"]


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_ground_truth_plan_succeeds(task_id):
    task = _by_id()[task_id]
    report = validate_plan(task.graph, task.ground_truth_plan, task.goal)
    assert report.success, report.summary()
    assert report.precision == 1.0
    assert not report.infeasible
    # strict success: the plan also closes again every container the SGS opened on its way
    assert task.goal.unchanged_elsewhere and report.goal.frame_checked and report.side_effects == []


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_ground_truth_plan_is_the_short_lm_level_plan(task_id):
    """Moves are rearrange actions; go_to and the opening of containers are left to the SGS."""
    functions = [parse_action(a).function_name for a in _by_id()[task_id].ground_truth_plan]
    assert not {"go_to", "pick_up", "put_on", "put_inside", "discover_objects", "done"} & set(functions)


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_plan_without_its_last_state_changing_step_fails(task_id):
    task = _by_id()[task_id]
    plan = list(task.ground_truth_plan)
    assert not task.goal.is_empty()
    last = max(i for i, a in enumerate(plan) if parse_action(a).function_name in STATE_CHANGING)
    report = validate_plan(task.graph, plan[:last] + plan[last + 1:], task.goal)
    assert not report.success
    # a step either reaches a goal unit or closes a container the plan opened (else a side effect)
    if report.precision == 1.0:
        step = parse_action(plan[last])
        assert step.function_name == "close"
        assert [i.label for i in report.side_effects] == [step.node]
        assert report.success_changed_only
    # without its last step that is not such a close, a goal unit is missed
    last = max(i for i, a in enumerate(plan) if parse_action(a).function_name in STATE_CHANGING
               and not (parse_action(a).function_name == "close" and validate_plan(
                   task.graph, plan[:i] + plan[i + 1:], task.goal).precision == 1.0))
    assert validate_plan(task.graph, plan[:last] + plan[last + 1:], task.goal).precision < 1.0


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_no_goal_part_holds_in_the_initial_graph(task_id):
    task = _by_id()[task_id]
    result = evaluate_goal(task.goal, task.graph, task.graph)
    assert not result.success and result.side_effects == []
    assert [i.label for i in result.items if i.ok] == []
    assert result.correct == 0


def test_task_edits_vary_the_building(building):
    tasks = _by_id()
    held = tasks["office-11"].graph
    assert held.agent.location == "cafeteria-1" and held.agent.holding == "plate-3"
    assert held.place_of("fork-3") == "cafeteria-1"  # the fork lying on the plate comes along
    moved = tasks["office-01"].graph
    assert building.parent["stapler-2"] == ("shelf-1", Relation.ONTOP)
    assert moved.parent["stapler-2"] == ("cardboard_box-1", Relation.INSIDE)
    assert tasks["office-04"].graph["light-2"].states == ("on",) and building["light-2"].states == ("off",)
    added = tasks["office-08"].graph
    assert "parcel-1" in added and "parcel-1" not in building
    assert all(t.graph.nodes.keys() >= building.nodes.keys() for t in tasks.values())


def test_two_builds_are_identical():
    first, second = office.build_tasks(), office.build_tasks()
    assert [t.model_dump(mode="json") for t in first] == [t.model_dump(mode="json") for t in second]
    assert json.dumps([t.model_dump(mode="json") for t in first]) == json.dumps([t.model_dump(mode="json") for t in second])


def test_dataset_build_writes_and_reloads_the_split(tmp_path):
    out = dataset.build(tmp_path / "grasif", splits=["office"], progress=lambda _: None)
    loaded = dataset.load_split(out, "office")
    assert [t.model_dump() for t in loaded] == [t.model_dump() for t in office.build_tasks()]


def test_build_from_a_copied_source_dir(source_copy):
    assert [t.id for t in office.build_tasks(source_copy)] == TASK_IDS


# -- errors in the source files -------------------------------------------------------------------
def test_unknown_node_in_a_goal_names_the_file_and_task(source_copy):
    path = _edit_tasks(source_copy, lambda d: _task_entry(d, "office-03")["goal"]["node_goals"][0].update(destination="fridge-9"))
    with pytest.raises(SourceError) as err:
        office.build_tasks(source_copy)
    msg = str(err.value)
    assert str(path) in msg and "office-03" in msg and "fridge-9" in msg


def test_malformed_tasks_json_names_the_file(source_copy):
    path = source_copy / office.TASKS_FILE
    path.write_text(path.read_text()[:-40])
    with pytest.raises(SourceError, match="not valid JSON") as err:
        office.build_tasks(source_copy)
    assert str(path) in str(err.value)


def test_malformed_building_names_the_file_and_node(source_copy):
    path = source_copy / office.BUILDING_FILE
    text = path.read_text().replace('"related_to": "desk-5"', '"related_to": "desk-99"', 1)
    path.write_text(text)
    with pytest.raises(SourceError) as err:
        office.build_tasks(source_copy)
    assert str(path) in str(err.value) and "desk-99" in str(err.value)
    path.write_text("{ nope")
    with pytest.raises(SourceError, match="not valid JSON"):
        office.build_tasks(source_copy)


def test_missing_source_file_is_a_source_error(tmp_path):
    with pytest.raises(SourceError, match="missing"):
        office.build_tasks(tmp_path)


@pytest.mark.parametrize("change, words", [
    (lambda t: t["edits"].update(move=[{"node": "stapler-9", "relation": "inside_of", "related_to": "cardboard_box-1"}]),
     ["office-01", "stapler-9"]),
    (lambda t: t["edits"].update(agent={"location": "garden-1"}), ["office-01", "garden-1"]),
    (lambda t: t.update(kind="dance"), ["office-01", "kind"]),
    (lambda t: t.update(plan=["rearrange(stapler-2 ontop desk-5"]), ["office-01", "plan"]),
    (lambda t: t.update(plan=["rearrange(stapler-2, ontop, desk-6)"]), ["office-01", "does not reach the goal", "stapler-2"]),
    (lambda t: t.update(goal={"count_goals": [{"cls": "stapla", "relation": "ontop", "destination": "desk-5", "count": 1}]}),
     ["office-01", "stapla"]),
    (lambda t: t.update(goal={"node_goals": [{"node": "stapler-1", "relation": "ontop", "destination": "shelf-1"}]}),
     ["office-01", "already holds", "stapler-1"]),
    (lambda t: t.update(goal={}), ["office-01", "empty goal"]),
])
def test_bad_task_entries_name_the_task_and_the_problem(source_copy, change, words):
    path = _edit_tasks(source_copy, lambda d: change(_task_entry(d, "office-01")))
    with pytest.raises(SourceError) as err:
        office.build_tasks(source_copy)
    msg = str(err.value)
    assert str(path) in msg
    for w in words:
        assert w in msg


def test_duplicate_task_ids_are_a_source_error(source_copy):
    _edit_tasks(source_copy, lambda d: _task_entry(d, "office-02").update(id="office-01"))
    with pytest.raises(SourceError, match="office-01: duplicate"):
        office.build_tasks(source_copy)
