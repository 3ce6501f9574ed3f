"""``validate``, ``show`` and ``grasif``: plans judged by graph simulation, scene graphs printed,
and the GraSIF benchmark's data directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grasif.generate import WORDINGS
from grasif.generate.tasks import KINDS as TASK_KINDS, OPT_IN_KINDS
from grasif.generate.worlds import BUILDING_KINDS
from grasif.task import TaskError, load_task
from grasif.validate import ValidationReport, validate_plan
from sgs.actions import ActionSyntaxError
from sgs.render import render_tree

from lookplangraph.cli.conventions import (EXIT_FAILED, EXIT_OK, UsageError, YesNo, add_command, deprecated,
                                           progress_bar)
from lookplangraph.cli.tasks import DATA_DIR_HELP, read_goal, read_graph, read_json, source_error, split_flag


def add_parsers(sub) -> None:
    """The commands of this module, under the top parser's ``sub``."""
    p = add_command(sub, "validate", help="validate a plan against a goal by graph simulation",
                    description="Validate a plan against a goal by graph simulation: the plan runs in the Scene "
                                "Graph Simulator from the initial graph, and the final graph is judged against the goal "
                                "(its units, and side effects on everything else). Exit code 1 when the plan fails.",
                    examples=["lookplangraph validate --initial examples/gift_basket/initial.json "
                              "--goal examples/gift_basket/goal.json --plan examples/gift_basket/plan.json",
                              "lookplangraph validate --task-file examples/gift_basket/task.json --json"])
    p.add_argument("--initial", metavar="FILE", help="initial scene graph (paper JSON format)")
    p.add_argument("--goal", metavar="FILE", help="goal scene graph, or a goal specification JSON")
    p.add_argument("--plan", metavar="FILE", help="JSON list of actions (strings like 'pick_up(apple-1)' or objects)")
    p.add_argument("--task-file", metavar="FILE",
                   help="a GraSIF task file (initial graph, goal; its ground-truth plan unless --plan)")
    deprecated(p, "--task", "task_file", "--task-file")
    p.add_argument("--correction", choices=["rules", "none"], default="rules",
                   help="rules (default): correct what the rules can (open a container first ...); "
                        "none: report infeasible actions instead")
    deprecated(p, "--no-correction", "correction", "--correction none", nargs=0, const="none")
    p.add_argument("--by-class", action=YesNo, default=False, help="check moved objects by class and count, not by id")
    p.add_argument("--json", action=YesNo, default=False, help="print the verdict as JSON")
    p.set_defaults(func=cmd_validate)

    p = add_command(sub, "show", help="print a scene graph as a tree",
                    description="Print a scene graph file (paper JSON format) as a tree: rooms, assets, objects "
                                "with their relations and states.",
                    examples=["lookplangraph show examples/gift_basket/initial.json"])
    p.add_argument("graph", metavar="GRAPH", help="scene graph file (paper JSON format)")
    p.set_defaults(func=cmd_show)

    p = add_command(sub, "grasif", help="build, list and describe the GraSIF benchmark",
                    description="The GraSIF benchmark's data directory: build the task files from their source "
                                "packages, list task ids, print Table I.",
                    examples=["lookplangraph grasif build --split office",
                              "lookplangraph grasif list --split virtualhome --selection strict",
                              "lookplangraph grasif stats"])
    gsub = p.add_subparsers(dest="grasif_command", required=True, metavar="COMMAND", title="commands")
    b = add_command(gsub, "build", help="build task files from the source packages (atomic, deterministic)",
                    description="Build the task files of the splits from their source packages (virtualhome-eval, "
                                "bddl, the office building), atomically and deterministically.",
                    examples=["lookplangraph grasif build", "lookplangraph grasif build --split office --out data/grasif"])
    b.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    b.add_argument("--out", metavar="DIR", help="output directory (default: the data directory)")
    split_flag(b, several=True, help="build only these splits (default: all three)")
    lst = add_command(gsub, "list", help="task ids, one per line",
                      description="Print the task ids of a build, one per line.",
                      examples=["lookplangraph grasif list --split office",
                                "lookplangraph grasif list --split virtualhome --selection paper | wc -l"])
    lst.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    split_flag(lst, several=False, help="only the tasks of this split, built first if missing (default: every split built so far; all of them when none is)")
    lst.add_argument("--selection", help="only tasks of this selection (virtualhome: strict = appendix H1 as written, "
                                         "paper = 308 tasks)")
    st = add_command(gsub, "stats", help="Table I of the paper for the build",
                     description="Table I of the paper (tasks, places, nodes, ground-truth actions per split) for the "
                                 "build, beside the paper's figures.",
                     examples=["lookplangraph grasif stats --data-dir data/grasif"])
    st.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    pr = add_command(gsub, "priors", help="where objects of a class are usually kept (train pool's scenes)",
                     description="Object priors P(holder class, relation | object class), counted over the train "
                                 "pool's scenes (grasif.priors): print an object class's most probable holders, list "
                                 "the known classes, or rebuild the shipped file from a GraSIF build.",
                     examples=["lookplangraph grasif priors --object apple",
                               "lookplangraph grasif priors --object coffee_cup --top 5 --json",
                               "lookplangraph grasif priors --rebuild"])
    gen = add_command(gsub, "generate", help="generated buildings with checked tasks (training material)",
                      description="Generate buildings (homes; offices with people's offices, meeting rooms, kitchens, "
                                  "printing and storage rooms, lounges; two-storey houses with a garage, a shed, a "
                                  "laundry and a patio; research labs with server rooms, corridors and people's offices) "
                                  "and tasks on them: every goal kind the validator knows, several phrasings each or "
                                  "instructions composed by a grammar, each task's plan checked through the SGS "
                                  "(grasif.generate). Training material only: a task whose scene or instruction equals or "
                                  "renames a held-out task is refused before anything is written.",
                      examples=["lookplangraph grasif generate --kind office --n 1000 --seed 0 --out runs/gen/office",
                                "lookplangraph grasif generate --kind home --n 300 --seed 2 --task-kinds remove,clear "
                                "--out runs/gen/home_removals",
                                "lookplangraph grasif generate --kind office --n 300 --seed 1 --task-kinds decoy,attribute "
                                "--out runs/gen/office_decoys",
                                "lookplangraph grasif generate --kind house --n 500 --seed 0 --wording grammar "
                                "--task-kinds rearrange,multi,count,pack,switch_one,nested_out,chain --out runs/gen/house",
                                "lookplangraph run --task-file runs/gen/office/office-s0-00000/office-s0-00000-t1.json "
                                "--lm expert"])
    gen.add_argument("--kind", required=True, choices=list(BUILDING_KINDS), help="the kind of building")
    gen.add_argument("--wording", choices=list(WORDINGS), default="templates",
                     help="instructions from the fixed templates (default) or composed by the grammar "
                          "(grasif.generate.wording: frames, context, reasons, constraints)")
    gen.add_argument("--n", type=int, default=1000, metavar="N", help="how many tasks (default 1000)")
    gen.add_argument("--seed", type=int, default=0, metavar="S", help="the seed (default 0)")
    gen.add_argument("--task-kinds", metavar="KIND[,KIND...]",
                     help="draw only these task kinds (default all: " + ", ".join(TASK_KINDS) + ";"
                          + " " + ", ".join(OPT_IN_KINDS) + " only when named)")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory (new, or empty)")
    gen.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP + " (the held-out tasks of the leak check)")
    what = pr.add_mutually_exclusive_group()
    what.add_argument("--object", metavar="CLASS", help="an object class or node name (apple, apple-1, water bottle)")
    what.add_argument("--list", action=YesNo, default=False, help="the object classes counted, with their placements")
    what.add_argument("--rebuild", action=YesNo, default=False,
                      help="count anew from the GraSIF build and write the priors file (the shipped one unless --file)")
    pr.add_argument("--top", type=int, default=10, metavar="N", help="holders to print (default 10)")
    pr.add_argument("--json", action=YesNo, default=False, help="print JSON")
    pr.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP + " (for --rebuild)")
    pr.add_argument("--file", metavar="FILE", help="the priors file to read or write (default: the shipped one)")
    p.set_defaults(func=cmd_grasif)


