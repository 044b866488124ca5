"""A profile's node costs rolled up: by position in the scope tree (capture/attribution/rollup.py)
and by group (the round's steps, or scopes with their repeats folded). Sums per-node
means (capture/profile/node_stats.py), so that every level of the scope tree sums
to its parent and the root to the round, and the groups to the whole. Computes; prices no
change (capture/profile/pairs.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from graph_harness.capture.attribution.rollup import ROOT, tree_label, tree_order, tree_parts
from graph_harness.capture.rows import columns, frame
from graph_harness.capture.scopes.names import UNSCOPED


@dataclass(frozen=True, kw_only=True)
class ScopeCost:
    """One position of the scope tree (or one group): its nodes' summed mean costs, us."""

    scope: str
    depth: int
    nodes: int
    exec_us: float  # summed mean durations
    gap_us: float  # summed mean gaps
    cost_us: float
    dispatch_share: float  # gap / cost
    share: float  # of the whole's cost
    gap_net_us: float  # net of the profiler; NaN where no node was sampled
    dispatch_share_net: float


SCOPE_COLUMNS = columns(ScopeCost)


def _cost_rows(
    labels: Sequence[str],
    stats: pd.DataFrame,
    total: float,
    depths: dict[str, int] | None = None,
) -> pd.DataFrame:
    """Sum each label's nodes' mean duration and gap, raw and net of the profiler
    (`labels[i]` is row i's label)."""
    acc: dict[str, list[float]] = {}
    net = stats.gap_net_mean if "gap_net_mean" in stats else [math.nan] * len(stats)
    for label, d, g, x in zip(labels, stats.dur_mean, stats.gap_mean, net):
        a = acc.setdefault(label, [0, 0.0, 0.0, 0.0, 0])
        a[0] += 1
        a[1] += 0.0 if math.isnan(d) else d
        a[2] += 0.0 if math.isnan(g) else g
        if not math.isnan(g):  # sampled: its net value counts, NaN included
            a[3] += x
            a[4] += 1
    for a in acc.values():
        a[3] = a[3] if a[4] else math.nan  # no sampled node: no net value, not 0
    rows = [
        ScopeCost(
            scope=label,
            depth=0 if depths is None else depths[label],
            nodes=int(n),
            exec_us=e,
            gap_us=g,
            cost_us=e + g,
            dispatch_share=g / (e + g) if e + g else math.nan,
            share=(e + g) / total if total else math.nan,
            gap_net_us=x,
            dispatch_share_net=x / (e + x) if e + x else math.nan,
        )
        for label, (n, e, g, x, _) in acc.items()
    ]
    return frame(rows, ScopeCost)


def _total(stats: pd.DataFrame) -> float:
    return float(stats.dur_mean.fillna(0).sum() + stats.gap_mean.fillna(0).sum())


def scope_costs(stats: pd.DataFrame, depth: int | None = None) -> pd.DataFrame:
    """Every position of the scope tree down to `depth` (capture/attribution/rollup.py): nodes, exec
    (sum of mean durations), gap (sum of mean gaps), cost, dispatch share (gap / cost) and
    share of the whole. The root "(all)" holds every node; each level sums to its parent."""
    labels, depths = [], {}
    expanded = []
    for rec in stats.itertuples():
        parts = tree_parts(rec.scope_path)[: None if depth is None else depth]
        for d in range(len(parts) + 1):
            label = tree_label(parts[:d]) if d else ROOT
            depths[label] = d
            labels.append(label)
            expanded.append(rec.Index)
    rows = _cost_rows(labels, stats.loc[expanded], _total(stats), depths)
    order = sorted(rows.scope, key=lambda s: [] if s == ROOT else tree_order(s))
    return rows.set_index("scope").loc[order].reset_index()[SCOPE_COLUMNS]


def group_costs(stats: pd.DataFrame, order: Sequence[str] = ()) -> pd.DataFrame:
    """The same figures by group (group_of: the round's steps, or scopes with their
    repeats folded), the groups named in `order` first, in that order (the export's
    step_order); the groups sum to the whole."""
    rows = _cost_rows(list(stats.group), stats, _total(stats))
    rank = {s: i for i, s in enumerate(order)}
    rows["_o"] = rows.scope.map(lambda s: (rank.get(s, len(rank)), s == UNSCOPED, s))
    return rows.sort_values("_o").drop(columns="_o").reset_index(drop=True)
