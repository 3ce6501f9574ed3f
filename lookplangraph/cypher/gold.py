"""The query expert: for every question template of :mod:`.qa`, the read-only Cypher query that
answers it, and the answer read off the query's rows.

It is a data tool (training examples in the agent's own turn format: question → query → rows →
answer), and it checks itself: :func:`gold` runs the query on the store and reads the answer from
the rows, and a question whose rows do not give the benchmark's answer is an error
(:class:`GoldError`), never a silent example. ``tests/test_cypher_gold.py`` runs every template
on GraSIF scenes.

The queries are written as a person who knows the schema (:mod:`.scene`) would write them, in
the dialect both stores accept: objects reach their room through ``ON_TOP_OF``/``INSIDE`` to an
Asset and ``IN_ROOM`` (``[:ON_TOP_OF|INSIDE*1..12]``), a held object is in no room and rests on
nothing, states are a list (``list_contains(n.states, 'open')``). A set is returned sorted, so the
rows (and the training data made of them) do not depend on the store's internal order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lookplangraph.cypher.answers import answers_equal
from lookplangraph.cypher.qa import Question

#: the path from an object to what ultimately holds it
CHAIN = "[:ON_TOP_OF|INSIDE*1..12]"
NAME = r"(?P<{}>[A-Za-z0-9_.\-]+)"


def _pattern(text: str) -> re.Pattern:
    out, fields = "", re.findall(r"\{(\w+)\}", text)
    for part in re.split(r"\{\w+\}", text):
        out += re.escape(part)
        if fields:
            out += NAME.format(fields.pop(0))
    return re.compile(f"^{out}$")


#: template -> (its question as :mod:`.qa` writes it, the gold query)
QUERIES: dict[str, tuple[str, str]] = {
    "count_class_scene": ("How many objects of class {cls} are there in the whole scene?",
                          "MATCH (o:Object) WHERE o.class = '{cls}' AND NOT EXISTS {{ MATCH (:Agent)-[:HOLDS]->(o) }} "
                          "RETURN count(o)"),
    "count_class_room": ("How many {cls} objects are in the room {room}?",
                         f"MATCH (o:Object)-{CHAIN}->(:Asset)-[:IN_ROOM]->(r:Room {{{{name: '{{room}}'}}}}) "
                         "WHERE o.class = '{cls}' RETURN count(DISTINCT o)"),
    "count_on_asset": ("How many objects are directly on top of or inside {asset}?",
                       "MATCH (o:Object)-[:ON_TOP_OF|INSIDE]->(a {{name: '{asset}'}}) RETURN count(o)"),
    "location_room": ("In which room is {obj}?",
                      f"MATCH (o:Object {{{{name: '{{obj}}'}}}})-{CHAIN}->(:Asset)-[:IN_ROOM]->(r:Room) RETURN r.name"),
    "location_parent": ("What is {obj} directly on top of or inside? Give the name of that node.",
                        "MATCH (o:Object {{name: '{obj}'}})-[:ON_TOP_OF|INSIDE]->(p) RETURN p.name"),
    "state_set": ("Which {cls} nodes are {state}? Give their names.",
                  "MATCH (n) WHERE n.class = '{cls}' AND list_contains(n.states, '{state}') RETURN n.name ORDER BY n.name"),
    "state_bool": ("Is {node} {state}?",
                   "MATCH (n {{name: '{node}'}}) RETURN list_contains(n.states, '{state}')"),
    "state_count_room": ("How many assets in the room {room} are {state}?",
                         "MATCH (a:Asset)-[:IN_ROOM]->(:Room {{name: '{room}'}}) WHERE list_contains(a.states, '{state}') "
                         "RETURN count(a)"),
    "contain_deep_set": ("Which objects are on top of or inside {node}, directly or through other objects (at any depth)?",
                         f"MATCH (d:Object)-{CHAIN}->(n {{{{name: '{{node}}'}}}}) RETURN DISTINCT d.name ORDER BY d.name"),
    "contain_base_asset": ("{obj} rests on or inside another object. Which asset (furniture or fixture) ultimately "
                           "holds it?", f"MATCH (o:Object {{{{name: '{{obj}}'}}}})-{CHAIN}->(a:Asset) RETURN a.name"),
    "contain_count_deep": ("How many objects are on top of or inside {asset} at any depth (objects on or in objects "
                           "count too)?", f"MATCH (d:Object)-{CHAIN}->(a {{{{name: '{{asset}}'}}}}) RETURN count(DISTINCT d)"),
    "argmax_room_class": ("Which room has the most {cls} objects?",
                          f"MATCH (o:Object)-{CHAIN}->(:Asset)-[:IN_ROOM]->(r:Room) WHERE o.class = '{{cls}}' "
                          "RETURN r.name, count(DISTINCT o) AS k ORDER BY k DESC LIMIT 1"),
    "argmax_room_assets": ("Which room has the most assets?",
                           "MATCH (a:Asset)-[:IN_ROOM]->(r:Room) RETURN r.name, count(a) AS k ORDER BY k DESC LIMIT 1"),
    "set_classes_on": ("What classes of objects are directly on top of or inside {asset}? Give each class once.",
                       "MATCH (o:Object)-[:ON_TOP_OF|INSIDE]->(a {{name: '{asset}'}}) RETURN DISTINCT o.class ORDER BY o.class"),
    "list_rooms_sorted": ("List the names of all rooms in alphabetical order.",
                          "MATCH (r:Room) RETURN r.name ORDER BY r.name"),
    "list_on_asset_sorted": ("List the names of the objects directly on top of or inside {asset}, in alphabetical order.",
                             "MATCH (o:Object)-[:ON_TOP_OF|INSIDE]->(a {{name: '{asset}'}}) RETURN o.name ORDER BY o.name"),
    "set_rooms_with_class": ("Which rooms contain at least one {cls} object?",
                             f"MATCH (o:Object)-{CHAIN}->(:Asset)-[:IN_ROOM]->(r:Room) WHERE o.class = '{{cls}}' "
                             "RETURN DISTINCT r.name ORDER BY r.name"),
}
PATTERNS = {name: _pattern(text) for name, (text, _) in QUERIES.items()}


class GoldError(ValueError):
    """No gold query for a question (another template, or its text not the template's), or the
    query's rows do not give the benchmark's answer; the message says which."""


@dataclass(frozen=True)
class Gold:
    """A question's gold query, the rows it returned, and the answer read off them."""

    query: str
    rows: list[list[Any]]
    answer: Any


def gold_query(q: Question) -> str:
    """The query that answers ``q`` (module doc)."""
    if q.template not in QUERIES:
        raise GoldError(f"{q.id}: no gold query for template {q.template!r}")
    m = PATTERNS[q.template].match(q.question)
    if m is None:
        raise GoldError(f"{q.id}: the question is not in template {q.template!r}'s words: {q.question!r}")
    return QUERIES[q.template][1].format(**m.groupdict())


def answer_from_rows(answer_type: str, rows: list[list[Any]]) -> Any:
    """The typed answer a query's rows give: the first cell (number, string, boolean), the first
    column (set, list: in the rows' order)."""
    if answer_type in ("set", "list"):
        return [r[0] for r in rows]
    return rows[0][0] if rows else None


def gold(q: Question, store) -> Gold:
    """``q``'s gold query run on ``store`` (the question's scene loaded), checked against the
    benchmark's answer (:class:`GoldError` when it differs)."""
    query = gold_query(q)
    rows = store.query(query).rows
    answer = answer_from_rows(q.answer_type, rows)
    if not answers_equal(q.answer_type, q.answer, answer):
        raise GoldError(f"{q.id} ({q.template}): the gold query gives {answer!r}, the benchmark says {q.answer!r}")
    return Gold(query, rows, answer)
