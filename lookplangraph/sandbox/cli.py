"""``lookplangraph sandbox``: what isolation this machine gives LM-written code.

Wiring (in ``lookplangraph/cli.py``): ``from lookplangraph.sandbox import cli as sandbox_cli``,
then ``sandbox_cli.add_parser(sub)`` beside the other sub-commands; the parser sets
``func=sandbox_cli.run``.
"""

from __future__ import annotations

import argparse
import json

from lookplangraph.sandbox.runner import Sandbox, SandboxUnavailable


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("sandbox", help="probe the sandbox for LM-written code: the isolation this machine achieves",
                       description="Probe the sandbox that runs LM-written code (SG-RwR): print the isolation this "
                                   "machine achieves and what the probe refused. Exit code 1 when only weak "
                                   "isolation is available (SG-RwR then refuses to run LM code unless allowed).",
                       epilog="examples:\n  lookplangraph sandbox\n  lookplangraph sandbox --json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action=argparse.BooleanOptionalAction, default=False,
                   help="print the probe's full report as JSON (default: off)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    """Print the isolation achieved (and the probe's refusals); exit status 1 when only weak
    isolation is available (SG-RwR would refuse to run LM code unless allowed)."""
    box = Sandbox(require_strong=False)
    strong = not box.isolation.startswith("weak:")
    if getattr(args, "json", False):
        print(json.dumps({"isolation": box.isolation, "strong": strong, "probe": box.probe}, indent=2))
    else:
        print(f"isolation: {box.isolation}")
        for name, outcome in box.probe.get("checks_before_freeze", {}).items():
            print(f"  {name:<22} {outcome} (below the descriptor freeze)")
        for note in box.probe.get("notes", []):
            print(f"  note: {note}")
        if not strong:
            try:
                Sandbox()
            except SandboxUnavailable as e:
                print(str(e))
    return 0 if strong else 1
