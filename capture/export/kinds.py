"""What a graph-harness JSON document is, and the one place that reads a document by what
it holds: every command that takes a file goes through `load_document` (or `read_export`),
so a document of another kind is refused in one line naming the file to pass instead.

Every JSON graph-harness writes names its kind in `schema` (a timeline in its `otherData`).
Which documents each command reads (exports, count's and sweep's by `#name`, replay's for
`--costs`, budget files): docs/output.md, "Which document each command reads". Schema
strings are listed here, not imported (a test checks each against its writer), so reading
a kind imports neither torch nor pandas.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph_harness.capture.export.documents import ExportError, Fields, load_json, show

if TYPE_CHECKING:
    from graph_harness.capture.export.nodes import NodeExport  # pandas, and cyclic

# schema -> what the document is, as a refusal names it
KINDS = {
    "graph-harness/nodes": "a node export",
    "graph-harness/count": "count's output (`count --json`)",
    "graph-harness/replay": "a replay document (`replay --out DIR`'s replay.json, `replay --json`)",
    "graph-harness/profile": "a profile (`profile --out DIR`'s profile.json, `profile --json`)",
    "graph-harness/check": "check's findings (`check --out DIR`'s check.json, `check --json`)",
    "graph-harness/delta": "a delta of two exports (`delta --json`)",
    "graph-harness/advice": "advise's output (`advise --json`)",
    "graph-harness/node-budgets": "a node-budget file (`pytest --update-node-budgets`)",
    "graph-harness/trace": "a timeline (`profile --out DIR`'s trace.json, for Perfetto)",
    "graph-harness/output": "an output folder's manifest",
    "graph-harness/sweep": "a sweep (`sweep --out DIR`'s sweep.json, `sweep --json`)",
    "graph-harness/recording": "a recording (`record --out DIR`'s recording.json)",
    "graph-harness/recording-delta": "a delta of two recordings (`delta REC_A REC_B --json`)",
}
NODES, COUNT, REPLAY, BUDGETS, SWEEP, RECORDING = (
    "graph-harness/nodes",
    "graph-harness/count",
    "graph-harness/replay",
    "graph-harness/node-budgets",
    "graph-harness/sweep",
    "graph-harness/recording",
)
# The version a sweep writes (capture/sweep/document.py takes it from here), and those
# read: version 2 only added fields beside the exports, which are all a reader takes.
SWEEP_SCHEMA_VERSION = 2
SWEEP_VERSIONS_READ = (1, 2)
COUNT_SCHEMA_VERSION = 1
RECORDING_SCHEMA_VERSION = 1
# a recording's document in its folder (capture/record/recording.py writes it), and the
# files a graph dump is taken by (capture/export/dump.py reads them)
RECORDING_DOCUMENT = "recording.json"
DUMP_SUFFIXES = (".dot", ".gv")

EXPORT_FILE = (
    "pass a node export: `graph-harness count --out DIR` writes DIR/nodes-VARIANT.json "
    "(DIR/nodes-target.json for --target), and `count --json` prints them all"
)


@dataclass(frozen=True)
class Reader:
    """What one reader takes: the schemas it reads, what it calls its input in a read
    error, what it wants in a refusal, and the file to pass instead."""

    takes: tuple[str, ...]
    reading: str
    wanted: str
    instead: str


READERS = {
    "export": Reader((NODES, COUNT, SWEEP, RECORDING), "export", "a node export", EXPORT_FILE),
    "replay": Reader(
        (REPLAY,),
        "replay document",
        "a replay document",
        "--costs takes a replay document: `graph-harness replay --out DIR` writes "
        "DIR/replay.json (`replay --json` prints the same)",
    ),
    "budgets": Reader(
        (BUDGETS,),
        "node budgets",
        "a node-budget file",
        "record= takes a budget file that `pytest --update-node-budgets` writes (a new "
        "path is fine)",
    ),
}


@dataclass(frozen=True, kw_only=True)
class Source:
    """One source of node exports, as capture/export/sources.py registers it: `name` as a
    refusal names it. Taken by its file's `suffixes` and read whole by `read` (one graph);
    or by its document's `schema`, and then one export (`several` None) or several by name
    (`several`: the document's exports, its envelope checked; `called`: the document, as
    its errors name it)."""

    name: str
    suffixes: tuple[str, ...] = ()
    read: Callable[[str | Path], NodeExport] | None = None
    schema: str | None = None
    several: Callable[[dict, str], Mapping[str, Any]] | None = None
    called: str = ""


def check_version(doc: dict, where: str, read: tuple[int, ...], what: str, again: str) -> None:
    """ExportError naming the file unless `doc`'s schema_version is one of `read`: "`what`
    version N is not one this graph-harness reads (...); `again` with this graph-harness"."""
    version = doc.get("schema_version")
    if type(version) is not int or version not in read:
        Fields(where).fail(
            "schema_version",
            f"{show(version)} is not a version of {what} this graph-harness reads "
            f"({', '.join(map(str, read))}); {again} with this graph-harness",
        )


