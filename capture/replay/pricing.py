"""Pricing node changes in time, for any graph: removed nodes x the per-node cost of
their type's chain (capture/replay/kinds.py TYPE_CHAIN), and a chain's cost per call."""

from __future__ import annotations

import pandas as pd


def predicted_saving_us(removed_by_type: dict[str, int], cost_by_type: dict[str, float]) -> float:
    """Sum over node types of (nodes removed) x (per-node cost of that type). A type with
    no measured cost of its own is priced as a kernel node."""
    return float(
        sum(n * cost_by_type.get(t, cost_by_type["kernel"]) for t, n in removed_by_type.items())
    )


def per_call_us(fits: pd.DataFrame, chain_trials: pd.DataFrame) -> dict[str, float]:
    """Cost of one call of each chain kind: its slope times its nodes per call."""
    per_call_nodes = (chain_trials.nodes / chain_trials.calls).groupby(chain_trials.kind).median()
    return {k: float(s * per_call_nodes[k]) for k, s in zip(fits["kind"], fits["slope"])}