def _print_report(report: ValidationReport, out) -> None:
    steps = report.steps
    print(f"Plan: {len(steps)} steps -> {report.primitive_count} primitive actions", file=out)
    for s in steps:
        if not s.ok:
            print(f"  step {s.index:>3}  {s.action}\n            INFEASIBLE: {s.feedback}", file=out)
        elif s.corrections and any(not c.startswith("expanded") for c in s.corrections):
            print(f"  step {s.index:>3}  {s.action}  corrected: {'; '.join(s.corrections)}", file=out)
    goal = report.goal
    print(f"Goal: {goal.correct}/{goal.total} correct (precision {goal.precision:.3f})", file=out)
    for item in goal.items:
        if not item.ok:
            print(f"  not met: {item.label}: expected {item.expected}; found {item.actual}", file=out)
    if not goal.frame_checked:
        print("Side effects: not checked (the goal judges only its own conditions)", file=out)
    else:
        print(f"Side effects: {len(goal.side_effects) or 'none'} (all else must stay as in the initial graph)", file=out)
        for item in goal.side_effects:
            print(f"  side effect: {item.label}: expected {item.expected}; found {item.actual}", file=out)
    if report.success:
        print("SUCCESS", file=out)
        return
    failed = []  # the success rules that fail
    if report.infeasible:
        failed.append(f"{len(report.infeasible)} infeasible step(s)")
    if not goal.success_changed_only:
        failed.append("goal not reached")
    if goal.side_effects:
        failed.append(f"side effects on {', '.join(i.label for i in goal.side_effects)}")
    print(f"FAILURE: {', '.join(failed)}", file=out)
    if report.success_changed_only:
        print("  (changed-only verdict: success; the goal's own units are met and every step is feasible)", file=out)


