"""Statistics of replay timings (no GPU needed): per-node fits with bootstrap intervals,
and savings between paired, interleaved series with theirs."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from graph_harness.capture.rows import columns

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclass(frozen=True)
class RoundTrial:
    """What round timing records (capture/round/timing.py measure_rounds): one trial of a
    variant's replays in one build, its replay's time."""

    variant: str
    build: int
    trial: int
    us: float  # one replay, the trial's mean


ROUND_TRIAL_COLUMNS = columns(RoundTrial)


@dataclass(frozen=True)
class Fit:
    slope: float  # us per node
    intercept: float  # us per replay at zero nodes
    slope_lo: float  # 95% bootstrap interval
    slope_hi: float
    intercept_lo: float
    intercept_hi: float
    r2: float
    points: int


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    xm, ym = x.mean(), y.mean()
    sxx = ((x - xm) ** 2).sum()
    if sxx == 0:
        raise ValueError("a fit needs at least two distinct chain lengths")
    slope = ((x - xm) * (y - ym)).sum() / sxx
    return float(slope), float(ym - slope * xm)


def fit_chain(
    nodes: Sequence[float],
    trials: Sequence[Sequence[float]],
    *,
    boot: int = 2000,
    seed: int = 0,
) -> Fit:
    """Least-squares fit of replay time against node count.

    `nodes[i]` is chain i's node count; `trials[i][t]` its time (us) in trial t. The
    bootstrap resamples whole trials (a trial measured every chain length at one moment,
    so its points move together with drift) and refits; the interval is the 2.5 and 97.5
    percentiles."""
    x = np.asarray(nodes, dtype=float)
    y = np.asarray(trials, dtype=float)  # [lengths, trials]
    if y.ndim != 2 or y.shape[0] != len(x):
        raise ValueError(f"trials must be [len(nodes)={len(x)}, trials], got {y.shape}")
    n_trials = y.shape[1]
    if n_trials < 2:
        raise ValueError("a bootstrap needs at least two trials")
    xs = np.repeat(x, n_trials)
    slope, intercept = _ols(xs, y.reshape(-1))
    pred = intercept + slope * xs
    ss_res = ((y.reshape(-1) - pred) ** 2).sum()
    ss_tot = ((y.reshape(-1) - y.mean()) ** 2).sum()
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_trials, size=(boot, n_trials))
    xb = np.repeat(x, n_trials)
    slopes, intercepts = np.empty(boot), np.empty(boot)
    for b in range(boot):
        slopes[b], intercepts[b] = _ols(xb, y[:, picks[b]].reshape(-1))
    lo, hi = np.percentile(slopes, [2.5, 97.5])
    ilo, ihi = np.percentile(intercepts, [2.5, 97.5])
    return Fit(slope, intercept, float(lo), float(hi), float(ilo), float(ihi), float(r2), xs.size)


def saving_interval(
    a_us: Sequence[float] | Sequence[Sequence[float]],
    b_us: Sequence[float] | Sequence[Sequence[float]],
    *,
    boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% bootstrap interval of the saving median(a) - median(b).

    One series per side, or one per build (`[builds][trials]`); the saving is then the
    median over builds of each build's difference of medians. Trial t of `a` and of `b`
    ran back to back (time_replays_us interleaves them), so trials are resampled jointly
    and drift shared by a pair stays shared; builds are resampled too, so the interval
    carries the spread between builds (where the buffers landed), which one build's
    trials cannot show."""
    a = np.asarray(a_us, dtype=float)
    b = np.asarray(b_us, dtype=float)
    a = a[None, :] if a.ndim == 1 else a
    b = b[None, :] if b.ndim == 1 else b
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"a and b must be paired series ([trials] or [builds][trials]), got shapes "
            f"{np.shape(a_us)}, {np.shape(b_us)}"
        )
    n_builds, n_trials = a.shape
    if n_trials < 2:
        raise ValueError("a bootstrap needs at least two trials")
    rng = np.random.default_rng(seed)
    pick_b = rng.integers(0, n_builds, size=(boot, n_builds))
    pick_t = rng.integers(0, n_trials, size=(boot, n_builds, n_trials))
    ra = np.take_along_axis(a[pick_b], pick_t, axis=2)  # [boot, builds, trials]
    rb = np.take_along_axis(b[pick_b], pick_t, axis=2)
    diffs = np.median(np.median(ra, axis=2) - np.median(rb, axis=2), axis=1)
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(lo), float(hi)


def median_by_variant(trials: pd.DataFrame) -> pd.Series:
    """Each variant's median `us` over its trials (rounds or host launches), indexed by
    variant."""
    return trials.groupby("variant")["us"].median()


def round_series(round_trials: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each variant's round times as `[builds][trials]`, the shape saving_interval and
    saving_point take."""
    missing = [c for c in ROUND_TRIAL_COLUMNS if c not in round_trials]
    if missing:
        raise ValueError(
            f"round trials lack columns {missing}; measure_rounds gives {ROUND_TRIAL_COLUMNS}"
        )
    return {
        v: g.pivot(index="build", columns="trial", values="us").to_numpy()
        for v, g in round_trials.groupby("variant")
    }


def saving_point(a_us: ArrayLike, b_us: ArrayLike) -> float:
    """The saving: median over builds of each build's difference of medians."""
    a = np.atleast_2d(np.asarray(a_us, dtype=float))
    b = np.atleast_2d(np.asarray(b_us, dtype=float))
    return float(np.median(np.median(a, axis=1) - np.median(b, axis=1)))


def median_interval(
    samples: Sequence[float] | np.ndarray, *, boot: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """95% bootstrap interval of the median of `samples` ([n], or [n, k]: k series resampled
    together by row, each row one moment's sample of all k). NaN (not measured) is left
    out of each median; a column with nothing measured gives NaN. Returns (lo, hi), each
    shaped like one row."""
    x = np.asarray(samples, dtype=float)
    if x.shape[0] < 2:
        raise ValueError("a bootstrap needs at least two samples")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, x.shape[0], size=(boot, x.shape[0]))
    median = np.nanmedian if np.isnan(x).any() else np.median  # the first is 2x slower
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices stay NaN
        meds = np.stack([median(x[p], axis=0) for p in picks])
        lo, hi = np.nanpercentile(meds, [2.5, 97.5], axis=0)
    return lo, hi
