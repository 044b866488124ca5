"""CUPTI's excess per node fitted to a graph's own event timing, and the choice of which
excess each graph's net figures use (its **basis**): "timing" (its median profiled period
less its median event-timed one, spread over its activity nodes) where it was event-timed,
else "chains" (capture/profile/calibration.py), or none. Its net period then matches its
timed one by construction; the test is a pair's, priced at A's excess (pairs.py). Why this
basis first, and its limits: docs/profile.md, "The excess fitted to a graph's own timing"."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from graph_harness.capture.profile.calibration import CALIBRATED_TYPES, Excess
from graph_harness.capture.profile.nodes import CHAINS, TIMING, VariantProfile
from graph_harness.capture.stats import median_interval


@dataclass(frozen=True)
class TimingFit:
    """One graph's excess per node from its own profiled and event-timed periods (median
    per replay, with 95% bootstrap intervals)."""

    nodes: int
    period_us: float
    period_lo: float
    period_hi: float
    timed_us: float
    timed_lo: float
    timed_hi: float

    @property
    def per_node(self) -> float:
        return (self.period_us - self.timed_us) / self.nodes

    @property
    def interval(self) -> tuple[float, float]:
        """Its 95% interval, the corners of the two periods' intervals (conservative)."""
        return (
            (self.period_lo - self.timed_hi) / self.nodes,
            (self.period_hi - self.timed_lo) / self.nodes,
        )

    @staticmethod
    def per_type(x: float) -> dict[str, float]:
        return dict.fromkeys(CALIBRATED_TYPES, x)


def fit_to_timing(profile: VariantProfile, timed_us: np.ndarray) -> TimingFit | None:
    """The fit of `profile` to its event-timed replays (`timed_us`, us per replay, one per
    trial), over its sampled replays that matched every node; None where it cannot be
    made: no activity node, a programmatic (PDL) node (its gap is no launch's), fewer than
    two timed trials or fully matched replays (no interval)."""
    active = set(profile.plan.nodes)
    nodes = [n for n in profile.export.nodes if n["index"] in active]
    timed = np.asarray(timed_us, dtype=float)
    r = profile.replays
    # the replays whose every node matched: those the net period is the median of
    whole = (r.unmatched_activities == 0) & (r.unmatched_nodes == 0)
    periods = r.period_us[whole].to_numpy(dtype=float)
    if not nodes or any(n.get("programmatic_deps") for n in nodes):
        return None
    if any(n["type"] not in CALIBRATED_TYPES for n in nodes) or len(timed) < 2 or len(periods) < 2:
        return None  # (two of each for an interval)
    p_lo, p_hi = _interval(periods)
    t_lo, t_hi = _interval(timed)
    return TimingFit(
        nodes=len(nodes),
        period_us=float(np.median(periods)),
        period_lo=p_lo,
        period_hi=p_hi,
        timed_us=float(np.median(timed)),
        timed_lo=t_lo,
        timed_hi=t_hi,
    )


def _interval(x: np.ndarray) -> tuple[float, float]:
    lo, hi = median_interval(x)
    return float(lo), float(hi)


def with_bases(
    profiles: dict[str, VariantProfile],
    trials: pd.DataFrame | None,
    chains: Excess | None,
) -> dict[str, VariantProfile]:
    """Each profile made again with the excess its net figures use: fitted to its own
    event timing (`trials`: variant, us per replay) where it was timed and a fit can be
    made (else, a PDL node or too few trials, as if untimed), else the calibration
    chains' where they measured anything, else none."""
    out = {}
    for name, p in profiles.items():
        timed = None if trials is None else trials[trials.variant == name].us.to_numpy()
        fit = fit_to_timing(p, timed) if timed is not None else None
        if fit is not None:
            lo, hi = fit.interval
            out[name] = replace(
                p,
                excess=fit.per_type(fit.per_node),
                excess_basis=TIMING,
                excess_bounds=[fit.per_type(lo), fit.per_type(hi)],
            )
        elif chains is not None and chains.per_node:
            out[name] = replace(
                p, excess=dict(chains.per_node), excess_basis=CHAINS, excess_bounds=chains.bounds()
            )
        else:
            out[name] = replace(p, excess={}, excess_basis="", excess_bounds=[])
    return out
