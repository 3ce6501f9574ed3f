"""The LM that answers with the scene graph in a database, and its two baselines (paper Table I).

:class:`CypherAgent` takes an LM backend, a store (or memory view) and an :class:`AgentConfig`
and answers a question or grounds an instruction, returning an :class:`AgentResult` (the
transcript, every query with its outcome and latency, token counts). Variants
(:data:`VARIANTS`): ``agentic`` (up to ``max_queries`` calls of ``run_cypher_query``, each result
or error going back to the LM, then the answer), ``one-query`` (exactly one query, then the
answer) and ``whole-graph`` (no tool; the whole graph in the prompt).

Every LM call is one :meth:`LMBackend.complete` with a JSON schema (the backends have no native
tool calls): ``{"thought", "tool": "run_cypher_query", "query"}``, ``{"thought", "tool":
"answer", "answer"}`` or, only with :attr:`AgentConfig.allow_relabel` and a store built with
``allow_writes=True``, ``relabel_object``. Invariants: at most ``max_queries + 2`` LM calls besides the send-backs;
after the last allowed query only an answer is accepted; an unreadable reply is answered with
the reason and counts as a call; an answer right after a query that found nothing
(:data:`QUESTIONED`), a room question answered with an asset, and an unusable goal are each
sent back once; so is an answer that no rows gave (:func:`unfounded_answer`: a name after
queries that all found nothing, or the reply's thought repeated), and the same answer again is
returned unanswered (``answer`` None, ``error`` set) instead of the text. Docs: ``docs/guides/cypher.md`` (*The agent and its baselines*).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from sgs.graph import Layer, Relation, SceneGraph, node_class

from lookplangraph.lm import ContextOverflow, LMBackend
from lookplangraph.cypher.answers import DESCRIPTIONS, answer_schema
from lookplangraph.cypher.examples import ExampleIndex, example_block, shipped_index
from lookplangraph.cypher.grounding import EMPTY_GOAL, parse_goal, referenced
from lookplangraph.cypher.hints import LABELS, empty_result_note, holders, is_empty, values
from lookplangraph.cypher.row_answers import answer_leaves_out_rows, answer_outside_rows, narrowed_answer
from lookplangraph.cypher.store import QueryError, StoreError
from lookplangraph.agent.prompts import template

#: what every variant says, once, to an answer that cannot be used (``_run``'s ``check``)
SENT_BACK = "This answer cannot be used: {problem}. Reply again with the answer the task asks for."

VARIANTS = ("agentic", "one-query", "whole-graph")
#: ``AgentConfig.answer_from_rows``: how a question's answer relates to the last query's rows
ROW_ANSWERS = ("free", "constrain", "check")
#: ``AgentConfig.classes_at``: where the system prompt lists the classes the scene has
CLASSES_AT = ("schema", "end")
TOOL = "run_cypher_query"
#: what the agentic variant says, once, to an answer given right after a query that found nothing
QUESTIONED = ("Your last query found nothing, so it does not show the answer: an empty result usually means the "
              "query asked for the wrong label, name or relationship (see the note with the result). Query again "
              "with what the store has, or give your answer again if you are sure of it.")

#: what the agentic variant says, once, to an answer no rows gave (:func:`unfounded_answer`)
UNFOUNDED = "This answer is not read from any rows: {problem}. {found} Query the store for what the question asks, " \
            "then answer with what the rows show."


def _said(v: Any) -> str:
    return " ".join(str(v).lower().strip(" .!").split())


def unfounded_answer(answer: Any, thought: Any, queried: bool, any_rows: bool, can_query: bool) -> str | None:
    """Why a question's answer stands on no rows, or None: a name or list of names given after
    queries of which none has returned rows (while another query is still allowed), or an answer
    that only repeats the reply's own thought ("the rows give the answer"). An empty answer, a
    number and a boolean are what an empty result can mean, so they pass; so does an answer
    given before any query (the prompt's schema and classes may hold it)."""
    if isinstance(answer, str) and answer.strip() and isinstance(thought, str) and _said(answer) == _said(thought):
        return "it repeats your thought instead of giving a value"
    substantive = (isinstance(answer, str) and answer.strip()) or (isinstance(answer, list) and answer)
    if substantive and queried and not any_rows and can_query:
        return "no query has returned rows yet"
    return None


def found_text(records: list["QueryRecord"]) -> str:
    """What the last query found, in one sentence (for :data:`UNFOUNDED`)."""
    if not records:
        return "No query has been run."
    last = records[-1]
    if last.error_kind:
        return f"Your last query failed ({last.error_kind})."
    return "Your last query found no rows." if last.rows == 0 else \
        f"Your last query returned {last.rows} row{'s' if last.rows != 1 else ''} that hold nothing."


@dataclass
class AgentConfig:
    """``max_queries``: tool calls allowed (agentic); ``max_tokens`` per LM reply;
    ``thought_max_length``/``query_max_length``: caps in the reply schema; ``allow_relabel``:
    offer the write tool; ``worked_examples``: worked examples (training questions like the one asked,
    with their gold queries: :mod:`.examples`) at the end of a question's system prompt, and
    ``worked_goals`` the same for an instruction (training instructions with their first query and
    goal); agentic and one-query variants; 0: none. ``answer_from_rows`` (:data:`ROW_ANSWERS`,
    :mod:`.row_answers`): after a query that found rows, a question's answer (a name, names or a
    number) is ``free``, ``constrain``-ed to the values the rows hold, or ``check``-ed against
    them (sent back once when it is not among them, or when a list leaves out names of a
    one-column result). ``classes_at`` (:data:`CLASSES_AT`): the line of classes the scene has
    comes with the ``schema`` (as the shipped adapters were trained) or at the ``end`` of the fixed
    text, before the worked examples, so that every question's prompt shares the longest prefix
    with the one before (the backend re-evaluates only what follows it)."""

    variant: str = "agentic"
    max_queries: int = 5
    max_tokens: int = 600
    thought_max_length: int = 300
    query_max_length: int = 600
    allow_relabel: bool = False
    worked_examples: int = 0
    worked_goals: int = 0
    answer_from_rows: str = "free"
    classes_at: str = "schema"

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"unknown variant {self.variant!r}; one of {', '.join(VARIANTS)}")
        if self.answer_from_rows not in ROW_ANSWERS:
            raise ValueError(f"unknown answer_from_rows {self.answer_from_rows!r}; one of {', '.join(ROW_ANSWERS)}")
        if self.classes_at not in CLASSES_AT:
            raise ValueError(f"unknown classes_at {self.classes_at!r}; one of {', '.join(CLASSES_AT)}")
        if self.max_queries < 1:
            raise ValueError("max_queries must be at least 1")
        if self.worked_examples < 0 or self.worked_goals < 0:
            raise ValueError("worked_examples and worked_goals cannot be negative")


