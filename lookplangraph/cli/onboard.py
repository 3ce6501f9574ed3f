"""``expert-proof`` and ``distill``: on-board planning's tools. The privileged expert in each
planner's loop (a harness proof, not a model), its training data on the held-out split's train
pool, LoRA training and export, and checked chunks for carrying files to a GPU machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lookplangraph.cli.conventions import (EXIT_FAILED, EXIT_OK, EXPERT_SPECS, UsageError, YesNo, add_command,
                                           lm_failure, progress_bar)
from lookplangraph.cli.tasks import (DATA_DIR_HELP, SPLITS, generated_tasks, seed_list, select_tasks, source_error,
                                     split_flag)
from lookplangraph.lm.embedded import default_adapter, default_lm
from lookplangraph.planners.config import ANSWER_FORMATS, CORRECTION_MODES, MAX_ACTIONS_PER_ANSWER, RECALL_MODES
from lookplangraph.agent.prompts import PROMPT_LAYOUTS

#: ``distill dagger --branches``: dagger.BRANCHES, spelled here so the parser imports no planner
DAGGER_BRANCHES = ("answer", "continuation")


def add_parsers(sub) -> None:
    """The commands of this module, under the top parser's ``sub``."""
    p = add_command(sub, "expert-proof", help="harness proof: the privileged expert in each planner's loop (SR should be 1.0)",
                    description="The harness proof: the expert policy (privileged: it reads the true graph "
                                "and the ground-truth plan; a harness tool, never a model) answers the planner's "
                                "prompts through the same reply path as an LM, over whole splits, static and dynamic "
                                "seeds, in the graph environment and the VirtualHome adapter. Every failure is listed.",
                    examples=["lookplangraph expert-proof",
                              "lookplangraph expert-proof --split virtualhome --env graph --env virtualhome "
                              "--seeds static,0,1",
                              "lookplangraph expert-proof --planner llm-as-p --seeds static,0"])
    split_flag(p, several=True, help="splits (default: all three)")
    p.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    p.add_argument("--planner", action="append", metavar="NAME",
                   help="lookplangraph (default), react, sayplan, sayplan-lite or llm-as-p; repeat for several")
    p.add_argument("--correction", action="append", choices=CORRECTION_MODES,
                   help="correction modes of lookplangraph (default: all three); repeat for several")
    p.add_argument("--env", action="append", choices=["graph", "virtualhome"],
                   help="environments (default graph); virtualhome runs the virtualhome split only, "
                        "without the 7 [PlugIn] programs")
    p.add_argument("--seeds", default="static,0,1", help="comma-separated: static and dynamic seeds (default static,0,1)")
    p.add_argument("--max-actions", type=int, default=200, metavar="N", help="action limit (default 200: a search of a whole home in dynamic mode)")
    p.add_argument("--limit", type=int, metavar="N", help="first N tasks of each split")
    p.add_argument("--out", metavar="DIR", help="output directory (default runs/expert_proof)")
    p.set_defaults(func=cmd_expert_proof)

    p = add_command(sub, "distill", help="distil the privileged expert into an embedded model: data, LoRA training, export",
                    description="Supervised fine-tuning data: the expert's episodes on the train pool of the pinned "
                                "held-out split (grasif/data/heldout_v1.json), with label-preserving augmentation; "
                                "every example is exactly what LookPlanGraph sends at a step and the expert's answer. "
                                "Then a LoRA trained on it (the distill extra) and exported as a GGUF LoRA for llama.cpp.",
                    examples=["lookplangraph distill data --out runs/distill",
                              "lookplangraph distill data --out runs/distill_small --limit 20 --augment none",
                              "lookplangraph distill validate --out runs/distill",
                              "lookplangraph distill train --data runs/distill --base qwen2.5-coder-1.5b --out runs/lora15"])
    dsub = p.add_subparsers(dest="distill_command", required=True, metavar="COMMAND", title="commands")
    d = add_command(dsub, "data", help="write sft.jsonl, episodes.jsonl, demonstrations.jsonl.gz and counts.json",
                    description="Run the expert in LookPlanGraph's loop on every train-pool task, static and dynamic "
                                "seeds, as it is and augmented (renamed instances, shuffled listing order, "
                                "distractors), and write chat-format examples of the accepted answers.",
                    examples=["lookplangraph distill data --out runs/distill --seeds static,0,1,2,3",
                              "lookplangraph distill data --out runs/distill_generated --generated runs/gen/home "
                              "--generated runs/gen/office --prompt-layout history-scene --answer-format action"])
    d.add_argument("--out", required=True, metavar="DIR", help="output directory")
    d.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    d.add_argument("--seeds", default="static,0,1,2,3", help="static and dynamic seeds (default: the manifest's "
                                                           "train seeds static,0,1,2,3)")
    d.add_argument("--augment", default="rename,shuffle,distract",
                   help="augmentation kinds, comma-separated, or none (default rename,shuffle,distract)")
    d.add_argument("--correction", choices=CORRECTION_MODES, default="rules", help="correction mode (default rules)")
    d.add_argument("--max-actions", type=int, default=200, metavar="N", help="action limit (default 200)")
    d.add_argument("--limit", type=int, metavar="N",
                   help="only the first N train-pool tasks (0: none, the --generated tasks alone)")
    d.add_argument("--generated", action="append", default=[], metavar="DIR",
                   help="also the tasks of a `lookplangraph grasif generate` directory (repeat for several); they are "
                        "checked against the held-out tasks first")
    d.add_argument("--prompt-layout", choices=PROMPT_LAYOUTS, default="scene-history",
                   help="the examples' user message: scene then steps (default), or steps before "
                        "the scene (history-scene: the KV cache serves the steps at run time); conversation: "
                        "one example per episode, its whole chat, every accepted answer trained")
    d.add_argument("--mistakes", type=float, default=0.0, metavar="SHARE",
                   help="conversation layout: the share of episodes (0..1) given one injected wrong answer, "
                        "untrained, followed by the simulator's feedback and the expert's trained answer "
                        "(default 0)")
    d.add_argument("--mistake-seed", type=int, default=0, metavar="N", help="seed of the injected mistakes (default 0)")
    d.add_argument("--actions-per-answer", type=int, default=1, metavar="K",
                   help="conversation layout: join consecutive answers, each carried out as written and "
                        "observing nothing, into answers of up to K actions (1 to 3), where replaying them in "
                        "the loop gives the same chat; the planner's setting actions_per_answer K reads them "
                        "(default 1: one action an answer)")
    d.add_argument("--answer-format", choices=ANSWER_FORMATS, default="action+reason",
                   help="the examples' replies: the action then a reason (default), the reason "
                        "first, or the action alone (the fewest tokens to decode)")
    _teacher_flags(d)
    dg = add_command(dsub, "dagger", help="roll a student out and label every state it visits with the expert (DAgger)",
                     description="One DAgger round: the student (an LM spec) plans in LookPlanGraph's loop on train-pool "
                                 "or generated tasks; at every state it visits the privileged belief-space expert's answer "
                                 "is recorded as a training example for that prompt (lookplangraph.distill.planning.dagger). "
                                 "Appends to OUT, so it resumes and rounds can share a directory.",
                     examples=[f"lookplangraph distill dagger --student {default_lm()} "
                               "--tasks train-pool --episodes 40 --out runs/dagger1",
                               "lookplangraph distill dagger --student openai:local@http://127.0.0.1:8080/v1 "
                               "--tasks generated:runs/gen/office --episodes 500 --out runs/dagger --round 1",
                               "lookplangraph distill dagger --student replay:runs/dagger --tasks generated:runs/gen/office "
                               "--expert expert-walk --out runs/dagger_walk"])
    dg.add_argument("--student", required=True, metavar="SPEC",
                    help="the student's LM backend spec, or replay:DIR: the answers DIR's round recorded, episode by "
                         "episode, labelled again by this round's teacher (no LM runs; --seeds unused)")
    dg.add_argument("--tasks", default="train-pool", metavar="WHICH",
                    help="train-pool (default) or generated:DIR (a `grasif generate` directory)")
    dg.add_argument("--episodes", type=int, metavar="N", help="at most N episodes this run (default: every task and seed)")
    dg.add_argument("--out", required=True, metavar="DIR",
                    help="output directory, appended to: a new one, or a `distill data` directory of the same format")
    dg.add_argument("--seeds", default="static,0", help="static and dynamic seeds (default static,0)")
    dg.add_argument("--round", type=int, default=1, metavar="K", help="the round recorded with each example (default 1)")
    dg.add_argument("--max-actions", type=int, default=12, metavar="N", help="the student's action limit (default 12)")
    dg.add_argument("--prompt-layout", choices=PROMPT_LAYOUTS, default="history-scene",
                    help="the prompts' layout (default history-scene)")
    dg.add_argument("--answer-format", choices=ANSWER_FORMATS, default="action",
                    help="the answers' format (default action)")
    dg.add_argument("--branches", choices=DAGGER_BRANCHES, default="answer",
                    help="conversation layout: what a state where the expert answers otherwise gives: the "
                         "expert's answer as the one trained turn, or the expert taking over from that state to "
                         "the episode's end, every answer of its own trained (default: answer)")
    _teacher_flags(dg)
    dg.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    v = add_command(dsub, "validate", help="replay every episode through the SGS and read back every example",
                    description="Replay each successful episode from its true initial graph through the SGS (every "
                                "action feasible, the goal holds at the end) and read every example's answer back "
                                "as an action whose names stand in its prompt. Exit 1 on any problem.",
                    examples=["lookplangraph distill validate --out runs/distill"])
    v.add_argument("--out", required=True, metavar="DIR", help="the directory distill data wrote")
    v.add_argument("--data-dir", metavar="DIR", help=DATA_DIR_HELP)
    v.add_argument("--generated", action="append", default=[], metavar="DIR",
                   help="the generated-task directories the data was built with (repeat for several)")
    t = add_command(dsub, "train", help="LoRA fine-tuning of a GGUF model on sft.jsonl (the distill extra)",
                    description="Read the base model and its tokenizer from its GGUF file, fine-tune a LoRA on the chat "
                                "examples with the loss on the answers only, and write OUT/adapter/, OUT/adapter.gguf "
                                "(for --lm llamacpp:BASE+OUT/adapter.gguf), loss.csv, loss.png and train.json. Seeded; "
                                "checkpoints every --save-steps; the same command resumes an interrupted run.",
                    examples=["lookplangraph distill train --data runs/distill --base qwen2.5-coder-1.5b --out runs/lora15",
                              "lookplangraph distill train --data runs/distill --base qwen2.5-coder-0.5b --out runs/lora05 "
                              "--examples 4000 --max-minutes 8"])
    t.add_argument("--data", required=True, metavar="PATH", help="sft.jsonl (or .jsonl.gz), or the directory distill data wrote")
    t.add_argument("--base", default="qwen2.5-coder-1.5b", metavar="MODEL",
                   help="an embedded model's name or a GGUF path (default qwen2.5-coder-1.5b)")
    t.add_argument("--out", required=True, metavar="DIR", help="output directory (checkpoints, adapter, loss)")
    t.add_argument("--rank", type=int, default=16, help="LoRA rank (default 16)")
    t.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (default 32)")
    t.add_argument("--lr", type=float, default=2e-4, help="learning rate (default 2e-4, cosine, 3%% warm-up)")
    t.add_argument("--epochs", type=float, default=1.0, help="passes over the data (default 1)")
    t.add_argument("--max-steps", type=int, metavar="N", help="optimizer steps (wins over --epochs)")
    t.add_argument("--batch-size", type=int, default=4, help="examples per device batch (default 4)")
    t.add_argument("--grad-accum", type=int, default=4, help="batches per optimizer step (default 4)")
    t.add_argument("--max-length", type=int, default=4096, help="leave out longer examples, in tokens (default 4096)")
    t.add_argument("--examples", type=int, metavar="N", help="use N examples of the seeded shuffle (default all)")
    t.add_argument("--seed", type=int, default=0, help="seed of the shuffle, LoRA init and dropout (default 0)")
    t.add_argument("--save-steps", type=int, default=100, help="checkpoint every N steps (default 100)")
    t.add_argument("--max-minutes", type=float, metavar="M", help="stop with a checkpoint after M minutes of training")
    t.add_argument("--lr-schedule", choices=["steps", "time"], default="steps",
                   help="cosine over the optimizer steps (default), or over the wall time of --max-minutes (a run "
                        "whose length a time limit sets then ends at a low learning rate)")
    t.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa",
                   help="attention kernels (default sdpa: PyTorch's fused ones, without cuDNN's on CUDA; eager: "
                        "plain matrix products, slower, for a run that still diverges)")
    t.add_argument("--checkpointing", choices=["auto", "on", "off"], default="auto",
                   help="activation checkpointing (default auto: on; off is faster where memory allows)")
    t.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"], default="auto",
                   help="weights and compute (default auto: bfloat16 on a GPU, or a CPU, that multiplies it "
                        "in hardware, else float32; bfloat16 without such instructions is several times slower)")
    t.add_argument("--system-prompt", choices=["as-built", "compact"], default="as-built",
                   help="the examples' system message: as built (the planner's full prompt) or compact (then run the "
                        "adapter with --system-prompt compact; a fifth of the prompt tokens)")
    t.add_argument("--init-adapter", metavar="ADAPTER",
                   help="start from this adapter's weights instead of a fresh LoRA: a GGUF LoRA file or the name of "
                        f"an adapter of --base in the registry ({default_adapter()}); it must have --rank and --alpha")
    t.add_argument("--start-step", type=int, default=0, metavar="N",
                   help="with --init-adapter, in an OUT without checkpoints: go on from optimizer step N of the run "
                        "(same data, seed and settings) whose adapter after N steps --init-adapter is, for a run whose "
                        "checkpoints were lost with its machine; the data and the learning-rate schedule go on from N, "
                        "the optimizer's moments start afresh; ignored once OUT has checkpoints (default: 0)")
    t.add_argument("--pack", action=YesNo, default=False,
                   help="several examples share a sequence of up to --max-length tokens, kept apart by their "
                        "position ids (off: one example a row, padded within a batch); for short conversations")
    t.add_argument("--restart", action=YesNo, default=False,
                   help="ignore the checkpoints in OUT and start over (off: go on from the last one)")
    e = add_command(dsub, "export", help="a PEFT adapter directory as a GGUF LoRA for llama.cpp",
                    description="Write a PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors) as the GGUF "
                                "LoRA file llama.cpp applies to the unchanged base; checked against the base's tensors.",
                    examples=["lookplangraph distill export --adapter runs/lora15/adapter --base qwen2.5-coder-1.5b "
                              "--out runs/lora15/adapter.gguf"])
    e.add_argument("--adapter", required=True, metavar="DIR", help="the PEFT adapter directory")
    e.add_argument("--base", default="qwen2.5-coder-1.5b", metavar="MODEL", help="the base: embedded name or GGUF path")
    e.add_argument("--out", required=True, metavar="FILE", help="the GGUF LoRA to write")
    e.add_argument("--dtype", choices=["f16", "f32"], default="f16", help="tensor type (default f16)")
    m = add_command(dsub, "merge", help="a LoRA adapter merged into its base and quantized again (no LoRA cost per token)",
                    description="Check the adapter against the base, add it to the base's dequantized weights, and "
                                "quantize the result with llama.cpp's own quantizer (minutes on 2 cores). The merged "
                                "model keeps the adapter's prompt metadata; run it as --lm llamacpp:OUT.",
                    examples=[f"lookplangraph distill merge --adapter {default_adapter()} --out ~/models/{default_adapter()}-q8_0.gguf",
                              "lookplangraph distill merge --adapter runs/lora15/adapter.gguf --out merged.gguf --type f16"])
    m.add_argument("--adapter", required=True, metavar="FILE|NAME", help="a GGUF LoRA, or the name of an adapter in the registry")
    m.add_argument("--base", default="qwen2.5-coder-1.5b", metavar="MODEL", help="the base: embedded name or GGUF path")
    m.add_argument("--out", required=True, metavar="FILE", help="the merged GGUF to write")
    m.add_argument("--type", default="q8_0", choices=["q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16"],
                   help="quantization of the merged model (default q8_0; q4_k_m, the embedded base's, can lose a "
                        "LoRA's update, whose steps are finer than its rounding: see docs/guides/distillation.md)")
    st = add_command(dsub, "stamp", help="a run's adapter with its training record, for a release or a later stage",
                     description="Write RUN/adapter.gguf to OUT with RUN/train.json as its training record "
                                 "(lookplangraph.training), the tensors unchanged; refused when the record names "
                                 "another adapter. A run started from a stamped adapter records the start's lineage "
                                 "and its own stage (docs/guides/distillation.md).",
                     examples=["lookplangraph distill stamp --run runs/lpg_v7 --out lookplangraph/lm/adapters/lpg-v7.gguf"])
    st.add_argument("--run", required=True, metavar="DIR", help="the --out of a finished distill train call")
    st.add_argument("--out", required=True, metavar="FILE", help="the stamped GGUF LoRA to write")
    mx = add_command(dsub, "mix", help="one training set from several: planning data, DAgger rounds, Cypher data",
                     description="Take a seeded sample (or all) of each source's examples and write one sft.jsonl "
                                 "and counts.json that distill train reads: planning sources (distill data, distill "
                                 "dagger) must share prompt layout, answer format and recall; Cypher sources (cypher-data) "
                                 "keep the agent's system message, planning examples get --system-prompt's here "
                                 "(lookplangraph.distill.training.mix).",
                     examples=["lookplangraph distill mix --out runs/mix --take runs/distill:4000 "
                               "--take runs/dagger --take runs/cypher_data:800 --system-prompt compact",
                               "lookplangraph distill mix --out runs/mix_homes --take runs/distill_homes:1300 "
                               "--take runs/distill_homes@split=virtualhome:1000 --system-prompt compact"])
    mx.add_argument("--out", required=True, metavar="DIR", help="output directory (sft.jsonl, counts.json)")
    mx.add_argument("--take", action="append", required=True, metavar="DIR[@KEY=VALUE,...][:N]",
                    help="a source directory and how many of its examples (default all); repeat for each source. "
                         "@KEY=VALUE takes only the examples whose meta has that value (e.g. "
                         "runs/distill_homes@split=virtualhome:1000), so a part of a source can be taken again")
    mx.add_argument("--system-prompt", choices=["as-built", "compact"], default="as-built",
                    help="the planning examples' system message: as built, or the planner's compact prompt (then "
                         "train with --system-prompt compact or as-built, and run the adapter with the compact prompt)")
    mx.add_argument("--seed", type=int, default=0, help="seed of the samples and the order (default 0)")
    mx.add_argument("--worked-examples", type=int, default=0, metavar="K",
                    help="write K worked examples (the shipped ones, never of the question's own building) into the "
                         "prompts of a share of the Cypher gold question turns, as `ask --worked-examples K` does "
                         "(default 0: none)")
    mx.add_argument("--worked-share", type=float, default=0.5, metavar="F",
                    help="the share of Cypher questions that get them with --worked-examples (default 0.5)")
    mx.add_argument("--cypher-classes-at", choices=["end"], default=None,
                    help="end: move the scene's classes line of every Cypher example's system prompt (a committed "
                         "mix's too) behind the fixed text, as `ask --classes-at end` writes it (default: as built)")
    sp = add_command(dsub, "split", help="cut a file into checked chunks (to carry it to a GPU machine)",
                     description="Cut FILE into chunks of at most --chunk-mib MiB with a manifest of SHA-256 sums; "
                                 "`distill join` checks and puts them back together.",
                     examples=["lookplangraph distill split ~/.cache/lookplangraph/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf "
                               "--out carry/base"])
    sp.add_argument("file", metavar="FILE", help="the file to cut")
    sp.add_argument("--out", required=True, metavar="DIR", help="directory of the chunks and the manifest")
    sp.add_argument("--chunk-mib", type=float, default=60.0, help="chunk size in MiB (default 60)")
    j = add_command(dsub, "join", help="check the chunks of a manifest and put the file back together",
                    description="Check every chunk's size and SHA-256 against the manifest, then write the whole file "
                                "(OUT.part, renamed when the whole file's SHA-256 matches). Exit 1 naming a bad chunk.",
                    examples=["lookplangraph distill join carry/base/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf.manifest.json"])
    j.add_argument("manifest", metavar="MANIFEST", help="the manifest split wrote")
    j.add_argument("--out", metavar="FILE", help="where to write the file (default: its name beside the manifest)")
    p.set_defaults(func=cmd_distill)


