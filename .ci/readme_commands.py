"""Print one of README.md's two set-up commands, as the README writes them: ``main`` (the main
job) or ``tests`` (the test command). They are the first two ```bash blocks of its section
"Set-up commands", in that order; anything else is an error (exit 2), so CI never runs a command
the README does not show."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def commands(text: str) -> dict[str, str]:
    """``{"main": ..., "tests": ...}`` from the README's text; ValueError if the section or a
    block is missing or a block holds more than one command line."""
    m = re.search(r"^## Set-up commands[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if m is None:
        raise ValueError("README.md has no '## Set-up commands' section")
    blocks = [b.strip() for b in re.findall(r"```bash\n(.*?)```", m.group(1), re.S)]
    if len(blocks) < 2:
        raise ValueError(f"README.md's set-up section has {len(blocks)} bash block(s), not 2")
    for b in blocks[:2]:
        if "\n" in b:
            raise ValueError(f"a set-up command must be one line: {b!r}")
    return {"main": blocks[0], "tests": blocks[1]}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("main", "tests"):
        print("usage: readme_commands.py main|tests", file=sys.stderr)
        sys.exit(2)
    try:
        print(commands(README.read_text())[sys.argv[1]])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
