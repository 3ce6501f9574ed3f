"""``trial``: a human-in-the-loop trial (:mod:`lookplangraph.apps.trial`), in the web console or
the terminal. Reasons on demand are on for a new trial unless ``--no-explain``: the planner config's
``explain``, kept in ``trial.json``, so ``--resume`` keeps it (and refuses the flag)."""

from __future__ import annotations

from pathlib import Path

from grasif.task import TaskError, load_task

from lookplangraph.cli.conventions import (EXIT_FAILED, EXIT_OK, Interrupted, Unavailable, UsageError, YesNo,
                                           add_command, check_spec_flags, lm_failure, verbose_flag)
from lookplangraph.cli.tasks import read_goal, read_graph
from lookplangraph.evaluation.settings import DEFAULT_LM
from lookplangraph.planners.config import CORRECTION_MODES


def add_parsers(sub) -> None:
    """The command of this module, under the top parser's ``sub``."""
    p = add_command(sub, "trial", help="a human-in-the-loop trial: a person performs each step (web console or terminal)",
                    description="A human-in-the-loop trial: the planner decides, a person performs each step and "
                                "answers (a web console, also on a phone, or this terminal), and a checklist judges "
                                "the result. Everything is recorded as it happens; --resume continues after a stop. "
                                "Exit code 1 when the checklist says the task failed.",
                    examples=["lookplangraph trial --task-file examples/office_building/tasks/coffee_for_maria.json",
                              "lookplangraph trial --task-file T.json --operator terminal",
                              "lookplangraph trial --graph my_office.json --instruction \"Pack Andrew's backpack\"",
                              "lookplangraph trial --resume runs/trial_20260101-101500_coffee_for_maria"])
    p.add_argument("--task-file", metavar="FILE", help="a task file (instruction, graph, goal)")
    p.add_argument("--graph", metavar="FILE", help="your own building: a scene graph in the paper's JSON format (with --instruction)")
    p.add_argument("--instruction", metavar="TEXT", help="what to do in --graph")
    p.add_argument("--goal", metavar="FILE", help="with --graph: a goal graph or goal specification for the checklist "
                                                  "(default: the checklist asks about the instruction itself)")
    p.add_argument("--resume", metavar="DIR", help="continue the trial in DIR (replays what is recorded, then goes on)")
    p.add_argument("--operator", choices=["web", "terminal"], default="web",
                   help="web (default): a console page, also on a phone; terminal: the same questions in this terminal")
    p.add_argument("--lm", metavar="SPEC", help=f"the planner's LM (default {DEFAULT_LM}: the default model and "
                                                "adapter, as for run)")
    p.add_argument("--vlm", metavar="SPEC", help="the describer of photos, a model that sees images, e.g. "
                                                 "openai:Qwen/Qwen2.5-VL-7B-Instruct@http://localhost:8000/v1 "
                                                 "(without it the operator types descriptions)")
    p.add_argument("--parser-lm", metavar="SPEC", help="the parser of descriptions (default: --vlm, else --lm)")
    p.add_argument("--max-actions", type=int, metavar="N", help="action limit (default 30)")
    p.add_argument("--correction", choices=CORRECTION_MODES, help="correction mode (default rules)")
    p.add_argument("--explain", action=YesNo, default=None, default_text="on",
                   help="after each decision whose answer gives no reason, ask the LM why (the planner config's "
                        "explain): the operator sees the reason beside the step to approve, the trace records it")
    p.add_argument("--out", metavar="DIR", help="trial directory (default runs/trial_<time>_<task>)")
    p.add_argument("--host", default="127.0.0.1", help="console address (default 127.0.0.1, this machine only); "
                                                       "0.0.0.0 opens it to the network with a one-time token")
    p.add_argument("--port", type=int, default=8765, help="console port (default 8765)")
    p.add_argument("--max-upload-mb", type=float, default=15.0, metavar="MB", help="largest photo accepted, in MB (default 15)")
    verbose_flag(p)
    p.set_defaults(func=cmd_trial)