def _teacher_flags(p) -> None:
    """``--recall`` and ``--expert``, the same on ``distill data`` and ``distill dagger``: the view
    the examples' prompts show and the teacher that labels them."""
    p.add_argument("--recall", choices=RECALL_MODES, default="here",
                   help="the view's recall: here (default, the paper's: unseen priors of the agent's room only), "
                        "named (also those of the classes the instruction names, wherever they are remembered) or "
                        "named-assets (named, and the assets of the classes the instruction names, in other rooms)")
    p.add_argument("--expert", choices=EXPERT_SPECS, default="expert",
                   help="the teacher: expert (belief-space search, default), expert-view (the same search limited "
                        "to what the planner's view shows: its choices are learnable from the prompt), expert-walk "
                        "(expert-view that puts only into what is in the room it stands in: it takes the object and "
                        "walks to another room's destination itself) or expert-oracle (the older room-by-room search)")


def cmd_expert_proof(args) -> int:
    """The harness proof: the privileged expert in each planner's loop (distill.teacher.proof)."""
    from types import SimpleNamespace

    from lookplangraph.distill.teacher.policy import PLANNERS
    from lookplangraph.distill.teacher.proof import proof_table, run_proof, write_proof

    pairs = []
    for name in (args.planner or ["lookplangraph"]):
        if name not in PLANNERS:
            raise UsageError(f"--planner {name}: the expert answers {', '.join(PLANNERS)}")
        modes = args.correction or (list(CORRECTION_MODES) if name == "lookplangraph" else ["rules"])
        if name != "lookplangraph":
            modes = ["rules"]  # the correction modes are LookPlanGraph's
        pairs += [(name, m) for m in modes]
    seeds = seed_list(args.seeds)
    rows = []
    for split in args.split or SPLITS:
        tasks = select_tasks(SimpleNamespace(split=split, selection=None, tasks=None, limit=args.limit), args.data_dir)
        for env in args.env or ["graph"]:
            if env.startswith("virtualhome"):
                if split != "virtualhome":
                    continue
                from sim_adapters.virtualhome import UNPLUGGED_TASKS

                left_out = sorted(t.id for t in tasks if t.id in UNPLUGGED_TASKS)
                if left_out:
                    print(f"left out in {env} ([PlugIn] programs): {', '.join(left_out)}", file=sys.stderr)
                run_tasks = [t for t in tasks if t.id not in UNPLUGGED_TASKS]
            else:
                run_tasks = tasks
            rows += run_proof(run_tasks, planners=pairs, seeds=seeds, env=env, max_actions=args.max_actions,
                              progress=progress_bar(f"{split} {env}"))
    out = Path(args.out) if args.out else Path("runs") / "expert_proof"
    write_proof(rows, out)
    print(proof_table(rows))
    failures = [f for r in rows for f in r.failures]
    for f in failures[:40]:
        print(f"FAIL {f['planner']}/{f['correction']} {f['env']} seed={f['seed']} {f['task']}: "
              f"{f['termination']}: {f['why']}")
    print(f"written: {out / 'proof.csv'}, {out / 'failures.csv'} ({len(failures)} failures)")
    return EXIT_OK


