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
from graph_harness.capture.rows import frame
from graph_harness.capture.stats import RoundTrial


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

    Each build constructs and captures every configuration afresh while every earlier
    build's rounds and graphs are still held (memory: builds x configurations x the round's
    pool and graph), so that none of its buffers can land where an earlier build's did.
    Trials within a build are interleaved; savings() pools the builds. Why (placement moves
    a round's time) and why not spacers: docs/builtin-round.md, "Builds held while timing"."""
    settings = settings or ReplaySettings()
    rows, exports = [], {}
    held = []  # every build's rounds and graphs, until all are timed
    for build in range(settings.builds):
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
        rows += [RoundTrial(v, build, t, x) for v, ts in times.items() for t, x in enumerate(ts)]
        if after_build is not None:
            after_build(build, keep)
        held.append((graphs, keep))
    del held
    return frame(rows, RoundTrial), exports
