"""A recording (`record --out DIR`'s recording.json) as a source of node exports
(capture/export/sources.py): each graph's export, by the graph's name as record's tables
show it (`DIR/recording.json#decode n=4`). A name two processes share is told apart by its
file (`NAME (graph-3)`). The recording is read here as JSON, its envelope as far as the
exports go; capture/record/recording.py reads it whole."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from graph_harness.capture.export.documents import ExportError, Fields, load_json, show
from graph_harness.capture.export.kinds import (
    RECORDING,
    RECORDING_SCHEMA_VERSION,
    Source,
    check_version,
)

GRAPH_FILE = re.compile(r"graph-[0-9]+\.json")  # a graph's export, beside the document


def recording_exports(doc: dict, where: str) -> Mapping[str, Any]:
    """A recording's exports by graph name (graphs without nodes have none), each read
    from its file beside the document only when taken (or held inline, as `record
    --json` prints it); each export is checked by NodeExport.from_dict when taken."""
    check_version(doc, where, (RECORDING_SCHEMA_VERSION,), "a recording", "record again")
    f = Fields(where)
    named: list[tuple[str, str, Any]] = []  # name, where in the document, export
    for j, g in enumerate(f.array("graphs", doc.get("graphs"))):
        g = f.obj(f"graphs[{j}]", g)
        export = g.get("export")
        if export is None:
            continue
        name = f.string(f"graphs[{j}].name", g.get("name"))
        if not isinstance(export, dict) and not (
            isinstance(export, str) and GRAPH_FILE.fullmatch(export)
        ):
            f.expected(f"graphs[{j}].export", "null or a file graph-<n>.json beside it", export)
        named.append((name, f"graphs[{j}]", export))
    if not named:
        f.fail("graphs", "the recording holds no graph with an export (no graph had nodes)")
    return _Graphs(f, named)


class _Graphs(Mapping[str, Any]):
    """The graphs by name (a name two processes share told apart by its file, or its
    place), each export read when taken: one bad file fails only the graph it holds."""

    def __init__(self, f: Fields, named: list[tuple[str, str, Any]]) -> None:
        self._f = f
        names = [n for n, _, _ in named]
        self._by: dict[str, tuple[str, Any]] = {}
        for n, path, export in named:
            own = n if names.count(n) == 1 else f"{n} ({_file_of(export, path)})"
            if own in self._by:
                f.fail(path, f"two graphs are named {show(own)}: read them by their files")
            self._by[own] = (path, export)

    def __getitem__(self, name: str) -> Any:
        path, export = self._by[name]
        if isinstance(export, dict):
            return export
        try:
            return load_json(Path(self._f.where).parent / export, "export")
        except ExportError as e:
            raise ExportError(f"{self._f.where}: {path}.export: {e}") from None

    def __contains__(self, name: object) -> bool:  # not Mapping's: that would read the file
        return name in self._by

    def __iter__(self) -> Iterator[str]:
        return iter(self._by)

    def __len__(self) -> int:
        return len(self._by)


def _file_of(export: Any, path: str) -> str:
    """What tells a shared name apart: its file's stem, or its place in the document."""
    return export.removesuffix(".json") if isinstance(export, str) else path


SOURCE = Source(
    name="a recording (`record --out DIR`)",
    schema=RECORDING,
    several=recording_exports,
    called="the recording",
)
