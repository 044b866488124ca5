"""Rich tables of node exports. Renders what `capture` measured; never measures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from graph_harness.capture import NodeExport
from graph_harness.capture.attribution.rollup import deeper_than, scope_tree
from graph_harness.capture.export.dump import is_dump

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pandas as pd

    from graph_harness.capture.export.delta import NodeDelta
    from graph_harness.capture.export.families import FamilyRule


def source_note(export: NodeExport) -> str:
    if export.source == "cuda-graph":
        if is_dump(export):
            return "CUDA graph nodes read from a graph dump"
        device = export.env.get("device")
        return f"CUDA graph nodes on {device}" if device else "CUDA graph nodes"
    return "CPU dispatch count (no GPU: ATen ops + Triton launches, not graph nodes)"


def totals_table(exports: list[NodeExport]) -> Table:
    if not all(e.is_round for e in exports):
        return workload_totals_table(exports)
    src = source_note(exports[0])
    t = Table(title=f"Nodes per round - {src}")
    t.add_column("variant", no_wrap=True)
    t.add_column("total", justify="right")
    steps = exports[0].step_order
    for step in steps:
        t.add_column(step, justify="right")
    base = exports[0].total
    t.add_column(f"vs {exports[0].variant}", justify="right")
    gathered = 0
    for e in exports:
        per_step = e.counts("step")
        gathered += int(per_step.get("gather", 0))
        t.add_row(
            e.variant or e.workload,
            str(e.total),
            *(str(int(per_step.get(s, 0))) for s in steps),
            f"{e.total - base:+d}",
        )
    if "gather" in steps and not gathered:
        # capture/round/decode.py: on one process the other ranks' slots are static inputs
        t.caption = (
            "gather 0: one process, no all-gather (the other ranks' slots are static inputs "
            "filled once); torchrun ... count --distributed captures the real one"
        )
    return t


def workload_totals_table(exports: list[NodeExport]) -> Table:
    """Totals of any workload: by node type; no round columns. A workload's name is one
    unbroken cell (a qualified name never wraps mid-word)."""
    t = Table(title=f"Nodes per call - {source_note(exports[0])}")
    t.add_column("workload", no_wrap=True)
    t.add_column("compiled", no_wrap=True)
    t.add_column("total", justify="right")
    per_types = [e.counts("type") for e in exports]
    types = sorted({ty for per_type in per_types for ty in per_type.index})
    for ty in types:
        t.add_column(ty, justify="right", no_wrap=True)
    for e, per_type in zip(exports, per_types):
        compiled = e.options.get("compiled")
        t.add_row(
            e.name,
            "-" if compiled is None else ("yes" if compiled else "no"),
            str(e.total),
            *(str(int(per_type.get(ty, 0))) for ty in types),
        )
    return t


SHOW_ALL = "--module-scopes all shows every level"  # how to see what a cut table hides


def default_depth(exports: Iterable[NodeExport]) -> int | None:
    """Where a user's step's scope tree is cut when no DEPTH is given (`--module-scopes`
    alone, or no module scopes): one row per decoder layer, the exports' block depth
    (`layers.i` is 2, HF's `model.layers.i` 3); every level (None) where no blocks were
    found. The one source of that default: count's and profile's tables (through
    reports/cli/args.py's shown_depth), report.md's tables, its CSVs and its plots."""
    depths = [e.options.get("block_depth") for e in exports]
    return max((d for d in depths if d is not None), default=None)


def deeper_note(frame: pd.DataFrame, depth: int | None, how: str = SHOW_ALL) -> str | None:
    """What a table cut at `depth` must say: how many nodes sit deeper (counted in their
    depth-`depth` scope's own) and how to see them; None when none do."""
    n = deeper_than(frame, depth)
    if not n:
        return None
    return (
        f"{n} of {len(frame)} nodes sit deeper than depth {depth} (counted in the own of "
        f"their depth-{depth} scope): {how}"
    )


def scope_tree_table(export: NodeExport, depth: int | None = None) -> Table:
    """Nodes per scope, as a tree rolled up by qualified-name prefix: `nodes` counts all
    under a scope, `own` those in it and in none of its children shown (a scope at the cut
    `depth` owns everything under it: capture/attribution/rollup.py's scope_tree, as
    report.md's table, its CSVs and its plot count them). Cut at `depth`, print
    `deeper_note` beside it (a line of its own: it must not wrap)."""
    tree = scope_tree(export.frame(), depth)
    name = export.name
    t = Table(title=f"{name}: nodes by scope (modules nest; each level sums to its parent)")
    t.add_column("scope", no_wrap=True)
    fused = bool(tree["fused"].any())
    for c in ("nodes", "own", *(["fused"] if fused else []), "share"):
        t.add_column(c, justify="right", no_wrap=True)
    if fused:
        t.caption = (
            "fused: own nodes that are compiled kernels Inductor fused from several "
            "modules, counted in their deepest common module (`fused_modules` in the export)"
        )
    total = max(export.total, 1)
    for r in tree.itertuples():
        label = r.scope if r.depth == 0 else "  " * (r.depth - 1) + r.scope
        extra = [str(r.fused)] if fused else []
        t.add_row(label, str(r.nodes), str(r.own), *extra, f"{100 * r.nodes / total:.1f}%")
    return t


def per_kernel_table(export: NodeExport, *, top: int = 30) -> Table:
    """The most frequent kernels (CPU: ATen ops), with how many scopes each appears in."""
    df = export.frame()
    df["kernel"] = df["kernel"].fillna("").replace("", "-")
    grouped = df.groupby(["type", "kernel"]).agg(
        nodes=("index", "size"), scopes=("scope", "nunique")
    )
    grouped = grouped.sort_values("nodes", ascending=False).reset_index()
    names = _short_names(grouped.kernel)
    name = export.name
    t = Table(title=f"{name}: nodes by type and kernel")
    t.add_column("type", no_wrap=True)
    t.add_column("kernel", overflow="fold")
    t.add_column("nodes", justify="right", no_wrap=True)
    t.add_column("scopes", justify="right", no_wrap=True)
    for r in grouped.head(top).itertuples():
        t.add_row(r.type, names.get(r.kernel, r.kernel), str(r.nodes), str(r.scopes))
    if len(grouped) > top:
        rest = grouped.iloc[top:]
        t.add_row("", f"... {len(rest)} more kernels", str(int(rest.nodes.sum())), "")
    return t


def per_family_table(export: NodeExport, rules: tuple[FamilyRule, ...] | None = None) -> Table:
    """Nodes by kernel family (capture/export/families.py; docs/families.md): what a
    graph with no scopes (a dump) is best read by."""
    from graph_harness.capture.export.families import RULES, families

    df = export.frame()
    per = families(df, rules or RULES).value_counts()
    total = int(per.sum())
    t = Table(title=f"{export.name}: nodes by kernel family")
    t.add_column("family", no_wrap=True)
    t.add_column("nodes", justify="right", no_wrap=True)
    t.add_column("share", justify="right", no_wrap=True)
    for fam, n in per.items():
        t.add_row(str(fam), str(int(n)), f"{100 * n / total:.1f}%")
    return t


def per_stage_table(export: NodeExport) -> Table:
    grid = export.per_stage_step()
    order = export.step_order
    steps = [s for s in order if s in grid.columns] + [s for s in grid.columns if s not in order]
    t = Table(title=f"{export.variant or export.workload}: nodes per stage and step")
    t.add_column("stage", justify="right")
    for s in steps:
        t.add_column(s, justify="right")
    t.add_column("total", justify="right")
    for stage, row in grid.iterrows():
        label = "-" if stage is None or str(stage) == "<NA>" else str(stage)
        t.add_row(label, *(str(int(row.get(s, 0))) for s in steps), str(int(row.sum())))
    return t


def delta_tables(d: NodeDelta, depth: int | None = None) -> list[Table]:
    """Tables of a NodeDelta: by step (a round) or by scope (any other workload: the
    scope tree to `depth`, rows that differ and every top-level one; none where neither
    side has scopes), by type, by kernel family (graph nodes), by kernel (the rows that
    differ)."""
    a, b = d.label(d.a), d.label(d.b)
    names = _short_names(d.by_kernel.kernel)
    out = []
    if d.is_round:
        first = ("by step (per round)", d.by_step, ["step"])
    else:
        from graph_harness.capture.attribution.repeats import fold_scopes

        tree = d.by_scope
        keep = (tree.depth <= 1) | (tree.delta != 0)
        if depth is not None:
            keep &= tree.depth <= depth
        # repeated layers that agree row for row: one row, its values per layer
        tree = fold_scopes(tree[keep], ["a", "b", "delta"])
        tree = tree.assign(
            scope=[
                ("  " * (r.depth - 1) + r.scope + (f" (x{r.times}, each)" if r.times > 1 else ""))
                if r.depth
                else "(all)"
                for r in tree.itertuples()
            ]
        )
        first = (
            "by scope (modules nest; rows that differ, and every top-level one)",
            tree,
            ["scope"],
        )
    # no scope on either side (graph dumps, recordings without module scopes): no tree
    scoped = d.is_round or bool((d.by_scope.depth > 0).any())
    parts = [first] if scoped else []
    parts.append(("by node type", d.by_type, ["type"]))
    if d.by_family is not None:
        parts.append(("by kernel family", d.by_family, ["family"]))
    if d.by_family_per_block is not None:  # graphs no one scoped: one repeated block each
        parts.append(("one repeated block, by kernel family", d.by_family_per_block, ["family"]))
    parts.append(("by kernel (rows that differ)", d.by_kernel, ["type", "kernel"]))
    for title, df, keys in parts:
        t = Table(title=f"{a} -> {b}: {title}")
        for k in keys:
            t.add_column(k, no_wrap=k == "scope", overflow="fold")
        for c in (a, b):  # a long name (a --target's path) folds, and never crops a scope
            t.add_column(c, justify="right", overflow="fold")
        t.add_column("delta", justify="right", no_wrap=True)
        for row in df.itertuples(index=False):
            r = row._asdict()
            shown = [names.get(r[k], r[k]) if k == "kernel" else str(r[k]) for k in keys]
            t.add_row(*shown, str(r["a"]), str(r["b"]), f"{r['delta']:+d}")
        if df.empty:  # say it, rather than print a table with no rows
            t.add_row("(none differs)", *[""] * (len(keys) - 1), "", "", "")
        out.append(t)
    return out


def _short_names(kernels: Iterable[str | None]) -> dict[str, str]:
    """reports/kernel_names.py's short_names, imported here: its demangler is torch's, and
    the tables of a recording (`graph-harness record`'s own process) import no torch."""
    from graph_harness.reports.kernel_names import short_names

    return short_names(kernels)
