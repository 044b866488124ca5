"""Which replays of a graph are checked: every one up to `first`, then each `ratio` times
the last checked (a geometric sample: a graph replayed a million times is checked about
40 times at the defaults), so a check costs a fixed share of a long run's replays while
every early replay, where graph-only bugs show first, is seen."""

from __future__ import annotations

import math
from dataclasses import dataclass

from graph_harness.capture.errors import UsageError

FIRST, RATIO = 8, 2.0


@dataclass(frozen=True)
class Sample:
    first: int = FIRST  # replays 1..first are all checked
    ratio: float = RATIO  # then each checked replay's number times this

    def next_after(self, n: int) -> int:
        """The replay to check after replay `n` (numbered from 1) was checked."""
        if n < self.first:
            return n + 1
        return max(n + 1, math.ceil(n * self.ratio))

    def to_text(self) -> str:
        return f"{self.first},{self.ratio:g}"

    @classmethod
    def parse(cls, text: str) -> Sample:
        """`FIRST[,RATIO]` (`8,2`; `0` for none up front); a UsageError saying the form."""
        first, _, ratio = str(text).partition(",")
        try:
            out = cls(int(first), float(ratio) if ratio else RATIO)
        except ValueError:
            out = None
        if out is None or out.first < 0 or not out.ratio > 1 or not math.isfinite(out.ratio):
            raise UsageError(
                f"--check-sample takes FIRST[,RATIO]: every replay up to FIRST, then each "
                f"RATIO times the last (RATIO over 1), e.g. 8,2; got {text!r}"
            )
        return out

    def due(self) -> int:
        """The first replay checked."""
        return 1
