"""``gam-eval``: the graph augmentation scored against true subgraphs (the paper's Table III), on
GraSIF's written descriptions or an OmniGibson image bank."""

from __future__ import annotations

from pathlib import Path

from lookplangraph.cli.conventions import (EXIT_OK, Unavailable, UsageError, add_command, check_spec_flags,
                                           deprecated, lm_failure, progress_bar)
from lookplangraph.cli.tasks import DATA_DIR_HELP, split_flag


def add_parsers(sub) -> None:
    """The command of this module, under the top parser's ``sub``."""
    p = add_command(sub, "gam-eval", help="graph augmentation (Table III): parser stage on GraSIF's written "
                                          "descriptions, or an image bank's pictures (--bank)",
                    description="Table III: the graph augmentation scored against the true subgraphs, on observations "
                                "sampled from GraSIF (the parser stage on written descriptions) or on an OmniGibson "
                                "image bank (--bank: its pictures, described by --vlm, or its descriptions). Resumable.",
                    examples=["lookplangraph gam-eval --n 40 --seed 1",
                              "lookplangraph gam-eval --augmentation ground_truth --split behavior",
                              "lookplangraph gam-eval --bank BANK_DIR --augmentation vlm "
                              "--vlm openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1"])
    p.add_argument("--augmentation", choices=["parser", "ground_truth", "vlm"], default="parser",
                   help="parser (default; text to graph), vlm (picture to text to graph; needs --bank and --vlm) "
                        "or ground_truth (checks the pipeline: every score 1)")
    deprecated(p, "--mode", "augmentation", "--augmentation", choices=["parser", "ground_truth", "vlm"])
    p.add_argument("--parser-lm", metavar="SPEC", help="the parser's LM backend (default llamacpp:qwen2.5-coder-1.5b; "
                                                       "with --augmentation vlm the --vlm model)")
    deprecated(p, "--lm", "parser_lm", "--parser-lm")
    p.add_argument("--vlm", metavar="SPEC", help="the describer's backend, a model that sees images (augmentation vlm), "
                                                 "e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1")
    p.add_argument("--bank", metavar="DIR", help="evaluate the observations of this OmniGibson image bank "
                                                 "(sim_adapters/omnigibson.py) instead of sampled GraSIF ones")
    p.add_argument("--n", type=int, default=200, metavar="N", help="observations, split evenly between the splits (default 200)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling and description seed (default 0)")
    split_flag(p, several=True, choices=["virtualhome", "behavior"], help="splits to sample from (default: both)",
                alias=True)
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/gam_eval_AUGMENTATION_nN_seedS, with "
                                                "--bank runs/gam_eval_bank_NAME_AUGMENTATION); rerun to resume")
    p.add_argument("--cache", nargs="?", const=True, default=None, metavar="FILE",
                   help="record LM replies in OUT/lm_cache.jsonl (or FILE; the describer's in OUT/vlm_cache.jsonl "
                        "or FILE_vlm_cache) and replay identical calls")
    p.set_defaults(func=cmd_gam_eval)


def cmd_gam_eval(args) -> int:
    """Table III: the graph augmentation scored against true subgraphs, on GraSIF (the parser
    stage on written descriptions) or on an image bank (``--bank``: its pictures and descriptions)."""
    from grasif import dataset
    from lookplangraph.lm import LMError, make_backend
    from lookplangraph.evaluation.gam_eval import bank_cases, evaluate, sample_cases, table
    from vlm.gam import GraphAugmentation

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    mode, splits = args.augmentation, args.split or ["virtualhome", "behavior"]
    if mode == "vlm" and not args.bank:
        raise UsageError("--augmentation vlm needs pictures: give --bank DIR (GraSIF has graphs, not images)")
    if mode == "vlm" and not args.vlm:
        raise UsageError("--augmentation vlm needs --vlm SPEC: the describer, a model that sees images "
                         "(e.g. openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1)")
    parser_spec = args.parser_lm or ("llamacpp:qwen2.5-coder-1.5b" if mode == "parser" else None)
    if args.bank:
        from sim_adapters.omnigibson import BankError

        try:
            cases = bank_cases(args.bank, root)
        except (BankError, dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None
        if mode == "parser":
            missing = [c.key for c in cases if not c.description]
            if missing:
                raise UsageError(f"--augmentation parser reads the bank's descriptions, and {len(missing)} entries have none "
                                 f"(first: {missing[0]}); use --augmentation vlm --vlm SPEC")
        label = f"bank {args.bank}"
    else:
        try:
            cases = sample_cases(root, splits, args.n, args.seed)
        except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None
        label = f"{', '.join(splits)}, seed {args.seed}"
    default_out = (f"gam_eval_bank_{Path(args.bank).resolve().name}_{mode}" if args.bank
                   else f"gam_eval_{mode}_n{args.n}_seed{args.seed}")
    out = Path(args.out) if args.out else Path("runs") / default_out
    meta = {"mode": mode, "lm": parser_spec if mode != "ground_truth" else None, "n": args.n, "seed": args.seed,
            "splits": splits}
    if args.bank:
        meta = {"mode": mode, "lm": meta["lm"], "bank": str(Path(args.bank).resolve())}
    if mode == "vlm":
        meta["vlm"] = args.vlm

    if mode != "ground_truth":
        check_spec_flags(None, args.vlm, parser_spec)

    def backend(spec: str, cache_name: str):
        try:
            lm = make_backend(spec)
        except LMError as exc:
            raise lm_failure(exc) from None
        if args.cache:
            from lookplangraph.lm.cache import CachedBackend

            path = out / cache_name if args.cache is True else Path(args.cache)
            if cache_name != "lm_cache.jsonl" and args.cache is not True:
                path = path.with_name(f"{path.stem}_{Path(cache_name).stem}{path.suffix}")
            lm = CachedBackend(lm, path)
        return lm

    if mode == "ground_truth":
        gam = GraphAugmentation("ground_truth")
    else:
        describer = backend(args.vlm, "vlm_cache.jsonl") if mode == "vlm" else None
        parser = backend(parser_spec, "lm_cache.jsonl") if parser_spec else describer
        gam = GraphAugmentation(mode, describer=describer, parser=parser)
    using = {"parser": f" with {parser_spec}", "vlm": f" with {args.vlm} (parser {parser_spec or args.vlm})"}
    print(f"GAM {mode}{using.get(mode, '')}: {len(cases)} observations ({label})")
    try:
        summary = evaluate(cases, gam, out, progress=progress_bar(), meta=meta)
    except LMError as exc:
        raise Unavailable(f"{exc} (finished observations are kept in {out / 'results.jsonl'}; rerun to resume)") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(table(summary))
    print(f"results: {out / 'results.jsonl'}; summary: {out / 'summary.csv'}, {out / 'summary.json'}")
    return EXIT_OK
