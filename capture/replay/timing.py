"""Timing captured work the way `triton.testing` does: warm up, CUDA events, many trials,
quantiles; tiny work is unrolled many times into one graph and divided.

All times are microseconds as Python floats, kept at full precision.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from graph_harness.capture.graph.capture import capture_graph
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.replay.guard import Replayer, as_replayer
from graph_harness.capture.replay.settings import ReplaySettings


@dataclass(frozen=True)
class Quantiles:
    median: float
    p20: float
    p80: float
    trials: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> Quantiles:
        xs = sorted(samples)
        return cls(statistics.median(xs), _quantile(xs, 0.2), _quantile(xs, 0.8), tuple(samples))


def _quantile(xs: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default).
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def capture_unrolled(
    fn: Callable[[], object],
    calls: int,
    *,
    graph_pool: tuple[int, int] | None = None,
    warmup: int = StepSettings.warmup,
) -> torch.cuda.CUDAGraph:
    """Capture `calls` back-to-back calls of `fn` into one graph (syncs the device), by
    `capture.graph.capture.capture_graph`: the unrolled calls are warmed up `warmup` times on a
    side stream first, so lazy initialization never lands inside the capture. The graph
    is kept (`keep_graph=True`), so its nodes can be read; replay instantiates it."""

    def unrolled() -> None:
        for _ in range(calls):
            fn()

    return capture_graph(unrolled, warmup=warmup, graph_pool=graph_pool).graph


def time_replays_us(
    graphs: dict[str, torch.cuda.CUDAGraph | Replayer],
    *,
    replays: int,
    trials: int,
    warmup: int = ReplaySettings.warmup,
) -> dict[str, list[float]]:
    """Per-trial time of one replay of each graph, in us (syncs the device).

    Each trial times `replays` back-to-back replays between two CUDA events. Trials are
    interleaved across graphs (A B C, C B A, A B C, ...) so drift hits all alike. Every
    run of replays is a window (capture/replay/guard.py): a step with a reset is reset
    before it, outside the timed span, and a CUDA error in it is one line."""
    runs = {n: as_replayer(g, n) for n, g in graphs.items()}
    names = list(runs)
    for name in names:
        with runs[name].window("the timing warm-up") as r:
            r.replay(warmup)
    out: dict[str, list[float]] = {n: [] for n in names}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for t in range(trials):
        order = names if t % 2 == 0 else names[::-1]
        for name in order:
            with runs[name].window(f"timed trial {t + 1} of {trials}") as r:
                start.record()
                r.replay(replays)
                end.record()
                end.synchronize()
            out[name].append(start.elapsed_time(end) * 1e3 / replays)
    return out
