"""Rich tables of the fusion advisor's advice (capture/advise/advice.py). Renders what
capture computed; never measures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from graph_harness.reports.kernel_names import short_names

if TYPE_CHECKING:
    from graph_harness.capture.advise.advice import Advice


def _kernel_list(names: list[str], short: dict[str, str]) -> str:
    """Kernels in order, a repeat shown once with its count: `memcpy x2`."""
    out: list[list] = []
    for n in names:
        shown = short.get(n, n)
        if out and out[-1][0] == shown:
            out[-1][1] += 1
        else:
            out.append([shown, 1])
    return ", ".join(s if k == 1 else f"{s} x{k}" for s, k in out)


def advice_table(advice: Advice, top: int) -> Table:
    """The ranked groups of an Advice (capture/advise/advice.py): where, what, how many nodes
    before and after, and the saving per replay of the graph."""
    groups = advice.groups[:top]
    short = short_names([k for g in groups for k in (*g.kernels, g.anchor_kernel) if k])
    measured = {c.ranks: c for c in advice.comparisons if len(c.ranks) == 1}
    unit = advice.unit
    t = Table(title=f"{advice.name}: what to fuse, by saving per {unit}")
    t.add_column("#", justify="right", no_wrap=True)
    t.add_column("scope", no_wrap=True)
    t.add_column("kernels (in order)", overflow="fold")
    t.add_column("x", justify="right", no_wrap=True)
    t.add_column("nodes", justify="right", no_wrap=True)
    t.add_column(f"us/{unit}", justify="right", no_wrap=True)
    t.add_column("priced by (us/node)", overflow="fold")
    if measured:
        t.add_column(f"measured us/{unit} [95%]", no_wrap=True)
    for g in groups:
        kernels = _kernel_list(list(g.kernels), short)
        if g.anchor_kernel is not None:
            anchor = short.get(g.anchor_kernel, g.anchor_kernel)
            kernels = f"after {anchor} ({g.anchor_scope}): {kernels}"
        row = [
            str(g.rank),
            g.scope,
            kernels,
            str(g.occurrences),
            f"{g.nodes_now} -> {g.nodes_after}",
            f"{g.saving_us:.1f}",
            g.priced_by,
        ]
        if measured:
            c = measured.get((g.rank,))
            row.append(
                ""
                if c is None
                else f"{c.measured_us:.1f} [{c.measured_lo:.1f}, {c.measured_hi:.1f}] ({c.b})"
            )
        t.add_row(*row)
    return t


def comparisons_table(advice: Advice) -> Table:
    """Predicted against measured, for the variant pairs the costs timed."""
    unit = advice.unit
    t = Table(title=f"Predicted against measured saving (us per {unit})")
    for c in (
        "A -> B",
        "groups",
        "nodes",
        "predicted",
        "by type",
        "with B's node",
        "measured",
        "95% interval",
        "verdict",
    ):
        t.add_column(c, justify="left" if c in ("A -> B", "verdict") else "right", no_wrap=True)
    for c in advice.comparisons:
        verdict = {True: "within", False: "outside", None: "not the same change"}[c.within]
        t.add_row(
            f"{c.a} -> {c.b}",
            ", ".join(f"#{r}" for r in c.ranks),
            f"{c.removed_nodes} ({c.variant_removed_nodes})",
            f"{c.predicted_us:.1f}",
            f"{c.predicted_by_type_us:.1f}",
            f"{c.predicted_with_b_us:.1f}",
            f"{c.measured_us:.1f}",
            f"[{c.measured_lo:.1f}, {c.measured_hi:.1f}]",
            verdict,
        )
    return t
