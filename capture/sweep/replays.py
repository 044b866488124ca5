"""A sweep's timing and leak check: every size's graph replayed through a guarded
Replayer from its reset, trials interleaved across sizes; then each replayed on, its pool
read, for what it grows by."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import torch

from graph_harness.capture.replay.guard import Replayer
from graph_harness.capture.replay.host import time_launches_us
from graph_harness.capture.replay.timing import time_replays_us
from graph_harness.capture.state.steps import start_of
from graph_harness.capture.sweep.document import size_name
from graph_harness.capture.sweep.settings import SweepSettings
from graph_harness.capture.sweep.sizes import Size, pool_reserved


@contextmanager
def steady(own: list[Size]) -> Iterator[None]:
    """The replays in this block, of a step that captures its own graphs, checked to be
    its steady calls (capture/record/steps.py StepCalls.steady)."""
    with ExitStack() as stack:
        for s in own:
            if s.calls is not None:
                stack.enter_context(s.calls.steady(f"the sweep's replays of batch {s.batch}"))
        yield


def replayer(s: Size) -> Replayer:
    return Replayer(
        s.calls if s.calls is not None else s.counted.captured.graph,
        f"batch {s.batch}",
        reset=start_of(s.step),
        repeatability=s.watch.repeatability,
    )


def timed(
    own: list[Size], settings: SweepSettings
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each size's replay time per trial (CUDA events), and its host launch time per trial
    (capture/replay/host.py: single launches from an idle device; empty where
    `settings.host_launches` is 0), trials interleaved across sizes."""
    runs = {size_name(s.batch): replayer(s) for s in own}
    times = time_replays_us(
        runs, replays=settings.replays, trials=settings.trials, warmup=settings.warmup
    )
    host: dict[str, list[float]] = {}
    if settings.host_launches:
        host = time_launches_us(
            runs, trials=settings.trials, launches=settings.host_launches, warmup=1
        )
    for r in runs.values():
        r.finish()
    return times, host


def leak(s: Size, settings: SweepSettings) -> tuple[int, int]:
    """Bytes the graph's pool, and the device's memory in use, grew by over
    `leak_replays` replays (in runs from the step's reset and feed) after the first. A
    replay itself allocates nothing from the pool; what a reset or a feed allocates and
    keeps shows in the second figure."""
    r = replayer(s)
    with r.window("the leak check's first replay"):
        r.replay(1)
    first = pool_reserved(s)
    device_first = torch.cuda.memory_allocated()
    done = 0
    while done < settings.leak_replays:  # in runs from the reset, as the timing replays
        n = min(settings.replays, settings.leak_replays - done)
        with r.window("the leak check's replays"):
            r.replay(n)
        done += n
    r.finish()
    pool = pool_reserved(s) - first
    return pool, torch.cuda.memory_allocated() - device_first
