"""A sweep (`sweep.json`, `sweep --json`) as a source of node exports
(capture/export/sources.py): it holds each size's export in full, by size name."""

from __future__ import annotations

from typing import Any

from graph_harness.capture.export.documents import Fields
from graph_harness.capture.export.kinds import SWEEP, SWEEP_VERSIONS_READ, Source, check_version


def sweep_exports(doc: dict, where: str) -> dict[str, Any]:
    """A sweep's exports by size name, its envelope checked as far as they go; each
    export is checked by NodeExport.from_dict when taken."""
    check_version(doc, where, SWEEP_VERSIONS_READ, "a sweep", "sweep again")
    f = Fields(where)
    exports = f.obj("exports", doc.get("exports"))
    if not exports:
        f.fail("exports", "the sweep holds no export")
    return exports


SOURCE = Source(name="a sweep", schema=SWEEP, several=sweep_exports, called="the sweep")
