"""The English of intent questions (lookplangraph.cypher.intent_words): classes by their display
names, never by a raw compound class name, and a plural rule with its exceptions."""

from __future__ import annotations

import random
import re

import pytest

from conftest import kitchen_dict
from grasif import heldout
from lookplangraph.cypher.benchmark import unique_scenes
from lookplangraph.cypher.intent_bench import intent_questions
from lookplangraph.cypher.intent_words import describe_room, descriptions, display, name_of, plural, plural_words, words
from sgs.graph import node_class
from sgs.io import graph_from_dict

PLURALS = {
    # the rules
    "cup": "cups", "battery": "batteries", "toy": "toys", "tray": "trays", "box": "boxes", "dish": "dishes",
    "bench": "benches", "glass": "glasses", "mattress": "mattresses", "bus": "buses", "iris": "irises",
    "avocado": "avocados", "stereo": "stereos", "skiff": "skiffs", "hoodie": "hoodies", "thesis": "theses",
    "analysis": "analyses",
    # irregular, also at the end of a glued compound
    "knife": "knives", "shelf": "shelves", "leaf": "leaves", "half": "halves", "scarf": "scarves",
    "person": "people", "mouse": "mice", "foot": "feet", "tooth": "teeth", "child": "children", "die": "dice",
    "cactus": "cacti", "potato": "potatoes", "tomato": "tomatoes", "mango": "mangoes", "lens": "lenses",
    "axis": "axes", "bookshelf": "bookshelves", "wallshelf": "wall shelves", "pocketknife": "pocketknives",
    "salesperson": "salespeople", "carving_knife": "carving knives", "pottable__cactus": "pottable cacti",
    # the same for one and many, and words already plural
    "series": "series", "species": "species", "sheep": "sheep", "fish": "fish", "chassis": "chassis",
    "clothes": "clothes", "pants": "pants", "scissors": "scissors", "glasses": "glasses", "sunglasses": "sunglasses",
    "keys": "keys", "shoes": "shoes", "band-aids": "band-aids", "pliers": "pliers", "printed_slides": "printed slides",
    "clothes_pants": "pants", "food_noodles": "noodles", "oven_mitts": "oven mitts", "food_food": "food",
    # the head of a phrase
    "bottle__of__gin": "bottles of gin", "deck_of_cards": "decks of cards", "basket_for_clothes": "baskets for clothes",
    "box__of__chocolates": "boxes of chocolates", "coffee_table": "coffee tables",
    # display names
    "clothes_hat": "hats", "food_donut": "donuts", "instrument_guitar": "guitars", "clothes_dryer": "clothes dryers",
    "tvstand": "TV stands", "t_shirt": "T-shirts", "tv": "TVs",
}


@pytest.mark.parametrize("cls, expected", sorted(PLURALS.items()))
def test_the_plural_of_a_class_follows_the_rules_and_their_exceptions(cls, expected):
    assert plural(cls) == expected


def test_display_names_drop_virtualhome_prefixes_and_read_glued_names():
    assert [display(c) for c in ("clothes_hat", "food_donut", "food_ice_cream", "instrument_violin", "hands_both")] \
        == ["hat", "donut", "ice cream", "violin", "hands"]
    assert [display(c) for c in ("clothes_dryer", "food_processor", "coffee_table", "bottle__of__gin")] \
        == ["clothes dryer", "food processor", "coffee table", "bottle of gin"]  # the prefix is part of the name
    assert [display(c) for c in ("tvstand", "cpuscreen", "coffe_maker", "dvd_player")] \
        == ["TV stand", "computer screen", "coffee maker", "DVD player"]
    assert display("annas_office") == "Anna's office" and plural_words("wall shelf") == "wall shelves"


def test_a_scene_names_its_rooms_and_keeps_classes_that_read_alike_apart():
    d = kitchen_dict()
    d["nodes"]["rooms"] = [{"name": "annas_office-1"}, {"name": "kitchen-1"}, {"name": "kitchen-2"}]
    d["nodes"]["asset"][2:] = [{"name": "lamp-1", "room": "annas_office-1", "states": [], "affordances": []},
                               {"name": "bed-1", "room": "annas_office-1", "states": [], "affordances": ["put_on"]}]
    d["nodes"]["agent"]["location"] = "kitchen-1"
    d["nodes"]["objects"] += [
        {"name": "food_chicken-1", "relation": "ontop_of", "related_to": "bed-1", "states": [], "affordances": []},
        {"name": "chicken-1", "relation": "ontop_of", "related_to": "bed-1", "states": [], "affordances": []},
        {"name": "clothes_hat-1", "relation": "ontop_of", "related_to": "bed-1", "states": [], "affordances": []}]
    g = graph_from_dict(d)
    assert {describe_room(g, "annas_office-1", random.Random(k)) for k in range(20)} == {"annas_office-1", "Anna's office"}
    assert [name_of(g, c) for c in ("food_chicken", "chicken", "clothes_hat")] == ["food chicken", "chicken", "hat"]
    assert "the hat" in descriptions(g, "clothes_hat-1")


def _raw_forms(cls: str) -> list[str]:
    """How a question might write a compound class raw: with its underscores, or with them as spaces."""
    return sorted({cls, cls.replace("_", " "), words(cls)}, key=len, reverse=True)


@pytest.fixture(scope="module")
def pool(split_tasks):
    """The planning train pool's unique scenes, split by split (what training questions are asked on)."""
    out = {}
    for split in ("virtualhome", "behavior"):
        tasks = [t for t in split_tasks(split) if heldout.in_train_pool(t.split, t.id)]
        out[split] = [(t.id, t.graph) for t in unique_scenes(tasks)]
    assert out["virtualhome"] and out["behavior"]
    return out


def test_no_question_on_the_train_pool_names_a_raw_compound_class(pool):
    checked, bad = set(), []
    for split, scenes in pool.items():
        graphs = dict(scenes)
        for scene, g in scenes:
            classes = {node_class(n) for n in g.nodes}
            names = [name_of(g, c) for c in classes]
            assert len({n.lower() for n in names}) == len(names), scene  # no two classes read alike
            for c in classes:  # every class of the pool, by itself
                if "_" in c and display(c).lower() not in (f.lower() for f in _raw_forms(c)):
                    checked.add(c)
                    assert name_of(g, c) == display(c), (scene, c)
        for q in intent_questions(split, scenes, seed=0, per_scene=2):
            g = graphs[q.scene]
            nodes = re.compile("|".join(re.escape(n) for n in sorted(g.nodes, key=len, reverse=True)))
            text = nodes.sub("<node>", q.question)  # node names (clothes_hat-1) are names, not words
            for c in {node_class(n) for n in g.nodes} & checked:
                for form in _raw_forms(c):
                    if re.search(r"(?<![\w-])" + re.escape(form), text, re.IGNORECASE):
                        bad.append((q.id, c, q.question))
    assert {"clothes_hat", "food_donut", "instrument_guitar", "food_orange"} <= checked
    assert not bad, bad[:10]
