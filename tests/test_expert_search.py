"""The privileged expert's search (a harness and data tool, not an LM): the belief-space search
finds moved objects without looking anywhere twice, no worse than the older room-by-room search,
and every reason it writes names only nodes its prompt shows."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from grasif import heldout
from lookplangraph.cli import main
from lookplangraph.agent.search import instruction_hints as _hints
from lookplangraph.distill.teacher.expert import Expert, grounded, ungrounded
from lookplangraph.distill.teacher.policy import ExpertError
from lookplangraph.distill.planning.trajectories import build_data, expert_episode, validate_data
from lookplangraph.planners.config import PlannerConfig
from sim_adapters.dynamic import relevant_objects


def test_a_reason_keeps_the_nodes_its_prompt_shows_and_writes_the_rest_as_classes():
    prompt = "Places: kitchen-1, storage_room-1.\nAssets here: shelf-2; cabinet-3 (closed)."
    reason = "stapler-2 is remembered on shelf-2; go to storage_room-1 to look at the cardboard_box-1"
    assert ungrounded(reason, prompt) == ["stapler-2", "cardboard_box-1"]
    assert grounded(reason, prompt) == ("the stapler is remembered on shelf-2; go to storage_room-1 to look at the "
                                        "cardboard box")
    assert ungrounded(grounded(reason, prompt), prompt) == []
    assert ungrounded("look at shelf-21", prompt) == ["shelf-21"]  # a name, not a prefix of one


def test_hints_are_the_rooms_and_asset_classes_the_instruction_names(split_tasks):
    office = split_tasks("office")[0].graph
    rooms, classes = _hints("Bring me the cup on the shelf in the storage room.", office)
    assert rooms == {"storage_room-1"} and classes == {"shelf"}


@pytest.fixture(scope="module")
def office(split_tasks):
    return split_tasks("office")


def test_the_belief_search_looks_nowhere_twice_and_is_no_worse_than_room_by_room(office):
    """Office, paper dynamic mode, seeds 0-2 together, 60 actions (measured: 81 against 76
    successes of 87, 1591 against 1717 actions)."""
    cfg = PlannerConfig(max_actions=60)
    done = {}
    for search in ("belief", "rooms"):
        results = [expert_episode(t, seed, cfg, Expert(search=search))[0] for seed in (0, 1, 2) for t in office]
        done[search] = (sum(r.success for r in results), sum(len(r.actions) for r in results))
        if search == "belief":
            for r in results:
                looks = Counter(a for a in r.actions if a.startswith("discover_objects"))
                assert max(looks.values(), default=1) == 1, (r.task_id, looks)
    assert done["belief"][0] >= done["rooms"][0] and done["belief"][1] < done["rooms"][1]


def test_static_episodes_are_unchanged_by_the_search(office):
    for task in office[::4]:
        belief, _, _ = expert_episode(task, None, PlannerConfig(), Expert(search="belief"))
        rooms, _, _ = expert_episode(task, None, PlannerConfig(), Expert(search="rooms"))
        assert belief.success and belief.actions == rooms.actions


def _remembered_elsewhere(task, obj: str, holder: str):
    """``task`` with ``obj`` on ``holder`` in the map and in the world (a static task still)."""
    data = task.model_dump()  # a new Task: no cached graph of the original comes along
    for o in data["initial_graph"]["nodes"]["objects"]:
        if o["name"] == obj:
            o["relation"], o["related_to"] = "ontop_of", holder
    return type(task).model_validate(data)


def test_the_view_limited_search_does_not_use_a_remembered_place_the_view_has_not_shown(office):
    """office-01: the stapler is remembered in the storage room. Remembered in Peter's office
    instead, the belief search's first step follows it there; the view-limited search's first step
    is the same either way (the prompt shows neither room's objects yet), and both episodes succeed."""
    task = next(t for t in office if t.id == "office-01")
    moved = _remembered_elsewhere(task, "stapler-2", "desk-6")
    assert task.graph.place_of("stapler-2") == "storage_room-1" and moved.graph.place_of("stapler-2") == "peters_office-1"
    first = {}
    for search in ("belief", "view"):
        for t in (task, moved):
            result, _, _ = expert_episode(t, None, PlannerConfig(max_actions=60), Expert(search=search))
            assert result.success, (search, t.graph.place_of("stapler-2"), result.actions)
            first[search, t.graph.place_of("stapler-2")] = result.actions[0]
    assert first["belief", "storage_room-1"] == "go_to(storage_room-1)"
    assert first["belief", "peters_office-1"] == "go_to(peters_office-1)"
    assert first["view", "storage_room-1"] == first["view", "peters_office-1"] == "go_to(toms_office-1)"  # a hint


def test_the_view_limited_search_reaches_every_static_office_goal(office):
    """Measured: 29/29 within 30 actions, 11.5 actions on average against 9.2 for the belief search."""
    results = [expert_episode(t, None, PlannerConfig(max_actions=60), Expert(search="view"))[0] for t in office]
    assert all(r.success for r in results), [r.task_id for r in results if not r.success]


def test_with_recall_named_the_view_shows_the_named_class_from_anywhere_and_the_view_search_follows_it(office):
    """office-01 asks for "the red stapler": with ``recall = named`` the prompt lists the stapler
    remembered in the storage room wherever the agent is, and the view-limited search walks there
    first, as the belief search does; the episode's prompts show it before the step that uses it."""
    task = next(t for t in office if t.id == "office-01")
    result, examples, _ = expert_episode(task, None, PlannerConfig(max_actions=60, recall="named"), Expert(search="view"))
    assert result.success and result.actions[0] == "go_to(storage_room-1)"
    first_prompt = examples[0][0][-1]["content"]
    assert "Objects the instruction names, remembered in other places (they may have moved): stapler-1, blue, " \
           "ontop shelf-1 in printing_room-1; stapler-2, red, inside cardboard_box-1 in storage_room-1." in first_prompt
    here, _, _ = expert_episode(task, None, PlannerConfig(max_actions=60), Expert(search="view"))
    assert here.actions[0] == "go_to(toms_office-1)" and len(result.actions) < len(here.actions)


def test_with_recall_named_assets_the_view_search_names_a_named_asset_of_another_room_at_once(office):
    """office-27 wants the markers on the whiteboard of meeting room 2: with ``recall = named``
    the prompt shows no whiteboard from the supply room, so the teacher takes a marker and walks;
    with ``named-assets`` the prompt lists whiteboard-2 and its room, and the teacher answers the
    rearrange itself (the rules insert the walk); both reach the goal."""
    task = next(t for t in office if t.id == "office-27")
    named, _, _ = expert_episode(task, None, PlannerConfig(max_actions=60, recall="named"), Expert(search="view"))
    assets, examples, _ = expert_episode(task, None, PlannerConfig(max_actions=60, recall="named-assets"),
                                         Expert(search="view"))
    assert named.success and assets.success
    assert named.actions[2:4] == ["pick_up(marker-2)", "go_to(meeting_room-2)"]
    assert assets.actions[2] == "rearrange(marker-2, ontop, whiteboard-2)"
    assert len(assets.actions) < len(named.actions)
    assert "whiteboard-2" in examples[0][0][-1]["content"]  # the name the teacher uses is in the prompt


def test_a_persons_room_is_named_by_the_persons_name(office):
    rooms, _ = _hints("Peter left his watch on his desk; bring Anna's mug to Tom.", office[0].graph)
    assert rooms == {"peters_office-1", "annas_office-1", "toms_office-1"}


def test_distill_data_takes_the_teacher_by_name_and_records_it(tmp_path):
    out = tmp_path / "d"
    assert main(["distill", "data", "--out", str(out), "--limit", "2", "--seeds", "static", "--augment", "none",
                 "--expert", "expert-view"]) == 0
    assert json.loads((out / "counts.json").read_text())["expert"] == "expert (privileged), view-limited search"


def test_an_unknown_search_is_refused():
    with pytest.raises(ExpertError, match="by belief or rooms or view, not 'random'"):
        Expert(search="random")


@pytest.fixture(scope="module")
def pool(split_tasks):
    tasks = [t for s in heldout.POOL_SPLITS for t in split_tasks(s)]
    chosen = [t for t in tasks if heldout.in_train_pool(t.split, t.id) and relevant_objects(t.graph, t.goal)]
    return chosen[:5] + [t for t in chosen if t.split == "behavior"][:5], tasks


def test_every_reason_distill_data_writes_names_only_what_its_prompt_shows(pool, tmp_path):
    """Over every example of a run of ``distill data`` (static and four dynamic seeds, renamed
    copies too): the validator reads each reason against its prompt, and searches say why."""
    tasks, everything = pool
    counts = build_data(tasks, tmp_path, seeds=[None, 0, 1, 2, 3], augmentations=("rename",))
    lines = [json.loads(x) for x in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert len(lines) == counts.examples > 100
    reasons = [json.loads(ex["messages"][-1]["content"])["reason"] for ex in lines]
    for ex, reason in zip(lines, reasons):
        assert ungrounded(reason, ex["messages"][-2]["content"]) == [], reason
    assert any("most likely place not looked at yet" in r for r in reasons)  # dynamic seeds moved something
    report = validate_data(tmp_path, {(t.split, t.id): t for t in everything})
    assert report.ok, report.problems[:3]
    # a reason that names a node its prompt does not show is caught
    bad = json.loads(json.dumps(lines[0]))
    answer = json.loads(bad["messages"][-1]["content"])
    answer["reason"] = "zzz_widget-9 is probably in the fridge"
    bad["messages"][-1]["content"] = json.dumps(answer)
    (tmp_path / "sft.jsonl").write_text(json.dumps(bad) + "\n")
    problems = validate_data(tmp_path, {(t.split, t.id): t for t in everything}).problems
    assert any("the reason names zzz_widget-9" in p for p in problems)


def test_the_older_search_is_selected_by_name_and_labelled(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--split", "office", "--task", "office-01", "--lm", "expert-oracle", "--out", str(out)]) == 0
    assert "room-by-room search" in capsys.readouterr().out
    assert json.loads((out / "result.json").read_text())["success"]


def test_the_walking_teacher_puts_only_in_the_room_it_stands_in(office):
    """office-27 with ``recall = named-assets``: where ``expert-view`` answers the rearrange from the
    supply room, ``expert-walk`` takes the marker, walks to meeting room 2 and puts it there; from
    that room on, the other things come by rearranges (the destination is where it stands)."""
    from lookplangraph.distill.teacher.expert import expert_for

    task = next(t for t in office if t.id == "office-27")
    cfg = PlannerConfig(max_actions=60, recall="named-assets")
    walk, examples, _ = expert_episode(task, None, cfg, expert_for("expert-walk"))
    assert walk.success
    assert walk.actions[2:6] == ["pick_up(marker-2)", "go_to(meeting_room-2)", "put_on(whiteboard-2)",
                                 "rearrange(marker-3, ontop, whiteboard-2)"]
    assert expert_for("expert-walk").name == "expert (privileged), view-limited search, puts from the destination's room"


def test_a_rearrange_the_teacher_began_is_passed_over_once_the_student_did_it(office, tmp_path):
    """SCRIPTED student (a test double, not an LM) on office-27: where ``expert-walk`` would take
    the marker first, the student answers the rearrange itself; the teacher's next label goes on to
    the next marker instead of taking the placed one back into hand."""
    from lookplangraph.distill.planning.dagger import run_round
    from lookplangraph.distill.planning.trajectories import data_config
    from lookplangraph.distill.teacher.expert import expert_for
    from lookplangraph.lm.scripted import ScriptedBackend

    task = next(t for t in office if t.id == "office-27")
    said = [{"function_name": "go_to", "node": "supply_room-1"}, {"function_name": "discover_objects", "node": "cabinet-4"},
            {"function_name": "rearrange", "node": "marker-2", "relation": "ontop", "destination": "whiteboard-2"},
            {"function_name": "done"}]
    said = [json.dumps({"node": None, "relation": None, "destination": None, **a}) for a in said]
    cfg = data_config("action", "history-scene", max_actions=12, recall="named-assets")
    run_round([task], ScriptedBackend(said), tmp_path, cfg=cfg, seeds=[None], expert=expert_for("expert-walk"))
    labels = {ex["meta"]["step"]: json.loads(ex["messages"][-1]["content"])
              for ex in map(json.loads, (tmp_path / "sft.jsonl").read_text().splitlines())}
    assert (labels[3]["function_name"], labels[3]["node"]) == ("pick_up", "marker-2")  # the teacher's own way
    assert (labels[4]["function_name"], labels[4]["node"]) != ("pick_up", "marker-2")
    assert labels[4]["node"] in ("marker-3", "eraser-1")


def test_the_teacher_specs_are_the_clis():
    from lookplangraph.cli.conventions import EXPERT_SPECS
    from lookplangraph.distill.teacher.expert import expert_for
    from lookplangraph.distill.teacher.policy import TEACHERS

    assert EXPERT_SPECS == tuple(TEACHERS)
    with pytest.raises(ExpertError, match="the teacher is one of expert, expert-oracle, expert-view, expert-walk"):
        expert_for("expert-run")
