"""``lookplangraph reproduce``: the command line of :mod:`lookplangraph.evaluation.reproduce`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


#: ``all`` runs these, cheapest first
ORDER = ("table3", "table4", "table5", "table2")


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("reproduce", help="run every row of the paper's tables (resumable) and write tables and plots")
    p.add_argument("tables", nargs="+", choices=[*ORDER, "all"], help="which tables (all: every one)")
    p.add_argument("--lm", default=None, help="the LM of every row (default: llamacpp:qwen2.5-coder-1.5b)")
    p.add_argument("--vlm", help="a describer that sees images (Table III and Table II's BEHAVIOR column, with --bank)")
    p.add_argument("--bank", help="an OmniGibson image bank (lookplangraph gam-eval --bank), for --vlm")
    p.add_argument("--limit", type=int, help="a seeded sample of N tasks per split, the same for every row (default: all)")
    p.add_argument("--splits", nargs="+", choices=["office", "behavior", "virtualhome"],
                   help="only these columns of each table (default: all of each table's)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed for --limit and Table III (default 0)")
    p.add_argument("--concurrency", type=int, default=1, help="episodes in parallel per row (server backends)")
    p.add_argument("--endpoints", metavar="URL,URL",
                   help="with --lm openai:MODEL: servers of that model shared round-robin by every row's workers")
    p.add_argument("--endpoint-concurrency", type=int, metavar="N", help="with --endpoints: requests in flight per endpoint")
    p.add_argument("--endpoint-rate", type=float, metavar="R", help="with --endpoints: request starts per second per endpoint")
    p.add_argument("--out", default="runs/reproduce", help="output directory (default runs/reproduce)")
    p.add_argument("--configs", help="folder of the tables' configs (default: the checkout's configs/)")
    p.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    p.add_argument("--report-only", action="store_true", help="write the report from what is finished, run nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_reproduce)
    return p


def cmd_reproduce(args) -> int:
    from grasif import dataset
    from lookplangraph.lm import LMError
    from lookplangraph.evaluation.reproduce.report import write_report
    from lookplangraph.evaluation.reproduce.run import (Options, ReproduceError, check_out, default_configs_dir, plan,
                                             run_cells, run_injection)
    from lookplangraph.evaluation.settings import DEFAULT_LM, SettingsError

    names = list(ORDER) if "all" in args.tables else [n for n in ORDER if n in args.tables]
    if args.limit is not None and args.limit < 1:
        print("error: --limit must be at least 1", file=sys.stderr)
        return 2
    if bool(args.vlm) != bool(args.bank):
        print("error: --vlm and --bank go together (the VLM needs the bank's pictures; GraSIF has graphs, not images)",
              file=sys.stderr)
        return 2
    opts = Options(lm=args.lm or DEFAULT_LM, out=Path(args.out),
                   data_dir=Path(args.data_dir) if args.data_dir else dataset.default_data_dir(),
                   configs=Path(args.configs) if args.configs else default_configs_dir(), vlm=args.vlm, bank=args.bank,
                   limit=args.limit, seed=args.seed, concurrency=max(1, args.concurrency), endpoints=args.endpoints,
                   endpoint_concurrency=args.endpoint_concurrency, endpoint_rate=args.endpoint_rate)
    try:
        check_out(opts)
        cells = plan(names, opts, splits=args.splits)
        if args.report_only:
            from lookplangraph.evaluation.reproduce.run import assign_keys

            assign_keys(cells, opts)
        else:
            run_cells(cells, opts, quiet=args.quiet)
            if "table5" in names:
                run_injection(opts, args.splits, quiet=args.quiet)
        mds = write_report(names, cells, opts.out, opts.identity())
    except (ReproduceError, SettingsError, LMError, dataset.SourceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for md in mds:
        print(md.read_text())
    print(f"report: {opts.out / 'report' / 'README.md'} (tables as .md/.csv/.json, plots as .png/.svg)")
    return 0
