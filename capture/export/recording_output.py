"""A recording (`record --out DIR`'s recording.json) as a source of node exports
(capture/export/sources.py): each graph's export, by the graph's name as record's tables
show it (`DIR/recording.json#decode n=4`). A name two processes share is told apart by its
file (`NAME (graph-3)`). The recording is read here as JSON, its envelope as far as the
exports go; capture/record/recording.py reads it whole."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from graph_harness.capture.export.documents import Fields, load_json
from graph_harness.capture.export.kinds import (
    RECORDING,
    RECORDING_SCHEMA_VERSION,
    Source,
    check_version,
)

GRAPH_FILE = re.compile(r"graph-[0-9]+\.json")  # a graph's export, beside the document


def recording_exports(doc: dict, where: str) -> dict[str, Any]:
    """A recording's exports by graph name (graphs without nodes have none), each read
    from its file beside the document (or held inline, as `record --json` prints it);
    each export is checked by NodeExport.from_dict when taken."""
    check_version(doc, where, (RECORDING_SCHEMA_VERSION,), "a recording", "record again")
    f = Fields(where)
    graphs = f.array("graphs", doc.get("graphs"))
    named: list[tuple[str, str, Any]] = []
    for j, g in enumerate(graphs):
        g = f.obj(f"graphs[{j}]", g)
        export = g.get("export")
        if export is None:
            continue
        name = f.string(f"graphs[{j}].name", g.get("name"))
        named.append((name, f"graph-{j}", _export(f, f"graphs[{j}]", export)))
    if not named:
        f.fail("graphs", "the recording holds no graph with an export (no graph had nodes)")
    names = [n for n, _, _ in named]
    return {(n if names.count(n) == 1 else f"{n} ({file})"): export for n, file, export in named}


def _export(f: Fields, path: str, export: Any) -> Any:
    """A graph's export: inline, or the file graph-<n>.json beside the document."""
    if isinstance(export, dict):
        return export
    if not isinstance(export, str) or not GRAPH_FILE.fullmatch(export):
        f.expected(f"{path}.export", "null or a file graph-<n>.json beside it", export)
    return load_json(Path(f.where).parent / export, "export")


SOURCE = Source(
    name="a recording (`record --out DIR`)",
    schema=RECORDING,
    several=recording_exports,
    called="the recording",
)
