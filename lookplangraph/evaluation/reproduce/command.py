"""``lookplangraph reproduce``: the command line of :mod:`lookplangraph.evaluation.reproduce`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grasif import dataset
from lookplangraph.evaluation.settings import BASE_LM, SettingsError
from lookplangraph.lm import LMError, parse_spec


#: ``all`` runs these, cheapest first
ORDER = ("table3", "table4", "table5", "table2")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("reproduce", help="run every row of the paper's tables (resumable) and write tables and plots",
                       description="Run every row of the paper's tables II-V with one LM (resumable: rerun the same "
                                   "command after a stop), then write each table as Markdown, CSV and JSON, with "
                                   "plots, under OUT/report.",
                       epilog="examples:\n"
                              "  lookplangraph reproduce table4 --limit 5\n"
                              "  lookplangraph reproduce all --lm openai:MODEL@http://localhost:8000/v1 --concurrency 16\n"
                              "  lookplangraph reproduce table3 table2 --lm SPEC --vlm SPEC --bank BANK_DIR\n"
                              "  lookplangraph reproduce table4 --limit 5 --report-only",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tables", nargs="+", choices=[*ORDER, "all"], metavar="TABLE",
                   help=f"which tables: {', '.join(ORDER)} or all (every one)")
    p.add_argument("--lm", default=None, metavar="SPEC", help="the LM of every row (default: the base model llamacpp:qwen2.5-coder-1.5b, "
                                                          "the same for every planner as in the paper)")
    p.add_argument("--vlm", metavar="SPEC", help="a describer that sees images (Table III and Table II's BEHAVIOR column, "
                                                 "with --bank)")
    p.add_argument("--bank", metavar="DIR", help="an OmniGibson image bank (lookplangraph gam-eval --bank), for --vlm")
    p.add_argument("--limit", type=int, metavar="N", help="a seeded sample of N tasks per split, the same for every row "
                                                          "(default: all)")
    p.add_argument("--split", nargs="+", action="extend", choices=["office", "behavior", "virtualhome"], metavar="S",
                   help="only these columns of each table (office, behavior, virtualhome; default: all of each table's)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="sampling seed for --limit and Table III (default 0)")
    p.add_argument("--concurrency", type=int, default=1, metavar="K", help="episodes in parallel per row (server backends; "
                                                                           "default 1)")
    p.add_argument("--processes", type=int, default=1, metavar="P", help="worker processes each row's K episodes are "
                                                                        "spread over (default 1: threads)")
    p.add_argument("--endpoints", metavar="URL,URL",
                   help="with --lm openai:MODEL: servers of that model shared round-robin by every row's workers")
    p.add_argument("--endpoint-concurrency", type=int, metavar="N", help="with --endpoints: requests in flight per endpoint")
    p.add_argument("--endpoint-rate", type=float, metavar="R", help="with --endpoints: request starts per second per endpoint")
    p.add_argument("--out", default="runs/reproduce", metavar="DIR", help="output directory (default runs/reproduce)")
    p.add_argument("--configs", metavar="DIR", help="folder of the tables' configs (default: the checkout's configs/)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    p.add_argument("--report-only", action=argparse.BooleanOptionalAction, default=False,
                   help="write the report from what is finished, run nothing (default: off)")
    p.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=False, help="no progress bars (default: off)")
    p.set_defaults(func=cmd_reproduce)
    return p


def cmd_reproduce(args) -> int:
    """Exit codes as for every command (lookplangraph.cli): 0 done, 2 bad input, 3 the LM or a source
    package unavailable; Ctrl-C ends with one line and 130."""
    # here, not at the top: it adds ~0.1 s to every command's start (lookplangraph --help)
    from lookplangraph.evaluation.reproduce.report import write_report
    from lookplangraph.evaluation.reproduce.run import (Options, ReproduceError, check_out, default_configs_dir, plan,
                                             run_cells, run_injection)

    names = list(ORDER) if "all" in args.tables else [n for n in ORDER if n in args.tables]
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    for flag, spec in (("--lm", args.lm), ("--vlm", args.vlm)):
        try:
            if spec:
                parse_spec(spec)
        except LMError as exc:
            print(f"error: {flag}: {exc}", file=sys.stderr)
            return 2
    if bool(args.vlm) != bool(args.bank):
        print("error: --vlm and --bank go together (the VLM needs the bank's pictures; GraSIF has graphs, not images)",
              file=sys.stderr)
        return 2
    opts = Options(lm=args.lm or BASE_LM, out=Path(args.out),
                   data_dir=Path(args.data_dir) if args.data_dir else dataset.default_data_dir(),
                   configs=Path(args.configs) if args.configs else default_configs_dir(), vlm=args.vlm, bank=args.bank,
                   limit=args.limit, seed=args.seed, concurrency=max(1, args.concurrency),
                   processes=max(1, args.processes), endpoints=args.endpoints,
                   endpoint_concurrency=args.endpoint_concurrency, endpoint_rate=args.endpoint_rate)
    try:
        check_out(opts)
        cells = plan(names, opts, splits=args.split)
        if args.report_only:
            # here, not at the top: it adds ~0.08 s to every command's start (lookplangraph --help)
            from lookplangraph.evaluation.reproduce.run import assign_keys

            assign_keys(cells, opts)
        else:
            run_cells(cells, opts, quiet=args.quiet)
            if "table5" in names:
                run_injection(opts, args.split, quiet=args.quiet)
        mds = write_report(names, cells, opts.out, opts.identity())
    except KeyboardInterrupt:
        raise KeyboardInterrupt(f"interrupted; finished rows are kept in {opts.out}; rerun the same command to resume") from None
    except LMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    except dataset.SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        missing = "not installed" in str(exc) or "cannot be imported" in str(exc)
        return 3 if missing else 2
    except (ReproduceError, SettingsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for md in mds:
        print(md.read_text())
    print(f"report: {opts.out / 'report' / 'README.md'} (tables as .md/.csv/.json, plots as .png/.svg)")
    return 0
