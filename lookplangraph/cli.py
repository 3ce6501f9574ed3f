"""The ``lookplangraph`` command.

Exit codes: 0 success, 1 the plan fails (``validate``), 2 bad input (unreadable or invalid files).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grasif.goals import GoalSpec, goal_from_graphs
from grasif.task import TaskError, load_task
from grasif.validate import ValidationReport, validate_plan
from sgs.actions import ActionSyntaxError
from sgs.graph import GraphError
from sgs.io import graph_from_dict, load_graph
from sgs.render import render_tree


SPLITS = ["virtualhome", "behavior", "office"]


class InputError(Exception):
    """Bad command-line input; the message is printed and the command exits with 2."""


def _read_json(path: str):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None


def _read_goal(path: str, initial, by_class: bool) -> GoalSpec:
    """A goal file is either a goal graph (paper format) or a goal specification (grasif.goals)."""
    data = _read_json(path)
    if isinstance(data, dict) and any(k in data for k in ("node_goals", "count_goals", "formula")):
        try:
            spec = GoalSpec.model_validate(data)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from None
    else:
        try:
            spec = goal_from_graphs(initial, graph_from_dict(data), by_class=by_class)
        except (GraphError, ValueError) as exc:
            raise InputError(f"{path}: {exc}") from None
    problems = spec.check_names(initial)
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems))
    return spec


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
    if report.success:
        verdict = "SUCCESS"
    elif report.infeasible:
        verdict = f"FAILURE: {len(report.infeasible)} infeasible step(s)" + ("" if goal.success else ", goal not reached")
    else:
        verdict = "FAILURE: goal not reached"
    print(verdict, file=out)


def cmd_validate(args) -> int:
    if args.task:
        try:
            task = load_task(args.task)
        except TaskError as exc:
            raise InputError(str(exc)) from None
        initial, goal, plan = task.graph, task.goal, task.ground_truth_plan
        if args.initial or args.goal:
            raise InputError("give either --task or --initial/--goal")
    else:
        if not (args.initial and args.goal and args.plan):
            raise InputError("validate needs --initial, --goal and --plan (or --task)")
        try:
            initial = load_graph(args.initial)
        except (GraphError, ValueError) as exc:
            raise InputError(str(exc)) from None
        except FileNotFoundError:
            raise InputError(f"{args.initial}: no such file") from None
        goal = _read_goal(args.goal, initial, args.by_class)
        plan = None
    if args.plan:
        plan = _read_json(args.plan)
        if isinstance(plan, dict) and "plan" in plan:
            plan = plan["plan"]
        if not isinstance(plan, list):
            raise InputError(f"{args.plan}: a plan is a JSON list of actions")
    report = validate_plan(initial, plan, goal, correct=not args.no_correction)
    if args.json:
        print(json.dumps(report.summary(), indent=1))
    else:
        _print_report(report, sys.stdout)
    return 0 if report.success else 1


def cmd_show(args) -> int:
    try:
        graph = load_graph(args.graph)
    except (GraphError, ValueError) as exc:
        raise InputError(str(exc)) from None
    except FileNotFoundError:
        raise InputError(f"{args.graph}: no such file") from None
    print(render_tree(graph))
    return 0


def cmd_grasif(args) -> int:
    from grasif import dataset

    data_dir = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        if args.grasif_command == "build":
            out = dataset.build(Path(args.out) if args.out else data_dir, splits=args.split or None,
                                progress=lambda msg: print(msg, file=sys.stderr))
            print(f"GraSIF written to {out}", flush=True)
        elif args.grasif_command == "list":
            for _, task_id in dataset.task_ids(data_dir, args.split):
                print(task_id)
        else:
            print(dataset.stats_table(data_dir))
    except (dataset.SourceError, FileNotFoundError, KeyError) as exc:
        raise InputError(str(exc).strip("'\"")) from None
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lookplangraph", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate a plan against a goal by graph simulation")
    p.add_argument("--initial", help="initial scene graph (paper JSON format)")
    p.add_argument("--goal", help="goal scene graph, or a goal specification JSON")
    p.add_argument("--plan", help="JSON list of actions (strings like 'pick_up(apple-1)' or objects)")
    p.add_argument("--task", help="a GraSIF task file (initial graph, goal; its ground-truth plan unless --plan)")
    p.add_argument("--no-correction", action="store_true", help="report infeasible actions instead of correcting them")
    p.add_argument("--by-class", action="store_true", help="check moved objects by class and count, not by id")
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("show", help="print a scene graph as a tree")
    p.add_argument("graph", help="scene graph file (paper JSON format)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("grasif", help="build, list and describe the GraSIF benchmark")
    data_dir = argparse.ArgumentParser(add_help=False)
    data_dir.add_argument("--data-dir", help="GraSIF data directory (default: $LOOKPLANGRAPH_DATA or ~/.cache/lookplangraph/grasif)")
    gsub = p.add_subparsers(dest="grasif_command", required=True)
    b = gsub.add_parser("build", parents=[data_dir], help="build task files from the source packages (atomic, deterministic)")
    b.add_argument("--out", help="output directory (default: the data directory)")
    b.add_argument("--split", action="append", choices=SPLITS, help="build only these splits (repeatable)")
    lst = gsub.add_parser("list", parents=[data_dir], help="task ids, one per line")
    lst.add_argument("--split", choices=SPLITS)
    gsub.add_parser("stats", parents=[data_dir], help="Table I of the paper for the build")
    p.set_defaults(func=cmd_grasif)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ActionSyntaxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
