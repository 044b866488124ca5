"""Node deltas between two exports: what a change added and removed, by type, kernel and
scope. Works on any two exports of the same schema (a round's variants, or a user's own
workload before and after a change).

One sign convention everywhere: delta = B - A (a change that removes nodes is negative);
`removed()` is its negation, for pricing what a change saves."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from graph_harness.capture.export import NodeExport
from graph_harness.capture.params import STEPS


class DeltaError(ValueError):
    """Two exports that cannot be compared."""


@dataclass
class NodeDelta:
    a: NodeExport
    b: NodeExport
    by_type: pd.DataFrame  # type, a, b, delta
    by_kernel: pd.DataFrame  # type, kernel, a, b, delta (rows that differ)
    by_step: pd.DataFrame  # step, a, b, delta (per round)
    by_stage_step: pd.DataFrame  # stage, step, a, b, delta (rows that differ)

    @property
    def total_delta(self) -> int:
        return self.b.total - self.a.total

    def removed_by_type(self) -> dict[str, int]:
        """Nodes of each type that B no longer has (A - B): what a change saves."""
        return {r.type: int(-r.delta) for r in self.by_type.itertuples()}

    def label(self, export: NodeExport) -> str:
        return export.variant or export.workload

    def to_dict(self) -> dict:
        """The delta as one JSON-ready document (what `delta --json` prints)."""

        def rec(df: pd.DataFrame) -> list[dict]:
            return [
                {
                    k: (v.item() if hasattr(v, "item") else (None if pd.isna(v) else v))
                    for k, v in r.items()
                }
                for r in df.to_dict(orient="records")
            ]

        return {
            "schema": "graph-harness/delta",
            "schema_version": 1,
            "a": self.label(self.a),
            "b": self.label(self.b),
            "source": self.a.source,
            "sign": "b - a",
            "total_a": self.a.total,
            "total_b": self.b.total,
            "total_delta": self.total_delta,
            "headline": self.headline(),
            "by_step": rec(self.by_step),
            "by_type": rec(self.by_type),
            "by_kernel": rec(self.by_kernel),
            "by_stage_step": rec(self.by_stage_step),
        }

    def headline(self) -> str:
        """e.g. `shipped -> fused: -264 nodes/round (pack -216, copy -48)`."""
        parts = [f"{r.step} {int(r.delta):+d}" for r in self.by_step.itertuples() if r.delta != 0]
        unit = "nodes/round" if self.a.workload == "decode-round" else "nodes"
        return f"{self.label(self.a)} -> {self.label(self.b)}: {self.total_delta:+d} {unit}" + (
            f" ({', '.join(parts)})" if parts else ""
        )


def _side_by_side(a: pd.Series, b: pd.Series, names: list[str]) -> pd.DataFrame:
    df = pd.concat([a.rename("a"), b.rename("b")], axis=1).fillna(0).astype(int)
    df["delta"] = df["b"] - df["a"]
    df.index.names = names
    return df.reset_index()


def node_delta(a: NodeExport, b: NodeExport) -> NodeDelta:
    """B minus A. Refuses exports of different sources, or rounds of different shapes."""
    if a.source != b.source:
        raise DeltaError(
            f"cannot compare a {a.source} export with a {b.source} one: graph nodes and "
            "CPU dispatches are different units; count both on the same kind of machine"
        )
    if a.params and b.params and a.params != b.params:
        diff = {
            k: (a.params.get(k), b.params.get(k))
            for k in a.params
            if a.params.get(k) != b.params.get(k)
        }
        raise DeltaError(
            f"the exports are of rounds with different parameters {diff}; "
            "compare variants of the same shape"
        )
    fa, fb = a.frame(), b.frame()
    fa["kernel"] = fa["kernel"].fillna("")
    fb["kernel"] = fb["kernel"].fillna("")
    by_type = _side_by_side(fa.groupby("type").size(), fb.groupby("type").size(), ["type"])
    by_kernel = _side_by_side(
        fa.groupby(["type", "kernel"]).size(),
        fb.groupby(["type", "kernel"]).size(),
        ["type", "kernel"],
    )
    by_kernel = by_kernel[by_kernel.delta != 0].sort_values("delta").reset_index(drop=True)
    by_step = _side_by_side(fa.groupby("step").size(), fb.groupby("step").size(), ["step"])
    order = {s: i for i, s in enumerate(STEPS)}
    by_step = by_step.sort_values("step", key=lambda s: s.map(lambda x: order.get(x, 99)))
    by_stage_step = _side_by_side(
        fa.groupby(["stage", "step"], dropna=False).size(),
        fb.groupby(["stage", "step"], dropna=False).size(),
        ["stage", "step"],
    )
    by_stage_step = by_stage_step[by_stage_step.delta != 0].reset_index(drop=True)
    return NodeDelta(a, b, by_type, by_kernel, by_step.reset_index(drop=True), by_stage_step)
