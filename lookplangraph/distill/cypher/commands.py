"""``lookplangraph cypher-data``, ``lookplangraph cypher-mistakes`` and ``lookplangraph cypher-intents``:
the Cypher agent's training data (:mod:`.data`, :mod:`.recovery`) and intent questions
(:mod:`.intent_data`, :mod:`lookplangraph.cypher.intent_bench`) on the command line, written as :mod:`lookplangraph.cypher.commands`
writes the agent's own commands, whose bad-input errors, LM and GraSIF tasks they share.

:func:`add_parser` puts them under ``lookplangraph`` (:func:`lookplangraph.cli.build_parser`); each
returns the exit code of the table in :mod:`lookplangraph.cli` (0 done, 2 bad input, 3 the LM cannot
be used). What the data holds: ``docs/guides/cypher.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grasif import dataset

from lookplangraph.cypher import QueryLimits, open_store
from lookplangraph.cypher.commands import BadInput, Unavailable, grasif_tasks, guarded_command, open_lm
from lookplangraph.cypher.qa import TEMPLATES
from lookplangraph.distill.planning.conversations import merge_turns
from lookplangraph.lm import LMError
from lookplangraph.lm.embedded import DEFAULT_MODEL

#: ``cypher-mistakes`` records the base model's mistakes: the recovery turns of the training data
MISTAKES_LM = f"llamacpp:{DEFAULT_MODEL}"


def _training_tasks(args) -> list:
    """The allowed training scenes (:func:`~.data.allowed_scenes`) of the GraSIF build and of
    the ``--generated`` directories."""
    # here, not at the top: it adds ~0.05 s to every command's start (lookplangraph --help)
    from lookplangraph.distill.cypher.data import allowed_scenes

    return allowed_scenes(grasif_tasks(args, args.generated))


def _templates(text: str | None) -> tuple[str, ...] | None:
    """``--templates NAME[,NAME...]`` as a tuple (None when not given); ``BadInput`` naming an unknown one."""
    if text is None:
        return None
    templates = tuple(t.strip() for t in text.split(",") if t.strip())
    unknown = [t for t in templates if t not in TEMPLATES]
    if unknown or not templates:
        raise BadInput(f"--templates: unknown {', '.join(unknown) or '(none given)'}; the templates are "
                   + ", ".join(TEMPLATES))
    return templates


@guarded_command
def cmd_cypher_data(args) -> int:
    """Write Cypher training data (:mod:`lookplangraph.distill.cypher.data`)."""
    # here, not at the top: it adds ~0.07 s to every command's start (lookplangraph --help)
    from lookplangraph.distill.cypher.recovery import read_records, recovery_writer
    from lookplangraph.distill.cypher.data import build_data
    from lookplangraph.distill.cypher.intent_data import intent_writer

    if args.qa_per_split < 0 or args.grounding_per_split < 0 or args.intents_per_split < 0:
        raise BadInput("--qa-per-split, --grounding-per-split and --intents-per-split cannot be negative")
    if args.qa_per_split == 0 and args.grounding_per_split == 0 and args.intents_per_split == 0 \
            and not args.recovery_from:
        raise BadInput("nothing to write: --qa-per-split, --grounding-per-split and --intents-per-split are 0 and no "
                   "--recovery-from")
    mistakes = []
    for path in args.recovery_from:
        try:
            mistakes += read_records(Path(path))
        except FileNotFoundError:
            raise BadInput(f"--recovery-from {path}: no such file") from None
        except ValueError as exc:
            raise BadInput(f"--recovery-from: {exc}") from None
    templates = _templates(args.templates)
    tasks = _training_tasks(args)
    store = open_store("ladybug", QueryLimits(timeout_s=10, max_rows=500, max_chars=20000))
    try:
        counts = build_data(tasks, store, Path(args.out), n_per_split=args.qa_per_split,
                            grounding_per_split=args.grounding_per_split,
                            recovery=recovery_writer(mistakes) if mistakes else None, seed=args.seed,
                            templates=templates, classes_at=args.classes_at,
                            intents=intent_writer(args.intents_per_split, seed=args.seed)
                            if args.intents_per_split else None)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    finally:
        store.close()
    if args.conversations:
        conversations = _as_conversations(Path(args.out))
        counts["conversations"] = conversations
        (Path(args.out) / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")
    g, r, i = counts["grounding"], counts.get("recovery"), counts.get("intents")
    rejected = f", {sum(g['rejected'].values())} rejected" if g["rejected"] else ""
    print(f"{counts['questions']} questions ({counts['qa_examples']} examples; "
          f"{', '.join(f'{k} {v}' for k, v in sorted(counts['by_split'].items()))}), "
          f"{g['items']} grounding items ({g['examples']} examples{rejected})"
          + (f", {i['questions']} intent questions of {len(i['by_intent'])} intents ({i['examples']} examples"
             + (f"; rejected {', '.join(f'{k} {v}' for k, v in sorted(i['rejected'].items()))}" if i["rejected"] else "")
             + ")" if i else "")
          + (f", {r['mistakes']} recovery turns from {len(mistakes)} records ({r['examples']} examples)" if r else "")
          + f"; {counts['examples']} examples written to {Path(args.out) / 'sft.jsonl'}"
          + (f", as {counts['conversations']} conversations" if args.conversations else ""))
    return 0


def _as_conversations(out: Path) -> int:
    """``out/sft.jsonl``'s one-turn examples merged into one conversation per question
    (:func:`lookplangraph.distill.planning.conversations.merge_turns`), written whole; how many."""
    path = out / "sft.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    merged = merge_turns(rows)
    part = out / "sft.jsonl.part"
    part.write_text("".join(json.dumps(r) + "\n" for r in merged))
    part.replace(path)
    return len(merged)


@guarded_command
def cmd_cypher_mistakes(args) -> int:
    """Record a real LM's first queries on training items, and its mistakes (:mod:`lookplangraph.distill.cypher.recovery`)."""
    # here, not at the top: it adds ~0.05 s to every command's start (lookplangraph --help)
    from lookplangraph.distill.cypher.recovery import collect

    if args.questions < 0 or args.grounding < 0 or args.questions + args.grounding == 0:
        raise BadInput("--questions and --grounding cannot be negative, and one must be at least 1")
    templates = _templates(args.templates)
    tasks = _training_tasks(args)
    out = Path(args.out)
    store = open_store("ladybug", QueryLimits(timeout_s=args.timeout, max_rows=args.max_rows, max_chars=args.max_chars))

    def show(done: int, total: int, rec) -> None:
        if rec is not None:
            print(f"[{done}/{total}] {rec.id}: {rec.outcome}{f' ({rec.error_kind})' if rec.error_kind else ''} "
                  f"{rec.seconds:.1f} s", file=sys.stderr)

    try:
        summary = collect(lambda: open_lm(args.lm, args.n_ctx, None, out), args.lm, tasks, store, out, n_questions=args.questions,
                          n_grounding=args.grounding, seed=args.seed, progress=show, templates=templates)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except LMError as exc:
        raise Unavailable(f"{exc} (finished items are kept in {out / 'first_queries.jsonl'}; rerun to resume)") from None
    finally:
        store.close()
    for label, s in summary.items():
        print(f"{label}: {s['items']} items, {s['mistakes']} mistakes; outcomes "
              f"{', '.join(f'{k} {v}' for k, v in sorted(s['outcomes'].items()))}"
              + (f"; errors {', '.join(f'{k} {v}' for k, v in sorted(s['error_kinds'].items()))}" if s['error_kinds'] else ""))
    print(f"mistakes: {out / 'mistakes.jsonl'}; every first query: {out / 'first_queries.jsonl'}")
    return 0


