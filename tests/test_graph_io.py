"""Loading and saving scene graphs: the paper's format, its variants, and bad graphs."""
import copy
import json

import pytest

from sgs.graph import GraphError, Layer, Relation, node_class
from sgs.io import graph_from_dict, graph_to_dict, load_graph, save_graph
from tests.conftest import kitchen_dict


def test_gift_basket_loads_with_its_layers(gift):
    assert len(gift.places) == 1
    assert len(gift.names(Layer.ASSET)) == 3
    assert len(gift.names(Layer.OBJECT)) == 20
    assert gift.parent["candle-1"] == ("table-1", Relation.ONTOP)
    assert gift.parent["table-1"] == ("living_room-1", Relation.IN_ROOM)
    assert gift.agent.location == "living_room-1" and gift.agent.holding is None
    assert gift["candle-1"].states == ("off",)
    assert gift.place_of("bow-4") == "living_room-1"


def test_round_trip_is_lossless_to_the_byte(gift_dict, gift):
    assert graph_to_dict(gift) == gift_dict
    assert json.dumps(graph_to_dict(gift)) == json.dumps(gift_dict)


def test_round_trip_of_prompt_variant():
    variant = {"nodes": {
        "room": [{"id": "living_room1"}],
        "asset": [{"id": "floor1", "located": "living_room1", "states": []}, {"id": "sofa1", "located": "living_room1", "states": []}],
        "object": [
            {"id": "carton1", "relation": "ontop_of", "related_to": "sofa1", "states": ["closed"]},
            {"id": "sock1", "relation": "ontop_of", "related_to": "sofa1", "states": [], "colour": "red"},
        ],
        "agent": [{"id": "agent1", "location": "living_room1", "holding": ""}],
    }}
    g = graph_from_dict(copy.deepcopy(variant))
    assert g.parent["sock1"] == ("sofa1", Relation.ONTOP)
    assert g.agent.name == "agent1" and g.agent.holding is None
    assert g["carton1"].affordances is None  # not given: layer defaults apply
    assert json.dumps(graph_to_dict(g)) == json.dumps(variant)


def test_round_trip_after_changes_keeps_held_object(tmp_path, kitchen):
    from sgs.actions import parse_action
    from sgs.simulator import check

    out = check(kitchen, parse_action("pick_up(cup-1)"))
    assert out.ok
    save_graph(out.graph, tmp_path / "g.json")
    back = load_graph(tmp_path / "g.json")
    assert back == out.graph
    assert back.agent.holding == "cup-1"
    assert back.parent["cup-1"] == ("agent-1", Relation.HELD)


def test_node_class():
    assert node_class("apple-1") == "apple"
    assert node_class("water_glass1") == "water_glass"
    assert node_class("band-aids-2") == "band-aids"
    assert node_class("fridge") == "fridge"


def _broken(mutate):
    d = kitchen_dict()
    mutate(d["nodes"])
    with pytest.raises(GraphError) as info:
        graph_from_dict(d)
    return str(info.value)


def test_unknown_parent_is_named():
    msg = _broken(lambda n: n["objects"][2].update(related_to="table-9"))
    assert "apple-2" in msg and "unknown parent 'table-9'" in msg


def test_two_parents_is_named():
    msg = _broken(lambda n: n["objects"][2].update(room="kitchen-1"))
    assert "apple-2" in msg and "two parents" in msg


def test_held_object_with_a_parent_is_two_parents():
    msg = _broken(lambda n: n["agent"].update(holding="apple-2"))
    assert "apple-2" in msg and "two parents" in msg


def test_cycle_is_named():
    def mutate(n):
        n["objects"][3].update(relation="ontop_of", related_to="cup-1")  # tray on cup, cup on tray
    msg = _broken(mutate)
    assert "cycle" in msg and "tray-1" in msg and "cup-1" in msg


def test_object_directly_in_room_is_rejected():
    msg = _broken(lambda n: n["objects"][2].update(related_to="kitchen-1"))
    assert "apple-2" in msg and "without an asset" in msg
    d = kitchen_dict()
    obj = d["nodes"]["objects"][2]
    del obj["relation"], obj["related_to"]
    obj["room"] = "kitchen-1"
    with pytest.raises(GraphError, match="apple-2.*without an asset"):
        graph_from_dict(d)


def test_unknown_relation_is_named():
    msg = _broken(lambda n: n["objects"][2].update(relation="under"))
    assert "apple-2" in msg and "unknown relation 'under'" in msg


def test_duplicate_name_is_named():
    msg = _broken(lambda n: n["objects"].append({"name": "table-1", "relation": "ontop_of", "related_to": "bed-1"}))
    assert "table-1" in msg and "duplicate" in msg


def test_asset_without_room_and_bad_agent():
    msg = _broken(lambda n: n["asset"][1].pop("room"))
    assert "table-1" in msg and "room" in msg
    msg = _broken(lambda n: n["agent"].update(location="garage-1"))
    assert "garage-1" in msg




def test_all_problems_reported_at_once():
    d = kitchen_dict()
    d["nodes"]["objects"][2]["related_to"] = "nowhere-1"
    d["nodes"]["objects"][5]["relation"] = "beside"
    with pytest.raises(GraphError) as info:
        graph_from_dict(d)
    assert len(info.value.problems) == 2
    assert any("apple-2" in p for p in info.value.problems)
    assert any("book-1" in p for p in info.value.problems)


def test_load_graph_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_graph(bad)
    d = kitchen_dict()
    d["nodes"]["objects"][0]["related_to"] = "ghost-1"
    bad.write_text(json.dumps(d))
    with pytest.raises(GraphError, match="bad.json.*ghost-1"):
        load_graph(bad)