def cmd_distill(args) -> int:
    """Distillation: training data from the expert (distill.planning.trajectories: ``distill data``,
    ``distill validate``), LoRA training, export and release (training: ``distill train``, ``distill
    export``, ``distill stamp``), and checked chunks for carrying files to a GPU machine (``distill split``, ``distill join``)."""
    if args.distill_command in ("train", "export", "merge", "split", "join", "mix", "stamp"):
        return _distill_training(args)
    from grasif import dataset
    from grasif.heldout import in_train_pool, kept_out_tasks

    from grasif.generate.leaks import GeneratedLeak

    from lookplangraph.distill.planning import trajectories

    root = Path(args.data_dir) if args.data_dir else dataset.default_data_dir()
    try:
        tasks = [t for split in ("virtualhome", "behavior") for t in dataset.load_split(root, split)]
    except (dataset.SourceError, KeyError, FileNotFoundError) as exc:
        raise source_error(exc) from None
    generated = generated_tasks(getattr(args, "generated", []))
    if args.distill_command == "dagger":
        return _dagger(args, root, tasks)
    out = Path(args.out)
    if args.distill_command == "validate":
        if not (out / "episodes.jsonl").exists() or not (out / "sft.jsonl").exists():
            raise UsageError(f"{out} holds no training data (episodes.jsonl, sft.jsonl); write it with "
                             f"`lookplangraph distill data --out {out}`")
        report = trajectories.validate_data(out, {(t.split, t.id): t for t in [*tasks, *generated]},
                                            progress=progress_bar("replay"))
        print(f"replayed {report.episodes} successful episodes and read {report.examples} examples: "
              f"{len(report.problems)} problem(s)")
        for line in report.problems[:30]:
            print("  " + line)
        return EXIT_OK if report.ok else EXIT_FAILED
    pool = [t for t in tasks if in_train_pool(t.split, t.id)]
    if args.limit is not None:
        pool = pool[: args.limit]
    seeds = seed_list(args.seeds)
    kinds = tuple(k for k in args.augment.split(",") if k) if args.augment != "none" else ()
    bad = sorted(set(kinds) - set(trajectories.AUGMENTATIONS))
    if bad:
        raise UsageError(f"--augment: unknown kind(s) {', '.join(bad)}; use {', '.join(trajectories.AUGMENTATIONS)} or none")
    if not 0 <= args.mistakes <= 1:
        raise UsageError(f"--mistakes is a share of the episodes, 0 to 1, not {args.mistakes}")
    if args.mistakes and args.prompt_layout != "conversation":
        raise UsageError("--mistakes needs --prompt-layout conversation (a mistake stands untrained in its episode's chat)")
    if args.actions_per_answer != 1 and args.prompt_layout != "conversation":
        raise UsageError("--actions-per-answer needs --prompt-layout conversation (an answer of several actions is one "
                         "assistant turn)")
    if not 1 <= args.actions_per_answer <= MAX_ACTIONS_PER_ANSWER:
        raise UsageError(f"--actions-per-answer is 1 to {MAX_ACTIONS_PER_ANSWER}, not {args.actions_per_answer}")
    held = kept_out_tasks(root) if generated else []
    try:
        counts = trajectories.build_data(pool, out, seeds=seeds, augmentations=kinds, correction=args.correction,
                                         max_actions=args.max_actions, progress=progress_bar("expert episodes"),
                                         prompt_layout=args.prompt_layout, answer_format=args.answer_format,
                                         generated=generated, heldout=held, expert=_expert(args.expert),
                                         recall=args.recall, mistakes=args.mistakes, mistake_seed=args.mistake_seed,
                                         actions_per_answer=args.actions_per_answer)
    except GeneratedLeak as exc:
        raise UsageError(str(exc)) from None
    print(f"{len(pool)} train-pool tasks and {len(generated)} generated tasks; {counts.episodes} episodes ({counts.successful} reached the goal; "
          f"by augmentation {counts.by_kind}; {counts.augmentations_left_out} augmented copies left out as unsolvable; "
          f"{counts.unmoved_left_out} dynamic episodes left out because the dynamic mode moved nothing: the static "
          "episode again)")
    if args.prompt_layout == "conversation":
        print(f"{counts.examples} conversations, {counts.decisions} trained decisions; injected mistakes: "
              f"{counts.mistakes or 'none'}")
        if args.actions_per_answer > 1:
            print(f"answers of up to {args.actions_per_answer} actions: {counts.chained_answers} trained answers hold "
                  f"more than one; {counts.chains_not_replayed} conversations did not replay chained and are "
                  "written one action an answer")
    print(f"{counts.examples} examples ({', '.join(f'{k} {v}' for k, v in sorted(counts.by_source.items()))}); "
          f"prompt tokens {counts.prompt_tokens}, answer tokens {counts.answer_tokens} ({counts.tokenizer})")
    print(f"written: {out / 'sft.jsonl'}, {out / 'episodes.jsonl'}, {out / 'demonstrations.jsonl.gz'}, "
          f"{out / 'counts.json'}")
    return EXIT_OK


