"""A node export of a graph dump (`cudaGraphDebugDotPrint`'s DOT, capture/graph/dot_reader.py):
what `count`, `delta`, `advise` and `report` take where they take an export, so a graph
dumped by any program (a C++ engine's, a colleague's file) is counted and compared as a
capture is. Its nodes have no scopes (a dump names no modules) and no environment."""

from __future__ import annotations

from pathlib import Path

from graph_harness.capture.environment import now
from graph_harness.capture.export.documents import ExportError
from graph_harness.capture.export.kinds import DUMP_SUFFIXES, Source
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.text import printable

DUMP_WORKLOAD = "dump:"  # an export's workload names the dump it was read from


def export_of_dump(path: str | Path) -> NodeExport:
    """The export of the graph dumped at `path`; ExportError in one line otherwise."""
    # the reader and the records' maker bring torch: here only (is_dump, in every table
    # of an export, must not: `graph-harness record`'s own process imports none)
    from graph_harness.capture.attribution.records import nodes_from_graph
    from graph_harness.capture.graph.dot_reader import DotDumpError, read_dump

    try:
        dump = read_dump(path)
    except DotDumpError as e:
        raise ExportError(str(e)) from None
    return NodeExport(
        source="cuda-graph",
        workload=DUMP_WORKLOAD + printable(Path(path).name),
        variant=None,
        params=None,
        nodes=nodes_from_graph(dump.nodes, []),
        created=now(),
        # flat, as every export's options are (a document's options hold plain values)
        options={
            "dump_file": printable(str(path)),
            "dump_launch_geometry": dump.verbose,
            "dump_graphs": dump.graphs,
            "module_depth": None,
        },
    )


SOURCE = Source(name="a graph dump", suffixes=DUMP_SUFFIXES, read=export_of_dump)


def is_dump(export: NodeExport) -> bool:
    """Whether an export was read from a graph dump (no scopes, no environment)."""
    return "dump_file" in export.options
