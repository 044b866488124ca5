"""The built-in round's variants profiled: every build captured fresh, profiled under CUPTI
(capture/profile/run.py), and timed as `replay` times rounds, so that each variant pair's
predicted saving stands beside the measured one.

Everything here syncs the device and needs CUDA.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from graph_harness.capture.environment import environment, now
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.activities import ProfileError, profiled
from graph_harness.capture.profile.document import ProfileResult
from graph_harness.capture.profile.fit import with_bases
from graph_harness.capture.profile.nodes import Window, profile_windows
from graph_harness.capture.profile.run import (
    Progress,
    calibrate,
    host_launches,
    profile_graphs,
    settings_options,
)
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.round.count import CountedRound, count_round
from graph_harness.capture.round.params import RoundParams
from graph_harness.capture.round.pricing import saving_pairs
from graph_harness.capture.round.timing import measure_rounds
from graph_harness.capture.text import plural


def profile_rounds(
    params: RoundParams,
    variants: Sequence[str],
    settings: ProfileSettings | None = None,
    *,
    timed: bool = True,
    pdl: bool = False,
    progress: Progress = None,
) -> ProfileResult:
    """Profile each variant's round in every build. `timed`: the builds are also timed as
    `replay` times rounds (measure_rounds: interleaved trials), which gives the measured
    round times and, for two or more variants, the measured savings the profiles'
    predictions are set against (pricing.saving_pairs). Syncs."""
    settings = settings or ProfileSettings()
    variants = list(variants)
    windows: dict[str, list[Window]] = {v: [] for v in variants}
    first: dict[str, NodeExport] = {}

    def profile_build(build: int, rounds: dict[str, CountedRound]) -> None:
        for v, counted in rounds.items():
            first.setdefault(v, counted.export)
            if first[v].structure() != counted.export.structure():
                raise ProfileError(f"{v}: build {build} captured another graph than build 0")
        graphs = {v: (c.captured.graph, c.export) for v, c in rounds.items()}
        if timed and build == 0:  # timed plain, before any profiler session (they read high
            # after one: capture/profile/activities.py profiled)
            plain = {v: c.captured.graph for v, c in rounds.items()}
            after.append(profiled())
            host.append(host_launches(plain, settings, progress))
        for v, ws in profile_graphs(graphs, settings, build, settings.builds, progress).items():
            windows[v] += ws

    host: list[pd.DataFrame | None] = []
    after: list[bool] = []  # whether a profiler session came before the host launches
    trials = None
    if timed:
        if progress:
            progress(f"timing and profiling {plural(len(variants), 'round')}")
        trials, _ = measure_rounds(
            params, variants, settings.timing(), pdl=pdl, after_build=profile_build
        )
    else:
        for build in range(settings.builds):
            pool = torch.cuda.graph_pool_handle()
            rounds = {v: count_round(params, v, "cuda", graph_pool=pool, pdl=pdl) for v in variants}
            profile_build(build, rounds)
            del rounds
    excess = calibrate(first.values(), settings, progress)
    profiles = {v: profile_windows(v, first[v], windows[v]) for v in variants}
    profiles = with_bases(profiles, trials, excess)
    return ProfileResult(
        profiles=profiles,
        excess=excess,
        round_trials=trials,
        host_trials=pd.concat(host, ignore_index=True)
        if any(h is not None for h in host)
        else None,
        pairs=saving_pairs(variants) if len(variants) > 1 else [],
        params=params.as_dict(),
        env=environment(torch.device("cuda")),
        created=now(),
        options={
            "pdl": pdl,
            "timed": timed,
            **settings_options(settings),
            "host_launch_after_profiler": any(after),
        },
    )
