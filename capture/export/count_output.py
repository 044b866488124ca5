"""count's output (`count --json`) as a source of node exports (capture/export/sources.py):
it holds every export it counted in full, by name."""

from __future__ import annotations

from typing import Any

from graph_harness.capture.export.documents import Fields
from graph_harness.capture.export.kinds import COUNT, COUNT_SCHEMA_VERSION, Source, check_version


def count_exports(doc: dict, where: str) -> dict[str, Any]:
    """count's output checked as far as its own envelope; each export is checked by
    NodeExport.from_dict when taken."""
    check_version(doc, where, (COUNT_SCHEMA_VERSION,), "count's output", "count again")
    f = Fields(where)
    f.keys("", doc, ("schema", "schema_version", "exports"), ("checks", "host_launch"))
    exports = f.obj("exports", doc["exports"])
    if not exports:
        f.fail("exports", "count's output holds no export")
    return exports


SOURCE = Source(
    name="count's output (`count --json`)",
    schema=COUNT,
    several=count_exports,
    called="count's output",
)
