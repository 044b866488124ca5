"""Rich tables of `replay`'s fits and savings (capture/replay/document.py). Renders what
capture measured; never measures."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.table import Table

from graph_harness.capture.stats import median_by_variant

if TYPE_CHECKING:
    import pandas as pd

    from graph_harness.capture.replay.document import ReplayResult


def fits_table(fits: pd.DataFrame) -> Table:
    t = Table(title="Per-node dispatch cost (least squares over chain lengths)")
    for c in ("kind", "us/node", "95% interval", "intercept us", "R^2"):
        t.add_column(c, justify="left" if c == "kind" else "right", no_wrap=True)
    for f in fits.itertuples():
        t.add_row(
            f.kind,
            f"{f.slope:.4f}",
            f"[{f.slope_lo:.4f}, {f.slope_hi:.4f}]",
            f"{f.intercept:.3f}",
            f"{f.r2:.6f}",
        )
    return t


def host_fits_table(fits: pd.DataFrame) -> Table:
    t = Table(title="Host launch: CPU time of one replay() from an idle device")
    for c in ("kind", "shape", "us/node", "95% interval", "fixed us", "95% interval ", "R^2"):
        t.add_column(c, justify="left" if c in ("kind", "shape") else "right", no_wrap=True)
    for f in fits.itertuples():
        t.add_row(
            f.kind,
            f.shape,
            f"{f.slope:.4f}",
            f"[{f.slope_lo:.4f}, {f.slope_hi:.4f}]",
            f"{f.intercept:.2f}",
            f"[{f.intercept_lo:.2f}, {f.intercept_hi:.2f}]",
            f"{f.r2:.4f}",
        )
    return t


def _interval(s: Any) -> str:
    return f"[{s.measured_lo:.1f}, {s.measured_hi:.1f}]"


def savings_table(result: ReplayResult) -> Table:
    med = median_by_variant(result.round_trials)
    t = Table(title="Round replay: measured vs predicted saving (us per round)")
    for c in (
        "A -> B",
        "nodes",
        "A us",
        "B us",
        "measured",
        "95% interval",
        "predicted",
        "ratio",
        "predicted (shapes)",
        "ratio (shapes)",
    ):
        t.add_column(c, justify="left" if c == "A -> B" else "right", no_wrap=True)
    for s in result.savings.itertuples():
        t.add_row(
            f"{s.a} -> {s.b}",
            f"{-s.removed_nodes:+d}",
            f"{med[s.a]:.1f}",
            f"{med[s.b]:.1f}",
            f"{s.measured_us:.2f}",
            _interval(s),
            f"{s.predicted_us:.2f}",
            f"{s.ratio:.3f}",
            f"{s.predicted_shapes_us:.2f}",
            f"{getattr(s, 'ratio_shapes', math.nan):.3f}",
        )
    return t