@dataclass
class QueryRecord:
    """One tool call: the query, ``error_kind`` (None when it gave rows), rows, seconds in the store."""

    query: str
    error_kind: str | None
    rows: int
    seconds: float
    shown: str  # what the LM read (clipped)


@dataclass
class AgentResult:
    """``answer`` is the LM's final answer (raw JSON value) or None with ``error`` set."""

    answer: Any = None
    error: str | None = None
    queries: list[QueryRecord] = field(default_factory=list)
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int | None = None
    lm_seconds: float = 0.0
    transcript: list[dict[str, str]] = field(default_factory=list)
    questioned: bool = False  # an answer right after an empty result was sent back once
    sent_back: str | None = None  # why an unusable answer (an empty goal, say) was sent back once
    unfounded: str | None = None  # why an answer no rows gave was sent back once (:func:`unfounded_answer`)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- schemas --------------------------------------------------------------------------------------
#: a question whose answer is a room ("In which room is ...?", "Which room has the most ...?")
ROOM_QUESTION = re.compile(r"\b(which|what) room\b", re.IGNORECASE)


def room_problem(store) -> Callable[[Any], str | None]:
    """The check of an answer to a question that asks for a room: a name of the store's that is
    not a Room ("table-1" for "In which room is the table?") is sent back saying what it is.
    Anything else passes (a name the store does not have is the scorer's to judge)."""
    def check(answer: Any) -> str | None:
        if not isinstance(answer, str) or not answer.strip():
            return None
        try:
            rooms = store.query("MATCH (n:Room) WHERE n.name = $name RETURN n.name", {"name": answer}).rows
            if rooms:
                return None
            for label in ("Asset", "Object"):
                if store.query(f"MATCH (n:{label}) WHERE n.name = $name RETURN n.name", {"name": answer}).rows:
                    return (f"{answer} is an {label} node, not a room, and the question asks for a room: answer "
                            f"with the name of the Room node {answer} is in (a query can follow its relationships "
                            "to the Room)")
        except (QueryError, StoreError):
            return None
        return None
    return check


