"""Graph stores: mapping, catalog schema, memory sync, read-only layers and bad queries.

Real stores only (LadybugDB in both isolations; Neo4j when NEO4J_URI is set)."""

import os
import sys
import types

import pytest

from lookplangraph.cypher import QueryError, QueryLimits, StoreError, WritesDisabled, open_store
from lookplangraph.cypher import ladybug_store
from lookplangraph.cypher.guard import QueryRejected, check_read_only
from lookplangraph.cypher.memory_view import MemoryView
from lookplangraph.agent.memory import MemoryGraph
from sgs.actions import parse_action
from sim_adapters.base import Observation, SeenObject

pytest.importorskip("ladybug")

ISOLATIONS = ["transaction", "file"]


def dump(store):
    """Everything in the store, for before/after comparisons."""
    nodes = store.query("MATCH (n) RETURN labels(n)[1] AS l, n.name, n.class, n.states ORDER BY n.name").rows \
        if store.engine == "ladybug" else \
        store.query("MATCH (n) RETURN labels(n)[0] AS l, n.name, n.class, n.states ORDER BY n.name").rows
    edges = store.query("MATCH (a)-[r]->(b) RETURN a.name, type(r), b.name ORDER BY a.name, b.name").rows \
        if store.engine == "neo4j" else \
        store.query("MATCH (a)-[r]->(b) RETURN a.name, label(r), b.name ORDER BY a.name, b.name").rows
    return nodes, edges


@pytest.fixture(params=ISOLATIONS)
def store(request, kitchen):
    s = open_store("ladybug", QueryLimits(timeout_s=1.0, max_rows=20, max_chars=2000), isolation=request.param)
    s.load(kitchen)
    yield s
    s.close()


# -- mapping and schema --------------------------------------------------------------------------
def test_mapping_counts_and_relationships(store, kitchen):
    counts = dict(store.query("MATCH (n:Room) RETURN 'Room', count(*) UNION ALL MATCH (n:Asset) RETURN 'Asset', "
                              "count(*) UNION ALL MATCH (n:Object) RETURN 'Object', count(*)").rows)
    assert counts == {"Room": 2, "Asset": 4, "Object": 6}
    rows = store.query("MATCH (o:Object {name: 'apple-1'})-[:INSIDE]->(b:Object)-[:INSIDE]->(f:Asset)-[:IN_ROOM]->"
                       "(r:Room) RETURN b.name, f.name, f.states, r.name").rows
    assert rows == [["box-1", "fridge-1", ["closed"], "kitchen-1"]]
    assert store.query("MATCH (:Agent)-[:AT]->(r:Room) RETURN r.name").rows == [["bedroom-1"]]
    assert store.query("MATCH (o:Object {name: 'cup-1'}) RETURN o.class, o.affordances, o.seen").rows == \
        [["cup", ["pick_up", "put_inside"], True]]


def test_schema_text_comes_from_the_catalog(store):
    text = store.schema_text()
    for part in ("(:Room {name: STRING", "(:Object {", "seen: BOOL", "(:Object)-[:ON_TOP_OF]->(:Asset)",
                 "(:Object)-[:INSIDE]->(:Object)", "(:Agent)-[:HOLDS]->(:Object)", "(:Asset)-[:IN_ROOM]->(:Room)",
                 "1-based", "SHORTEST"):
        assert part in text, part


def test_held_object_is_a_holds_relationship(kitchen):
    from sgs.simulator import apply
    g = apply(apply(kitchen, parse_action("go_to(kitchen-1)")), parse_action("pick_up(apple-2)"))
    with open_store("ladybug") as s:
        s.load(g)
        assert s.query("MATCH (:Agent)-[:HOLDS]->(o:Object) RETURN o.name").rows == [["apple-2"]]
        assert s.query("MATCH (:Object {name: 'apple-2'})-[r]->() RETURN count(r)").rows == [[0]]


def test_relabel_needs_writes_enabled_and_persists_across_loads(kitchen):
    with open_store("ladybug") as ro:
        ro.load(kitchen)
        with pytest.raises(WritesDisabled):
            ro.relabel("book-1", "notebook")
        assert ro.query("MATCH (o:Object {name: 'book-1'}) RETURN o.class").rows == [["book"]]
    with open_store("ladybug", allow_writes=True) as rw:
        rw.load(kitchen)
        rw.relabel("book-1", "notebook")
        assert rw.query("MATCH (o:Object {name: 'book-1'}) RETURN o.class").rows == [["notebook"]]
        rw.load(kitchen)  # the memory changed: the correction stays
        assert rw.query("MATCH (o:Object {class: 'notebook'}) RETURN o.name").rows == [["book-1"]]
        with pytest.raises(QueryError) as err:
            rw.relabel("nope-1", "x")
        assert err.value.kind == "unknown_name"
        with pytest.raises(QueryError):  # the LM's query tool stays read-only on a writable store
            rw.query("MATCH (o:Object {name: 'book-1'}) SET o.class = 'x' RETURN o")