def _expert(spec: str):
    """The privileged expert an ``--expert`` spec names (:data:`~lookplangraph.distill.teacher.policy.TEACHERS`)."""
    from lookplangraph.distill.teacher.expert import expert_for

    return expert_for(spec)


def _dagger(args, root: Path, tasks: list) -> int:
    """``distill dagger``: one round over train-pool or generated tasks (module doc of dagger)."""
    from grasif.generate.leaks import GeneratedLeak, check_training
    from grasif.heldout import in_train_pool, kept_out_tasks

    from lookplangraph.distill.planning import dagger, replay, trajectories
    from lookplangraph.lm import LMError, make_backend

    if args.tasks == "train-pool":
        chosen = [t for t in tasks if in_train_pool(t.split, t.id)]
    elif args.tasks.startswith("generated:"):
        chosen = generated_tasks([args.tasks.split(":", 1)[1]])
        try:
            check_training(chosen, kept_out_tasks(root))
        except GeneratedLeak as exc:
            raise UsageError(str(exc)) from None
    else:
        raise UsageError(f"--tasks is train-pool or generated:DIR, not {args.tasks!r}")
    if args.episodes is not None and args.episodes < 1:
        raise UsageError(f"--episodes must be at least 1, not {args.episodes}")
    cfg = trajectories.data_config(args.answer_format, args.prompt_layout, max_actions=args.max_actions,
                                   recall=args.recall)
    if args.student.startswith(replay.PREFIX):  # another round's answers, labelled by this round's teacher
        try:
            student = replay.RecordedStudent(Path(args.student[len(replay.PREFIX):]))
        except replay.ReplayError as exc:
            raise UsageError(str(exc)) from None
        if student.unrecoverable:
            print(f"{len(student.unrecoverable)} recorded episodes left out: their answers could not be read back")
    else:
        try:
            student = make_backend(args.student)
        except LMError as exc:
            raise lm_failure(exc) from None
    try:
        counts = dagger.run_round(chosen, student, Path(args.out), cfg=cfg, seeds=seed_list(args.seeds),
                                  round_=args.round, episodes=args.episodes, expert=_expert(args.expert),
                                  branches=args.branches, progress=progress_bar("student episodes"))
    except LMError as exc:
        raise lm_failure(exc, f"{exc} (finished episodes are kept in {args.out}; rerun to resume)") from None
    except dagger.DaggerError as exc:
        raise UsageError(str(exc)) from None
    print(f"{counts.episodes} student episodes in {args.out} ({counts.student_successes} reached the goal); "
          f"{counts.states} states labelled, {counts.examples} examples kept ({counts.left_out_done} give-ups and "
          f"{counts.left_out_ungrounded} ungrounded labels left out); the student agreed with the expert on "
          f"{counts.agreed}; {counts.states_per_hour:.0f} states per hour")
    if counts.replays_diverged:
        print(f"{counts.replays_diverged} replayed episodes diverged from the recorded ones (no examples written)")
    if counts.continuations or counts.continuations_diverged:
        print(f"{counts.continuations} expert continuations written; {counts.continuations_diverged} states got the "
              f"one-answer branch instead (the replay did not reach the student's state)")
    by_kind = dagger.success_by_kind(Path(args.out) / "dagger_episodes.jsonl")
    if by_kind:
        cells = [f"{kind} " + ", ".join(f"{mode} {c['successes']}/{c['episodes']}" for mode, c in modes.items())
                 for kind, modes in by_kind.items()]
        print("reached the goal by task kind: " + "; ".join(cells))
    return EXIT_OK


