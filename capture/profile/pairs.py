"""A change A -> B priced from two graphs' profiles (capture/profile/nodes.py), set against
its measured saving, and where the saving comes from by group and kernel. A saving is
priced as the measured savings are (capture/stats.py): per build the difference of the
median replay costs, then the median over builds, with its bootstrap interval. Computes;
the tables that show it are reports/profile_tables.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from graph_harness.capture.profile.calibration import PERIOD_TOLERANCE
from graph_harness.capture.profile.nodes import CHAINS, VariantProfile
from graph_harness.capture.stats import (
    median_by_variant,
    round_series,
    saving_interval,
    saving_point,
)

TOLERANCE = 0.03  # a priced saving must land within 3% of the measured one
# The verdicts: only "pass" passes. "cannot tell" where the measurement cannot decide (a
# prediction NaN, the excess's interval straddling the tolerance, a graph whose net period
# is off its timed one, a measured saving not known to within the tolerance); "not judged"
# where there is no net prediction: the raw one runs high by the profiler's own cost by
# construction, so judging it would be judging that.
PairVerdict = Literal["pass", "fail", "cannot tell", "not judged", "not measured"]
PASS, FAIL, CANNOT_TELL, NOT_JUDGED, NOT_MEASURED = get_args(PairVerdict)
Basis = Literal["timing", "chains", "raw"]  # what the net figures take the excess from
HOST = "host"  # the verdict's basis where both launches are exposed: the host launches


@dataclass(frozen=True, kw_only=True)
class PricedPair:
    """A saving A -> B priced from two profiles, against the measured one: one row of the
    profile's pair table (price_pair says how each figure is made)."""

    a: str
    b: str
    removed_nodes: int
    predicted_us: float  # raw: with the profiler's own cost in it
    predicted_lo: float
    predicted_hi: float
    predicted_net_us: float  # net of A's excess per node
    predicted_net_lo: float
    predicted_net_hi: float
    net_low: float  # the net saving at the excess interval's corners
    net_high: float
    measured_us: float
    measured_lo: float
    measured_hi: float
    error: float
    error_net: float
    basis: Basis
    b_net_vs_timed: float  # B's period net of A's excess against B's event-timed one
    # Launches (price_pair's `host_trials`): each graph's exposure verdict, the host launch
    # saving (A's plain host launch less B's) and, where both launches are exposed, the
    # saving priced from the host launches, which the verdict then judges.
    launch_a: str
    launch_b: str
    host_saving_us: float
    host_saving_lo: float
    host_saving_hi: float
    predicted_launch_us: float
    within_tolerance: bool
    measured_in_interval: bool
    verdict: PairVerdict
    why: str
    passed: bool


def price_pair(
    a: VariantProfile,
    b: VariantProfile,
    round_trials: pd.DataFrame | None = None,
    host_trials: pd.DataFrame | None = None,
    *,
    host_after_profiler: bool = False,
) -> PricedPair:
    """The saving A -> B predicted from the profiles (summed node costs per replay: per
    build the difference of medians, median over builds; bootstrap interval), raw and net
    of the profiler (`_predicted`), set against the measured one (event-timed interleaved
    replays, `round_trials` with the columns measure_rounds gives) where given. Judged on
    the net prediction (`_verdict`), or, where both launches are exposed, on the host
    launch saving (`_judged_on_host`); where one is exposed and the other not, "cannot
    tell"."""
    predictions, raw, net, corners, basis = _predicted(a, b)
    measured, (mlo, mhi), off = _measured(a, b, round_trials, basis)
    host = _host_saving(a, b, host_trials)
    launches = _launches(a, b, host_trials)
    exposed = [x == "exposed" for x in launches]
    if all(exposed):  # the loop runs at the host's pace: priced by the host launches
        predicted, lo, hi = host
        verdict, why = _judged_on_host(measured, (mlo, mhi), host, host_after_profiler)
    else:  # judged on the net prediction; without one the raw one's shown, unjudged
        predicted, lo, hi = net if basis != "raw" else raw
        verdict, why = _verdict(basis, measured, (mlo, mhi), net, corners, off)
        if any(exposed) and verdict not in (NOT_MEASURED, NOT_JUDGED):
            verdict, why = CANNOT_TELL, _one_exposed(a.name, b.name, launches)
    within = abs(predicted - measured) <= TOLERANCE * abs(measured)
    inside = lo <= measured <= hi
    return PricedPair(
        **predictions,
        measured_us=measured,
        measured_lo=mlo,
        measured_hi=mhi,
        error=raw[0] / measured - 1 if measured else math.nan,
        error_net=net[0] / measured - 1 if measured else math.nan,
        basis=basis,
        b_net_vs_timed=off.get(b.name, math.nan),
        launch_a=launches[0],
        launch_b=launches[1],
        host_saving_us=host[0],
        host_saving_lo=host[1],
        host_saving_hi=host[2],
        predicted_launch_us=host[0] if all(exposed) else math.nan,
        within_tolerance=bool(within),
        measured_in_interval=bool(inside),
        verdict=verdict,
        why=why,
        passed=verdict == PASS,
    )


