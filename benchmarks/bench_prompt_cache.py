"""What a prompt layout and an answer format leave to evaluate per decision (run by hand, not a test).

The privileged expert (a harness tool that reads the true graph, not a model) plays the same
episodes in every format, so the decisions are the same and only the prompt's bytes differ. For
each decision of each episode the prompt is tokenized with the embedded model's own tokenizer and
chat template (``LlamaCppBackend.prompt_tokens``; no weights are loaded) and compared with the
previous decision's prompt: the common token prefix is what llama.cpp's prefix cache serves, the
rest is evaluated anew. The cache holds the previous prompt and its answer (the answer's text as
the tokenizer writes it: a model's own tokens may differ, which ``bench_decision.py`` measures),
so in the conversation layout, where the answer is part of the next prompt, only the new user
turn is evaluated. The answer's tokens are counted too. Prints a Markdown table.

    .venv/bin/python benchmarks/bench_prompt_cache.py            # the 10 tasks of bench_decision.py
    .venv/bin/python benchmarks/bench_prompt_cache.py --tasks dev --dynamic-seed 0   # the dev split
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_decision import TASKS, load_tasks  # noqa: E402
from lookplangraph.distill.planning.trajectories import expert_episode  # noqa: E402
from lookplangraph.lm import LlamaCppBackend  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402

FORMATS = {  # name -> planner settings
    "scene-history, action+reason (v0's)": {"prompt_layout": "scene-history"},
    "scene-history, action": {"prompt_layout": "scene-history", "reason_max_length": 0},
    "history-scene, action+reason": {"prompt_layout": "history-scene"},
    "history-scene, action (v2)": {"prompt_layout": "history-scene", "reason_max_length": 0},
    "journal, action+reason": {"prompt_layout": "journal"},
    "journal, action": {"prompt_layout": "journal", "reason_max_length": 0},
    "conversation, action+reason": {"prompt_layout": "conversation"},
    "conversation, action": {"prompt_layout": "conversation", "reason_max_length": 0},
}


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="*", default=list(TASKS), metavar="SPLIT/ID",
                    help="tasks (dev/ID from the dev split; dev: all of it)")
    ap.add_argument("--recall", default="named", help="the view's recall setting (default named: lpg-v5's)")
    ap.add_argument("--dynamic-seed", type=int, default=None, help="dynamic mode with this seed (default: static)")
    ap.add_argument("--max-actions", type=int, default=30)
    args = ap.parse_args()
    tokenizer = LlamaCppBackend("qwen2.5-coder-1.5b", vocab_only=True)
    tasks = load_tasks(args.tasks)
    print("| format | decisions | prompt tokens (median) | evaluated anew (median) | evaluated anew (mean) | "
          "answer tokens (median) |\n|---|---|---|---|---|---|")
    for name, settings in FORMATS.items():
        cfg = PlannerConfig(max_actions=args.max_actions, system_prompt="compact", recall=args.recall, **settings)
        prompts, evaluated, answers = [], [], []
        for task in tasks:
            _, examples, _ = expert_episode(task, args.dynamic_seed, cfg)
            before: list[int] = []
            for messages, answer, _ in examples:
                tokens = tokenizer.prompt_tokens(messages)
                prompts.append(len(tokens))
                evaluated.append(len(tokens) - common_prefix(before, tokens))
                answer_tokens = tokenizer.llm.tokenize(answer.encode(), add_bos=False, special=False)
                answers.append(len(answer_tokens))
                before = tokens + answer_tokens  # what the KV cache holds after the decision
        print(f"| {name} | {len(prompts)} | {statistics.median(prompts):.0f} | {statistics.median(evaluated):.0f} | "
              f"{statistics.mean(evaluated):.0f} | {statistics.median(answers):.0f} |")


if __name__ == "__main__":
    main()
