"""Rounds timed: every variant built afresh several times, its graph replayed interleaved
with the others', so drift and placement hit all alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.replay.timing import time_replays_us
from graph_harness.capture.round.count import CountedRound, count_round
from graph_harness.capture.round.params import RoundParams


def measure_rounds(
    params: RoundParams,
    variants: Sequence[str],
    settings: ReplaySettings | None = None,
    *,
    pdl: bool = False,
    after_build: Callable[[int, dict[str, CountedRound]], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, NodeExport]]:
    """Trial rows (variant, build, trial, us per round) of interleaved replays, and the
    exports (of the first build; every build captures the same structure). Syncs.
    `after_build(build, rounds)` runs after each build is timed, its rounds still alive
    (capture/profile/run.py profiles them there)."""
    configs = {v: (v, pdl) for v in variants}
    return measure_round_configs(params, configs, settings, after_build=after_build)


def measure_round_configs(
    params: RoundParams,
    configs: dict[str, tuple[str, bool]],
    settings: ReplaySettings | None = None,
    *,
    after_build: Callable[[int, dict[str, CountedRound]], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, NodeExport]]:
    """Like measure_rounds, for labelled (variant, pdl) configurations timed together.

    Each build constructs and captures every configuration afresh, after returning the
    last build's memory to the driver and behind spacers of different sizes, so its
    buffers land elsewhere: on the H200 where a round's data lives moves its time by up to
    ~35 us, 0.5-0.7% of a round (BENCHMARKS.md, "Placement"), more than most single changes
    save. Trials
    within a build are interleaved; savings() pools the builds."""
    settings = settings or ReplaySettings()
    rows, exports = [], {}
    for build in range(settings.builds):
        torch.cuda.empty_cache()  # the last build's blocks must not simply be reused
        # One spacer per pool of the caching allocator, each of a size of this build's. A
        # round's 32 MiB chunks get segments of their own straight from cudaMalloc, so only
        # a spacer with a segment of its own size moves them: requests of 10 MiB and over
        # are rounded to 2 MiB and get exactly that, while anything under 10 MiB takes a
        # 20 MiB segment whatever its size (session 20: behind such spacers the round's
        # first chunk sat at one address in all three builds). Requests of 1 MiB and less
        # come from 2 MiB segments of a pool of their own, which the large spacer never
        # moves; the small one's size, 4 KiB x (1 + 37 b mod 255), repeats only after 255
        # builds (37 and 255 share no factor). benchmarks/experiments/spacer_probe.py.
        spacer = [
            torch.empty((10 + 2 * (build % 64)) << 20, dtype=torch.uint8, device="cuda"),
            torch.empty(4096 * (1 + 37 * build % 255), dtype=torch.uint8, device="cuda"),
        ]
        graphs = {}
        graph_pool = torch.cuda.graph_pool_handle()
        keep = {}
        for v, (variant, pdl) in configs.items():
            counted = count_round(params, variant, "cuda", graph_pool=graph_pool, pdl=pdl)
            counted.captured.graph.instantiate()
            graphs[v] = counted.captured.graph
            exports.setdefault(v, counted.export)
            keep[v] = counted  # the round's buffers must outlive its graph
        times = time_replays_us(
            graphs,
            replays=settings.round_replays,
            trials=settings.trials,
            warmup=settings.warmup,
        )
        rows += [
            dict(variant=v, build=build, trial=t, us=x)
            for v, ts in times.items()
            for t, x in enumerate(ts)
        ]
        if after_build is not None:
            after_build(build, keep)
        del graphs, keep, spacer
    return pd.DataFrame(rows), exports
