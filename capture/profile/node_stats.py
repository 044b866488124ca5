"""Every node's statistics over a graph's sampled replays (median duration, gap and cost
with 95% bootstrap intervals, means for the roll-ups, the net columns), and the group a
node sits in. Pure computation on the samples capture/profile/nodes.py collects.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from graph_harness.capture.attribution.labels import generalize
from graph_harness.capture.attribution.node import Node
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.match_plan import plan_of
from graph_harness.capture.rows import columns, frame
from graph_harness.capture.stats import median_interval


def group_of(node: Node) -> str:
    """Where a node sits, less which repeat of it: the built-in round's step (stage
    dropped), else its scope generalised (capture/attribution/labels.py:
    layers.3.attention -> layers.*.attention)."""
    if node.get("stage") is not None:
        return node["step"]
    return generalize(node["scope"])


@dataclass(frozen=True, kw_only=True)
class NodeStat:
    """One activity node over a graph's sampled replays: where it sits, how often it was
    sampled, its median duration, gap and cost (us) with 95% intervals, the means the
    roll-ups sum, and its gap and cost net of CUPTI's excess (NaN without one)."""

    node: int
    type: str
    kernel: str | None
    stage: int | None
    step: str
    scope: str
    scope_path: list[str]
    group: str  # group_of
    samples: int
    dur_us: float
    dur_lo: float
    dur_hi: float
    gap_us: float
    gap_lo: float
    gap_hi: float
    cost_us: float
    dur_mean: float
    gap_mean: float
    excess_us: float  # one constant per node: the net median is the shift
    gap_net_us: float
    cost_net_us: float
    gap_net_mean: float


NODE_COLUMNS = columns(NodeStat)


def node_stats(
    export: NodeExport, samples: pd.DataFrame, excess: dict[int, float] | None = None
) -> pd.DataFrame:
    """Per activity node its statistics over the sampled replays (NodeStat); `excess`
    (node -> CUPTI's excess, us) gives the net columns, NaN without it."""
    excess = excess or {}
    plan = plan_of(export.nodes)
    index = list(plan.nodes)
    key = ["build", "window", "replay"]
    dur = samples.pivot_table(index=key, columns="node", values="dur_us").reindex(columns=index)
    gap = samples.pivot_table(index=key, columns="node", values="gap_us").reindex(columns=index)
    d, g = dur.to_numpy(dtype=float), gap.to_numpy(dtype=float)
    k = len(index)
    if d.shape[0] >= 2:
        lo, hi = median_interval(np.concatenate([d, g], axis=1))
    else:
        lo = hi = np.full(2 * k, np.nan)
    by_index = {n["index"]: n for n in export.nodes}
    rows = []
    for j, n in enumerate(index):
        rec = by_index[n]
        col_d, col_g = d[:, j], g[:, j]
        gap_us, gap_mean = _nan(np.nanmedian, col_g), _nan(np.nanmean, col_g)
        cost_us = _nan(np.nanmedian, col_d + col_g)
        x = excess.get(n, math.nan)
        rows.append(
            NodeStat(
                node=n,
                type=rec["type"],
                kernel=rec["kernel"],
                stage=rec["stage"],
                step=rec["step"],
                scope=rec["scope"],
                scope_path=list(rec["scope_path"]),
                group=group_of(rec),
                samples=int((~np.isnan(col_d)).sum()),
                dur_us=_nan(np.nanmedian, col_d),
                dur_lo=float(lo[j]),
                dur_hi=float(hi[j]),
                gap_us=gap_us,
                gap_lo=float(lo[k + j]),
                gap_hi=float(hi[k + j]),
                cost_us=cost_us,
                dur_mean=_nan(np.nanmean, col_d),
                gap_mean=gap_mean,
                excess_us=x,
                gap_net_us=gap_us - x,
                cost_net_us=cost_us - x,
                gap_net_mean=gap_mean - x,
            )
        )
    return frame(rows, NodeStat)


def _nan(f: Callable[[np.ndarray], object], x: np.ndarray) -> float:
    return float(f(x)) if (~np.isnan(x)).any() else math.nan
