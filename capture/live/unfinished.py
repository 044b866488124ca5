"""Which replay did not finish, when a device-side assertion surfaces after it.

`record --check` compares a sample of each graph's replays; an assertion tripped by a
replay it does not compare surfaces at the next synchronization: the next checked
replay's, or the program's own (`.item()`, `.tolist()`), or the process's end. By then
the CUDA context is lost and nothing can be re-run. So every replay of a checked graph
is marked as it is launched (capture/replay/progress.py: the device counts the graph's
finished replays into pinned memory, no sync; the graph's marks made at its first
replay, outside any capture), and the process's last LAUNCHES replays are remembered in
launch order: after the error, the first remembered replay past its graph's count is the
one that did not finish. Two small launches a replay, under `--check` only. A graph
replayed on several streams is counted across them, which names a replay only where
its replays run in the order they were launched.
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