_Priced = tuple[float, float, float]  # a saving, its 95% interval


def _predicted(
    a: VariantProfile, b: VariantProfile
) -> tuple[dict[str, Any], _Priced, _Priced, list[float], str]:
    """The predicted saving's columns of a PricedPair; the raw and net savings, the net
    one at every corner of the excess's interval, and the basis of the net one.

    Net, both sides take A's excess per node (`a.excess`, on its basis, fit.py; also at
    every corner of its interval, `a.excess_bounds`): where A's is fitted to A's own
    timing, B's timing is then used only to judge the prediction, never to make it, and
    the prediction's error is exactly how far B's period net of A's excess lies from B's
    timed one (`b_net_vs_timed`)."""
    raw = _priced(a.cost_series, b.cost_series)
    basis = (a.excess_basis or CHAINS) if a.calibrated else "raw"
    if basis != "raw":
        net = _priced(a.net_cost_series, b.net_cost_series_at(a.excess))
        corners = [
            saving_point(*_paired(a.net_cost_series_at(c), b.net_cost_series_at(c)))
            for c in a.excess_bounds
        ]
    else:
        net, corners = (math.nan,) * 3, []
    predictions = dict(
        a=a.name,
        b=b.name,
        removed_nodes=len(a.plan.nodes) - len(b.plan.nodes),
        predicted_us=raw[0],
        predicted_lo=raw[1],
        predicted_hi=raw[2],
        predicted_net_us=net[0],
        predicted_net_lo=net[1],
        predicted_net_hi=net[2],
        net_low=min(corners, default=math.nan),
        net_high=max(corners, default=math.nan),
    )
    return predictions, raw, net, corners, basis


def _measured(
    a: VariantProfile, b: VariantProfile, round_trials: pd.DataFrame | None, basis: str
) -> tuple[float, tuple[float, float], dict[str, float]]:
    """The measured saving and its interval (NaN without both variants' round trials),
    and how far each side's period net of A's excess lies from its timed one."""
    measured = mlo = mhi = math.nan
    off = {}
    if round_trials is not None and {a.name, b.name} <= set(round_trials.variant):
        series = round_series(round_trials[round_trials.variant.isin([a.name, b.name])])
        measured = saving_point(series[a.name], series[b.name])
        mlo, mhi = saving_interval(series[a.name], series[b.name])
        for p in (a, b):
            timed = float(median_by_variant(round_trials)[p.name])
            net_period = p.period_net_at(a.excess) if basis != "raw" else math.nan
            off[p.name] = net_period / timed - 1 if timed else math.nan
    return measured, (mlo, mhi), off


def _judged_on_host(
    measured: float,
    measured_interval: tuple[float, float],
    host: _Priced,
    host_after_profiler: bool,
) -> tuple[PairVerdict, str]:
    """Both launches exposed (VariantProfile.exposure): priced and judged on the host launch
    saving alone (A's plain host launch less B's, paired by trial, with its interval). One
    exposed and the other not, no host launch times, or times taken after a profiler session
    (`host_after_profiler`): "cannot tell". Neither exposed: the host saving is shown, not
    used. Why: docs/profile.md, "A pair's verdicts"."""
    verdict, why = _verdict(HOST, measured, measured_interval, host, [], {})
    if math.isnan(host[0]) and verdict == CANNOT_TELL:
        why = "the host launches were not timed"
    elif host_after_profiler and verdict != NOT_MEASURED:
        verdict, why = (
            CANNOT_TELL,
            (
                "the host launches were timed after a profiler session in this process, "
                "which leaves them reading several times high"
            ),
        )
    return verdict, f"both launches exposed, priced by the host launch saving: {why}"


def _one_exposed(a: str, b: str, launches: tuple[str, str]) -> str:
    k = 0 if launches[0] == "exposed" else 1
    shown, other = (a, b)[k], (a, b)[1 - k]
    return (
        f"{shown}'s launch is exposed, {other}'s not (its verdict: {launches[1 - k]}): one "
        "side may run at the host's pace, the other at the device's, and neither price "
        "covers both"
    )


def _host_trials(p: VariantProfile, host_trials: pd.DataFrame | None) -> pd.Series:
    """A graph's host launch trials (us), by trial number."""
    if host_trials is None or not len(host_trials):
        return pd.Series(dtype=float)
    rows = host_trials[host_trials.variant == p.name]
    return rows.set_index("trial").us.astype(float)