# -- the memory graph ----------------------------------------------------------------------------
def test_memory_view_follows_the_memory_and_never_the_true_graph(kitchen):
    memory = MemoryGraph(kitchen)
    with open_store("ladybug") as s:
        view = MemoryView(s, memory)
        assert view.query("MATCH (o:Object) WHERE o.seen RETURN count(o)").rows == [[0]]  # all priors
        assert view.reloads == 1
        view.query("MATCH (n) RETURN count(n)")
        assert view.reloads == 1  # nothing changed, no reload
        # the true table holds a pear the map does not know; discovering it adds it
        memory.apply(parse_action("go_to(kitchen-1)"))
        memory.discover(Observation("table-1", (SeenObject("apple-2", "ontop", "table-1", (), ("pick_up",)),
                                                SeenObject("pear-1", "ontop", "table-1", (), ("pick_up",)))))
        rows = view.query("MATCH (o:Object)-[:ON_TOP_OF]->(:Asset {name: 'table-1'}) RETURN o.name, o.seen "
                          "ORDER BY o.name").rows
        assert rows == [["apple-2", True], ["pear-1", True]]  # tray-1 and cup-1 were not seen: removed
        assert view.query("MATCH (:Agent)-[:AT]->(r) RETURN r.name").rows == [["kitchen-1"]]
        assert view.reloads == 2


def test_no_priors_memory_shows_no_objects(kitchen):
    with open_store("ladybug") as s:
        view = MemoryView(s, MemoryGraph(kitchen, priors=False))
        assert view.query("MATCH (o:Object) RETURN count(o)").rows == [[0]]


# -- the lexical guard ---------------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    "MATCH (n) RETURN n.name",
    "MATCH (n) WHERE n.name = 'CREATE; DELETE' RETURN n // SET a comment\n",
    "MATCH (n) /* MERGE (x) ; */ RETURN n.set, n.create",
    "MATCH (n:`DELETE`) RETURN n",
    "MATCH (n) RETURN n;",
    "CALL show_tables() RETURN *",
    "CALL db.labels()",
    "MATCH (a:Asset) WHERE NOT EXISTS { MATCH (a)<-[:ON_TOP_OF]-(:Object) } RETURN a.name",
])
def test_guard_lets_reads_through(query):
    assert check_read_only(query).rstrip().endswith(query.rstrip().rstrip(";").rstrip()[-3:])


