"""Replaying a captured graph in runs ("windows"): the one place every replay loop goes
through (timing, CUPTI windows, the step profile, check's replays).

A window resets the step first (if it has `step.reset`; then syncs) and syncs at its end,
so a CUDA error is pinned to its window and becomes ReplayFailed, one line naming the
graph, the window, the replays and the likely cause. After a device-side assert the CUDA
context is lost; the process should exit. In full: docs/steps-and-check.md,
"capture/replay/guard.py".
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.replay.progress import Marks, held_stderr

if TYPE_CHECKING:
    import torch


class ReplayFailed(HarnessError, RuntimeError):
    """A CUDA error while replaying a graph (exit 1). `context_lost`: the CUDA context
    is unusable; the process must do no more GPU work. `tripped`: with marks, the replay
    (counted in its window from 1) that tripped it; `assertion`: the device assertion's
    condition, where one was printed (capture/replay/progress.py)."""

    def __init__(
        self,
        message: str,
        *,
        context_lost: bool,
        tripped: int | None = None,
        assertion: str | None = None,
    ) -> None:
        super().__init__(message)
        self.context_lost = context_lost
        self.tripped = tripped
        self.assertion = assertion


# After a lost context, every CUDA object freed touches the context again, and a C++
# destructor that fails there aborts the process (a core dump): what the failed window
# held (the error's frames, the marks) is kept here, never freed, until the process ends.
KEPT: list[object] = []


def context_lost(e: BaseException | None) -> bool:
    """Whether `e`, or an exception it was raised from, lost the CUDA context."""
    while e is not None:
        if isinstance(e, ReplayFailed) and e.context_lost:
            return True
        if is_cuda_error(e) and cuda_in_use():
            return True
        e = e.__cause__
    return False


def is_cuda_error(e: BaseException | None) -> bool:
    """torch's AcceleratorError (a CUDA error), or the RuntimeError older torch raised."""
    if e is None:
        return False
    torch = sys.modules.get("torch")
    accel = getattr(torch, "AcceleratorError", None) if torch is not None else None
    if accel is not None and isinstance(e, accel):
        return True
    return isinstance(e, RuntimeError) and str(e).startswith("CUDA error")


def cuda_in_use() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


def sync() -> None:
    """Wait for the device, where CUDA is in use (a stand-in graph on the CPU has none)."""
    if cuda_in_use():
        sys.modules["torch"].cuda.synchronize()


@dataclass(eq=False)
class Replayer:
    """A graph (anything with `replay()`) to replay in windows. `reset`: what returns the
    step to its start (capture/state/steps.py `start_of`: its reset, then its feed of call 0);
    `repeatability`: what its warm-ups showed (capture/state/steps.py), None for our graphs."""

    graph: object
    name: str
    reset: Callable[[], object] | None = None
    repeatability: object | None = None
    replays: int = 0  # replays so far, in all
    since_reset: int = 0
    most_since_reset: int = 0  # the longest run from a reset (or from the start)
    marks: Marks | None = None  # which replay trips an error (capture/replay/progress.py)

    def replay(self, n: int = 1) -> None:
        for _ in range(n):
            self._count()
            self.graph.replay()
            if self.marks is not None:
                self.marks.mark()

    def replay_host_ns(self) -> int:
        """One replay, and the CPU time of its launch call in ns: the clock is read around
        the graph's own `replay()` alone, the counting outside it (capture/replay/host.py
        syncs before each)."""
        self._count()
        t0 = time.perf_counter_ns()
        self.graph.replay()
        return time.perf_counter_ns() - t0

    def _count(self) -> None:
        self.replays += 1  # counted as it is asked for: a launch may raise
        self.since_reset += 1
        self.most_since_reset = max(self.most_since_reset, self.since_reset)

    @contextlib.contextmanager
    def window(self, what: str) -> Iterator[Replayer]:
        """One run of replays, `what` naming it in an error ("timed trial 3 of 30")."""
        first = self.replays + 1
        held = held_stderr() if self.marks is not None else contextlib.nullcontext([])
        try:
            with held as said:
                if self.reset is not None:
                    self.reset()
                    self.since_reset = 0
                    sync()
                yield self
                sync()
        except Exception as e:
            if not is_cuda_error(e):
                raise
            failed = self.error(what, first, e, said)
            if failed.context_lost:
                KEPT.append(failed)
            raise failed from e

    def error(
        self, what: str, first: int, e: BaseException, said: list[str] | None = None
    ) -> ReplayFailed:
        """The ReplayFailed a window raises for CUDA error `e` in replays `first` on (for
        a loop that cannot end in a window's sync, check's soak waits on events); `said`:
        the device assertions stderr showed."""
        lost = cuda_in_use()
        tripped = None
        if self.marks is not None:
            KEPT.append(self.marks)  # pinned memory with a pending copy: never freed now
            done = self.marks.done()
            if done < self.replays:
                tripped = done + 1 - (first - 1)
        assertion = said[0] if said else None
        line = self._line(what, first, e, tripped, assertion)
        return ReplayFailed(line, context_lost=lost, tripped=tripped, assertion=assertion)

    def finish(self) -> None:
        """After the last window: the step back in its starting state."""
        if self.reset is not None:
            with self.window("the closing reset"):
                pass

    def _line(
        self,
        what: str,
        first: int,
        e: BaseException,
        tripped: int | None = None,
        assertion: str | None = None,
    ) -> str:
        last = self.replays
        if tripped is not None:
            where = (
                f"replay {tripped} of this window (replay {first + tripped - 1} of this graph) "
                f"is the first that did not finish: the replays before it ran to their end, "
                f"as the device counted them"
            )
        elif last >= first:
            where = (
                f"replays {first} to {last} of this graph; CUDA reports an error at the next "
                f"sync, so it came at or before replay {last}"
            )
        else:
            where = "before any replay of it: in the step's reset, or earlier work"
        if assertion is not None:
            where += f"; the device assertion: `{assertion}`"
        rep = self.repeatability
        has_reset = rep.reset if rep is not None else self.reset is not None  # not a feed alone
        if not has_reset:
            cause = (
                "a step whose state advances at every replay (a position, a cache) ran past "
                "the end of a buffer: give it a step.reset (docs/steps-and-check.md)"
            )
        else:
            cause = (
                "the step's reset does not return all of its state to the start, or its "
                f"buffers hold fewer than the {self.most_since_reset} replays a window takes"
            )
        first_line = (str(e).splitlines() or [""])[0]
        return (
            f"a CUDA error replaying the graph of {self.name} in {what} ({where}): "
            f"{type(e).__name__}: {first_line}. Likely cause: {cause}. The CUDA context is "
            "lost; nothing was written"
        )


def as_replayer(graph: torch.cuda.CUDAGraph | Replayer, name: str) -> Replayer:
    return graph if isinstance(graph, Replayer) else Replayer(graph, name)
