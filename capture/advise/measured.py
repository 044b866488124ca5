"""The advisor's predictions against measured savings: each comparison a workload
registers (capture/advise/hooks.py; the built-in round's variant pairs,
capture/round/advice.py) of the groups a measured change touches, predicted against what
it saved, with whether the prediction lies in its 95% interval and, if not, the per-node
figures that say why. Neither finds nor prices candidates (capture/advise/candidates.py,
capture/advise/groups.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_harness.capture.advise.hooks import measured_comparers

if TYPE_CHECKING:
    from graph_harness.capture.advise.costs import Costs
    from graph_harness.capture.advise.groups import Group
    from graph_harness.capture.export.nodes import NodeExport


@dataclass(frozen=True)
class Comparison:
    """Groups whose change a measured pair (A -> B) makes, predicted against measured."""

    a: str
    b: str
    ranks: tuple[int, ...]  # the groups, by rank
    removed_nodes: int  # by these groups
    variant_removed_nodes: int  # by A -> B
    predicted_us: float
    predicted_by_type_us: float  # every removed node priced by its type
    predicted_with_b_us: float  # the node that stays priced at B's own chain as well
    measured_us: float
    measured_lo: float
    measured_hi: float
    within: bool | None  # None: not the same change (the nodes removed differ)
    note: str  # within the interval, or why not, in figures


def compare_measured(
    export: NodeExport, groups: list[Group], costs: Costs
) -> tuple[list[Comparison], list[str]]:
    """Every registered workload's comparisons of `export`'s groups with the measured
    savings in `costs`, and its notes on what could not be compared."""
    comparisons: list[Comparison] = []
    notes: list[str] = []
    for compare in measured_comparers():
        c, n = compare(export, groups, costs)
        comparisons += c
        notes += n
    return comparisons, notes
