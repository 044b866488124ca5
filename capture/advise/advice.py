"""The fusion advisor: from any export, what is worth fusing, ranked by time saved, as one
document (`Advice`). Composes three steps, each its own module: candidates.py finds
candidates (serial chains in one scope, copies after a kernel), groups.py groups, prices
and ranks them, measured.py sets predictions beside measured savings where a workload
registered them (docs/advise.md, "Inside the advisor").

Computes only: the `advise` command and reports/tables.py render the document.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from graph_harness.capture.advise.costs import Costs, builtin_costs
from graph_harness.capture.advise.groups import Group, rank_groups
from graph_harness.capture.advise.measured import Comparison, compare_measured
from graph_harness.capture.export.documents import plain
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.export.workload import export_name

ADVICE_SCHEMA = "graph-harness/advice"
ADVICE_SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Advice:
    """One export's advice: its groups ranked, the comparisons with measured savings, and
    notes on what could not be compared."""

    workload: str
    variant: str | None
    source: str
    compiled: bool | None
    total_nodes: int
    params: dict[str, int] | None
    unit: str  # "round" | "step": what one replay of the export's graph is
    costs: Costs
    groups: list[Group]  # ranked, best first
    comparisons: list[Comparison]
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        base = export_name(self.workload, self.variant)
        return base + (" [compiled]" if self.compiled else "")

    def frame(self) -> pd.DataFrame:
        """One row per group, ranked (list-valued columns as tuples)."""
        rows = [{**asdict(g), "removed_nodes": g.removed_nodes} for g in self.groups]
        return pd.DataFrame(rows, columns=[*Group.__dataclass_fields__, "removed_nodes"])

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The advice as one JSON-ready document (`advise --json`): the first `top` groups
        (all when None), every comparison, the costs' source and the rules."""
        shown = self.groups if top is None else self.groups[:top]
        return {
            "schema": ADVICE_SCHEMA,
            "schema_version": ADVICE_SCHEMA_VERSION,
            "export": {
                "name": self.name,
                "workload": self.workload,
                "variant": self.variant,
                "source": self.source,
                "compiled": self.compiled,
                "total_nodes": self.total_nodes,
                "params": self.params,
            },
            "unit": f"us per {self.unit}",
            "costs": {
                "source": self.costs.label,
                "builtin": self.costs.builtin,
                "env": self.costs.env,
                "created": self.costs.created,
                "us_per_node": {k: v[0] for k, v in self.costs.slopes.items()},
            },
            "rules": RULES,
            "notes": self.notes,
            "groups_total": len(self.groups),
            "groups": [{**_plain(asdict(g)), "removed_nodes": g.removed_nodes} for g in shown],
            "comparisons": [_plain(asdict(c)) for c in self.comparisons],
        }


RULES = [
    "a chain: a maximal serial run of nodes in one scope (each depends only on the one "
    "before, which nothing else depends on) becomes one kernel",
    "copies after a kernel: a run of memcpy/memset nodes that depends on one kernel alone "
    "goes; the kernel writes their destination directly",
    "library kernels (GEMM, attention, sort/top-k, collectives, matched by name) and nodes "
    "that launch nothing fusable break runs",
    "each removed node is priced at its type's chain slope (kernel: torch-add; memcpy; "
    "memset), or at the chain that replays the candidate's own nodes where there is one",
]


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """A dataclass's fields as plain JSON (tuples as lists)."""
    return {k: plain(v) for k, v in d.items()}


def advise(export: NodeExport, costs: Costs | None = None) -> Advice:
    """What is worth fusing in `export`, ranked by saving per replay of its graph, priced
    with `costs` (default: the built-in H200 table, labelled as such)."""
    costs = costs or builtin_costs()
    groups = rank_groups(export, costs)
    comparisons, notes = compare_measured(export, groups, costs)
    if export.source == "cpu-dispatch":
        notes.insert(
            0,
            "CPU dispatch count: ATen ops and Triton launches priced as if each were a "
            "graph node; dependencies are program order (one stream)",
        )
    return Advice(
        workload=export.workload,
        variant=export.variant,
        source=export.source,
        compiled=export.options.get("compiled"),
        total_nodes=export.total,
        params=export.params,
        unit=export.unit,
        costs=costs,
        groups=groups,
        comparisons=comparisons,
        notes=notes,
    )
