"""Which replay did not finish, when a device-side assertion surfaces after it.

An assertion tripped by a replay `record --check` does not compare surfaces later, the
CUDA context lost. So every replay of a checked graph is marked as it is launched
(capture/replay/progress.py) and the process's last LAUNCHES replays are remembered in
launch order: the first past its graph's count is the one that did not finish. In
full: docs/record.md, "capture/live/unfinished.py".
"""

from __future__ import annotations

from collections import deque
from typing import Any

from graph_harness.capture.replay.progress import Marks

LAUNCHES = 4096  # replays remembered: an error surfaces within a few of its replay


class Launches:
    """The process's checked graphs' replays, in launch order (module notes)."""

    def __init__(self) -> None:
        self.order: deque[tuple[Any, int]] = deque(maxlen=LAUNCHES)
        self.lost = False  # a lost context already said (checked.py)

    def launched(self, check: Any, n: int) -> None:
        """`check`'s graph (a GraphCheck) was just launched for its replay `n` (on its
        capture's device; none: no CUDA, a stand-in graph, nothing to count)."""
        if check.device is None:
            return
        if check.marks is None:
            check.marks = Marks(check.device)
        check.marks.mark()
        self.order.append((check, n))

    def first_unfinished(self) -> tuple[Any, int] | None:
        """The first remembered replay its graph's count did not reach: (check, replay),
        or None (every one finished, or the one that did not was forgotten)."""
        done: dict[int, int] = {}
        for check, n in self.order:
            if check.marks is None:
                continue
            if n > done.setdefault(id(check), check.marks.done()):
                return check, n
        return None
