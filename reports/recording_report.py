"""The folder of a recording (`record --out`, `report --recording`): the recording itself
(recording.json and one export per graph, capture/record/recording.py), its tables as CSV,
a plot of nodes and replays per graph, and report.md, readable alone. Every figure comes
from the recording; nothing is measured here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from graph_harness.capture.files import write_csv, write_output
from graph_harness.capture.record.recording import Recording
from graph_harness.capture.rows import frame
from graph_harness.reports import plots
from graph_harness.reports.record_tables import (
    MIB,
    check_lines,
    headline,
    most_replayed_lines,
    never_replayed_lines,
    process_lines,
    program_line,
    recaptured_lines,
)
from graph_harness.reports.tables import default_depth
from graph_harness.reports.text import markdown_table

if TYPE_CHECKING:
    from graph_harness.capture.record.graphs import GraphRecord


@dataclass(frozen=True)
class GraphRow:
    """One graph as graphs.csv shows it: where, its key (and the captures of its process
    that share it, by capture order), what its region read, nodes, replays, pool, site,
    its export's file and its check."""

    process: str
    pid: int
    rank: int | None
    index: int
    name: str
    key: str
    key_source: str
    shares_key_with: str
    reads: str | None
    status: str
    nodes: int
    replays: int
    launches: int
    pool_reserved_bytes: int | None
    pool: str | None
    capture_s: float | None
    record_s: float | None
    released: bool | None
    keep_graph: bool | None
    site_library: str | None
    site_user: str | None
    export: str | None
    error: str | None
    check: str | None
    check_compared: int | None
    check_finding: str | None


def _row(rec: Recording, g: GraphRecord, name: str, file: str, shared: list[int]) -> GraphRow:
    check = g.check
    return GraphRow(
        process=rec.process_label(g), pid=g.pid, rank=g.rank, index=g.index, name=name,
        key=g.key, key_source=g.key_source, shares_key_with=" ".join(map(str, shared)),
        reads=None if g.reads is None else "; ".join(g.reads), status=g.status,
        nodes=g.nodes, replays=g.replays, launches=g.nodes * g.replays,
        pool_reserved_bytes=g.pool_reserved,
        pool=None if g.pool is None else f"{g.pool[0]}:{g.pool[1]}",
        capture_s=g.capture_s, record_s=g.record_s, released=g.released,
        keep_graph=g.keep_graph, site_library=g.site.library, site_user=g.site.user,
        export=file if g.export is not None else None, error=g.error,
        check=None if check is None else check.status,
        check_compared=None if check is None else check.compared_count,
        check_finding=None if check is None else check.line(),
    )  # fmt: skip


def graphs_frame(rec: Recording) -> pd.DataFrame:
    """One row per graph (graphs.csv: GraphRow's columns, also where there is none)."""
    shared = {id(g): [x.index for x in gs if x is not g] for gs in rec.shared_keys() for g in gs}
    rows = [
        _row(rec, g, name, file, shared.get(id(g), []))
        for g, name, file in zip(rec.graphs, rec.names(), rec.files())
    ]
    return frame(rows, GraphRow)


REPORT_FILES = ("graphs.csv", "recorded_graphs.png", "modules.csv", "report.md")


def write_recording(folder: Path, rec: Recording, *, command: str) -> Path:
    """Everything into `folder` (which exists, empty): see the module's notes."""
    rec.write(folder)
    return write_report(folder, rec, command=command)


def write_report(folder: Path, rec: Recording, *, command: str) -> Path:
    """What is made from the recording (REPORT_FILES) into `folder`, which holds it."""
    table = graphs_frame(rec)
    write_csv(folder / "graphs.csv", table)
    exports = [g.export for g in rec.graphs if g.export is not None]
    depth = default_depth(exports)
    program = program_line(rec.program) if rec.program is not None else None
    lines = [
        "# Recording",
        "",
        f"- command: `{command}`",
        f"- program: `{program}`" if program is not None else "- a block of Python code",
        f"- recorded {rec.created}",
        f"- {headline(rec)}",
        "",
    ]
    notes = process_lines(rec)
    if notes:
        lines += ["Notes:", "", *[f"- {n}" for n in notes], ""]
    if not table.empty:
        shown = table[["process", "index", "name", "key_source", "nodes", "replays"]].copy()
        shown["pool MiB"] = table["pool_reserved_bytes"].map(
            lambda b: None if pd.isna(b) else round(b / MIB, 1)
        )
        shown["site"] = [
            " <- ".join(x for x in (lib, user) if isinstance(x, str)) or "-"
            for lib, user in zip(table["site_library"], table["site_user"])
        ]
        lines += ["## Graphs, in capture order (graphs.csv)", "", markdown_table(shown), ""]
        found = never_replayed_lines(rec, most=20) + recaptured_lines(rec)
        lines += [f"- {x}" for x in found + most_replayed_lines(rec)]
        if rec.options.check:
            lines += ["", "## Checked against their eager forms (record --check)", ""]
            lines += [f"- {x}" for x in check_lines(rec) or ["no graph was replayed"]]
        lines += ["", "![nodes and replays per graph](recorded_graphs.png)", ""]
        plots.recorded_graphs(table, folder / "recorded_graphs.png")
    if rec.options.module_scopes and not table.empty:
        mods = rec.by_module(depth)
        write_csv(folder / "modules.csv", mods)
        cut = f" (cut at depth {depth})" if depth is not None else ""
        lines += [
            f"## By module, over every graph{cut} (modules.csv)",
            "",
            "`nodes`: summed over the graphs; `launches`: nodes times their graph's replays, "
            "the node launches the program made. Nodes no module ran around stay `unscoped`, "
            "at their capture site.",
            "",
            markdown_table(mods),
            "",
        ]
    write_output(folder / "report.md", "\n".join(lines) + "\n")
    return folder / "report.md"
