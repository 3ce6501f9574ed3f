"""Success rates with their uncertainty, and two planners compared task by task.

:func:`wilson` is the 95 % Wilson score interval of a success rate (sound at the small counts of
this project's task sets, unlike the normal approximation). :func:`compare` pairs two runs on the
tasks both finished: which tasks only one of them solved, and the exact two-sided sign test of
those discordant tasks (the tasks both solve or both fail say nothing about which is better).
Totals alone hide this: nearly equal totals can be several gains and as many losses. See
``docs/benchmark/heldout.md`` (which set decides, which reports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` of ``n`` (95 % for ``z = 1.96``); (0, 1) for n = 0."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def sign_test(gains: int, losses: int) -> float:
    """Exact two-sided sign test: the probability, were both equally good, of a split of the
    ``gains + losses`` discordant tasks at least this uneven (1.0 with none)."""
    if gains < 0 or losses < 0:
        raise ValueError("counts must be non-negative")
    n, k = gains + losses, min(gains, losses)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Paired:
    """Two runs on the tasks both finished: ``gains`` solved by B only, ``losses`` by A only."""

    tasks: int
    both: int
    neither: int
    gains: tuple[str, ...]
    losses: tuple[str, ...]
    only_a: tuple[str, ...]  # finished by A alone: not compared
    only_b: tuple[str, ...]

    @property
    def p_value(self) -> float:
        return sign_test(len(self.gains), len(self.losses))

    def text(self, a: str = "A", b: str = "B") -> str:
        """A few lines a person reads: the counts, the test, the tasks each gained."""
        sa, sb = self.both + len(self.losses), self.both + len(self.gains)
        lo_a, hi_a = wilson(sa, self.tasks)
        lo_b, hi_b = wilson(sb, self.tasks)
        lines = [f"{self.tasks} tasks both finished: {a} {sa} ({lo_a:.2f}–{hi_a:.2f}), {b} {sb} ({lo_b:.2f}–{hi_b:.2f}); "
                 f"both {self.both}, neither {self.neither}; {b} gains {len(self.gains)}, loses {len(self.losses)} "
                 f"(sign test p = {self.p_value:.3f})"]
        if self.gains:
            lines.append(f"  solved by {b} only: {', '.join(self.gains)}")
        if self.losses:
            lines.append(f"  solved by {a} only: {', '.join(self.losses)}")
        if self.only_a or self.only_b:
            lines.append(f"  not compared (finished by one run only): {len(self.only_a)} of {a}, {len(self.only_b)} of {b}")
        return "\n".join(lines)


def compare(a: Mapping[str, bool], b: Mapping[str, bool]) -> Paired:
    """Pair two runs given as ``{task key: success}`` (:func:`outcomes` reads them from results)."""
    common = sorted(set(a) & set(b))
    return Paired(
        tasks=len(common),
        both=sum(a[t] and b[t] for t in common),
        neither=sum(not a[t] and not b[t] for t in common),
        gains=tuple(t for t in common if b[t] and not a[t]),
        losses=tuple(t for t in common if a[t] and not b[t]),
        only_a=tuple(sorted(set(a) - set(b))),
        only_b=tuple(sorted(set(b) - set(a))),
    )


def outcomes(rows: Iterable[Mapping]) -> dict[str, bool]:
    """``{split/task id: success}`` of the rows of one run's ``results.jsonl`` (one episode per
    task: a run has one dynamic setting)."""
    return {f"{r['split']}/{r['task_id']}": bool(r["success"]) for r in rows}
