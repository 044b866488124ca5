"""A sweep's graph memory, whole, against what the common estimators would have said, and
where its start-up went (issue 43, items 3 and 4).

The truth (the shared pool after the last size plus every size's executable) beside
"linear from two sizes" and "sum of per-size deltas"; start-up split into warm-ups and
capture, compile, instantiate and upload, each with its share. Why and how each is
computed: docs/sweep.md, "Estimators and start-up". Plain arithmetic on the sweep's rows;
tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from graph_harness.capture.rows import columns, frame
from graph_harness.capture.sweep.truth import SharedRow, true_total

if TYPE_CHECKING:
    from graph_harness.capture.sweep.forecast import Forecast
    from graph_harness.capture.sweep.tables import SizeRow

CAPTURES = "warm-ups and capture (graph-harness's reads in it)"


@dataclass(frozen=True)
class Estimate:
    """An estimator's figure for the sweep's graph memory against the truth."""

    estimator: str
    bytes: int
    true_bytes: int
    error: float | None  # estimate / true - 1; None where the truth is 0


@dataclass(frozen=True)
class StartupPhase:
    """One phase of the sizes' start-up, summed over the sizes."""

    phase: str
    seconds: float
    share: float | None  # of the phases' sum; None where that is 0


ESTIMATE_COLUMNS = columns(Estimate)
STARTUP_COLUMNS = columns(StartupPhase)


def estimates(own: Mapping[int, int], true: int) -> list[Estimate]:
    """Each estimator's figure for the sizes `own` (batch -> bytes the size took alone:
    pool plus executable) against `true` (bytes), with its error (estimate / true - 1)."""
    if not own:
        return []
    sizes = sorted(own)
    lo, hi = sizes[0], sizes[-1]
    if hi == lo:
        linear = float(own[lo]) * len(sizes)
    else:
        slope = (own[hi] - own[lo]) / (hi - lo)
        linear = sum(own[lo] + slope * (b - lo) for b in sizes)
    figures = {
        "linear from two sizes": round(linear),
        "sum of per-size deltas": sum(own.values()),
    }
    return [Estimate(k, v, true, (v / true - 1) if true else None) for k, v in figures.items()]


def estimate_frame(rows: Sequence[SizeRow], shared: Sequence[SharedRow] | None) -> pd.DataFrame:
    """Estimate rows for a sweep's sizes (each alone: pool plus executable) and its
    shared pool; empty where the sweep did not read both."""
    true = true_total(shared or [])
    own = {
        r.batch: r.reserved + r.exec_bytes
        for r in rows
        if r.reserved is not None and r.exec_bytes is not None
    }
    if true is None or len(own) != len(rows):
        return pd.DataFrame(columns=ESTIMATE_COLUMNS)
    return frame(estimates(own, true), Estimate)


def with_forecast(df: pd.DataFrame, fc: Forecast | None) -> pd.DataFrame:
    """`df` (estimate_frame's) with the prediction from the sampled sizes and vLLM's
    method (capture/sweep/vllm_method.py) for the sizes swept, where their truth is."""
    swept = next((lf for lf in (fc.ladders if fc else []) if lf.true_total), None)
    if df.empty or swept is None:
        return df
    true = swept.true_total
    sampled = ", ".join(map(str, fc.sampled))
    extra = [(f"predicted from {sampled} (interval {swept.last.total_lo}-"
              f"{swept.last.total_hi} B)", swept.last.total)]  # fmt: skip
    if swept.vllm is not None:
        extra.append(("vLLM's method (profile_cudagraph_memory)", swept.vllm))
    rows = [Estimate(k, v, true, v / true - 1) for k, v in extra]
    return pd.concat([df, frame(rows, Estimate)], ignore_index=True)


def startup_frame(rows: Sequence[SizeRow]) -> pd.DataFrame:
    """StartupPhase rows: the sizes' start-up by phase (module docstring), in seconds and as
    shares of their sum; empty where not every size was made executable here."""
    made = [r for r in rows if r.instantiate_s is not None]
    if not made or len(made) != len(rows):
        return pd.DataFrame(columns=STARTUP_COLUMNS)
    compile_s = sum(r.compile_s or 0.0 for r in made)
    phases = {
        CAPTURES: sum(r.capture_s for r in made) - compile_s,
        "compile": compile_s,
        "instantiate": sum(r.instantiate_s for r in made),
        "upload": sum(r.upload_s for r in made),
    }
    total = sum(phases.values())
    return frame(
        [StartupPhase(k, v, v / total if total else None) for k, v in phases.items()], StartupPhase
    )