#: a question about what a named node holds: a preposition right before the name ("What is
#: inside drawer_unit-2?", "Which objects are on desk-1?"); the name is group 2
CONTENTS_QUESTION = re.compile(r"\b(on top of|inside|in|on|within)\s+(?:the\s+)?([a-z][a-z0-9_]*-\d+)\b", re.IGNORECASE)


def contents_problem(store, question: str) -> Callable[[Any], str | None] | None:
    """The check of an answer to a question about what a named node holds (:data:`CONTENTS_QUESTION`;
    None for other questions, and for "where" questions): an answer that names the node's own
    holder (what it rests on or in, or its room, unless the question asks for a room: "the room
    with the knife on table-1") read the relationship backwards, and is sent back saying which way
    it points. Anything else passes."""
    found = CONTENTS_QUESTION.search(question)
    if found is None or re.match(r"\s*where\b", question, re.IGNORECASE):
        return None
    name = found.group(2)
    holders = (("ON_TOP_OF", "rests on"), ("INSIDE", "is inside"))
    if not re.search(r"\brooms?\b", question, re.IGNORECASE):
        holders += (("IN_ROOM", "is in"),)

    def check(answer: Any) -> str | None:
        given = answer if isinstance(answer, list) else [answer]
        for rel, verb in holders:
            try:  # one plain query per relationship: both engines run it
                rows = store.query(f"MATCH (n {{name: $name}})-[:{rel}]->(h) RETURN h.name", {"name": name}).rows
            except (QueryError, StoreError):
                return None
            holder = next((r[0] for r in rows if r[0] in given), None)
            if holder is not None:
                return (f"{name} {verb} {holder}: ({name})-[:{rel}]->({holder}). Relationships point from the "
                        f"thing held to its holder, so {holder} holds {name}, not the other way; what {name} holds "
                        f"is MATCH (o)-[:ON_TOP_OF|INSIDE]->({{name: '{name}'}})")
        return None

    return check


def goal_problem(answer: Any) -> str | None:
    """Why ``answer`` is no usable goal (:func:`~.grounding.parse_goal`'s reason: unreadable, a
    formula that does not parse, or empty, since an instruction always asks for something), or
    None. Reads nothing of the scene."""
    try:
        parse_goal(answer)
    except ValueError as exc:  # FormulaError included
        if str(exc) == EMPTY_GOAL:
            return f"{EMPTY_GOAL}, but an instruction always asks for something: write its goal with the scene's node names"
        return str(exc)
    return None


def goal_names_problem(store) -> Callable[[Any], str | None]:
    """The check of a goal grounded on ``store``: :func:`goal_problem`'s first, then every node the
    goal names (:func:`~.grounding.referenced`) must be a node of the store. A name it lacks
    ("desk-6" where the desks are desk-1 and desk-2) is sent back with the store's nodes of that
    class (at most 12), or saying the scene has none. A store that fails lets the goal pass (the
    judge scores it)."""
    def check(answer: Any) -> str | None:
        problem = goal_problem(answer)
        if problem is not None:
            return problem
        names = sorted(referenced(parse_goal(answer))[0])
        try:
            known = {row[0] for label in (*LABELS, "Agent") for row in store.query(
                f"MATCH (n:{label}) WHERE n.name IN $names RETURN n.name", {"names": names}).rows}
            missing = [n for n in names if n not in known]
            said = []
            for name in missing[:3]:
                cls = node_class(name)
                same = sorted(n for names in holders(store, "class", cls, limit=13).values() for n in names)
                said.append(f"{name} is no node of the scene ("
                            + (f"its {cls} nodes: {', '.join(same[:12])}{' ...' if len(same) > 12 else ''})"
                               if same else f"it has no {cls})"))
        except (QueryError, StoreError):
            return None
        if not said:
            return None
        return "; ".join(said) + ". A goal names only nodes of the scene: query for the ones the instruction means"
    return check


