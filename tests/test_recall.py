"""The view's recall (lookplangraph.agent.recall): which classes an instruction names, and the
view that lists their unseen priors (and, with ``named-assets``, their assets) from other rooms
only when asked; and the nodes' properties in the view, which tell such priors apart. The loop
test uses ``ScriptedBackend``, a test double for an LM that replies with fixed texts."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.recall import named_classes, recall_asset_classes, recall_classes
from lookplangraph.agent.view import names_in, render_view, view, vocabulary
from lookplangraph.evaluation.runner import make_env
from lookplangraph.lm import ScriptedBackend
from lookplangraph.planners.config import PlannerConfig
from lookplangraph.planners.lookplangraph import run_episode
from sgs.graph import Layer


@pytest.fixture(scope="module")
def office(split_tasks):
    return {t.id: t for t in split_tasks("office")}


def test_an_instruction_names_classes_by_their_words_in_the_singular(office):
    g = office["office-01"].graph
    assert named_classes("Find the red stapler and put it on Tom's desk.", g) == {"stapler"}
    assert named_classes("Bring the STAPLERS here", g) == {"stapler"}
    assert named_classes("Bring me something to write with", g) == frozenset()
    assert named_classes("Put the orange and the apple into the fridge", office["office-03"].graph) == {"apple", "orange"}


def test_without_recall_the_view_is_what_it_was_and_with_it_the_named_priors_elsewhere_are_listed(office):
    task = office["office-01"]
    memory = MemoryGraph(task.graph)
    plain = view(memory)
    assert "recalled" not in plain
    named = view(memory, recall=named_classes(task.instruction, task.graph))
    assert [(e["name"], e["room"]) for e in named["recalled"]] == [("stapler-1", "printing_room-1"),
                                                                    ("stapler-2", "storage_room-1")]
    assert {k: v for k, v in named.items() if k != "recalled"} == plain
    text = render_view(named)
    assert text.startswith(render_view(plain))
    assert text.endswith("Objects the instruction names, remembered in other places (they may have moved): "
                         "stapler-1, blue, ontop shelf-1 in printing_room-1; stapler-2, red, inside cardboard_box-1 in storage_room-1.")
    assert "stapler-2" in names_in(named) and "stapler-2" not in names_in(plain)


def test_the_view_shows_properties_so_that_an_instruction_naming_one_is_decidable(office, split_tasks):
    """Office-01 asks for "the red stapler" with a blue one remembered too: the properties are in
    the view's data (JSON style included), in the text as an apposition, and a room's in Places;
    a graph without properties renders as it always did."""
    task = office["office-01"]
    memory = MemoryGraph(task.graph)
    named = view(memory, recall=named_classes(task.instruction, task.graph))
    assert [(e["name"], e.get("properties")) for e in named["recalled"]] == [("stapler-1", ["blue"]), ("stapler-2", ["red"])]
    assert named["place_properties"]["kitchen-1"] == ["main kitchen"]
    text = render_view(named)
    assert "stapler-2, red, inside cardboard_box-1 in storage_room-1" in text
    assert "kitchen-1 (main kitchen), " in text and "lobby-1, corridor-1," in text
    assert json.loads(render_view(view(memory, "json"), "json"))["place_properties"]["boardroom-1"] == ["the largest meeting room"]
    parcels = render_view(view(MemoryGraph(office["office-08"].graph)))
    assert "parcel-2, addressed to Anna, ontop reception_desk-1" in parcels

    home = split_tasks("virtualhome")[0]
    plain = view(MemoryGraph(home.graph))
    assert plain["place_properties"] == {} and not any("properties" in e for k in ("assets", "remembered") for e in plain[k])
    items = [i for line in render_view(plain).splitlines()[2:] for i in line.split(": ", 1)[1].rstrip(".").split("; ")]
    assert items and not any("," in re.sub(r" \([^)]*\)$", "", i) for i in items)  # no apposition without properties


def test_recall_follows_the_adapter_unless_set(tmp_path):
    from types import SimpleNamespace

    named = SimpleNamespace(metadata={"lookplangraph.recall": "named"}, path=tmp_path / "a.gguf")
    assert PlannerConfig().settled(None)[0].recall == "here"
    assert PlannerConfig().settled(named)[0].recall == "named"
    cfg, notes = PlannerConfig(recall="here").settled(named)
    assert cfg.recall == "here" and notes == ["a.gguf was trained with recall = named; running it with here as set"]
    with pytest.raises(ValueError, match="recall"):
        PlannerConfig(recall="everywhere")


def test_named_assets_lists_the_assets_the_instruction_names_in_other_rooms(office):
    """``recall = named-assets``: Office-01 ("put it on Tom's desk", "the shelf in the printing
    room") names the desk and shelf classes; the view lists those assets of other rooms with their
    room (never those of the agent's own room, which it shows already), they become nameable, and
    everything else is the ``named`` view's."""
    task = office["office-01"]
    memory = MemoryGraph(task.graph)
    assert named_classes(task.instruction, task.graph, Layer.ASSET) == {"desk", "shelf"}
    assert recall_classes("named-assets", task.instruction, task.graph) == recall_classes("named", task.instruction, task.graph)
    assert recall_asset_classes("named", task.instruction, task.graph) == frozenset()
    classes = recall_classes("named", task.instruction, task.graph)
    named = view(memory, recall=classes)
    assets = view(memory, recall=classes, asset_recall=recall_asset_classes("named-assets", task.instruction, task.graph))
    assert {k: v for k, v in assets.items() if k != "named_assets"} == named
    listed = {e["name"]: e["room"] for e in assets["named_assets"]}
    assert listed["desk-5"] == "toms_office-1" and listed["shelf-1"] == "printing_room-1"
    assert all(memory.graph.nodes[n].layer is Layer.ASSET and n.split("-")[0] in ("desk", "shelf") for n in listed)
    assert "reception_desk-1" not in listed  # another class, in the agent's own room
    assert "desk-5" in names_in(assets) and "desk-5" not in names_in(named)
    typed = vocabulary(memory, v=assets)  # the typed vocabulary: a destination and a place to look
    assert "desk-5" in typed["discover_objects"]["node"] and "desk-5" in typed["rearrange"]["destination"]
    assert "desk-5" not in vocabulary(memory, v=named)["discover_objects"]["node"]
    assert "Assets the instruction names, in other places: shelf-1 in printing_room-1;" in render_view(assets)
    # in the desk's own room it is an asset here, not listed
    moved = MemoryGraph(task.graph.evolve(agent=replace(task.graph.agent, location="toms_office-1")))
    there = view(moved, recall=classes, asset_recall=recall_asset_classes("named-assets", task.instruction, task.graph))
    assert "desk-5" in [e["name"] for e in there["assets"]] and "desk-5" not in [e["name"] for e in there["named_assets"]]


def test_the_conversation_lists_named_assets_once_a_room_and_the_loop_accepts_them(office):
    """In the conversation layout the list comes with each room entered for the first time (with
    ``named`` it never does), a listed asset of another room is a name the answer's schema allows
    (with ``named`` it is not), and an answer naming it is carried out with a go_to inserted."""
    task = office["office-01"]
    first = json.dumps({"function_name": "discover_objects", "node": "desk-5", "relation": None, "destination": None})
    done = json.dumps({"function_name": "done", "node": None, "relation": None, "destination": None})
    out = {}
    for recall in ("named", "named-assets"):
        lm = ScriptedBackend([first, done])
        records = []
        run_episode(task, make_env(task, None), lm, PlannerConfig(prompt_layout="conversation", recall=recall,
                                                                  reason_max_length=0, max_actions=3),
                    on_step=records.append)
        out[recall] = (lm.requests[0]["messages"][-1]["content"], records[0], lm.requests[1]["messages"][-1]["content"],
                       json.dumps(lm.requests[0]["schema"]))
    opening, record, then, schema = out["named-assets"]
    assert '"desk-5"' in schema
    assert "The instruction names, in other rooms: shelf-1 in printing_room-1;" in opening
    assert "desk-5 in toms_office-1" in opening
    assert record.accepted and record.executed[:2] == ["go_to(toms_office-1)", "discover_objects(desk-5)"]
    # the room entered for the first time lists them again, but for the desk now among its assets
    assert "In toms_office-1." in then and "The instruction names, in other rooms: shelf-1 in printing_room-1;" in then
    assert "desk-5 in toms_office-1" not in then and "Assets here: desk-5" in then
    opening, record, _, schema = out["named"]
    assert "The instruction names, in other rooms" not in opening and "desk-5" not in opening
    assert '"desk-5"' not in schema
