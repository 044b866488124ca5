"""A sweep (`sweep.json`, `sweep --json`) as a source of node exports
(capture/export/sources.py): it holds each size's export in full, by size name."""

from __future__ import annotations

from typing import Any

from graph_harness.capture.export.documents import Fields, show
from graph_harness.capture.export.kinds import SWEEP, SWEEP_VERSIONS_READ, Source


def sweep_exports(doc: dict, where: str) -> dict[str, Any]:
    """A sweep's exports by size name, its envelope checked as far as they go; each
    export is checked by NodeExport.from_dict when taken."""
    f = Fields(where)
    version = doc.get("schema_version")
    if type(version) is not int or version not in SWEEP_VERSIONS_READ:
        f.fail(
            "schema_version",
            f"{show(version)} is not a sweep version this graph-harness reads "
            f"({', '.join(map(str, SWEEP_VERSIONS_READ))}); sweep again with this graph-harness",
        )
    exports = f.obj("exports", doc.get("exports"))
    if not exports:
        f.fail("exports", "the sweep holds no export")
    return exports


SOURCE = Source(name="a sweep", schema=SWEEP, several=sweep_exports, called="the sweep")