def _host_saving(
    a: VariantProfile, b: VariantProfile, host_trials: pd.DataFrame | None
) -> tuple[float, float, float]:
    """A's host launch less B's (us): the difference of their medians over the trials
    both have, joined by trial number (each trial launched both, interleaved), with its
    95% interval (trials resampled in pairs); NaN where either was not timed."""
    both = pd.concat([_host_trials(a, host_trials), _host_trials(b, host_trials)], axis=1)
    both = both.dropna()
    if both.empty:
        return math.nan, math.nan, math.nan
    ta, tb = both.iloc[:, 0].to_numpy()[None, :], both.iloc[:, 1].to_numpy()[None, :]
    lo, hi = saving_interval(ta, tb) if len(both) >= 2 else (math.nan, math.nan)
    return saving_point(ta, tb), lo, hi


def _launches(
    a: VariantProfile, b: VariantProfile, host_trials: pd.DataFrame | None
) -> tuple[str, str]:
    out = []
    for p in (a, b):
        ts = _host_trials(p, host_trials)
        out.append(p.exposure(float(ts.median()) if len(ts) else None)[0])
    return out[0], out[1]


def _verdict(
    basis: str,
    measured: float,
    measured_interval: tuple[float, float],
    net: tuple[float, float, float],
    corners: Sequence[float],
    off: dict[str, float],
) -> tuple[PairVerdict, str]:
    """The verdict on the net prediction (`passed` is verdict == "pass"), taken at its point,
    both ends of its interval and every corner of the excess's: pass when all lie within
    TOLERANCE of the measured saving (point and both ends), fail when all lie more than
    TOLERANCE outside the measured interval, cannot tell otherwise (and, on the chains' basis,
    where A or B runs more than PERIOD_TOLERANCE off its timed period net of the excess).
    `measured_in_interval` is shown, not required: docs/profile.md, "A pair's verdicts"."""
    tol = f"{100 * TOLERANCE:.0f}%"
    if math.isnan(measured):
        return NOT_MEASURED, "no event-timed saving to judge it against"
    if basis == "raw":
        return NOT_JUDGED, "no net prediction (the profiler's own cost was not measured)"
    if any(math.isnan(x) for x in (*net, *corners, *measured_interval)):
        return CANNOT_TELL, "the net prediction, its interval or the measured one is unknown"
    # On A's own timing the prediction's error is B's period error itself (A's is zero by
    # construction): the saving is judged directly. On the chains' a graph they do not fit
    # leaves the prediction in doubt.
    loose = [n for n, x in off.items() if not abs(x) <= PERIOD_TOLERANCE]
    if basis == CHAINS and loose:
        return CANNOT_TELL, (
            f"net of A's excess, {' and '.join(loose)} ran more than "
            f"{100 * PERIOD_TOLERANCE:.0f}% off "
            + ("its event-timed period" if len(loose) == 1 else "their event-timed periods")
        )
    lo, hi = measured_interval
    ends = [*net, *corners]  # the point, its sampling interval, the excess interval's corners

    def near(x: float, m: float) -> bool:
        return abs(x - m) <= TOLERANCE * abs(m)

    # a pass holds wherever in its interval the measured saving is; a fail, too
    if all(near(x, m) for x in ends for m in (lo, measured, hi)):
        return PASS, f"within {tol} of the measured saving's whole interval, at every end"
    if not any(near(x, lo) or near(x, hi) or lo <= x <= hi for x in ends):
        return FAIL, f"more than {tol} outside the measured saving's interval, at every end"
    if all(near(x, measured) for x in ends):
        return CANNOT_TELL, (
            f"within {tol} of the measured saving, which is not known to {tol} "
            f"(its interval is {lo:.2f} to {hi:.2f} us)"
        )
    return CANNOT_TELL, (
        f"within {tol} of the measured saving at some ends of the prediction's intervals or "
        f"of the measured one ({lo:.2f} to {hi:.2f} us), not at others"
    )


def _paired(ta: np.ndarray, tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = min(ta.shape[1], tb.shape[1])
    return ta[:, :n], tb[:, :n]


def _priced(ta: np.ndarray, tb: np.ndarray) -> tuple[float, float, float]:
    """(saving, its 95% interval) from two graphs' [builds][samples] replay costs."""
    ta, tb = _paired(ta, tb)
    n = ta.shape[1]
    if not n or np.isnan(ta).any() or np.isnan(tb).any():
        return (saving_point(ta, tb) if n else math.nan), math.nan, math.nan
    lo, hi = saving_interval(ta, tb) if n >= 2 else (math.nan, math.nan)
    return saving_point(ta, tb), lo, hi
