"""One graph's in-round profile: what CUPTI saw each sampled replay run, matched to the
graph's nodes and costed (duration, gap), raw and net of the profiler. Pure computation on
activities (capture/profile/activities.py) matched to nodes (capture/profile/matching.py)
and costed row by row (capture/profile/windows.py); capture/profile/run.py collects them
on a GPU. A node's in-round cost is its duration plus the gap before it; on a serial graph
a replay's costs sum to its period. Per-node figures are medians with 95% bootstrap
intervals. The definitions, the net figures and what lives elsewhere: docs/profile.md,
"The costs of one graph"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.exposure import Exposure, exposure_verdict
from graph_harness.capture.profile.match_plan import MatchPlan, plan_of
from graph_harness.capture.profile.node_stats import node_stats

# re-exported where they were defined before: the tables' columns, one replay's costs
from graph_harness.capture.profile.windows import REPLAY_COLUMNS as REPLAY_COLUMNS
from graph_harness.capture.profile.windows import SAMPLE_COLUMNS as SAMPLE_COLUMNS
from graph_harness.capture.profile.windows import (
    Window,
    cost_windows,
    match_windows,
    matching_summary,
)
from graph_harness.capture.profile.windows import replay_costs as replay_costs
from graph_harness.capture.stats import median_interval

NET_COLUMNS = ["excess_us", "period_net_us", "gap_net_us", "cost_net_us"]
# Where a graph's excess per node came from (capture/profile/fit.py): its own event timing,
# or the calibration chains; "" where it has none.
TIMING, CHAINS = "timing", "chains"


# --- one graph's profile -----------------------------------------------------------------


@dataclass
class VariantProfile:
    """Every sampled replay of one graph (a round variant or a step), matched and costed."""

    name: str
    export: NodeExport
    samples: pd.DataFrame  # SAMPLE_COLUMNS: one row per matched node per sampled replay
    replays: pd.DataFrame  # REPLAY_COLUMNS: one row per sampled replay
    matching: dict[str, Any] = field(default_factory=dict)
    # CUPTI's excess per node by node type, us; empty where the run did not measure it, and
    # then every net figure is NaN. `excess_basis`: where it came from (capture/profile/fit.py:
    # "timing", the graph's own event timing, or "chains"); `excess_bounds`: the per-type
    # excesses at the corners of its 95% interval, what a pair priced from this graph is
    # also judged at (capture/profile/pairs.py).
    excess: dict[str, float] = field(default_factory=dict)
    excess_basis: str = ""
    excess_bounds: list[dict[str, float]] = field(default_factory=list)

    @cached_property
    def plan(self) -> MatchPlan:
        return plan_of(self.export.nodes)

    @property
    def calibrated(self) -> bool:
        return bool(self.excess)

    def excess_of_nodes(self, per_type: dict[str, float]) -> dict[int, float]:
        """Each activity node's excess under `per_type` (CUPTI's cost per node by type): NaN
        for a type not in it, and for a node launched as a programmatic dependent (its gap
        may be negative; the chains that measured the excess have no such edge)."""
        nodes = {n["index"]: n for n in self.export.nodes}
        return {
            n: math.nan
            if nodes[n].get("programmatic_deps")
            else per_type.get(nodes[n]["type"], math.nan)
            for n in self.plan.nodes
        }

    @cached_property
    def node_excess(self) -> dict[int, float]:
        """Each activity node's excess (its type's), NaN for every node where uncalibrated."""
        return self.excess_of_nodes(self.excess)

    def replay_excess(self, per_type: dict[str, float]) -> np.ndarray:
        """Per sampled replay (the rows of `replays`) the summed excess of its matched nodes
        under `per_type`: NaN where any of them has none, and where the replay left an
        activity or a node unmatched (its gaps are not all known)."""
        key = ["build", "window", "replay"]
        x = self.samples.node.map(self.excess_of_nodes(per_type))
        by = [self.samples[k] for k in key]
        per = x.groupby(by).sum()
        per[x.isna().groupby(by).any()] = math.nan
        rows = pd.MultiIndex.from_frame(self.replays[key])
        out = per.reindex(rows).to_numpy(dtype=float, copy=True)
        r = self.replays
        out[((r.unmatched_activities > 0) | (r.unmatched_nodes > 0)).to_numpy()] = math.nan
        return out

    @cached_property
    def net(self) -> pd.DataFrame:
        """Per sampled replay (the rows of `replays`): NET_COLUMNS, the excess of its matched
        nodes and its period, gaps and cost less it (NaN throughout where uncalibrated)."""
        r = self.replays
        excess = self.replay_excess(self.excess) if self.calibrated else np.full(len(r), math.nan)
        return pd.DataFrame(
            {
                "excess_us": excess,
                "period_net_us": r.period_us.to_numpy() - excess,
                "gap_net_us": r.gap_us.to_numpy() - excess,
                "cost_net_us": r.cost_us.to_numpy() - excess,
            },
            columns=NET_COLUMNS,
        )

    @cached_property
    def nodes(self) -> pd.DataFrame:
        """Per activity node: its scope columns and group, samples, median duration, gap
        and cost with 95% intervals, mean duration and gap (for roll-ups), and its gap and
        cost net of the profiler."""
        return node_stats(self.export, self.samples, self.node_excess)

    @cached_property
    def cost_series(self) -> np.ndarray:
        """Each sampled replay's summed node cost, as [builds][samples]."""
        return _per_build(self.replays, "cost_us")

    @cached_property
    def net_cost_series(self) -> np.ndarray:
        """The same, net of the profiler (NaN where uncalibrated)."""
        net = self.replays.assign(cost_net_us=self.net.cost_net_us.to_numpy())
        return _per_build(net, "cost_net_us")

    def net_cost_series_at(self, per_type: dict[str, float]) -> np.ndarray:
        """The replay costs net of another excess per node (a bound of the measured one)."""
        net = self.replays.cost_us.to_numpy() - self.replay_excess(per_type)
        return _per_build(self.replays.assign(cost_net_us=net), "cost_net_us")

    def period_net_us(self) -> float:
        """The median sampled replay's period net of the profiler (NaN where unknown)."""
        return _median(self.net.period_net_us)

    def period_net_at(self, per_type: dict[str, float]) -> float:
        """The same, net of another excess per node (another graph's, a bound of this one's)."""
        return _median(self.replays.period_us.to_numpy() - self.replay_excess(per_type))

    def excess_per_node(self, per_type: dict[str, float] | None = None) -> float:
        """The mean excess over the activity nodes under `per_type` (this graph's own by
        default): NaN where a node's is unknown."""
        x = list(self.excess_of_nodes(self.excess if per_type is None else per_type).values())
        return float(np.mean(x)) if x else math.nan

    def exposure(self, host_launch_us: float | None = None) -> tuple[Exposure, str]:
        """Whether this graph's launch is hidden behind the replay before it, replayed back
        to back (capture/profile/exposure.py), and why; `host_launch_us` the launch's
        plain host time, where measured."""
        r = self.replays
        excess = self.net.excess_us.to_numpy()
        if self.calibrated and self.excess_bounds:  # its interval's upper end, per replay
            corners = [self.replay_excess(b) for b in self.excess_bounds]
            excess = np.max([excess, *corners], axis=0)
        calls = "outside_graphs_per_call" in self.matching
        return exposure_verdict(r.launch_late_us, excess, r.launch_us, host_launch_us, calls=calls)

    def summary(self) -> dict[str, Any]:
        r, net = self.replays, self.net
        share = (r.gap_us / r.period_us).to_numpy()
        lo, hi = median_interval(share) if len(share) >= 2 else (math.nan, math.nan)
        share_net = (net.gap_net_us / net.period_net_us).to_numpy()
        if (~np.isnan(share_net)).sum() >= 2:
            nlo, nhi = median_interval(share_net)
        else:
            nlo = nhi = math.nan
        m = self.matching
        ends = [self.excess_per_node(b) for b in self.excess_bounds]
        return dict(
            name=self.name,
            nodes=len(self.plan.nodes),
            method=m.get("method"),
            verified=bool(m.get("verified")),
            replays=len(r),
            period_us=float(r.period_us.median()),
            exec_us=float(r.exec_us.median()),
            gap_us=float(r.gap_us.median()),
            cost_us=float(r.cost_us.median()),
            overlap_us=float((r.cost_us - r.period_us).median()),
            dispatch_share=float(np.median(share)),
            dispatch_share_lo=float(lo),
            dispatch_share_hi=float(hi),
            excess_basis=self.excess_basis,
            excess_per_node_us=self.excess_per_node() if self.calibrated else math.nan,
            excess_per_node_lo=float(np.min(ends)) if ends else math.nan,
            excess_per_node_hi=float(np.max(ends)) if ends else math.nan,
            lead_gap_us=_median(r.lead_gap_us),
            launch_late_us=_median(r.launch_late_us),
            exposed_us=_median(r.exposed_us),
            launch_us=_median(r.launch_us),
            excess_us=_median(net.excess_us),
            period_net_us=self.period_net_us(),
            gap_net_us=_median(net.gap_net_us),
            dispatch_share_net=_median(share_net),
            dispatch_share_net_lo=float(nlo),
            dispatch_share_net_hi=float(nhi),
        )


