"""A change A -> B priced from two graphs' profiles (capture/profile/nodes.py), set against
its measured saving, and where the saving comes from by group and kernel. A saving is
priced as the measured savings are (capture/stats.py): per build the difference of the
median replay costs, then the median over builds, with its bootstrap interval. Computes;
the tables that show it are reports/profile_tables.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from graph_harness.capture.profile.calibration import PERIOD_TOLERANCE
from graph_harness.capture.profile.nodes import VariantProfile
from graph_harness.capture.stats import round_series, saving_interval, saving_point

TOLERANCE = 0.03  # a priced saving must land within 3% of the measured one
PAIR_COLUMNS = ["a", "b", "removed_nodes", "predicted_us", "predicted_lo", "predicted_hi"]
PAIR_COLUMNS += ["predicted_net_us", "predicted_net_lo", "predicted_net_hi"]
PAIR_COLUMNS += ["net_low", "net_high"]  # the net saving at the excess interval's corners
PAIR_COLUMNS += ["measured_us", "measured_lo", "measured_hi", "error", "error_net", "basis"]
PAIR_COLUMNS += ["within_tolerance", "measured_in_interval", "verdict", "why", "passed"]

# The verdicts: only "pass" passes. "cannot tell" where the measurement cannot decide (a
# prediction NaN, the excess's interval straddling the tolerance, a graph whose net period
# is off its timed one); "not judged" where there is no net prediction: the raw one runs
# high by the profiler's own cost by construction, so judging it would be judging that.
PASS, FAIL, CANNOT_TELL, NOT_JUDGED, NOT_MEASURED = (
    "pass", "fail", "cannot tell", "not judged", "not measured"
)  # fmt: skip


def price_pair(
    a: VariantProfile,
    b: VariantProfile,
    round_trials: pd.DataFrame | None = None,
    bounds: Sequence[dict[str, float]] = (),
) -> dict[str, Any]:
    """The saving A -> B predicted from the profiles (summed node costs per replay: per
    build the difference of medians, median over builds; bootstrap interval), raw and net
    of the profiler (each replay's cost less its nodes' excess, where both graphs were
    calibrated; also at every corner of the excess's interval, `bounds`), set against the
    measured one (event-timed interleaved replays, `round_trials` with the columns
    measure_rounds gives) where given.

    The verdict (`verdict`, `why`; `passed` is verdict == "pass") is on the net prediction:
    pass when it lies within TOLERANCE of the measured saving at the point and at every
    corner, and the measured saving inside its interval; fail when it misses at the point
    and at every corner, or lies within at all of them with the measured saving outside its
    interval; cannot tell otherwise, and where a graph's net period is more than
    PERIOD_TOLERANCE from its event-timed one (the excess does not fit that graph)."""
    raw = _priced(a.cost_series, b.cost_series)
    basis = "net" if a.calibrated and b.calibrated else "raw"
    net = _priced(a.net_cost_series, b.net_cost_series) if basis == "net" else (math.nan,) * 3
    corners = [
        saving_point(*_paired(a.net_cost_series_at(c), b.net_cost_series_at(c))) for c in bounds
    ] if basis == "net" else []  # fmt: skip
    row: dict[str, Any] = dict(
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
    measured = mlo = mhi = math.nan
    off = {}
    if round_trials is not None and {a.name, b.name} <= set(round_trials.variant):
        series = round_series(round_trials[round_trials.variant.isin([a.name, b.name])])
        measured = saving_point(series[a.name], series[b.name])
        mlo, mhi = saving_interval(series[a.name], series[b.name])
        for p in (a, b):
            timed = float(round_trials[round_trials.variant == p.name].us.median())
            off[p.name] = p.period_net_us() / timed - 1 if timed else math.nan
    # judged on the net prediction; without one the raw one's figures are shown, unjudged
    predicted, lo, hi = net if basis == "net" else raw
    within = abs(predicted - measured) <= TOLERANCE * abs(measured)
    inside = lo <= measured <= hi
    verdict, why = _verdict(basis, measured, net, corners, within, inside, off)
    row.update(
        measured_us=measured,
        measured_lo=mlo,
        measured_hi=mhi,
        error=raw[0] / measured - 1 if measured else math.nan,
        error_net=net[0] / measured - 1 if measured else math.nan,
        basis=basis,
        within_tolerance=bool(within),
        measured_in_interval=bool(inside),
        verdict=verdict,
        why=why,
        passed=verdict == PASS,
    )
    return row


def _verdict(
    basis: str,
    measured: float,
    net: tuple[float, float, float],
    corners: Sequence[float],
    within: bool,
    inside: bool,
    off: dict[str, float],
) -> tuple[str, str]:
    tol = f"{100 * TOLERANCE:.0f}%"
    if math.isnan(measured):
        return NOT_MEASURED, "no event-timed saving to judge it against"
    if basis != "net":
        return NOT_JUDGED, "no net prediction (the profiler's own cost was not measured)"
    if any(math.isnan(x) for x in (*net, *corners)):
        return CANNOT_TELL, "the net prediction or its interval is unknown"
    loose = [n for n, x in off.items() if not abs(x) <= PERIOD_TOLERANCE]
    if loose:
        return CANNOT_TELL, (
            f"net of the profiler, {' and '.join(loose)} ran more than "
            f"{100 * PERIOD_TOLERANCE:.0f}% off its event-timed period"
        )
    at = [abs(x - measured) <= TOLERANCE * abs(measured) for x in corners]
    if within and all(at):
        if inside:
            return PASS, f"within {tol}, measured inside the interval"
        return FAIL, "measured outside the predicted interval"
    if not within and not any(at):
        return FAIL, f"off by more than {tol}"
    return CANNOT_TELL, f"within {tol} at some ends of the excess's interval, not at others"


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


BREAKDOWN_COLUMNS = ["a", "b", "part", "group", "type", "kernel", "nodes_a", "nodes_b"]
BREAKDOWN_COLUMNS += ["cost_a_us", "cost_b_us", "saving_us"]


def pair_breakdown(a: VariantProfile, b: VariantProfile) -> pd.DataFrame:
    """Where a saving A -> B comes from, by group and kernel (mean costs per replay): nodes
    only A has (`removed`), only B has (`added`), and nodes both have (`common`: the k-th
    node of one group, type and kernel in A against the k-th in B). A change that only
    removed nodes would show common rows near zero; the common rows that are not are the
    nodes whose cost the change moved. Rows sum to the mean-based predicted saving;
    sorted by |saving|."""
    sides = []
    for p in (a, b):
        s = p.nodes.assign(cost=p.nodes.dur_mean + p.nodes.gap_mean)
        s["kernel"] = s["kernel"].fillna("")
        s["k"] = s.groupby(["group", "type", "kernel"]).cumcount()
        sides.append(s.set_index(["group", "type", "kernel", "k"]).cost)
    both = pd.concat(sides, axis=1, keys=["a", "b"])
    both["part"] = np.where(
        both.a.notna() & both.b.notna(), "common", np.where(both.a.notna(), "removed", "added")
    )
    both = both.reset_index()
    out = (
        both.groupby(["part", "group", "type", "kernel"])
        .agg(
            nodes_a=("a", "count"),
            nodes_b=("b", "count"),
            cost_a_us=("a", "sum"),
            cost_b_us=("b", "sum"),
        )
        .reset_index()
    )
    out["saving_us"] = out.cost_a_us - out.cost_b_us
    out.insert(0, "b", b.name)
    out.insert(0, "a", a.name)
    out = out.reindex(out.saving_us.abs().sort_values(ascending=False).index)
    return out[BREAKDOWN_COLUMNS].reset_index(drop=True)