@guarded_command
def cmd_cypher_intents(args) -> int:
    """Write intent questions: the training side as JSON lines, or the held-out intents as a
    benchmark file ``cypher-eval --bench-dir`` reads (:mod:`lookplangraph.cypher.intent_bench`)."""
    import time

    # here, not at the top: it adds ~0.07 s to every command's start (lookplangraph --help)
    from lookplangraph.cypher.intent_bench import write_heldout_intents, write_questions
    from lookplangraph.distill.cypher.intent_data import training_intent_questions

    if args.per_scene < 1 or (args.per_intent is not None and args.per_intent < 1):
        raise BadInput("--per-scene and --per-intent must be at least 1")
    t0 = time.perf_counter()
    out = Path(args.out)
    try:
        if args.split == "train":
            qs = training_intent_questions(_training_tasks(args), seed=args.seed, per_scene=args.per_scene,
                                           per_intent=args.per_intent)
            path = write_questions(qs, out / "intents.train.jsonl")
            print(f"{len(qs)} training questions over {len({(q.split, q.scene) for q in qs})} scenes, "
                  f"{len({q.template for q in qs})} intents, in {time.perf_counter() - t0:.1f} s: {path}")
        else:
            if args.generated:
                raise BadInput("--generated: only for --split train (the benchmark file pins GraSIF scenes)")
            data = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
            path = write_heldout_intents(data, out, seed=args.seed, per_scene=args.per_scene,
                                         per_intent=40 if args.per_intent is None else args.per_intent,
                                         progress=lambda m: print(m, file=sys.stderr))
            print(f"written in {time.perf_counter() - t0:.1f} s: {path} "
                  f"(lookplangraph cypher-eval --benchmark qa --bench-dir {out})")
    except (FileNotFoundError, dataset.SourceError, KeyError, ValueError) as exc:
        raise BadInput(str(exc).strip("'\"")) from None
    return 0


