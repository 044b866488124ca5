"""The round's savings priced: each variant change's removed nodes at the per-node costs
of capture/replay/pricing.py, and its steps' own calls at their real-shape chains
(capture/round/chains.py), set against the saving measured over builds. Signs: a delta is
B - A (capture/export/delta.py); a saving and the nodes it removes are A - B, both
positive when B is the faster, smaller round."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

from graph_harness.capture.export.delta import NodeDelta, node_delta
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.replay.document import ReplayResult, Saving
from graph_harness.capture.replay.kinds import TYPE_CHAIN
from graph_harness.capture.replay.pricing import per_call_us, predicted_saving_us
from graph_harness.capture.round.chains import step_chain
from graph_harness.capture.rows import frame
from graph_harness.capture.stats import (
    median_by_variant,
    round_series,
    saving_interval,
    saving_point,
)

# The chains savings() prices removed nodes with, measured whenever rounds are timed: the
# kernel nodes' (required) and the copies'. A round's sets are priced as kernels without it.
PRICE_KINDS = (TYPE_CHAIN["kernel"], TYPE_CHAIN["memcpy"])

SAVING_PAIRS = (
    ("shipped", "fused"),
    ("shipped-compiled", "fused"),
    ("shipped", "direct-compaction"),
    ("shipped", "fused-pack"),
)


def waterfall_us(delta: NodeDelta, replay: ReplayResult) -> list[tuple[str, float]]:
    """A change (`delta`, B - A) in microseconds per round, step by step: each step's
    nodes at the per-node cost of their kind (copies at the memcpy chain's, the rest at
    torch-add's), then what remains of the measured difference of medians (kernel work
    that moved: the residual). The bars sum to median(B) - median(A)."""
    cost = replay.fits.set_index("kind").slope
    kernel_us = float(cost["torch-add"])
    copy_us = float(cost.get("memcpy", kernel_us))
    bars = [
        (f"{r.step} x dispatch", float(r.delta) * (copy_us if r.step == "copy" else kernel_us))
        for r in delta.by_step.itertuples()
        if r.delta
    ]
    med = median_by_variant(replay.round_trials)
    a, b = delta.label(delta.a), delta.label(delta.b)
    bars.append(("kernel work (residual)", float(med[b] - med[a]) - sum(us for _, us in bars)))
    return bars


def shapes_prediction_us(a: str, b: str, stages: int, call_us: dict[str, float]) -> float:
    """Saving predicted from the real-shape chains: per stage, the pack call each variant
    makes, plus the two copies of the allocating compaction. This prices the kernels'
    work as well as their dispatch; NaN when a needed chain was not measured."""

    def stage(v: str) -> float:
        kinds = [k for k in (step_chain(v, "pack"), step_chain(v, "copy")) if k]
        return sum(call_us.get(k, math.nan) for k in kinds)

    return stages * (stage(a) - stage(b))


def savings(
    round_trials: pd.DataFrame,
    exports: dict[str, NodeExport],
    fits: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] | None = None,
    chain_trials: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Measured saving (per build the difference of medians, then the median over builds;
    with its 95% bootstrap interval over builds and paired trials) against delta nodes x
    per-node cost.

    Per-node costs by node type: kernel nodes at the torch-add chain's slope (the removed
    kernels are small torch elementwise ones), memcpy and memset at their own chains'.
    With `chain_trials`, a second prediction prices the real-shape chains per call.
    `pairs` defaults to saving_pairs(the variants timed)."""
    slope = dict(zip(fits["kind"], fits["slope"]))
    if "torch-add" not in slope:
        raise ValueError(
            "savings price kernel nodes at the torch-add chain's slope: measure the "
            f"'torch-add' chain too (fits have {sorted(slope)})"
        )
    call_us = per_call_us(fits, chain_trials) if chain_trials is not None else {}
    cost = {t: slope[k] for t, k in TYPE_CHAIN.items() if k in slope}
    med = median_by_variant(round_trials)
    series = round_series(round_trials)
    rows = []
    if pairs is None:
        pairs = saving_pairs([v for v in exports if v in series])
    for a, b in pairs:
        if a not in exports or b not in exports:
            continue
        change = node_delta(exports[a], exports[b])
        removed = change.removed_by_type()
        predicted = predicted_saving_us(removed, cost)
        measured = saving_point(series[a], series[b])
        lo, hi = saving_interval(series[a], series[b])
        rows.append(
            Saving(
                a=a,
                b=b,
                removed_nodes=-change.total_delta,
                removed_by_type=json.dumps(removed),
                round_a_us=float(med[a]),
                round_b_us=float(med[b]),
                measured_us=measured,
                measured_lo=lo,
                measured_hi=hi,
                predicted_us=predicted,
                ratio=measured / predicted if predicted else math.nan,
                predicted_shapes_us=shapes_prediction_us(
                    a, b, int(exports[a].params["stages"]), call_us
                )
                if exports[a].params
                else math.nan,
            )
        )
    return frame(rows, Saving)


def saving_pairs(variants: Sequence[str]) -> list[tuple[str, str]]:
    """The A -> B pairs to report for these variants: the standard ones (SAVING_PAIRS)
    among them, else the first variant against each of the others."""
    standard = [(a, b) for a, b in SAVING_PAIRS if a in variants and b in variants]
    if standard:
        return standard
    return [(variants[0], v) for v in variants[1:]]