def cmd_validate(args) -> int:
    if args.task_file:
        try:
            task = load_task(args.task_file)
        except TaskError as exc:
            raise UsageError(str(exc)) from None
        initial, goal, plan = task.graph, task.goal, task.ground_truth_plan
        if args.initial or args.goal:
            raise UsageError("give either --task-file or --initial/--goal")
    else:
        if not (args.initial and args.goal and args.plan):
            raise UsageError("validate needs --initial, --goal and --plan (or --task-file)")
        initial = read_graph(args.initial)
        goal = read_goal(args.goal, initial, args.by_class)
        plan = None
    if args.plan:
        plan = read_json(args.plan)
        if isinstance(plan, dict) and "plan" in plan:
            plan = plan["plan"]
        if not isinstance(plan, list):
            raise UsageError(f"{args.plan}: a plan is a JSON list of actions")
    try:
        report = validate_plan(initial, plan, goal, correct=args.correction != "none")
    except ActionSyntaxError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.summary(), indent=1))
    else:
        _print_report(report, sys.stdout)
    return EXIT_OK if report.success else EXIT_FAILED


def cmd_show(args) -> int:
    print(render_tree(read_graph(args.graph)))
    return EXIT_OK


def cmd_grasif(args) -> int:
    from grasif import dataset

    data_dir = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        if args.grasif_command == "build":
            out = dataset.build(Path(args.out) if args.out else data_dir, splits=args.split or None,
                                progress=lambda msg: print(msg, file=sys.stderr))
            print(f"GraSIF written to {out}", flush=True)
        elif args.grasif_command == "list":
            if args.selection:
                for task in dataset.load_split(data_dir, args.split):
                    if args.selection in task.provenance.get("selections", []):
                        print(task.id)
            else:  # without --split: the splits built so far (every split where nothing is built)
                for _, task_id in dataset.task_ids(data_dir, args.split):
                    print(task_id)
        elif args.grasif_command == "priors":
            return _priors(args, data_dir)
        elif args.grasif_command == "generate":
            return _generate(args, data_dir)
        else:
            print(dataset.stats_table(dataset.ensure(data_dir)))  # every split first where none is built
    except (dataset.SourceError, FileNotFoundError, KeyError) as exc:
        raise source_error(exc) from None
    return EXIT_OK