def _scene_flags(p, generated_note: str = "") -> None:
    """``--data-dir`` and ``--generated``: where the scenes come from."""
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory (default $LOOKPLANGRAPH_DATA)")
    p.add_argument("--generated", action="append", default=[], metavar="DIR",
                   help=generated_note + "also the buildings of a `grasif generate` directory (repeat for several)")


def add_parser(sub) -> None:
    """Add ``cypher-data``, ``cypher-mistakes`` and ``cypher-intents`` to the ``lookplangraph`` sub-parsers."""
    raw = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("cypher-data", help="training data for the Cypher agent: gold queries in its own turns",
                       formatter_class=raw, allow_abbrev=False,
                       description="Questions and instructions on the allowed scenes (the planning train pool's "
                                   "development-part scenes, and generated buildings), answered through the real agent "
                                   "by the query expert's gold policy (a data tool): one example per query turn and "
                                   "per answer turn (lookplangraph.distill.cypher.data). Questions are reworded; "
                                   "instructions are grounded with the grounding expert's queries and goal, each goal "
                                   "checked by the grounding judge (lookplangraph.distill.cypher.grounding_gold). With "
                                   "--recovery-from, also recovery turns: a real model's mistaken first query, the "
                                   "store's answer, then the gold turns (lookplangraph.distill.cypher.recovery). With "
                                   "--intents-per-split, also intent questions of the training intents, in their own "
                                   "wordings, answered the same way (lookplangraph.distill.cypher.intent_data). "
                                   "Held-out scenes and held-out intents never enter.",
                       epilog="examples:\n  lookplangraph cypher-data --out runs/cypher_data\n"
                              "  lookplangraph cypher-data --out runs/cypher_data --generated runs/gen/office --qa-per-split 400\n"
                              "  lookplangraph cypher-data --out runs/cypher_data --recovery-from runs/cypher_mistakes/mistakes.jsonl\n"
                              "  lookplangraph cypher-data --out runs/cypher_intents --qa-per-split 0 --grounding-per-split 0 "
                              "--intents-per-split 75 --classes-at end")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    _scene_flags(p)
    p.add_argument("--qa-per-split", type=int, default=200, metavar="N", help="questions per split (default 200; 0: none)")
    p.add_argument("--grounding-per-split", type=int, default=200, metavar="N",
                   help="instructions to ground per split (default 200; 0: none)")
    p.add_argument("--recovery-from", action="append", default=[], metavar="FILE",
                   help="also recovery turns from the mistakes in FILE (written by `lookplangraph cypher-mistakes`; "
                        "repeat for several)")
    p.add_argument("--templates", metavar="NAME[,NAME...]",
                   help="ask only these question templates (default all; e.g. contain_deep_set,contain_base_asset, "
                        "contain_count_deep: the deep-containment questions)")
    p.add_argument("--intents-per-split", type=int, default=0, metavar="N",
                   help="also up to N intent questions per split, spread over the training intents (source "
                        "cypher-gold-intent; default 0: none)")
    p.add_argument("--classes-at", choices=["schema", "end"], default="schema",
                   help="where the agent's system prompt lists the scene's classes: with the schema (default) or at "
                        "the end of the fixed text (as ask and cypher-eval --classes-at)")
    p.add_argument("--conversations", action=argparse.BooleanOptionalAction, default=False,
                   help="write each question's turns (query, rows, answer) as one conversation, every answer "
                        "trained in one pass, instead of one example per turn (default: off)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed (default 0)")
    p.set_defaults(func=cmd_cypher_data)

    p = sub.add_parser("cypher-mistakes", help="record a real LM's first Cypher queries on training items, and its "
                                               "mistakes (for recovery turns)", formatter_class=raw, allow_abbrev=False,
                       description="Run a real LM through the Cypher agent on training questions and instructions "
                                   "(the items cypher-data makes: allowed scenes only, never held-out ones) and "
                                   "record its first reply and what its query gave: an error, no rows, rows that do "
                                   "not answer, or the right rows (lookplangraph.distill.cypher.recovery). OUT/mistakes.jsonl "
                                   "holds the mistakes for `cypher-data --recovery-from`; OUT/first_queries.jsonl "
                                   "every first reply; OUT/summary.json the counts. Resumable: rerun the same "
                                   "command and only unfinished items run. Threads of the in-process model: "
                                   "$LOOKPLANGRAPH_THREADS.",
                       epilog="examples:\n  LOOKPLANGRAPH_THREADS=1 lookplangraph cypher-mistakes --out runs/cypher_mistakes "
                              "--questions 40\n"
                              "  lookplangraph cypher-mistakes --out runs/cypher_mistakes --questions 40 --grounding 10")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory; rerun to resume")
    p.add_argument("--questions", type=int, default=40, metavar="N", help="training questions to ask (default 40)")
    p.add_argument("--grounding", type=int, default=0, metavar="N", help="training instructions to ground (default 0)")
    p.add_argument("--templates", metavar="NAME[,NAME...]",
                   help="ask only questions of these templates (default all; as cypher-data --templates)")
    _scene_flags(p)
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed of the items (default 0)")
    p.add_argument("--lm", default=MISTAKES_LM, metavar="SPEC", help=f"LM backend spec (default {MISTAKES_LM}, the base)")
    p.add_argument("--n-ctx", type=int, default=8192, metavar="N",
                   help="context of an in-process llama.cpp model (default 8192)")
    p.add_argument("--timeout", type=float, default=5.0, metavar="S", help="seconds per query (default 5)")
    p.add_argument("--max-rows", type=int, default=50, metavar="N", help="rows a query may return (default 50)")
    p.add_argument("--max-chars", type=int, default=2000, metavar="N",
                   help="characters of a result shown to the LM (default 2000)")
    p.set_defaults(func=cmd_cypher_mistakes)

    p = sub.add_parser("cypher-intents", help="questions drawn from intents in many wordings: training questions "
                                              "or a held-out-intent benchmark", formatter_class=raw, allow_abbrev=False,
                       description="Draw questions from intents (lookplangraph.cypher.intents: what a question asks, "
                                   "its answer computed from the graph, its gold Cypher query), each worded by a small "
                                   "seeded grammar (lookplangraph.cypher.intent_words). --split train: the intents "
                                   "training may ask, on the allowed training scenes (as cypher-data), written to "
                                   "OUT/intents.train.jsonl with each question's slots and gold query. --split "
                                   "heldout_intents: only the held-out intents, on the GraSIF scenes of both benchmark "
                                   "parts, written to OUT/qa.v2.json, which `cypher-eval --benchmark qa --bench-dir "
                                   "OUT` evaluates.",
                       epilog="examples:\n  lookplangraph cypher-intents --split train --out runs/intents\n"
                              "  lookplangraph cypher-intents --split heldout_intents --out runs/intents_bench\n"
                              "  lookplangraph cypher-eval --benchmark qa --bench-dir runs/intents_bench --limit 20")
    p.add_argument("--split", choices=["train", "heldout_intents"], required=True,
                   help="train (training intents on training scenes) or heldout_intents (held-out intents, a "
                        "benchmark file); required")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    _scene_flags(p, "train only: ")
    p.add_argument("--per-scene", type=int, default=1, metavar="N",
                   help="questions per intent and scene, each on other slots (default 1)")
    p.add_argument("--per-intent", type=int, default=None, metavar="N",
                   help="at most N questions per intent, split and part, a seeded sample (default: all for train, "
                        "40 for heldout_intents)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed (default 0)")
    p.set_defaults(func=cmd_cypher_intents)