def _median(x: pd.Series | np.ndarray) -> float:
    """The median of what was measured (NaN left out, as median_interval leaves it out)."""
    x = np.asarray(x, dtype=float)
    return float(np.nanmedian(x)) if len(x) and not np.isnan(x).all() else math.nan


def _per_build(replays: pd.DataFrame, column: str) -> np.ndarray:
    groups = [g[column].to_numpy() for _, g in replays.groupby("build")]
    if not groups:
        return np.empty((0, 0))
    n = min(len(g) for g in groups)
    return np.array([g[:n] for g in groups])


def profile_windows(
    name: str,
    export: NodeExport,
    windows: Sequence[Window],
    excess: dict[str, float] | None = None,
) -> VariantProfile:
    """Match and cost every sampled replay of `windows` (capture/profile/run.py records
    them). Nodes are matched by order; where every window carries the nodes' local ids,
    also by CUPTI's graph node id, and the id match is used if it is complete in every
    replay, the two compared either way (`matching`). `excess`: CUPTI's cost per node by
    node type measured on calibration chains (capture/profile/calibration.py), for the
    figures net of it; capture/profile/fit.py may give it another basis after."""
    plan = plan_of(export.nodes)
    matched = match_windows(plan, windows)
    samples, replays = cost_windows(plan, windows, matched)
    matching = matching_summary(plan, windows, matched)
    return VariantProfile(
        name, export, samples, replays, matching, dict(excess or {}), CHAINS if excess else ""
    )