def _priors(args, data_dir: Path) -> int:
    """``grasif priors``: one class's top holders, the known classes, or a rebuild."""
    from grasif import heldout, priors

    path = Path(args.file) if args.file else priors.PRIORS_FILE
    if not (args.object or args.list or args.rebuild):
        raise UsageError("grasif priors: give --object CLASS, --list or --rebuild")
    if args.top < 1:
        raise UsageError(f"--top must be at least 1, not {args.top}")
    try:
        if args.rebuild:
            built = priors.build(data_dir, progress=progress_bar("counting placements", unit="task"))
            priors.write(built, path)
            print(f"priors of {len(built.counts)} object classes from {len(built.sources)} train-pool tasks "
                  f"written to {path}")
            return EXIT_OK
        p = priors.load(path)
        if args.list:
            rows = sorted(((c, sum(v.values())) for c, v in p.counts.items()), key=lambda r: (-r[1], r[0]))
            print(json.dumps(dict(rows), indent=1) if args.json else "\n".join(f"{c}\t{n}" for c, n in rows))
            return EXIT_OK
        ranked = p.holders(args.object, args.top)
    except (priors.PriorsError, heldout.LeakError) as exc:
        raise UsageError(str(exc)) from None
    cls = p.resolve(args.object)
    if args.json:
        print(json.dumps({"object": args.object, "class": cls, "holders": [r.__dict__ for r in ranked]}, indent=1))
        return EXIT_OK
    backed = "" if cls == priors.normalise(args.object) else f" (counted as {cls!r}, its head noun)"
    print(f"where {cls} is kept{backed}: P(holder, relation | {cls}); {sum(p.counts[cls].values())} "
          f"placements counted")
    print(f"{'holder':<24} {'relation':<8} {'P':>6} {'count':>6}")
    for r in ranked:
        print(f"{r.holder:<24} {r.relation:<8} {r.probability:6.3f} {r.count:6d}")
    return EXIT_OK


def _generate(args, data_dir: Path) -> int:
    """``grasif generate``: tasks on generated buildings, leak-checked, written whole."""
    from grasif import dataset, generate, heldout
    from grasif.generate.leaks import GeneratedLeak

    if args.n < 1:
        raise UsageError(f"--n must be at least 1, not {args.n}")
    kinds = None
    if args.task_kinds is not None:
        kinds = tuple(k.strip() for k in args.task_kinds.split(",") if k.strip())
        unknown = [k for k in kinds if k not in generate.KINDS + generate.OPT_IN_KINDS]
        if unknown or not kinds:
            raise UsageError(f"--task-kinds: unknown {', '.join(unknown) or '(none given)'}; the kinds are "
                             + ", ".join(generate.KINDS + generate.OPT_IN_KINDS))
    held = heldout.kept_out_tasks(data_dir)  # the splits are built on first use
    tasks = generate.generate(args.kind, args.n, args.seed, kinds=kinds, wording=args.wording,
                              progress=progress_bar(f"generated {args.kind} tasks", unit="task"))
    try:
        out = generate.write(tasks, Path(args.out), held)
    except (GeneratedLeak, FileExistsError) as exc:
        raise UsageError(str(exc)) from None
    index = json.loads((out / "index.json").read_text())
    kinds = ", ".join(f"{k} {v}" for k, v in index["by_kind"].items())
    print(f"{index['tasks']} tasks on {index['buildings']} {args.kind} buildings ({kinds}); no held-out scene or "
          f"instruction among them; written to {out}")
    return EXIT_OK
