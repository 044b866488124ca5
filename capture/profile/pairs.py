"""A change A -> B priced from two graphs' profiles (capture/profile/nodes.py), set against
its measured saving, and where the saving comes from by group and kernel. A saving is
priced as the measured savings are (capture/stats.py): per build the difference of the
median replay costs, then the median over builds, with its bootstrap interval. Computes;
the tables that show it are reports/profile_tables.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from graph_harness.capture.profile.nodes import VariantProfile
from graph_harness.capture.stats import round_series, saving_interval, saving_point

TOLERANCE = 0.03  # a priced saving must land within 3% of the measured one
PAIR_COLUMNS = ["a", "b", "removed_nodes", "predicted_us", "predicted_lo", "predicted_hi"]
PAIR_COLUMNS += ["predicted_net_us", "predicted_net_lo", "predicted_net_hi"]
PAIR_COLUMNS += ["measured_us", "measured_lo", "measured_hi", "error", "error_net", "basis"]
PAIR_COLUMNS += ["within_tolerance", "measured_in_interval", "passed"]


def price_pair(
    a: VariantProfile, b: VariantProfile, round_trials: pd.DataFrame | None = None
) -> dict[str, Any]:
    """The saving A -> B predicted from the profiles (summed node costs per replay: per
    build the difference of medians, median over builds; bootstrap interval), raw and net
    of the profiler (each replay's cost less its nodes' excess, where both graphs were
    calibrated), set against the measured one (event-timed interleaved replays,
    `round_trials` with the columns measure_rounds gives) where given. The verdict is on
    the net prediction where there is one (`basis`), else on the raw: it passes when the
    prediction lies within TOLERANCE of the measured saving and the measured saving inside
    its interval."""
    raw = _priced(a.cost_series, b.cost_series)
    basis = "net" if a.calibrated and b.calibrated else "raw"
    net = _priced(a.net_cost_series, b.net_cost_series) if basis == "net" else (math.nan,) * 3
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
    )
    measured = mlo = mhi = math.nan
    if round_trials is not None and {a.name, b.name} <= set(round_trials.variant):
        series = round_series(round_trials[round_trials.variant.isin([a.name, b.name])])
        measured = saving_point(series[a.name], series[b.name])
        mlo, mhi = saving_interval(series[a.name], series[b.name])
    predicted, lo, hi = net if basis == "net" else raw
    within = abs(predicted - measured) <= TOLERANCE * abs(measured)
    inside = lo <= measured <= hi
    row.update(
        measured_us=measured,
        measured_lo=mlo,
        measured_hi=mhi,
        error=raw[0] / measured - 1 if measured else math.nan,
        error_net=net[0] / measured - 1 if measured else math.nan,
        basis=basis,
        within_tolerance=bool(within),
        measured_in_interval=bool(inside),
        passed=bool(within and inside),
    )
    return row


def _priced(ta: np.ndarray, tb: np.ndarray) -> tuple[float, float, float]:
    """(saving, its 95% interval) from two graphs' [builds][samples] replay costs."""
    n = min(ta.shape[1], tb.shape[1])
    ta, tb = ta[:, :n], tb[:, :n]
    predicted = saving_point(ta, tb) if n else math.nan
    lo, hi = saving_interval(ta, tb) if n >= 2 else (math.nan, math.nan)
    return predicted, lo, hi


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