def goal_schema() -> dict[str, Any]:
    """The goal as the LM writes it (a :class:`grasif.goals.GoalSpec` without the frame flag)."""
    name = {"type": "string", "maxLength": 80}
    states = {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 6}
    node_goal = {"type": "object", "properties": {
        "node": name, "relation": {"enum": ["ontop", "inside", "held", None]},
        "destination": {"anyOf": [name, {"type": "null"}]}, "states": states},
        "required": ["node", "relation", "destination", "states"], "additionalProperties": False}
    count_goal = {"type": "object", "properties": {
        "cls": name, "relation": {"enum": ["ontop", "inside"]}, "destination": name,
        "count": {"type": "integer", "minimum": 1, "maximum": 50}, "states": states},
        "required": ["cls", "relation", "destination", "count", "states"], "additionalProperties": False}
    return {"type": "object", "properties": {
        "node_goals": {"type": "array", "items": node_goal, "maxItems": 20},
        "count_goals": {"type": "array", "items": count_goal, "maxItems": 10},
        "formula": {"anyOf": [{"type": "string", "maxLength": 600}, {"type": "null"}]}},
        "required": ["node_goals", "count_goals", "formula"], "additionalProperties": False}


def _variant(tool: str, extra: dict[str, Any], thought: int) -> dict[str, Any]:
    props = {"thought": {"type": "string", "maxLength": thought}, "tool": {"const": tool}} | extra
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def reply_schema(answer: dict[str, Any], config: AgentConfig, *, query: bool, answer_allowed: bool = True,
                 relabel: bool = False) -> dict[str, Any]:
    """The reply schema of one call: a query, an answer and/or a relabel, as allowed."""
    options = []
    if query:
        options.append(_variant(TOOL, {"query": {"type": "string", "maxLength": config.query_max_length}},
                                config.thought_max_length))
    if relabel:
        options.append(_variant("relabel_object", {"node": {"type": "string", "maxLength": 80},
                                                   "new_class": {"type": "string", "maxLength": 60}},
                                config.thought_max_length))
    if answer_allowed:
        options.append(_variant("answer", {"answer": answer}, config.thought_max_length))
    return options[0] if len(options) == 1 else {"anyOf": options}


# -- the whole graph as text ----------------------------------------------------------------------
def graph_text(graph: SceneGraph) -> str:
    """Every node of ``graph`` in short lines (the whole-graph baseline's context)."""
    def extras(name: str) -> str:
        node = graph.nodes[name]
        parts = []
        if node.states:
            parts.append("states: " + ", ".join(node.states))
        if node.properties:
            parts.append("properties: " + "; ".join(node.properties))
        return f" ({'; '.join(parts)})" if parts else ""

    lines = ["Rooms: " + ", ".join(graph.names(Layer.PLACE)), "Assets:"]
    for a in graph.names(Layer.ASSET):
        lines.append(f"- {a} in {graph.parent[a][0]}{extras(a)}")
    lines.append("Objects:")
    for o in graph.names(Layer.OBJECT):
        par, rel = graph.parent[o]
        where = "held by the robot" if rel is Relation.HELD else f"{'on top of' if rel is Relation.ONTOP else 'inside'} {par}"
        lines.append(f"- {o} {where}{extras(o)}")
    agent = graph.agent
    lines.append(f"Robot: {agent.name} in {agent.location or 'no room'}, holding {agent.holding or 'nothing'}")
    return "\n".join(lines)


# -- the layout of the classes line (AgentConfig.classes_at) ---------------------------------------
CLASSES_LINE = "Classes present: "


def _fixed_text_end() -> str:
    """The last line of the system prompt's fixed text (the end layout's classes line follows it)."""
    return template("cypher_system").split("{classes_at_end}")[0].rsplit("\n", 1)[-1]