def _base_model_file(spec: str) -> Path:
    """A ``--base``: the name of an embedded model (assembled on first use) or a GGUF path."""
    from lookplangraph.lm import embedded

    try:
        return embedded.model_file(spec)
    except embedded.ModelError as exc:
        raise UsageError(f"--base: {exc}") from None


def _merge(args, base: Path) -> int:
    from tqdm import tqdm

    from lookplangraph.lm import AdapterError, embedded
    from lookplangraph.lm.llamacpp import resolve_adapter
    from lookplangraph.distill.training.merge import merge_lora

    adapter = resolve_adapter(args.base, args.adapter)
    spec = embedded.MODELS.get(args.base)
    with tqdm(total=None, desc="merge", unit="tensor") as bar:
        def step(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            r = merge_lora(base, adapter, args.out, file_type=args.type, base_sha256=spec.sha256 if spec else None,
                           progress=step)
        except AdapterError as exc:
            raise UsageError(str(exc)) from None
    print(f"{r.path}: {r.merged} weights merged, {r.size / 2**20:.0f} MiB {args.type}; merge {r.merge_seconds:.0f} s, "
          f"quantization {r.quantize_seconds:.0f} s; use it as --lm llamacpp:{r.path}")
    return EXIT_OK


def _mix(args) -> int:
    """``distill mix``: one training set from several sources (:mod:`lookplangraph.distill.training.mix`)."""
    from lookplangraph.distill.training import mix
    from lookplangraph.agent.prompts import compact_prompt
    from lookplangraph.cypher.agent import classes_at_end

    transform, name = None, ""
    if args.worked_examples < 0 or not 0 <= args.worked_share <= 1:
        raise UsageError("--worked-examples must be >= 0 and --worked-share between 0 and 1")
    if args.worked_examples:
        from functools import partial

        from lookplangraph.cypher.examples import shipped_index, with_worked_examples

        transform = partial(with_worked_examples, index=shipped_index("qa"), k=args.worked_examples,
                            share=args.worked_share)
        name = f"worked examples: {args.worked_examples} (shipped), share {args.worked_share:g} of gold questions"
    try:
        takes = [mix.Take.parse(t) for t in args.take]
        counts = mix.mix(takes, args.out, system=compact_prompt() if args.system_prompt == "compact" else None,
                         system_name="compact" if args.system_prompt == "compact" else "full", seed=args.seed,
                         cypher_transform=transform, cypher_transform_name=name,
                         cypher_system=classes_at_end if args.cypher_classes_at == "end" else None,
                         cypher_system_name="classes at end (lookplangraph.cypher.agent.classes_at_end)")
    except mix.MixError as exc:
        raise UsageError(str(exc)) from None
    for src in counts["sources"]:
        print(f"{src['name']} ({src['kind']}): {src['taken']} of {src['available']}")
    print(f"{counts['examples']} examples ({', '.join(f'{k} {v}' for k, v in sorted(counts['by_source'].items()))}); "
          f"planning: {counts['prompt_layout']} layout, {counts['answer_format']} answers, "
          f"{counts['system_prompt_name']} system prompt")
    if "cypher_transform" in counts:
        print(f"Cypher examples changed: {counts['cypher_transform']['changed']} ({name})")
    if "cypher_system" in counts:
        c = counts["cypher_system"]
        print(f"Cypher system prompts rewritten: {c['changed']} of {c['cypher_examples']} ({c['name']})")
    print(f"written: {Path(args.out) / 'sft.jsonl'}, {Path(args.out) / 'counts.json'}")
    return EXIT_OK


def _distill_training(args) -> int:
    from lookplangraph.distill.training import chunks

    if args.distill_command == "split":
        try:
            manifest = chunks.split_file(args.file, args.out, int(args.chunk_mib * (1 << 20)))
        except chunks.ChunkError as exc:
            raise UsageError(str(exc)) from None
        m = json.loads(manifest.read_text())
        print(f"{len(m['chunks'])} chunks of {args.file} in {args.out}; manifest {manifest} (sha256 {m['sha256'][:16]}...)")
        return EXIT_OK
    if args.distill_command == "mix":
        return _mix(args)
    if args.distill_command == "stamp":
        from lookplangraph.distill.training.lineage import RecordError, stamp_run
        from lookplangraph.lm.lora import AdapterError

        try:
            path = stamp_run(args.run, args.out)
        except (RecordError, AdapterError) as exc:
            raise UsageError(str(exc)) from None
        print(f"{path}: {args.run}/adapter.gguf with its training record (lookplangraph.training)")
        return EXIT_OK
    if args.distill_command == "join":
        try:
            path = chunks.join_file(args.manifest, args.out)
        except chunks.ChunkError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print(f"joined and checked: {path}")
        return EXIT_OK
    from lookplangraph.distill.training import gguf_lora, sft
    from lookplangraph.agent.prompts import compact_prompt

    base = _base_model_file(args.base)
    if args.distill_command == "export":
        try:
            r = gguf_lora.export_lora(args.adapter, base, args.out, dtype=args.dtype)
        except gguf_lora.ExportError as exc:
            raise UsageError(str(exc)) from None
        print(f"{r.path}: {r.pairs} LoRA pairs, rank {r.rank}, alpha {r.alpha:g}, {r.architecture}, "
              f"{r.bytes / 2**20:.1f} MiB; use it as --lm llamacpp:{args.base}+{r.path}")
        return EXIT_OK
    if args.distill_command == "merge":
        return _merge(args, base)
    init_adapter = None
    if args.init_adapter is not None:
        from lookplangraph.lm import embedded
        from lookplangraph.lm.llamacpp import resolve_adapter
        from lookplangraph.lm.lora import AdapterError, check_adapter

        spec = embedded.MODELS.get(args.base)  # its known hash: the 1.1 GB base is not hashed again here
        try:
            init_adapter = resolve_adapter(args.base, args.init_adapter)
            check_adapter(init_adapter, base, spec.sha256 if spec else None)
        except AdapterError as exc:
            raise UsageError(f"--init-adapter: {exc}") from None
    config = sft.TrainConfig(rank=args.rank, alpha=args.alpha, learning_rate=args.lr, epochs=args.epochs,
                             max_steps=args.max_steps, batch_size=args.batch_size, grad_accum=args.grad_accum,
                             max_length=args.max_length, examples=args.examples, seed=args.seed,
                             save_steps=args.save_steps, max_minutes=args.max_minutes, dtype=args.dtype,
                             lr_schedule=args.lr_schedule, gradient_checkpointing=args.checkpointing,
                             attention=args.attention,
                             system=compact_prompt() if args.system_prompt == "compact" else None,
                             system_name="compact" if args.system_prompt == "compact" else "full",
                             init_adapter=str(init_adapter) if init_adapter is not None else None,
                             start_step=args.start_step, pack=args.pack)
    try:
        r = sft.train(args.data, base, args.out, config, resume=not args.restart)
    except sft.TrainError as exc:
        raise UsageError(str(exc)) from None
    state = "stopped by --max-minutes (run the same command to go on)" if r.stopped_by_time else "done"
    print(f"{state}: {r.steps} steps on {r.examples} examples ({r.left_out_too_long} too long), "
          f"final loss {r.final_loss if r.final_loss is None else round(r.final_loss, 4)}, {r.seconds:.0f} s"
          + (f"; {len(r.skipped_steps)} steps skipped for non-finite gradients" if r.skipped_steps else ""))
    print(f"written: {r.adapter_gguf}, {r.out / 'adapter'}/, {r.out / 'loss.csv'}, {r.out / 'loss.png'}, "
          f"{r.out / 'train.json'}; use it as --lm llamacpp:{args.base}+{r.adapter_gguf}")
    return EXIT_OK
