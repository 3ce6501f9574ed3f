"""``lookplangraph view RUN_DIR [RUN_DIR...] [--out FILE] [--open] [--data-dir DIR] [--explain [--lm
SPEC]]``: write the episode viewer's page (:mod:`lookplangraph.apps.viewer.page`) and print its path
(or open it in the default browser with ``--open``). With ``--explain`` the steps without a reason
are first asked of the run's LM (or ``--lm``) and the reasons saved in the run directories
(:mod:`lookplangraph.apps.viewer.reasons`); an LM that cannot be used stops the asking, the page is
still written with what was saved, and the exit code is 3."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from grasif.dataset import default_data_dir

from lookplangraph.apps.viewer.load import ViewerError, load_runs
from lookplangraph.apps.viewer.page import render_page


def _default_data_dir() -> Path | None:
    d = default_data_dir()
    return d if d.is_dir() else None


def write_view(run_dirs: list[Path], out: Path | None = None, *, data_dir: Path | None = None,
               image_budget_mb: float = 25, title: str | None = None) -> Path:
    """Write the page for ``run_dirs`` to ``out`` (default: ``view.html`` in the first run
    directory) and return its path. ``data_dir`` is the GraSIF data directory where the tasks of
    evaluations and runs are found (default ``$LOOKPLANGRAPH_DATA`` or the default build, when it
    exists); :class:`~lookplangraph.apps.viewer.load.ViewerError` for a path that is no run directory.
    The page is written to a temporary file first and renamed, so a reader never sees half."""
    if not run_dirs:
        raise ViewerError("give at least one run directory")
    run_dirs = [Path(p) for p in run_dirs]
    runs = load_runs(run_dirs, data_dir if data_dir is not None else _default_data_dir())
    page = render_page(runs, title=title, image_budget=int(image_budget_mb * 1_000_000))
    out = Path(out) if out is not None else run_dirs[0] / "view.html"
    if out.is_dir():
        out = out / "view.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out


def add_parser(sub) -> None:
    """Register ``view`` on an argparse subparsers object (``set_defaults(func=cmd_view)``)."""
    p = sub.add_parser("view", help="write a self-contained HTML page to browse episodes: verdicts, "
                                    "step-by-step timeline, memory graph per step, goal units",
                       description="Write one self-contained HTML page (no server, no network) with every episode "
                                   "of the run directories: the list with verdicts, and per episode the "
                                   "step-by-step timeline, the memory graph after each step and the goal units; "
                                   "print its path.",
                       epilog="examples:\n  lookplangraph view runs/eval_A runs/eval_B --out page.html\n"
                              "  lookplangraph view runs/ --open",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", metavar="RUN_DIR",
                   help="evaluation, run or trial directories (or directories holding them)")
    p.add_argument("--out", metavar="FILE", help="the page to write (default: RUN_DIR/view.html)")
    p.add_argument("--open", action=argparse.BooleanOptionalAction, default=False,
                   help="open the page in the default web browser (default: off)")
    p.add_argument("--data-dir", metavar="DIR", help="GraSIF data directory, where the tasks are found to draw memory "
                                                     "graphs (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    p.add_argument("--image-budget-mb", type=float, default=25, metavar="MB",
                   help="at most this many MB of image thumbnails in the page (default 25)")
    p.add_argument("--explain", action=argparse.BooleanOptionalAction, default=False,
                   help="first ask the run's LM for the reasons of the LookPlanGraph steps that have none (as "
                        "lookplangraph explain does) and save them in RUN_DIR/reasons.jsonl (default: off)")
    p.add_argument("--lm", metavar="SPEC", help="with --explain: the LM that gives the reasons (default: each run's own)")
    p.set_defaults(func=cmd_view)


def cmd_view(args) -> int:
    """Write the page, with ``--explain`` after asking for the missing reasons; print its path
    (and open it with ``--open``). 2 on a bad run directory, 3 when the reasons' LM cannot be used
    (the page is written all the same)."""
    t0 = time.perf_counter()
    data_dir = Path(args.data_dir) if args.data_dir else None
    unavailable = None
    if args.lm and not args.explain:
        print("error: --lm names the LM that gives the reasons: it goes with --explain", file=sys.stderr)
        return 2
    if args.explain:
        # here, not at the top: it adds ~0.05 s to every command's start (lookplangraph --help)
        from lookplangraph.apps.viewer.reasons import ReasonsUnavailable, ask_missing_reasons

        try:
            done = ask_missing_reasons([Path(d) for d in args.dirs], data_dir=data_dir, lm=args.lm,
                                       progress=lambda line: print(line, flush=True))
            print(f"reasons: {done.saved} saved of {done.asked} asked, in {done.episodes} episode(s)"
                  + (f"; {done.skipped} could not be replayed" if done.skipped else ""))
        except ReasonsUnavailable as exc:
            unavailable = str(exc)
            print(f"error: {exc}; the page shows the reasons saved so far", file=sys.stderr)
        except ViewerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        out = write_view([Path(d) for d in args.dirs], Path(args.out) if args.out else None,
                         data_dir=data_dir, image_budget_mb=args.image_budget_mb)
    except ViewerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(f"{out}  ({size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s)")
    if args.open:
        import webbrowser

        if not webbrowser.open(out.resolve().as_uri()):
            print("no browser could be opened here; open the file above", file=sys.stderr)
    return 3 if unavailable else 0
