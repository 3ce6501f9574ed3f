"""The view's recall (lookplangraph.agent.recall): which classes an instruction names, and the
view that lists their unseen priors from other rooms only when asked; and the nodes' properties
in the view, which tell such priors apart."""

from __future__ import annotations

import json
import re

import pytest

from lookplangraph.agent.memory import MemoryGraph
from lookplangraph.agent.recall import named_classes
from lookplangraph.agent.view import names_in, render_view, view
from lookplangraph.planners.config import PlannerConfig


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
