import json
from pathlib import Path

import pytest

from sgs.io import graph_from_dict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def gift_dict():
    return json.loads((EXAMPLES / "gift_basket" / "initial.json").read_text())


@pytest.fixture
def gift(gift_dict):
    return graph_from_dict(gift_dict)


@pytest.fixture
def gift_plan():
    return json.loads((EXAMPLES / "gift_basket" / "plan.json").read_text())


def kitchen_dict():
    """Two rooms; a closed fridge holding a closed box holding an apple; a lamp; a held-free agent."""
    return {"nodes": {
        "rooms": [{"name": "kitchen-1"}, {"name": "bedroom-1"}],
        "asset": [
            {"name": "fridge-1", "room": "kitchen-1", "states": ["closed"], "affordances": ["put_inside", "open", "close"]},
            {"name": "table-1", "room": "kitchen-1", "states": [], "affordances": ["put_on"]},
            {"name": "lamp-1", "room": "bedroom-1", "states": ["off"], "affordances": ["turn_on", "turn_off"]},
            {"name": "bed-1", "room": "bedroom-1", "states": [], "affordances": ["put_on"]},
        ],
        "objects": [
            {"name": "box-1", "relation": "inside_of", "related_to": "fridge-1", "states": ["closed"], "affordances": ["pick_up", "put_inside", "open", "close"]},
            {"name": "apple-1", "relation": "inside_of", "related_to": "box-1", "states": [], "affordances": ["pick_up"]},
            {"name": "apple-2", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up"]},
            {"name": "tray-1", "relation": "ontop_of", "related_to": "table-1", "states": [], "affordances": ["pick_up", "put_on"]},
            {"name": "cup-1", "relation": "ontop_of", "related_to": "tray-1", "states": [], "affordances": ["pick_up", "put_inside"]},
            {"name": "book-1", "relation": "ontop_of", "related_to": "bed-1", "states": [], "affordances": ["pick_up"]},
        ],
        "agent": {"name": "agent-1", "location": "bedroom-1", "holding": "nothing"},
    }}


@pytest.fixture
def kitchen():
    return graph_from_dict(kitchen_dict())