# where a document passed to the wrong reader goes instead
ELSEWHERE = {
    NODES: "an export goes to advise's EXPORT or delta's A and B",
    COUNT: "its exports go to advise's EXPORT or delta's A and B, FILE#NAME for one",
    SWEEP: "its sizes' exports go to advise's EXPORT or delta's A and B, FILE#batchN for one",
    RECORDING: "its graphs' exports go to advise's EXPORT or delta's A and B, FILE#NAME for one",
    REPLAY: "a replay document goes to advise --costs",
    BUDGETS: "a budget file goes to node_budget's record=",
}


def schema_of(doc: Any) -> str | None:
    """The kind a document names: `schema`, or for a timeline `otherData.schema`."""
    if not isinstance(doc, dict):
        return None
    schema = doc.get("schema")
    if schema is None and isinstance(doc.get("otherData"), dict):
        schema = doc["otherData"].get("schema")
    return schema if isinstance(schema, str) else None


def refuse_other_kinds(
    doc: Any, where: str, want: str, error: type[ExportError] = ExportError
) -> None:
    """`error` in one line if `doc` is a graph-harness document of a kind `want` does not
    read, naming what it is and the file to pass; anything else passes (the reader's own
    checks judge a document of its kind, or one that is no graph-harness document)."""
    schema, reader = schema_of(doc), READERS[want]
    if schema in KINDS and schema not in reader.takes:
        hint = f" ({ELSEWHERE[schema]})" if schema in ELSEWHERE else ""
        raise error(
            f"{where}: this is {KINDS[schema]}, not {reader.wanted}{hint}; {reader.instead}"
        )


def load_document(path: str | Path, want: str, error: type[ExportError] = ExportError) -> Any:
    """Parse the file at `path` (a regular file, UTF-8 JSON) for a reader of `want`
    ("export", "replay", "budgets"), refusing a graph-harness document of another kind."""
    doc = load_json(path, READERS[want].reading, error)
    refuse_other_kinds(doc, str(path), want, error)
    return doc


def split_ref(ref: str | Path) -> tuple[str | Path, str | None]:
    """A document reference: a path, or `PATH#NAME` naming one export of count's output.
    A path that exists as written is a path, `#` and all; else PATH is the shortest part
    before a `#` that exists (so a NAME may hold a `#`: `c.json#a#b`), or, where none does,
    all before the last `#` (the error then names that file)."""
    if isinstance(ref, Path) or "#" not in ref or os.path.lexists(ref):
        return ref, None
    at = ref.find("#")
    while at != -1:
        if os.path.lexists(ref[:at]):
            return ref[:at], ref[at + 1 :]
        at = ref.find("#", at + 1)
    path, name = ref.rsplit("#", 1)
    return path, name


def read_export(ref: str | Path) -> NodeExport:
    """The NodeExport at `ref`: a node export file, one export of count's output or of a
    sweep (`PATH#NAME`; the name may be left out when it holds one), or a graph dump (a
    .dot file cudaGraphDebugDotPrint wrote: capture/export/dump.py); each source is one of
    capture/export/sources.py's SOURCES. ExportError in one line otherwise, naming the file
    and what to pass."""
    from graph_harness.capture.export.sources import read_source

    path, name = split_ref(ref)
    return read_source(ref, path, name)