def classes_layout(system: str) -> str | None:
    """Where the system prompt ``system`` lists the scene's classes: ``"schema"``, ``"end"`` (after
    the last line of the fixed text), or None for a prompt with no classes line (the whole-graph
    baseline, a planning prompt)."""
    start = system.find("\n" + CLASSES_LINE)
    if start < 0:
        return None
    at = system.find(_fixed_text_end())
    return "end" if 0 <= at < start else "schema"


def classes_at_end(system: str) -> str:
    """``system``, a system prompt of :meth:`CypherAgent._system` with ``classes_at="schema"``, as
    ``classes_at="end"`` writes it: its ``Classes present: ...`` line moved from after the schema's
    "Meaning:" paragraph to after the last line of the fixed text (before any worked examples).
    Unchanged when it has no such line or has it there already (the whole-graph baseline, a
    planning prompt, an ``end`` prompt); ``ValueError`` when it has two, or lacks the fixed text's
    last line (another prompt)."""
    if system.count("\n" + CLASSES_LINE) > 1:
        raise ValueError("a Cypher system prompt with more than one classes line")
    if classes_layout(system) != "schema":
        return system
    anchor = _fixed_text_end()
    if anchor not in system:
        raise ValueError(f"not a Cypher system prompt of this version: no line {anchor[:40]!r}...")
    start = system.find("\n" + CLASSES_LINE) + 1
    end = system.index("\n", start)
    line, rest = system[start:end], system[:start] + system[end + 1:]
    at = rest.find(anchor) + len(anchor)
    return f"{rest[:at]}\n\n{line}{rest[at:]}"