@pytest.mark.parametrize("query, word", [
    ("MATCH (n) SET n.class = 'x'", "SET"),
    ("create (n:Object {name: 'x'})", "CREATE"),
    ("MATCH (n) DETACH DELETE n", "DETACH"),
    ("MERGE (n:Room {name: 'x'})", "MERGE"),
    ("MATCH (n) REMOVE n.class", "REMOVE"),
    ("DROP TABLE Object", "DROP"),
    ("COPY Object FROM 'x.csv'", "COPY"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l", "LOAD"),
    ("CALL timeout=0", "CALL"),
    ("CALL apoc.create.node(['X'], {}) YIELD node RETURN node", "CALL"),
    ("MATCH (n) RETURN n; MATCH (n) DETACH DELETE n", "statement"),
    ("MATCH (n) RETURN n ; RETURN 1", "statement"),
    ("BEGIN TRANSACTION", "BEGIN"),
    ("MATCH (n) FOREACH (x IN [1] | SET n.a = x)", "FOREACH"),
    ("", "empty"),
])
def test_guard_rejects_writes_admin_and_chains(query, word):
    with pytest.raises(QueryRejected) as err:
        check_read_only(query)
    assert word.lower() in str(err.value).lower()


# -- bad queries against the real store: clear bounded errors, store unchanged --------------------
BAD = [
    ("MATCH (o:Object RETURN o", "syntax"),
    ("MATCH (o:Thing) RETURN o.name", "unknown_name"),
    ("MATCH (o:Object) RETURN o.colour", "unknown_name"),
    ("MATCH (o:Object) SET o.class = 'bomb' RETURN o", "rejected"),
    ("CREATE (:Object {name: 'ghost-1'})", "rejected"),
    ("MATCH (n) DETACH DELETE n", "rejected"),
    ("MATCH (o:Object) RETURN o.name; MATCH (n) DETACH DELETE n", "rejected"),
    # Queries that no machine can finish, whatever its speed or memory (the kitchen has 13 nodes): the
    # top-1 of 13**10 (1.4e11) concatenations in constant memory can only be stopped by the timeout;
    # collecting 13**7 (6.3e7) strings needs gigabytes against a 512 MB buffer pool, so time or memory
    # stops it. (A 6-way product and a 30-hop walk, used before, finished in time on a fast machine.)
    ("MATCH (a), (b), (c), (d), (e), (f), (g), (h), (i), (j) RETURN a.name + b.name + c.name + d.name + e.name "
     "+ f.name + g.name + h.name + i.name + j.name AS s ORDER BY s LIMIT 1", "timeout"),
    ("MATCH (a), (b), (c), (d), (e), (f), (g) RETURN collect(a.name + b.name + c.name + d.name + e.name + f.name "
     "+ g.name)", "timeout|resources"),
    ("MATCH (a), (b) RETURN a.name, b.name", "too_large"),
    ("MATCH (o:Object) RETURN o, o, o, o, o", "too_large"),
]


@pytest.mark.parametrize("query, kind", BAD)
def test_bad_query_gives_a_clear_bounded_error_and_leaves_the_store_unchanged(store, query, kind):
    before = dump(store)
    with pytest.raises(QueryError) as err:
        store.query(query)
    assert err.value.kind in kind.split("|")
    assert 10 < len(str(err.value)) <= 600
    assert dump(store) == before
    assert store.query("MATCH (o:Object) RETURN count(o)").rows == [[6]]  # still usable


@pytest.mark.parametrize("query", ["CREATE (:Object {name: 'ghost-1'})", "MATCH (n:Object) DETACH DELETE n",
                                   "MATCH (o:Object) SET o.class = 'bomb' RETURN o.name"])
def test_the_database_itself_refuses_writes_that_pass_the_guard(store, monkeypatch, query):
    """Layer 1 alone: with the lexical guard switched off the engine still refuses the write."""
    monkeypatch.setattr(ladybug_store, "check_read_only", lambda q: q)
    before = dump(store)
    with pytest.raises(QueryError) as err:
        store.query(query)
    assert err.value.kind == "rejected"
    assert dump(store) == before


def test_parameters_are_passed(store):
    assert store.query("MATCH (o:Object {name: $n}) RETURN o.class", {"n": "tray-1"}).rows == [["tray"]]


def test_query_before_load_is_a_store_error():
    with open_store("ladybug") as s, pytest.raises(StoreError):
        s.query("MATCH (n) RETURN n")


def test_a_foreign_ladybug_module_is_detected(monkeypatch):
    """Ladybug Tools' ladybug-core installs a module named ladybug too: a clear error, not an AttributeError."""
    monkeypatch.setitem(sys.modules, "ladybug", types.ModuleType("ladybug"))
    with pytest.raises(StoreError) as err:
        ladybug_store.import_ladybug()
    assert "ladybug-core" in str(err.value)


def test_unknown_engine():
    with pytest.raises(StoreError):
        open_store("sqlite")


# -- Neo4j (a real server only) ------------------------------------------------------------------
needs_neo4j = pytest.mark.skipif(not os.environ.get("NEO4J_URI"), reason="NEO4J_URI is not set: no Neo4j server to test against")


@needs_neo4j
def test_neo4j_store_reads_and_refuses_writes(kitchen):
    s = open_store("neo4j", QueryLimits(timeout_s=2.0, max_rows=20))
    try:
        s.load(kitchen)
        assert s.query("MATCH (o:Object)-[:INSIDE]->(b:Object {name: 'box-1'}) RETURN o.name").rows == [["apple-1"]]
        assert "(:Object)-[:ON_TOP_OF]->(:Asset)" in s.schema_text()
        before = dump(s)
        for query, kind in BAD[:7] + BAD[9:]:
            with pytest.raises(QueryError) as err:
                s.query(query)
            assert err.value.kind in kind.split("|"), query
        assert dump(s) == before
    finally:
        s.close()


def test_neo4j_without_a_server_is_a_clear_store_error(monkeypatch):
    pytest.importorskip("neo4j")
    monkeypatch.delenv("NEO4J_URI", raising=False)
    with pytest.raises(StoreError, match="NEO4J_URI"):
        open_store("neo4j")
    with pytest.raises(StoreError, match="cannot reach Neo4j"):
        open_store("neo4j", uri="bolt://127.0.0.1:9")
