"""The grounding expert: for a grounding item (:mod:`lookplangraph.cypher.grounding`), the read-only
Cypher queries that find the nodes its instruction refers to, and the goal the agent should answer,
both checked. The grounding counterpart of :mod:`lookplangraph.cypher.gold`: a data tool for
training examples in the agent's own turns (instruction → queries → rows → goal).

* The **candidates**: every node of each class the goal refers to, one query per label (objects
  with what holds them, their room, states and properties; assets with their room, states and
  properties; rooms by name), rows sorted by name.
* The **answer**: the goal in the agent's reply schema (:func:`~lookplangraph.cypher.agent.goal_schema`);
  absent states as ``(not (state node))`` conjuncts of the formula; the frame flag dropped.

:func:`grounding_gold` raises :class:`GroundingGoldError` instead of returning an example that
would teach something wrong: every query returns rows within :data:`EVAL_LIMITS`; the rows contain
every node name and class the answer uses; the answer fits the reply schema and passes
:func:`~lookplangraph.cypher.agent.goal_problem`; and the grounding judge
(:func:`~lookplangraph.cypher.grounding.judge`) scores it correct. See ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sgs.graph import Layer, SceneGraph, node_class

from grasif.goals import GoalSpec

from lookplangraph.cypher.agent import AgentConfig, goal_problem, goal_schema, reply_schema
from lookplangraph.cypher.gold import CHAIN
from lookplangraph.cypher.grounding import GroundingItem, judge, referenced
from lookplangraph.cypher.store import QueryError, QueryLimits
from lookplangraph.lm.json_reply import check_reply

#: the result limits of ``lookplangraph cypher-eval`` (its ``--max-rows``/``--max-chars`` defaults):
#: a gold query's rows must fit them, or the agent would get an error where the data shows rows
EVAL_LIMITS = QueryLimits(max_rows=50, max_chars=2000)
#: the store label of each scene-graph layer, in the order the expert asks
LABELS = ((Layer.OBJECT, "Object"), (Layer.ASSET, "Asset"), (Layer.PLACE, "Room"))


#: kinds of :class:`GroundingGoldError`
REJECTIONS = ("goal", "query_failed", "no_rows", "too_large", "rows_lack", "schema", "sent_back", "judge")


class GroundingGoldError(ValueError):
    """No gold for an item: ``kind`` (one of :data:`REJECTIONS`) says why: a goal that is no
    GoalSpec or refers to a class the scene lacks, a query that fails, finds nothing or gives too
    large a result, rows that lack what the answer uses, a goal outside the reply schema or sent
    back by the agent, or one the judge scores wrong; the message gives the details."""

    def __init__(self, kind: str, message: str):
        assert kind in REJECTIONS, kind
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class GoldQuery:
    """One query of the expert, the thought it is sent with, and the rows the store returned."""

    thought: str
    query: str
    rows: list[list[Any]]


@dataclass(frozen=True)
class GroundingGold:
    """An item's gold queries (in order), the goal to answer and the answer's thought."""

    queries: list[GoldQuery]
    answer: dict[str, Any]
    thought: str


def _labels_of(graph: SceneGraph, cls: str) -> list[str]:
    layers = {graph.nodes[n].layer for n in graph.nodes if node_class(n) == cls}
    return [label for layer, label in LABELS if layer in layers]


def _quoted(values) -> str:
    return "[" + ", ".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in sorted(values)) + "]"


def _words(classes) -> str:
    return ", ".join(sorted(classes))


def candidate_queries(goal: GoalSpec, graph: SceneGraph) -> list[tuple[str, str]]:
    """``(thought, query)`` per label: the nodes of every class the goal refers to (module doc).
    ``GroundingGoldError`` when a class is in no node of ``graph``."""
    names, classes = referenced(goal)
    by_label: dict[str, set[str]] = {}
    for cls in {node_class(n) for n in names} | classes:
        labels = _labels_of(graph, cls)
        if not labels:
            raise GroundingGoldError("goal", f"the goal refers to class {cls!r}, which no node of the scene has")
        for label in labels:
            by_label.setdefault(label, set()).add(cls)
    out = []
    if "Object" in by_label:
        cls = by_label["Object"]
        out.append((f"Find the objects of class {_words(cls)}: what each rests on or in, its room, states and properties.",
                    f"MATCH (o:Object) WHERE o.class IN {_quoted(cls)} OPTIONAL MATCH (o)-[:ON_TOP_OF|INSIDE]->(p) "
                    f"OPTIONAL MATCH (o)-{CHAIN}->(:Asset)-[:IN_ROOM]->(r:Room) "
                    "RETURN o.name, p.name, r.name, o.states, o.properties ORDER BY o.name"))
    if "Asset" in by_label:
        cls = by_label["Asset"]
        out.append((f"Find the assets (furniture, fixtures) of class {_words(cls)}: the room, states and properties of each.",
                    f"MATCH (a:Asset)-[:IN_ROOM]->(r:Room) WHERE a.class IN {_quoted(cls)} "
                    "RETURN a.name, r.name, a.states, a.properties ORDER BY a.name"))
    if "Room" in by_label:
        out.append(("Find the rooms the instruction names.", "MATCH (r:Room) RETURN r.name ORDER BY r.name"))
    return out


# -- the answer -----------------------------------------------------------------------------------
def _state_predicate(word: str) -> str:
    return "toggled_on" if word == "on" else word


def answer_of(goal: GoalSpec) -> dict[str, Any]:
    """``goal`` as the agent writes it (:func:`~lookplangraph.cypher.agent.goal_schema`; module doc): every key
    present, absent states as negated formula conjuncts."""
    node_goals, negations = [], []
    for g in goal.node_goals:
        node_goals.append({"node": g.node, "relation": g.relation, "destination": g.destination,
                           "states": list(g.states)})
        negations += [f"(not ({_state_predicate(s)} {g.node}))" for s in g.absent_states]
    count_goals = [{"cls": g.cls, "relation": g.relation, "destination": g.destination, "count": g.count,
                    "states": list(g.states)} for g in goal.count_goals]
    formula = goal.formula
    if negations:
        parts = ([formula] if formula else []) + negations
        formula = parts[0] if len(parts) == 1 else f"(and {' '.join(parts)})"
    # a node goal that only asked for absent states is now all in the formula
    node_goals = [g for g, src in zip(node_goals, goal.node_goals) if src.relation or src.states or not src.absent_states]
    return {"node_goals": node_goals, "count_goals": count_goals, "formula": formula}


def _answer_thought(answer: dict[str, Any]) -> str:
    spec = GoalSpec.model_validate({k: v for k, v in answer.items() if v not in (None, [])})
    names, classes = referenced(spec)
    text = f"The rows show the nodes the instruction means: {', '.join(sorted(names))}" + \
        (f" (and the class{'es' if len(classes) > 1 else ''} {', '.join(sorted(classes))})." if classes else ".")
    return text if len(text) <= 290 else text[:286].rsplit(", ", 1)[0] + " ..."


# -- the checked gold -----------------------------------------------------------------------------
def _cells(rows: list[list[Any]]) -> set[str]:
    out: set[str] = set()
    for row in rows:
        for v in row:
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, list):
                out.update(x for x in v if isinstance(x, str))
    return out


def grounding_gold(item: GroundingItem, graph: SceneGraph, store) -> GroundingGold:
    """The gold of ``item`` on ``store`` (``graph``, the item's initial scene, loaded: as a plain
    store or through :class:`~lookplangraph.cypher.memory_view.MemoryView`), checked as the module doc says
    (:class:`GroundingGoldError` otherwise)."""
    try:
        goal = GoalSpec.model_validate(item.goal)
        referenced(goal)
    except ValueError as exc:  # FormulaError included
        raise GroundingGoldError("goal", f"{item.id}: the item's goal is not a GoalSpec: {exc}") from None
    answer = answer_of(goal)
    queries = []
    for thought, query in candidate_queries(goal, graph):
        try:
            result = store.query(query)
        except QueryError as exc:
            raise GroundingGoldError("query_failed", f"{item.id}: the gold query failed ({exc.kind}): {exc}") from None
        if not result.rows:
            raise GroundingGoldError("no_rows", f"{item.id}: the gold query found no rows: {query}")
        shown = len(result.to_text())
        if len(result.rows) > EVAL_LIMITS.max_rows or shown > EVAL_LIMITS.max_chars:
            raise GroundingGoldError("too_large", f"{item.id}: the gold query's result ({len(result.rows)} rows, "
                                     f"{shown} characters) exceeds the evaluation's limits ({EVAL_LIMITS.max_rows} rows, "
                                     f"{EVAL_LIMITS.max_chars} characters)")
        queries.append(GoldQuery(thought, query, result.rows))
    cells = _cells([r for q in queries for r in q.rows])
    names, classes = referenced(goal)
    missing = sorted(n for n in names if n not in cells) + \
        sorted(f"class {c}" for c in classes if c not in {node_class(x) for x in cells})
    if missing:
        raise GroundingGoldError("rows_lack", f"{item.id}: the rows lack what the answer uses: {', '.join(missing)}")
    parsed, error = check_reply(json.dumps({"thought": "the goal", "tool": "answer", "answer": answer}),
                                reply_schema(goal_schema(), AgentConfig(), query=False))
    if parsed is None:
        raise GroundingGoldError("schema", f"{item.id}: the goal does not fit the agent's reply schema: {error}")
    problem = goal_problem(answer)
    if problem is not None:
        raise GroundingGoldError("sent_back", f"{item.id}: the agent would send the goal back: {problem}")
    verdict = judge(item, graph, answer)
    if not verdict.correct:
        raise GroundingGoldError("judge", f"{item.id}: the judge scores the gold goal wrong: {verdict.reason} "
                                 f"({'; '.join(verdict.disagreements[:3])})")
    return GroundingGold(queries, answer, _answer_thought(answer))
