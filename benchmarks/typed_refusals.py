"""Which answers of a finished run the typed vocabulary would not have let the LM write (run by hand).

Replays every trace of a ``lookplangraph eval`` directory through the loop with the replies it
recorded (a scripted replay of the run's own texts: no model is loaded) and, at each decision,
asks whether the answer was decodable under ``vocabulary = typed``
(:func:`lookplangraph.agent.view.vocabulary`: each function only the names and slots it can take
in that memory state). Counts, over the decisions: answers the loop refused (feedback) that
typed decoding would have made impossible, and answers it accepted that typed decoding would
have forbidden (what the typed grammar would cost). Prints a Markdown table and the forbidden
accepted answers.

    .venv/bin/python benchmarks/typed_refusals.py runs/s63_new_dev
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_decision import load_tasks  # noqa: E402
from lookplangraph.agent.decoding import action_key  # noqa: E402
from lookplangraph.agent.view import view, vocabulary  # noqa: E402
from lookplangraph.evaluation.runner import make_env  # noqa: E402
from lookplangraph.lm import ScriptedBackend  # noqa: E402
from lookplangraph.planners.config import PlannerConfig  # noqa: E402
from lookplangraph.planners.lookplangraph import run_episode  # noqa: E402

def typed_allows(vocab: dict, action) -> bool:
    """Whether ``action`` can be decoded under the typed vocabulary ``vocab`` (function -> slot ->
    names): its function is offered and each name it gives stands in that slot's list."""
    fn, node, _, destination = action_key(action)
    allowed = vocab.get(fn)
    if allowed is None:
        return False
    return all(value is None or value in allowed.get(slot, ()) for slot, value in (("node", node),
                                                                                    ("destination", destination)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a lookplangraph eval output directory (config.json, traces/)")
    args = ap.parse_args()
    config = json.loads((args.run / "config.json").read_text())
    # the run's loop settings; a setting newer than the run is off, as the run had it
    cfg = PlannerConfig(**{k: config.get(k, False) for k, f in PlannerConfig.__dataclass_fields__.items()
                           if k in config or f.type == "bool"})
    counts, forbidden = Counter(), []
    traces = sorted((args.run / "traces").glob("*.jsonl"))
    tasks = load_tasks([trace.stem.replace("__", "/", 1) for trace in traces])  # trace files: SPLIT__ID.jsonl
    for trace, task in zip(traces, tasks):
        task_id = task.id
        steps = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
        if not steps:
            continue
        seed = config.get("seed") if config.get("dynamic") else None
        env = make_env(task, dynamic_seed=seed, dynamic_mode=config.get("dynamic_mode") or "paper")
        allowed: list[bool | None] = []

        def on_reply(reply, memory):
            if reply.action is None:
                allowed.append(None)
            else:
                allowed.append(typed_allows(vocabulary(memory, cfg.graph_style, view(memory, cfg.graph_style)),
                                            reply.action))

        records = []
        run_episode(task, env, ScriptedBackend([s["text"] for s in steps]), cfg, on_step=records.append,
                    on_reply=on_reply)
        if [r.proposed for r in records] != [s["proposed"] for s in steps]:
            counts["replay differs"] += 1
            continue
        for rec, ok in zip(records, allowed):
            kind = "accepted" if rec.accepted else "refused"
            counts[(kind, "typed allows" if ok else "unreadable" if ok is None else "typed forbids")] += 1
            if rec.accepted and ok is False:
                forbidden.append(f"{task_id}: {rec.proposed}")
    print("| answer | typed allows | typed forbids | unreadable |\n|---|---|---|---|")
    for kind in ("accepted", "refused"):
        print(f"| {kind} | {counts[(kind, 'typed allows')]} | {counts[(kind, 'typed forbids')]} | "
              f"{counts[(kind, 'unreadable')]} |")
    if counts["replay differs"]:
        print(f"\n{counts['replay differs']} traces left out: the replay did not take the recorded path")
    if forbidden:
        print("\naccepted answers typed decoding would have forbidden:\n" + "\n".join(f"- {f}" for f in forbidden))
    return 0


if __name__ == "__main__":
    sys.exit(main())
