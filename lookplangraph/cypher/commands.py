"""Command-line glue: ``lookplangraph ask``, ``lookplangraph cypher-eval``, ``lookplangraph cypher-build``
and ``lookplangraph cypher-examples`` (the training data's commands, ``cypher-data`` and
``cypher-mistakes``, are :mod:`lookplangraph.distill.cypher.commands`).

:func:`add_parser` puts them under ``lookplangraph`` (:func:`lookplangraph.cli.build_parser`);
``python -m lookplangraph.cypher.commands ask|cypher-eval|cypher-build ...`` runs them alone.
Each sub-command sets ``func`` to one of :func:`cmd_ask`, :func:`cmd_cypher_eval`,
:func:`cmd_cypher_build`, :func:`cmd_cypher_examples`, which return the
exit code of the table in :mod:`lookplangraph.cli` (0 done, 1 ``ask`` found no answer, 2 bad
input, 3 the LM or the graph store cannot be used: the message is printed, no traceback).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from grasif import dataset
from grasif.generate import load
from sgs.graph import GraphError
from sgs.io import load_graph

from lookplangraph.agent.demonstrations import LeakError
from lookplangraph.cypher import QueryLimits, StoreError, open_store
import lookplangraph.lm
from lookplangraph.lm import LMError, parse_spec
from lookplangraph.lm.cache import CachedBackend
from lookplangraph.lm.embedded import default_lm, registered_settings
from lookplangraph.lm.specs import spec_adapter, with_native_log

#: the agent's LM for ``ask`` and ``cypher-eval``: the embedded model with the adapter the registry
#: chose for the Cypher agent, trained on its turns beside planning (:func:`lookplangraph.lm.embedded.default_lm`)
DEFAULT_LM = default_lm("cypher")
#: worked examples in a question's prompt for ``ask`` and ``cypher-eval`` (:mod:`.examples`; the
#: library's ``AgentConfig`` has none, as the training data's prompts have none)
WORKED_EXAMPLES = 2


class BadInput(Exception):
    """Bad input; printed as ``error: ...`` with exit code 2."""

    code = 2


class Unavailable(BadInput):
    """The LM or the graph store cannot be used; printed as ``error: ...`` with exit code 3."""

    code = 3


def open_lm(spec: str, n_ctx: int, cache: str | bool | None = None, out: Path | None = None, verbose: bool = False):
    """The agent's LM; an in-process llama.cpp keeps its own log in ``out/llama.log`` (none
    without ``out``) and shows it on the terminal with ``verbose``."""
    try:
        kind = parse_spec(spec)[0]
    except LMError as exc:
        raise BadInput(f"--lm: {exc}") from None
    try:
        options = {"n_ctx": n_ctx} if kind == "llamacpp" else {}
        make_backend = lookplangraph.lm.make_backend  # looked up per call: tests replace it
        lm = make_backend(spec, **with_native_log(spec, options, out / "llama.log" if out is not None else None, verbose))
    except LMError as exc:
        raise Unavailable(str(exc)) from None
    if cache:
        lm = CachedBackend(lm, out / "lm_cache.jsonl" if cache is True else Path(cache))
    return lm


def _store(args, allow_writes: bool = False):
    limits = QueryLimits(timeout_s=args.timeout, max_rows=args.max_rows, max_chars=args.max_chars)
    try:
        return open_store(args.engine, limits, allow_writes=allow_writes)
    except StoreError as exc:
        raise Unavailable(str(exc)) from None


def guarded_command(fn):
    """``fn`` (a sub-command's function of its arguments) printing a :class:`BadInput` as
    ``error: ...`` and returning its exit code, with no traceback."""
    @functools.wraps(fn)
    def run(args) -> int:
        try:
            return fn(args)
        except BadInput as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.code
    return run


def _classes_at(args) -> str:
    """``--classes-at``, with ``auto`` settled from the LM's adapter: the layout the adapter
    registry chose for it on the development part (its entry's ``cypher``), else the layout its
    Cypher examples had (:attr:`lookplangraph.lm.lora.AdapterInfo.cypher_classes_at`), else
    ``schema``. Read from the adapter's file without loading a model; an adapter that cannot be
    read is left to the LM's own loading to report."""
    if args.classes_at != "auto":
        return args.classes_at
    try:
        adapter = spec_adapter(args.lm)
    except LMError:
        return "schema"
    if adapter is None:
        return "schema"
    return registered_settings(adapter.path, "cypher").get("classes_at") or adapter.cypher_classes_at


def _texts(args) -> list[str]:
    """The questions (or instructions) of ``ask``: its arguments, or with none (or ``-``) the lines
    of standard input, blank lines and ``#`` comments skipped."""
    texts = [t for t in args.text if t != "-"]
    if not args.text or "-" in args.text:
        texts += [line.strip() for line in sys.stdin if line.strip() and not line.lstrip().startswith("#")]
    if not texts:
        raise BadInput("no question given (as an argument, or one per line on standard input)")
    return texts


@guarded_command
def cmd_ask(args) -> int:
    """Answer questions about a scene graph file (or ground instructions with --ground), one model
    and one store for all of them."""
    # here, not at the top: it adds ~0.03 s to every command's start (lookplangraph --help)
    from lookplangraph.cypher.agent import AgentConfig, CypherAgent

    try:
        graph = load_graph(args.graph)
    except FileNotFoundError:
        raise BadInput(f"{args.graph}: no such file") from None
    except (GraphError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    try:
        config = AgentConfig(variant=args.variant, max_queries=args.max_queries, allow_relabel=args.allow_relabel,
                             worked_examples=args.worked_examples, worked_goals=args.worked_goals,
                             answer_from_rows=args.answer_from_rows, classes_at=_classes_at(args))
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    texts = _texts(args)
    store = _store(args, allow_writes=args.allow_relabel)
    unanswered = 0
    try:
        store.load(graph)
        lm = open_lm(args.lm, args.n_ctx, verbose=args.verbose)
        agent = CypherAgent(lm, store, config, graph=graph)
        for k, text in enumerate(texts, start=1):
            if len(texts) > 1:
                print(f"[{k}/{len(texts)}] {text}", file=sys.stderr)
            result = agent.ground(text) if args.goal else agent.answer_question(text, args.answer_type)
            unanswered += _report(result, args.verbose)
    except StoreError as exc:
        raise Unavailable(str(exc)) from None
    finally:
        store.close()
    return 1 if unanswered else 0


def _report(result, verbose: bool) -> int:
    """Print one ``ask`` result: its queries and LM cost on stderr, the answer as one JSON line on
    stdout (``null`` when there is none, so that line k answers question k). 1 when unanswered."""
    for q in result.queries:
        status = f"error {q.error_kind}" if q.error_kind else f"{q.rows} rows"
        print(f"query ({status}, {1000 * q.seconds:.1f} ms): {q.query}", file=sys.stderr)
        if verbose:
            print("  " + q.shown.replace("\n", "\n  "), file=sys.stderr)
    print(f"{result.calls} LM calls, {result.input_tokens} input tokens ({result.cached_tokens or 0} cached), "
          f"{result.lm_seconds:.1f} s", file=sys.stderr)
    if result.error:
        print(f"no answer: {result.error}", file=sys.stderr)
    print(json.dumps(result.answer if not result.error else None, ensure_ascii=False), flush=True)
    return 1 if result.error else 0


def _progress(total_width: int = 30):
    from tqdm import tqdm

    bar = {}

    def show(done: int, total: int, row) -> None:
        if "bar" not in bar:
            bar["bar"] = tqdm(total=total, initial=done, unit="item", file=sys.stderr, dynamic_ncols=True)
            bar["ok"] = 0
            return
        bar["ok"] += bool(row and row["correct"])
        bar["bar"].update(1)
        bar["bar"].set_postfix_str(f"last {row['id']} {'ok' if row['correct'] else 'wrong'}")
        if done == total:
            bar["bar"].close()

    return show


@guarded_command
def cmd_cypher_eval(args) -> int:
    """Evaluate one variant on the QA or grounding benchmark (resumable; prints the summary table)."""
    # here, not at the top: it adds ~0.1 s to every command's start (lookplangraph --help)
    from lookplangraph.cypher.agent import AgentConfig
    from lookplangraph.cypher.benchmark import BenchmarkError
    from lookplangraph.cypher.evaluate import evaluate, summary_table

    out = Path(args.out) if args.out else Path("runs") / f"cypher_{args.task}_{args.variant}"
    try:
        config = AgentConfig(variant=args.variant, max_queries=args.max_queries, worked_examples=args.worked_examples,
                             worked_goals=args.worked_goals, answer_from_rows=args.answer_from_rows,
                             classes_at=_classes_at(args))
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    store = _store(args)
    meta = {"lm": args.lm, "n_ctx": args.n_ctx, "timeout_s": args.timeout, "max_rows": args.max_rows,
            "max_chars": args.max_chars, "worked_examples": args.worked_examples, "worked_goals": args.worked_goals,
            "answer_from_rows": args.answer_from_rows} | \
        ({"classes_at": config.classes_at} if config.classes_at != "schema" else {})  # older runs stay resumable
    try:
        summary = evaluate(args.task, lambda: open_lm(args.lm, args.n_ctx, args.cache, out), store, config, out,
                           splits=args.split, limit=args.limit, seed=args.seed, part=args.part,
                           phrasing=args.phrasing, data_dir=Path(args.data_dir) if args.data_dir else None,
                           bench_dir=Path(args.bench_dir) if args.bench_dir else None, meta=meta,
                           progress=_progress())
    except (BenchmarkError, FileNotFoundError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    except StoreError as exc:
        raise Unavailable(str(exc)) from None
    except LMError as exc:
        raise Unavailable(f"{exc} (finished items are kept in {out / 'results.jsonl'}; rerun to resume)") from None
    finally:
        store.close()
    print(summary_table(summary, f"{args.task}, {args.variant}, {args.lm}"))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.json'}")
    return 0


@guarded_command
def cmd_cypher_build(args) -> int:
    """Build the QA and grounding benchmark files from a GraSIF build."""
    # here, not at the top: it adds ~0.03 s to every command's start (lookplangraph --help)
    from lookplangraph.cypher.benchmark import build

    data = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        qa, grounding = build(data, Path(args.out) if args.out else None, seed=args.seed,
                              qa_per_split=args.qa_per_split, grounding_per_split=args.grounding_per_split,
                              heldout_qa_per_split=args.heldout_qa_per_split, progress=lambda m: print(m, file=sys.stderr))
    except (FileNotFoundError, dataset.SourceError, KeyError) as exc:
        raise BadInput(str(exc).strip("'\"")) from None
    print(f"written: {qa}, {grounding}")
    return 0


def grasif_tasks(args, generated: list[str] = ()) -> list:
    """Every task of the GraSIF build (``--data-dir``) and of the ``generated`` directories;
    :class:`BadInput` when they cannot be read."""
    data = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        tasks = [t for s in ("virtualhome", "behavior", "office") for t in dataset.load_split(data, s)]
        for d in generated:
            tasks += load(Path(d))
    except (FileNotFoundError, dataset.SourceError, KeyError, ValueError) as exc:
        raise BadInput(str(exc).strip("'\"")) from None
    return tasks


@guarded_command
def cmd_cypher_examples(args) -> int:
    """Write the worked examples of ``cypher-data`` output (:mod:`lookplangraph.cypher.examples`)."""
    # here, not at the top: it adds ~0.03 s to every command's start (lookplangraph --help)
    from lookplangraph.cypher.benchmark import building
    from lookplangraph.cypher.examples import KINDS, ExampleIndex, examples_from_training, write_examples

    tasks = grasif_tasks(args)
    sources = [Path(p) / "sft.jsonl" if Path(p).is_dir() else Path(p) for p in args.sources]
    missing = [str(p) for p in sources if not p.exists()]
    if missing:
        raise BadInput(f"--from: no such file {', '.join(missing)}")
    try:
        examples = examples_from_training(sources, {(t.split, t.id): building(t) for t in tasks})
        for kind in KINDS:  # an index refuses an example of a held-out building before anything is written
            of_kind = [e for e in examples if e.kind == kind]
            if of_kind:
                ExampleIndex(of_kind)
    except (LeakError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    if not examples:
        raise BadInput("--from: no gold question or grounded instruction in the files (are they cypher-data output?)")
    n = write_examples(examples, Path(args.out))
    by_template: dict[str, int] = {}
    for e in examples:
        if e.kind == "qa":
            by_template[e.template] = by_template.get(e.template, 0) + 1
    print(f"{n} worked examples written to {args.out}: {sum(by_template.values())} questions ({len(by_template)} "
          f"templates, {min(by_template.values(), default=0)} to {max(by_template.values(), default=0)} each), "
          f"{n - sum(by_template.values())} instructions")
    return 0


def add_parser(sub) -> None:
    """Add ``ask``, ``cypher-eval``, ``cypher-build`` and ``cypher-examples`` to the ``lookplangraph``
    sub-parsers."""
    raw = argparse.RawDescriptionHelpFormatter

    def store_flags(p, *, relabel: bool) -> None:  # the agent, its LM and its graph store
        p.add_argument("--engine", choices=["ladybug", "neo4j"], default="ladybug",
                       help="graph store: ladybug (embedded, default) or neo4j (NEO4J_URI, NEO4J_USERNAME, NEO4J_PASSWORD)")
        p.add_argument("--lm", default=DEFAULT_LM, metavar="SPEC", help=f"LM backend spec (default {DEFAULT_LM})")
        p.add_argument("--n-ctx", type=int, default=8192, metavar="N",
                       help="context of an in-process llama.cpp model (default 8192)")
        p.add_argument("--variant", choices=["agentic", "one-query", "whole-graph"], default="agentic",
                       help="agentic (up to --max-queries Cypher queries, default), one-query, or whole-graph "
                            "(no database: the graph in the prompt)")
        p.add_argument("--max-queries", type=int, default=5, metavar="N", help="query limit of the agentic variant (default 5)")
        p.add_argument("--worked-examples", type=int, default=WORKED_EXAMPLES, metavar="K",
                       help="worked examples in a question's prompt: the K training questions most like it (BM25), "
                            "one per template, with their gold queries (lookplangraph.cypher.examples; agentic and "
                            f"one-query; default {WORKED_EXAMPLES}; 0: none)")
        p.add_argument("--worked-goals", type=int, default=0, metavar="K",
                       help="worked examples in an instruction's prompt: the K training instructions most like it, "
                            "one per scene, with their first query and goal (default 0: none)")
        p.add_argument("--answer-from-rows", choices=["free", "constrain", "check"], default="free",
                       help="after a query that found rows, a question's answer (names or a number) is free (default), "
                            "constrained to the values the rows hold, or checked against them and sent back once "
                            "(one not among them, or a list that leaves out names of a one-column result; "
                            "lookplangraph.cypher.row_answers)")
        p.add_argument("--classes-at", choices=["auto", "schema", "end"], default="auto",
                       help="where the system prompt lists the scene's classes: with the schema, or at the end of "
                            "the fixed text, so that consecutive prompts share a longer prefix and less is evaluated "
                            "anew; auto (default): as the adapter registry chose for the LM's adapter, else where "
                            "the adapter was trained to read them (its record), else with the schema")
        p.add_argument("--timeout", type=float, default=5.0, metavar="S", help="seconds per query (default 5)")
        p.add_argument("--max-rows", type=int, default=50, metavar="N", help="rows a query may return (default 50)")
        p.add_argument("--max-chars", type=int, default=2000, metavar="N",
                       help="characters of a result shown to the LM (default 2000)")
        if relabel:
            p.add_argument("--allow-relabel", action=argparse.BooleanOptionalAction, default=False,
                           help="offer the LM the write tool relabel_object (default: off)")

    p = sub.add_parser("ask", help="answer questions about a scene graph with Cypher queries", formatter_class=raw, allow_abbrev=False,
                       description="Answer questions about a scene graph file: the graph is loaded into a graph "
                                   "database and an LM agent queries it with read-only Cypher; each answer is printed "
                                   "as one JSON line (null when none was found), each query on stderr. With --ground "
                                   "the texts are instructions and their goals (GoalSpec) are printed. Several "
                                   "questions share one model and one store, and the prompt prefix they share is "
                                   "evaluated once. Exit code 1 when a question got no answer.",
                       epilog="examples:\n"
                              "  lookplangraph ask --graph G.json \"How many mugs are in kitchen-1?\" --answer-type number\n"
                              "  lookplangraph ask --graph G.json --ground \"Put the red stapler on Tom's desk\"\n"
                              "  lookplangraph ask --graph G.json < questions.txt    # one question per line")
    p.add_argument("text", nargs="*", metavar="TEXT",
                   help="the questions (or, with --ground, the instructions); none or - : one per line from "
                        "standard input")
    p.add_argument("--graph", required=True, metavar="FILE", help="scene graph file (paper JSON format)")
    p.add_argument("--answer-type", choices=["any", "number", "string", "boolean", "set", "list"], default="any",
                   help="the kind of answer expected of every question (default any)")
    p.add_argument("--ground", dest="goal", action=argparse.BooleanOptionalAction, default=False,
                   help="ground the text as an instruction: print its goal (GoalSpec JSON) (default: off)")
    p.add_argument("--verbose", action=argparse.BooleanOptionalAction, default=False,
                   help="also print each query's result and llama.cpp's own log (default: off)")
    store_flags(p, relabel=True)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("cypher-eval", help="evaluate the Cypher agent or a baseline on the QA or grounding "
                                           "benchmark (resumable)", formatter_class=raw, allow_abbrev=False,
                       description="Evaluate one variant (the Cypher agent or a baseline) on the question-answering "
                                   "or the goal-grounding benchmark; prints the summary table. Resumable: rerun the "
                                   "same command and only unfinished items run.",
                       epilog="examples:\n"
                              "  lookplangraph cypher-eval --benchmark qa --variant agentic --limit 10 --cache\n"
                              "  lookplangraph cypher-eval --benchmark grounding --variant whole-graph --split office")
    p.add_argument("--benchmark", dest="task", choices=["qa", "grounding"], required=True,
                   help="qa (questions about a scene graph) or grounding (instructions to goals); required")
    p.add_argument("--split", nargs="+", action="extend", choices=["virtualhome", "behavior", "office"], metavar="S",
                   help="only these splits (virtualhome, behavior, office; several, or the flag repeated; default all)")
    p.add_argument("--part", choices=["dev", "heldout"], help="only items on development scenes (the prompts may draw "
                                                            "on them) or held-out scenes (never); default both")
    p.add_argument("--limit", type=int, metavar="N", help="items per split, sampled with --seed (default all)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed for --limit (default 0)")
    p.add_argument("--phrasing", choices=["original", "reworded"], default="original",
                   help="qa only: the questions as written (default) or reworded in phrasings training never uses, "
                        "nodes named in other surface forms (the same answers and sample)")
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory (default $LOOKPLANGRAPH_DATA)")
    p.add_argument("--bench-dir", metavar="DIR", help="benchmark files (default lookplangraph/cypher/data)")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/cypher_BENCHMARK_VARIANT); rerun to resume")
    p.add_argument("--cache", nargs="?", const=True, default=None, metavar="FILE",
                   help="record LM replies in OUT/lm_cache.jsonl (or FILE) and replay identical calls")
    store_flags(p, relabel=False)
    p.set_defaults(func=cmd_cypher_eval)

    p = sub.add_parser("cypher-build", help="build the Cypher QA and grounding benchmarks from a GraSIF build",
                       formatter_class=raw, allow_abbrev=False,
                       description="Build the question-answering and goal-grounding benchmark files of the Cypher "
                                   "interface from a GraSIF build (seeded samples per split).",
                       epilog="examples:\n  lookplangraph cypher-build\n"
                              "  lookplangraph cypher-build --qa-per-split 30 --out runs/bench")
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory (default $LOOKPLANGRAPH_DATA)")
    p.add_argument("--out", metavar="DIR", help="output directory (default lookplangraph/cypher/data)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed (default 0)")
    p.add_argument("--qa-per-split", type=int, default=60, metavar="N",
                   help="questions per split on development scenes (default 60)")
    p.add_argument("--heldout-qa-per-split", type=int, default=320, metavar="N",
                   help="questions per split on held-out scenes (default 320)")
    p.add_argument("--grounding-per-split", type=int, default=20, metavar="N",
                   help="instructions per split (default 20)")
    p.set_defaults(func=cmd_cypher_build)

    p = sub.add_parser("cypher-examples", help="write the Cypher agent's worked examples from cypher-data output",
                       formatter_class=raw, allow_abbrev=False,
                       description="Read the gold questions and grounded instructions of `cypher-data` output "
                                   "(sft.jsonl files, or their directories) and write each distinct one as asked with "
                                   "its gold query (and an instruction's goal), the pool that `ask`/`cypher-eval "
                                   "--worked-examples K` (and --worked-goals K) retrieve from "
                                   "(lookplangraph.cypher.examples). An example of a held-out building is refused "
                                   "before anything is written. The package ships lookplangraph/cypher/data/"
                                   "examples.v1.jsonl.gz.",
                       epilog="examples:\n  lookplangraph cypher-examples --from runs/cypher_data --out runs/examples.jsonl.gz\n"
                              "  lookplangraph cypher-examples --from runs/cypher_data --from runs/cypher_data_deep "
                              "--out lookplangraph/cypher/data/examples.v1.jsonl.gz")
    p.add_argument("--from", dest="sources", action="append", required=True, metavar="PATH",
                   help="a cypher-data sft.jsonl (or its directory; .gz read as gzip); repeat for several")
    p.add_argument("--out", required=True, metavar="FILE", help="the gzipped JSON-lines file to write")
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory (default $LOOKPLANGRAPH_DATA)")
    p.set_defaults(func=cmd_cypher_examples)


def main(argv: list[str] | None = None) -> int:
    """The three commands on their own (``python -m lookplangraph.cypher.commands``); Ctrl-C ends
    with one line and exit code 130, as ``lookplangraph`` does."""
    parser = argparse.ArgumentParser(prog="python -m lookplangraph.cypher.commands", allow_abbrev=False)
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
