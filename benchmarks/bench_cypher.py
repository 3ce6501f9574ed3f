"""Graph-store speed on ~200-node GraSIF scenes: load, reload and typical queries (target: a
200-node load well under 100 ms in the default embedded store); and, with ``--prompts``, how the
prompt grows with the graph for the Cypher agent and for the whole graph in context (paper
Table IV) on the office building copied 1, 2, 4 and 8 times.

    .venv/bin/python benchmarks/bench_cypher.py [--data-dir DIR] [--repeat 15] [--isolation transaction|file|both]
    .venv/bin/python benchmarks/bench_cypher.py --prompts [--tokenizer qwen2.5-coder-1.5b]

Prints medians (and the 90th percentile) in milliseconds. The first load of a process (engine
start-up) is reported separately from the steady state. Prompt sizes are counted with the named
model's tokenizer (its vocabulary only: no LM runs), or as characters / 4 without llama-cpp-python.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grasif import dataset  # noqa: E402
from lookplangraph.cypher.ladybug_store import LadybugStore  # noqa: E402
from sgs.graph import Layer  # noqa: E402

QUERIES = {
    "count by class": "MATCH (o:Object) RETURN o.class, count(*) AS n ORDER BY n DESC LIMIT 5",
    "objects in a room (2 hops+)": "MATCH (o:Object)-[:ON_TOP_OF|INSIDE*1..4]->(:Asset)-[:IN_ROOM]->(r:Room) "
                                   "RETURN r.name, count(o) ORDER BY r.name",
    "states filter": "MATCH (a:Asset) WHERE 'closed' IN a.states RETURN count(a)",
    "parameter lookup": "MATCH (o:Object {name: $name})-[:ON_TOP_OF|INSIDE]->(p) RETURN p.name",
}


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"median {1000 * statistics.median(values):7.1f} ms   p90 {1000 * p90:7.1f} ms"


def scaled(graph, copies: int):
    """``copies`` disjoint copies of ``graph`` in one graph (copy c renames ``desk-5`` to
    ``desk-{5 + 1000 c}``, so classes stay), one agent in the first copy."""
    from sgs.graph import SceneGraph

    def rename(name: str, c: int) -> str:
        if c == 0:
            return name
        stem, _, num = name.rpartition("-")
        return f"{stem}-{int(num) + 1000 * c}" if num.isdigit() else f"{name}-{c}"

    nodes, parent = {}, {}
    for c in range(copies):
        for name, node in graph.nodes.items():
            nodes[rename(name, c)] = node.__class__(rename(name, c), node.layer, node.states, node.affordances,
                                                    node.properties)
        for child, (par, rel) in graph.parent.items():
            parent[rename(child, c)] = (par if rel.value == "held" else rename(par, c), rel)
    return SceneGraph(nodes, parent, graph.agent).check()


def prompt_sizes(root: Path, tokenizer: str) -> None:
    from lookplangraph.lm import ScriptedBackend
    from lookplangraph.cypher.agent import AgentConfig, CypherAgent

    count = lambda text: len(text) // 4  # noqa: E731
    unit = "chars/4"
    try:
        import llama_cpp

        from lookplangraph.lm import embedded as models

        vocab = llama_cpp.Llama(model_path=str(models.ensure_model(tokenizer)), vocab_only=True, verbose=False)
        count = lambda text: len(vocab.tokenize(text.encode(), add_bos=False, special=True))  # noqa: E731
        unit = f"{tokenizer} tokens"
    except Exception as exc:  # no llama-cpp-python or no model parts: estimate
        print(f"(no tokenizer: {exc}; counting characters / 4)")
    base = next(t for t in dataset.load_split(root, "office") if t.id == "office-01")
    question = "How many mug objects are in the room kitchen-1?"
    print(f"prompt of the first LM call ({unit}), office building copied k times:")
    print(f"{'copies':>6}{'nodes':>7}{'load ms':>9}{'agentic':>9}{'whole graph':>13}")
    for k in (1, 2, 4, 8):
        graph = scaled(base.graph, k)
        store = LadybugStore()
        t0 = time.perf_counter()
        store.load(graph)
        load = time.perf_counter() - t0
        sizes = []
        for variant in ("agentic", "whole-graph"):
            lm = ScriptedBackend(['{"thought": "x", "tool": "answer", "answer": 1}'])  # scripted: only the prompt matters
            CypherAgent(lm, store, AgentConfig(variant=variant), graph=graph).answer_question(question, "number")
            sizes.append(sum(count(m["content"]) for m in lm.requests[0]["messages"]))
        store.close()
        print(f"{k:>6}{len(graph.nodes):>7}{1000 * load:>9.1f}{sizes[0]:>9}{sizes[1]:>13}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", help="GraSIF build (default $LOOKPLANGRAPH_DATA)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--isolation", choices=["transaction", "file", "both"], default="both")
    ap.add_argument("--prompts", action="store_true", help="prompt size against graph size instead of store speed")
    ap.add_argument("--tokenizer", default="qwen2.5-coder-1.5b", help="model whose tokenizer counts (--prompts)")
    args = ap.parse_args()
    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    if args.prompts:
        prompt_sizes(root, args.tokenizer)
        return
    scenes = {split: dataset.load_split(root, split)[0].graph for split in ("office", "virtualhome")}
    isolations = ["transaction", "file"] if args.isolation == "both" else [args.isolation]
    for isolation in isolations:
        for split, graph in scenes.items():
            store = LadybugStore(isolation=isolation)
            t0 = time.perf_counter()
            store.load(graph)
            first = time.perf_counter() - t0
            loads = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                store.load(graph)
                loads.append(time.perf_counter() - t0)
            name = graph.names(Layer.OBJECT)[0]
            print(f"[{isolation}] {split}: {len(graph.nodes)} nodes; first load {1000 * first:.1f} ms")
            print(f"  load   {_ms(loads)}")
            for label, q in QUERIES.items():
                times = []
                for _ in range(args.repeat):
                    r = store.query(q, {"name": name} if "$name" in q else None)
                    times.append(r.seconds)
                print(f"  query  {_ms(times)}   {label}")
            store.close()


if __name__ == "__main__":
    main()