# -- the agent ------------------------------------------------------------------------------------
class CypherAgent:
    """Answers questions and grounds instructions over ``store`` (a :class:`~.store.GraphStore`
    or a :class:`~.memory_view.MemoryView`) with ``lm``; ``graph`` is needed only by the
    whole-graph baseline (the same graph the store holds); ``example_index``: worked examples of one
    kind that ``config.worked_examples`` or ``worked_goals`` draws on (default: the shipped ones, :mod:`.examples`)."""

    def __init__(self, lm: LMBackend, store, config: AgentConfig | None = None, graph: SceneGraph | None = None,
                 example_index: ExampleIndex | None = None):
        self.lm, self.store, self.config = lm, store, config or AgentConfig()
        self.graph = graph
        self.example_index = example_index
        if self.config.variant == "whole-graph" and graph is None:
            raise ValueError("the whole-graph baseline needs the graph itself (graph=...)")

    # public ------------------------------------------------------------------------------------
    def answer_question(self, question: str, answer_type: str = "string") -> AgentResult:
        """Answer ``question`` with a value of ``answer_type`` (:mod:`.answers`; or ``any``). An
        answer to a question that asks for a room must be a room: a furniture's or object's own
        name is sent back once (:func:`room_problem`)."""
        schema = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"},
                            {"type": "array", "items": {"type": "string"}}]} if answer_type == "any" \
            else answer_schema(answer_type)
        wanted = "any JSON value that answers the question" if answer_type == "any" else DESCRIPTIONS[answer_type]
        user = f"Question: {question}\n(answer: {wanted})"
        check = room_problem(self.store) if answer_type in ("string", "any") and ROOM_QUESTION.search(question) \
            and self.store is not None else None
        if check is None and self.store is not None and answer_type in ("string", "set", "list", "any"):
            check = contents_problem(self.store, question)
        return self._run("questions", template("cypher_qa"), user, schema, check=check,
                         examples=self._examples(question), from_rows=answer_type != "any", question=True)

    def ground(self, instruction: str) -> AgentResult:
        """The goal of ``instruction`` in the project's goal syntax (a GoalSpec-shaped dict). An
        unusable goal (:func:`goal_problem`), or one naming a node the store lacks
        (:func:`goal_names_problem`), is sent back once."""
        check = goal_names_problem(self.store) if self.store is not None else goal_problem
        return self._run("instructions (you turn them into goals)", template("cypher_goal"),
                         f"Instruction: {instruction}", goal_schema(), check=check,
                         examples=self._examples(instruction, "grounding"))

    # internals ---------------------------------------------------------------------------------
    def _examples(self, text: str, kind: str = "qa") -> str:
        """The worked-example block for a question (or, ``kind == "grounding"``, an instruction):
        empty when none are asked for, or for the whole-graph baseline, which writes no query.
        ``example_index`` serves the kind it holds; the shipped examples serve the other."""
        k = self.config.worked_examples if kind == "qa" else self.config.worked_goals
        if not k or self.config.variant == "whole-graph":
            return ""
        index = self.example_index if self.example_index and self.example_index.kind == kind else shipped_index(kind)
        return example_block(index.top(text, k))

    def _labelspace(self) -> str:
        return "; ".join(f"{label}: " + ", ".join(values(self.store, label, "class", 400)) for label in LABELS)

    def _system(self, task_kind: str, rules: str, examples: str = "") -> str:
        cfg = self.config
        if cfg.variant == "whole-graph":
            return template("cypher_whole_graph").format(task_kind=task_kind, graph=graph_text(self.graph),
                                                         task_rules=rules.split("\nExample:")[0])
        write = ""
        if self._relabel_enabled():
            write = ("\nor, only when the user tells you an object is mislabelled, a correction of its class:\n"
                     '{"thought": "...", "tool": "relabel_object", "node": "name", "new_class": "class"}')
        limit = cfg.max_queries if cfg.variant == "agentic" else 1
        classes = f"{CLASSES_LINE}{self._labelspace()}\n"
        at_end = cfg.classes_at == "end"
        return template("cypher_system").format(task_kind=task_kind, max_queries=limit,
                                                schema=self.store.schema_text(),
                                                classes_in_schema="" if at_end else classes,
                                                classes_at_end=f"\n\n{classes.rstrip()}" if at_end else "",
                                                task_rules=rules, write_tool=write) \
            + (f"\n\n{examples}" if examples else "")

    def _relabel_enabled(self) -> bool:
        store = getattr(self.store, "store", self.store)
        return self.config.allow_relabel and getattr(store, "allow_writes", False)

    def _call(self, messages: list[dict[str, str]], schema: dict[str, Any], result: AgentResult):
        c = self.lm.complete(messages, schema=schema, max_tokens=self.config.max_tokens)
        result.calls += 1
        result.input_tokens += c.usage.prompt_tokens
        result.output_tokens += c.usage.completion_tokens
        if c.usage.cached_tokens is not None:
            result.cached_tokens = (result.cached_tokens or 0) + c.usage.cached_tokens
        result.lm_seconds += c.seconds
        return c

    def _tool(self, query: str, result: AgentResult) -> tuple[str, bool, list]:
        """The result of ``query`` as the LM reads it, whether it found nothing (no rows, or only
        empty values, or an error; then a note says what the store has:
        :func:`~.hints.empty_result_note`), and its rows."""
        t0 = time.perf_counter()
        try:
            out = self.store.query(query)
        except QueryError as exc:
            text = f"ERROR ({exc.kind}): {exc}"
            note = empty_result_note(self.store, query)
            text += f"\n{note}" if note else ""
            result.queries.append(QueryRecord(query, exc.kind, 0, time.perf_counter() - t0, text))
            return text, True, []
        text = out.to_text()
        empty = is_empty(out.rows)
        if empty:
            note = empty_result_note(self.store, query)
            text += f"\n{note}" if note else ""
        result.queries.append(QueryRecord(query, None, len(out.rows), out.seconds, text[:2000]))
        return text, empty, out.rows

    def _relabel(self, parsed: dict[str, Any]) -> str:
        store = getattr(self.store, "store", self.store)
        try:
            store.relabel(parsed["node"], parsed["new_class"])
        except (QueryError, StoreError) as exc:
            return f"ERROR: {exc}"
        return f"{parsed['node']} now has class {parsed['new_class']}."

    def _run(self, task_kind: str, rules: str, user: str, answer: dict[str, Any],
             check: Callable[[Any], str | None] | None = None, examples: str = "",
             from_rows: bool = False, question: bool = False) -> AgentResult:
        """The loop of every variant. ``check`` names what makes an answer unusable (None: usable);
        such an answer is sent back once with that reason, in every variant. ``examples``: text
        that ends the system prompt (:meth:`_examples`). ``from_rows``: the answer may be read
        from the last query's rows (``AgentConfig.answer_from_rows``). ``question``: a question's
        answer, which the agentic variant sends back once when no rows gave it (:func:`unfounded_answer`)."""
        cfg = self.config
        result = AgentResult()
        try:
            messages = [{"role": "system", "content": self._system(task_kind, rules, examples)},
                        {"role": "user", "content": user}]
        except (QueryError, StoreError) as exc:
            result.error = f"the scene graph store failed: {exc}"
            return result
        result.transcript = messages
        allowed = cfg.max_queries if cfg.variant == "agentic" else (1 if cfg.variant == "one-query" else 0)
        relabel = self._relabel_enabled()
        max_calls = allowed + 2
        last_empty = questioned = False
        rows_mode = cfg.answer_from_rows if from_rows else "free"
        last_rows: list = []  # the rows of the last query, when it found something
        any_rows = False  # whether some query has found something
        doubted: Any = None  # the answer sent back as unfounded (once: then result.unfounded is set)
        try:
            while result.calls < max_calls:
                can_query = len(result.queries) < allowed
                must_query = cfg.variant == "one-query" and can_query
                wanted = (narrowed_answer(answer, last_rows) or answer) if rows_mode == "constrain" else answer
                schema = reply_schema(wanted, cfg, query=can_query, answer_allowed=not must_query,
                                      relabel=relabel and can_query)
                c = self._call(messages, schema, result)
                messages.append({"role": "assistant", "content": c.text})
                parsed = c.parsed
                if parsed is None:
                    if must_query:  # the one-query variant goes on to the answer without rows
                        result.queries.append(QueryRecord("", "unreadable", 0, 0.0, c.error or ""))
                        messages.append({"role": "user", "content": f"Your reply was not a query ({c.error}). "
                                                                    "No rows. Answer now."})
                        continue
                    messages.append({"role": "user", "content": f"Your reply was not valid: {c.error}. Reply with "
                                                                "one JSON object as described."})
                    continue
                tool = parsed.get("tool")
                if tool == "answer":
                    unfounded = unfounded_answer(parsed.get("answer"), parsed.get("thought"), bool(result.queries),
                                                 any_rows, can_query) if question and cfg.variant == "agentic" else None
                    if unfounded is not None and result.unfounded is None:  # sent back once, saying what was found
                        doubted = parsed.get("answer")
                        questioned = True
                        result.unfounded = unfounded
                        max_calls += 1
                        messages.append({"role": "user", "content": UNFOUNDED.format(
                            problem=unfounded, found=found_text(result.queries))})
                        continue
                    if unfounded is not None and parsed.get("answer") == doubted:
                        result.error = f"the same answer again, which no rows gave ({unfounded}): {doubted!r}"
                        return result
                    if last_empty and not questioned and can_query and cfg.variant == "agentic":
                        questioned = True  # an answer read off an empty result is questioned once
                        max_calls += 1
                        result.questioned = True
                        messages.append({"role": "user", "content": QUESTIONED})
                        continue
                    problem = check(parsed.get("answer")) if check is not None else None
                    if problem is None and rows_mode == "check":
                        problem = answer_outside_rows(answer, parsed.get("answer"), last_rows) or \
                            answer_leaves_out_rows(answer, parsed.get("answer"), last_rows)
                    if problem is not None and result.sent_back is None:
                        result.sent_back = problem
                        max_calls += 1
                        messages.append({"role": "user", "content": SENT_BACK.format(problem=problem)})
                        continue
                    result.answer = parsed.get("answer")
                    return result
                if tool == "relabel_object":
                    messages.append({"role": "user", "content": self._relabel(parsed)})
                    continue
                shown, last_empty, rows = self._tool(parsed.get("query", ""), result)
                last_rows = [] if last_empty else rows
                any_rows = any_rows or not last_empty
                left = allowed - len(result.queries)
                tail = f"\n({left} {'query' if left == 1 else 'queries'} left)" if left else "\nNo queries left: answer now."
                messages.append({"role": "user", "content": f"Result of run_cypher_query:\n{shown}{tail}"})
            result.error = f"no answer after {result.calls} LM calls"
        except ContextOverflow as exc:
            result.error = f"context overflow: {exc}"
        return result