def cmd_trial(args) -> int:
    """A human-in-the-loop trial (lookplangraph/apps/trial/): the web console or the terminal."""
    from lookplangraph.lm import LMError
    from lookplangraph.planners.config import PlannerConfig
    from lookplangraph.apps.trial import (Trial, TrialError, TrialSession, ask_checklist, backends_for, new_trial_dir,
                                     photo_file_check, task_from_graph)
    from sim_adapters.human import Desk, TerminalOperator, TrialPaused

    limit = int(args.max_upload_mb * 1_000_000)
    try:
        if args.resume:
            given = [f for f in ("task_file", "graph", "instruction", "lm", "vlm", "parser_lm", "max_actions", "correction")
                     if getattr(args, f)]
            if given:
                raise UsageError(f"--resume continues a trial as it was set up (its trial.json); drop --{given[0].replace('_', '-')}")
            if args.explain is not None:
                raise UsageError("--resume continues a trial as it was set up (its trial.json, which says whether "
                                 f"reasons are asked); drop --{'' if args.explain else 'no-'}explain")
            trial = Trial(args.resume)
        else:
            if args.task_file:
                try:
                    task = load_task(args.task_file)
                except TaskError as exc:
                    raise UsageError(str(exc)) from None
            elif args.graph and args.instruction:
                goal = None
                if args.goal:
                    goal = read_goal(args.goal, read_graph(args.graph), False)
                task = task_from_graph(args.graph, args.instruction, goal)
            else:
                raise UsageError("give --task-file T.json, or --graph G.json with --instruction TEXT, or --resume DIR")
            check_spec_flags(args.lm, args.vlm, args.parser_lm)
            given = {"max_actions": args.max_actions, "correction": args.correction,
                     "explain": True if args.explain is None else args.explain}  # a person reads the reasons
            cfg = PlannerConfig.from_dict({k: v for k, v in given.items() if v is not None})
            trial = Trial.create(Path(args.out) if args.out else new_trial_dir(task), task, lm=args.lm or DEFAULT_LM,
                                 vlm=args.vlm, parser_lm=args.parser_lm, planner=cfg)
        lm, augmentation = backends_for(trial, verbose=args.verbose)
    except TrialError as exc:
        raise UsageError(str(exc)) from None
    except LMError as exc:
        raise lm_failure(exc) from None
    if (trial.planner_config().actions_per_answer or 1) > 1:
        raise UsageError(f"{trial.dir}: its planner settings ask for answers of several actions; a trial shows the "
                         "operator each action before its steps run, so it plans one action an answer")
    s = trial.settings
    print(f"Trial {trial.dir}: {trial.task.instruction}")
    print(f"LM {s['lm']}; photos {'described by ' + s['vlm'] if s.get('vlm') else 'kept, not read (no --vlm): type descriptions'}; "
          f"parser {s.get('parser_lm') or s.get('vlm') or s['lm']}; {len(trial.answers())} recorded answers to replay")
    if trial.planner_config().explain:
        print("Reasons: the LM is asked why after each answer that gives none (the operator sees them)")
    if args.operator == "terminal":
        operator = TerminalOperator(needs_description=trial.augmentation_mode != "vlm", check_photo=photo_file_check(limit))
        session = TrialSession(trial, operator, lm=lm, augmentation=augmentation, max_photo_bytes=limit,
                               echo=lambda text: print(text, flush=True))
        try:
            session.run()
            if session.state == "checklist":
                session.finish(ask_checklist(session.checklist()))
        except TrialPaused:
            session.state = "stopped"
        except KeyboardInterrupt:
            session.state = "stopped"
            raise Interrupted(f"stopped; everything so far is in {trial.dir}; continue with: "
                              f"lookplangraph trial --resume {trial.dir}") from None
        if session.state == "error":
            raise UsageError(f"{session.error} (nothing is lost: lookplangraph trial --resume {trial.dir})")
        if session.state == "stopped":
            print(f"\nStopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
            return EXIT_OK
        result = trial.result()
        print(f"\n{'SUCCESS' if result['success'] else 'FAILURE'}: precision {result['precision']:.3f}, "
              f"{len(result['actions'])} actions, {len(result['executed'])} steps, {len(result['failed_steps'])} failed, "
              f"operator {result['operator_seconds'] / 60:.1f} min; result: {trial.path('result.json')}")
        return EXIT_OK if result["success"] else EXIT_FAILED
    from lookplangraph.apps.console.app import serve

    desk = Desk()
    session = TrialSession(trial, desk, lm=lm, augmentation=augmentation, max_photo_bytes=limit)
    session.start()
    try:
        serve(session, desk, host=args.host, port=args.port, max_upload_bytes=limit)
    except KeyboardInterrupt:
        session.join(timeout=5)  # the planner's thread records that it stopped
        raise Interrupted(f"console stopped; everything so far is in {trial.dir}; continue with: "
                          f"lookplangraph trial --resume {trial.dir}") from None
    except SystemExit:  # the server could not start (it says why on stderr)
        session.join(timeout=5)
        raise Unavailable(f"the console could not listen on {args.host}:{args.port}") from None
    session.join(timeout=5)  # the planner's thread records that it stopped
    print(f"Console stopped; everything so far is in {trial.dir}. Continue with: lookplangraph trial --resume {trial.dir}")
    return EXIT_OK
