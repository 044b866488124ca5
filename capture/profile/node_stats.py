"""Every node's statistics over a graph's sampled replays (median duration, gap and cost
with 95% bootstrap intervals, means for the roll-ups, the net columns), and the group a
node sits in. Pure computation on the samples capture/profile/nodes.py collects.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from graph_harness.capture.attribution.labels import generalize
from graph_harness.capture.attribution.node import Node
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.profile.match_plan import plan_of
from graph_harness.capture.stats import median_interval


def group_of(node: Node) -> str:
    """Where a node sits, less which repeat of it: the built-in round's step (stage
    dropped), else its scope generalised (capture/attribution/labels.py:
    layers.3.attention -> layers.*.attention)."""
    if node.get("stage") is not None:
        return node["step"]
    return generalize(node["scope"])


NODE_COLUMNS = ["node", "type", "kernel", "stage", "step", "scope", "scope_path", "group"]
NODE_COLUMNS += ["samples", "dur_us", "dur_lo", "dur_hi", "gap_us", "gap_lo", "gap_hi"]
NODE_COLUMNS += ["cost_us", "dur_mean", "gap_mean", "excess_us", "gap_net_us", "cost_net_us"]
NODE_COLUMNS += ["gap_net_mean"]


def node_stats(
    export: NodeExport, samples: pd.DataFrame, excess: dict[int, float] | None = None
) -> pd.DataFrame:
    """Per activity node its statistics over the sampled replays (NODE_COLUMNS); `excess`
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
        seen = ~np.isnan(col_d)
        rows.append(
            dict(
                node=n,
                type=rec["type"],
                kernel=rec["kernel"],
                stage=rec["stage"],
                step=rec["step"],
                scope=rec["scope"],
                scope_path=list(rec["scope_path"]),
                group=group_of(rec),
                samples=int(seen.sum()),
                dur_us=_nan(np.nanmedian, col_d),
                dur_lo=float(lo[j]),
                dur_hi=float(hi[j]),
                gap_us=_nan(np.nanmedian, col_g),
                gap_lo=float(lo[k + j]),
                gap_hi=float(hi[k + j]),
                cost_us=_nan(np.nanmedian, col_d + col_g),
                dur_mean=_nan(np.nanmean, col_d),
                gap_mean=_nan(np.nanmean, col_g),
            )
        )
        x = excess.get(n, math.nan)  # one constant per node: the net median is the shift
        rows[-1].update(
            excess_us=x,
            gap_net_us=rows[-1]["gap_us"] - x,
            cost_net_us=rows[-1]["cost_us"] - x,
            gap_net_mean=rows[-1]["gap_mean"] - x,
        )
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


def _nan(f: Callable[[np.ndarray], object], x: np.ndarray) -> float:
    return float(f(x)) if (~np.isnan(x)).any() else math.nan
