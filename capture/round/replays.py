"""`run_replays`: the replay document of the built-in round, measured whole: the chains
that price a node (the round's own calls among them), every variant timed over fresh
builds, and each change's saving priced against the one measured."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict

import torch

from graph_harness.capture.environment import environment, now
from graph_harness.capture.replay.chains import measure_chains
from graph_harness.capture.replay.document import ReplayResult
from graph_harness.capture.replay.host import HOST_KINDS, measure_host_launch
from graph_harness.capture.replay.kinds import chain_kinds
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.round import chains as round_chains
from graph_harness.capture.round.params import RoundParams
from graph_harness.capture.round.pricing import PRICE_KINDS, savings
from graph_harness.capture.round.timing import measure_rounds
from graph_harness.capture.text import plural


def run_replays(
    params: RoundParams,
    variants: Sequence[str],
    *,
    kinds: Sequence[str] | None = None,
    settings: ReplaySettings | None = None,
    pdl: bool = False,
    host: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ReplayResult:
    """Chains, fits, the host side of a launch (capture/replay/host.py: `host`, for the
    measured kinds among HOST_KINDS), round timing and savings in one document (syncs;
    needs CUDA).

    `kinds` defaults to every registered kind without PDL, the round's included. When
    rounds are timed, the chains their predictions price nodes with (PRICE_KINDS) are
    measured too, whether or not `kinds` names them."""
    settings = settings or ReplaySettings()
    round_chains.register()  # the round's kinds, measured and priced with below
    kinds = list(chain_kinds() if kinds is None else kinds)
    if variants:
        kinds += [k for k in PRICE_KINDS if k not in kinds]
    chain_trials, fits = measure_chains(kinds, settings, progress=progress)
    host_trials = host_fits = None
    host_kinds = [k for k in HOST_KINDS if k in kinds]
    if host and host_kinds:
        host_trials, host_fits = measure_host_launch(
            host_kinds,
            lengths=settings.host_lengths,
            trials=settings.trials,
            launches=settings.launches,
            warmup=settings.warmup,
            progress=progress,
        )
    round_trials = sav = None
    if variants:
        if progress:  # each phase named as it starts
            progress(
                f"timing {plural(len(variants), 'round')} over {plural(settings.builds, 'build')}"
            )
        round_trials, exports = measure_rounds(params, variants, settings, pdl=pdl)
        sav = savings(round_trials, exports, fits, chain_trials=chain_trials)
        sav["ratio_shapes"] = sav.measured_us / sav.predicted_shapes_us
    return ReplayResult(
        chain_trials=chain_trials,
        fits=fits,
        round_trials=round_trials,
        savings=sav,
        params=params.as_dict(),
        env=environment(torch.device("cuda")),
        created=now(),
        # The settings that shaped the timings (the lengths are in chain_trials).
        options={
            "pdl": pdl,
            **{k: v for k, v in asdict(settings).items() if k not in ("lengths", "host_lengths")},
        },
        host_trials=host_trials,
        host_fits=host_fits,
    )
