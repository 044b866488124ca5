"""What a node delta buys: B - A priced per replay of the graph with per-node costs
(capture/advise/costs.py), each node at the slope of its type's chain
(capture/replay/kinds.py's TYPE_CHAIN), and split by kernel family.

A node of a type no chain measures (event, empty, child-graph, host) is counted and said,
never priced. This prices dispatch, not the kernels' own work (docs/compare.md, "How a
delta is priced").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graph_harness.capture.export.documents import frame_records
from graph_harness.capture.export.families import RULES, FamilyRule, families
from graph_harness.capture.replay.kinds import TYPE_CHAIN
from graph_harness.capture.rows import frame

if TYPE_CHECKING:
    import pandas as pd

    from graph_harness.capture.advise.costs import Costs
    from graph_harness.capture.export.delta import NodeDelta
    from graph_harness.capture.record.delta import RecordingDelta


@dataclass(frozen=True)
class TypePrice:
    """One node type's part of a delta: its nodes (B - A) at its chain's cost per node."""

    type: str
    delta: int
    chain: str
    us_per_node: float
    us: float


@dataclass(frozen=True)
class FamilyPrice:
    """One kernel family's part of a delta: its nodes (B - A) and their price, us."""

    family: str
    delta: int
    us: float


@dataclass(frozen=True)
class DeltaPrice:
    """B - A in microseconds per replay (negative: B dispatches less)."""

    label: str  # where the costs came from
    us: float  # the priced nodes' total
    by_type: pd.DataFrame  # TypePrice rows (priced types)
    by_family: pd.DataFrame  # FamilyPrice rows with `share` (of the priced gap), largest first
    unpriced: dict[str, int]  # node type -> delta, types no chain prices

    def line(self, unit: str = "replay", *, named: bool = True) -> str:
        """In words: the price per `unit`, by type, the families that carry most of it, and
        what was not priced; `named`: the costs' source first."""
        parts = [
            f"{r.type} {int(r.delta):+d} x {r.us_per_node:.3f} us"
            for r in self.by_type.itertuples()
            if r.delta
        ]
        text = f"priced by {self.label}: " if named else ""
        text += f"{self.us:+.1f} us per {unit}"
        if parts:
            text += f" ({', '.join(parts)})"
        fams = [f"{r.family} {r.us:+.1f} us" for r in self.by_family.head(3).itertuples() if r.us]
        if fams:
            text += f"; most of it: {', '.join(fams)}"
        if self.unpriced:
            left = ", ".join(f"{t} {d:+d}" for t, d in self.unpriced.items())
            text += f"; not priced (these costs hold no chain of these types): {left}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "costs": self.label,
            "us": self.us,
            "by_type": frame_records(self.by_type),
            "by_family": frame_records(self.by_family),
            "unpriced": self.unpriced,
        }


def price_delta(d: NodeDelta, costs: Costs, rules: tuple[FamilyRule, ...] = RULES) -> DeltaPrice:
    """`d` priced with `costs` (see the module's notes)."""
    import pandas as pd

    slope = {t: costs.slope(chain) for t, chain in TYPE_CHAIN.items()}
    rows, unpriced = [], {}
    for r in d.by_type.itertuples():
        s = slope.get(r.type)
        if s is None:
            if r.delta:
                unpriced[r.type] = int(r.delta)
            continue
        rows.append(TypePrice(r.type, int(r.delta), TYPE_CHAIN[r.type], s, r.delta * s))
    by_type = frame(rows, TypePrice)
    fa, fb = d.a.frame(), d.b.frame()
    per = []
    for side, f in ((-1, fa), (1, fb)):
        if f.empty:
            continue
        g = f.assign(family=families(f, rules)).groupby(["family", "type"]).size()
        per.append(side * g)
    both = pd.concat(per, axis=1).fillna(0).sum(axis=1) if per else pd.Series(dtype=float)
    fam_rows: dict[str, dict[str, float]] = {}
    for (fam, typ), n in both.items():
        s = slope.get(typ)
        row = fam_rows.setdefault(fam, {"delta": 0, "us": 0.0})
        row["delta"] += int(n)
        if s is not None:
            row["us"] += n * s
    by_family = frame(
        [FamilyPrice(f, int(v["delta"]), v["us"]) for f, v in fam_rows.items()], FamilyPrice
    )
    total = float(by_type["us"].sum()) if not by_type.empty else 0.0
    by_family = by_family[(by_family.delta != 0) | (by_family.us != 0)]
    gap = float(by_family["us"].abs().sum()) or 1.0
    by_family = by_family.assign(share=by_family["us"].abs() / gap)
    by_family = by_family.assign(size=by_family.us.abs()).sort_values(
        ["size", "family"], ascending=[False, True], kind="stable"
    )
    return DeltaPrice(
        costs.label, total, by_type, by_family.drop(columns="size").reset_index(drop=True), unpriced
    )


@dataclass(frozen=True)
class RecordingPrice:
    """A recording delta priced: each step both sides have, and every graph once each;
    `graphs`: per step, the graphs it runs on each side (their launches not priced)."""

    steps: dict[str, DeltaPrice]
    total: DeltaPrice
    graphs: dict[str, tuple[int, int]]

    def lines(self) -> list[str]:
        """The costs' source, then each step's price and the total's, in words."""
        out = [
            f"priced by {self.total.label}: the graphs' nodes only (what an engine runs "
            "between its graphs, and each graph's own launch, are in no recording)"
        ]
        for k, p in self.steps.items():
            ga, gb = self.graphs[k]
            more = ""
            if ga != gb:
                more = (
                    f" [B runs {gb - ga:+d} graphs per step: their launches, and any work "
                    "between them, not priced]"
                )
            out.append(f"step {k}: {p.line('step', named=False)}{more}")
        out.append(f"every graph, once each: {self.total.line('pass', named=False)}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": {k: p.to_dict() for k, p in self.steps.items()},
            "total": self.total.to_dict(),
            "graphs_per_step": {k: list(v) for k, v in self.graphs.items()},
        }


def price_recording(
    d: RecordingDelta, costs: Costs, rules: tuple[FamilyRule, ...] = RULES
) -> RecordingPrice:
    """`d`'s steps (with a step key) and its total priced with `costs`."""
    graphs = {k: (len(d.a.steps[k]), len(d.b.steps[k])) for k in d.step_pairs}
    return RecordingPrice(
        {k: price_delta(p, costs, rules) for k, p in d.step_pairs.items()},
        price_delta(d.total, costs, rules),
        graphs,
    )
