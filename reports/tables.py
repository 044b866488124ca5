"""Rich tables of node exports. Renders what `capture` measured; never measures."""

from __future__ import annotations

from rich.table import Table

from capture import STEPS, NodeExport


def source_note(export: NodeExport) -> str:
    if export.source == "cuda-graph":
        return f"CUDA graph nodes on {export.env.get('device')}"
    return "CPU dispatch count (no GPU: ATen ops + Triton launches, not graph nodes)"


def totals_table(exports: list[NodeExport]) -> Table:
    src = source_note(exports[0])
    t = Table(title=f"Nodes per round - {src}")
    t.add_column("variant", no_wrap=True)
    t.add_column("total", justify="right")
    for step in STEPS:
        t.add_column(step, justify="right")
    base = exports[0].total
    t.add_column(f"vs {exports[0].variant}", justify="right")
    for e in exports:
        df = e.frame()
        per_step = df.groupby("step").size()
        t.add_row(
            e.variant or e.workload,
            str(e.total),
            *(str(int(per_step.get(s, 0))) for s in STEPS),
            f"{e.total - base:+d}",
        )
    return t


def per_stage_table(export: NodeExport) -> Table:
    df = export.frame()
    grid = df.groupby(["stage", "step"], dropna=False).size().unstack(fill_value=0)
    steps = [s for s in STEPS if s in grid.columns] + [s for s in grid.columns if s not in STEPS]
    t = Table(title=f"{export.variant or export.workload}: nodes per stage and step")
    t.add_column("stage", justify="right")
    for s in steps:
        t.add_column(s, justify="right")
    t.add_column("total", justify="right")
    for stage, row in grid.iterrows():
        label = "-" if stage is None or str(stage) == "<NA>" else str(stage)
        t.add_row(label, *(str(int(row.get(s, 0))) for s in steps), str(int(row.sum())))
    return t
