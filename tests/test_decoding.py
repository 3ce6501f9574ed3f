"""Constrained decoding with excluded actions (lookplangraph/agent/decoding.py): the schema's action
space is checked by enumeration against its definition, and llama.cpp compiles it."""

from __future__ import annotations

import itertools
import json

import pytest

from lookplangraph.agent.decoding import (
    Box, action_key, action_schema, constrained_schema, exclude, flat_boxes, typed_action_schema, typed_boxes,
)
from sgs.actions import FUNCTIONS, RELATIONS, Action, parse_action

NAMES = ["kitchen-1", "fridge-1", "apple-1"]


def decodes(schema: dict) -> set[tuple]:
    """Every (function, node, relation, destination) the schema admits, by enumeration."""
    options = schema.get("anyOf", [schema])

    def values(slot: dict) -> list:
        if slot.get("type") == "null":
            return [None]
        if "anyOf" in slot:
            return [v for part in slot["anyOf"] for v in values(part)]
        return list(slot["enum"])

    out = set()
    for opt in options:
        p = opt["properties"]
        out |= set(itertools.product(*(values(p[k]) for k in ("function_name", "node", "relation", "destination"))))
    return out


def meaning(t: tuple) -> tuple:
    return action_key(Action(function_name=t[0], node=t[1], relation=t[2], destination=t[3]))


@pytest.mark.parametrize("keys", [
    [("go_to", "kitchen-1", None, None)],
    [("pick_up", "apple-1", None, None), ("discover_objects", "kitchen-1", None, None)],
    [("rearrange", "apple-1", "inside", "fridge-1")],
    [("put_on", None, None, "fridge-1"), ("open", "fridge-1", None, None), ("open", "apple-1", None, None)],
])
def test_flat_space_minus_keys_is_exactly_the_other_decodes(keys):
    full = decodes(action_schema(NAMES))
    narrowed = decodes(constrained_schema(NAMES, keys))
    assert narrowed == {t for t in full if meaning(t) not in set(keys)}
    assert len(narrowed) < len(full)


def test_typed_space_minus_keys():
    vocab = {"go_to": {"node": ["kitchen-1", "hall-1"]}, "open": {"node": ["fridge-1"]},
             "rearrange": {"node": ["apple-1"], "destination": ["fridge-1", "table-1"]}, "done": {}}
    full = decodes(typed_action_schema(vocab))
    keys = [("go_to", "hall-1", None, None), ("rearrange", "apple-1", "ontop", "table-1")]
    narrowed = decodes(constrained_schema(vocab, keys))
    assert narrowed == {t for t in full if meaning(t) not in set(keys)}
    assert ("go_to", "kitchen-1", None, None) in narrowed and ("rearrange", "apple-1", "inside", "table-1") in narrowed


def test_without_exclusions_the_schemas_are_the_plain_ones():
    assert constrained_schema(NAMES, []) == action_schema(NAMES)
    vocab = {"go_to": {"node": ["kitchen-1"]}, "done": {}}
    assert constrained_schema(vocab, []) == typed_action_schema(vocab)
    # free names cannot be narrowed: the schema stays the free one
    assert constrained_schema(None, [("go_to", "kitchen-1", None, None)]) == action_schema(None)


def test_excluding_everything_leaves_done():
    keys = [("go_to", "kitchen-1", None, None)]
    assert exclude(typed_boxes({"go_to": {"node": ["kitchen-1"]}}), keys) == []
    schema = constrained_schema({"go_to": {"node": ["kitchen-1"]}}, keys)
    assert decodes(schema) == {("done", None, None, None)}


def test_one_function_excluded_on_many_names_stays_two_variants():
    names = [f"room-{i}" for i in range(40)]
    keys = [("discover_objects", n, None, None) for n in names]
    schema = constrained_schema(names, keys)
    assert len(schema["anyOf"]) == 2  # the other functions; discover_objects on no name (null only)
    assert all(t[0] != "discover_objects" or t[1] is None for t in decodes(schema))


def test_action_key_reads_the_meaning():
    assert action_key(parse_action("put_on(table-1)")) == ("put_on", None, None, "table-1")
    assert action_key(Action(function_name="put_on", destination="table-1")) == ("put_on", None, None, "table-1")
    assert action_key(parse_action("put_on(apple-1, table-1)")) == ("put_on", "apple-1", None, "table-1")
    assert action_key(Action(function_name="go_to", node="hall-1", destination="x-1")) == ("go_to", "hall-1", None, None)
    assert action_key(parse_action("rearrange(a-1, on, t-1)")) == ("rearrange", "a-1", "ontop", "t-1")


def test_box_subtraction_is_exact_on_random_cuts():
    import random

    rng = random.Random(0)
    names = ["a-1", "b-1", "c-1"]
    for _ in range(200):
        keys = set()
        for _ in range(rng.randint(1, 6)):
            fn = rng.choice(list(FUNCTIONS))
            slots = FUNCTIONS[fn]
            keys.add(action_key(Action(function_name=fn, node=rng.choice(names) if "node" in slots else None,
                                       relation=rng.choice(RELATIONS) if "relation" in slots else None,
                                       destination=rng.choice(names) if "destination" in slots else None)))
        boxes = exclude(flat_boxes(names), keys)
        admitted = {t for b in boxes for t in itertools.product(*b.slots())}
        full = {t for b in flat_boxes(names) for t in itertools.product(*b.slots())}
        assert admitted == {t for t in full if meaning(t) not in keys}
        assert all(isinstance(b, Box) for b in boxes)


def test_llamacpp_compiles_the_narrowed_schema():
    llama_cpp = pytest.importorskip("llama_cpp")
    schema = constrained_schema(NAMES, [("go_to", "kitchen-1", None, None), ("rearrange", "apple-1", "inside", "fridge-1")],
                                reason_max_length=80)
    assert llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False) is not None
