"""What a command's export argument names (`delta A B`, `advise EXPORT`): a variant of the
built-in round, an export file (`c.json#fused`: one export of count's output), or a
recording whole (its folder, or its recording.json)."""

from __future__ import annotations

import os
import re

from graph_harness.capture.export.kinds import (
    DUMP_SUFFIXES,
    RECORDING,
    RECORDING_DOCUMENT,
    schema_of,
    split_ref,
)
from graph_harness.capture.round.params import VARIANTS
from graph_harness.reports.cli.console import UsageError


def is_export_path(ref: str) -> bool:
    """The rule for `delta A B`: a path holds a separator or ends in .json (or .dot, .gv:
    a graph dump); anything else is a variant name (so a file named `shipped` in the
    current folder is `./shipped`).
    `c.json#fused` is one export of count's output (capture/export/kinds.py)."""

    def looks(p: str) -> bool:
        seps = ("/", os.sep, os.altsep or "/")
        return p.lower().endswith((".json", *DUMP_SUFFIXES)) or any(c in p for c in seps)

    # the file as named (`c.json#fused` may be a file's whole name), or what comes before a '#'
    return looks(str(split_ref(ref)[0])) or looks(ref.partition("#")[0])


def is_recording(ref: str) -> bool:
    """A recording's folder (it holds recording.json), or its recording.json, whole (one
    graph of it, `recording.json#NAME`, is an export: capture/export/recording_output.py);
    a node export that happens to be named recording.json is an export."""
    doc = RECORDING_DOCUMENT
    if os.path.isdir(ref):
        return os.path.isfile(os.path.join(ref, doc))
    return os.path.basename(ref) == doc and _schema_of_file(ref) in (RECORDING, None)


def _schema_of_file(path: str) -> str | None:
    """The schema a file's JSON names; None where it cannot be read as JSON (the reader
    that takes it says why; load_json reads a regular file only, never waiting on a FIFO)."""
    from graph_harness.capture.export.documents import ExportError, load_json

    try:
        return schema_of(load_json(path, "document"))
    except ExportError:
        return None


def neither(ref: str) -> UsageError:
    """The refusal of a reference that is neither a variant nor an export file path."""
    what = f"{ref!r} is neither a variant ({', '.join(VARIANTS)}) nor an export or dump path"
    if "#" in ref:  # FILE#NAME whose FILE is no path: ./ would not help
        path = split_ref(ref)[0]
        return UsageError(
            f"{what}: in FILE#NAME (one export of count's output, a sweep or a recording) "
            "FILE holds a '/' or ends "
            f"in .json, and {path!r} does neither: ./{path} for a file here"
        )
    if os.path.isdir(ref):  # an output folder of ours, say: name a document in it
        from graph_harness.capture.paths import documents_in

        return UsageError(f"{what}: {ref} is a folder; give a file{documents_in(ref)}")
    return UsageError(
        f"{what} (a path holds a '/' or ends in .json or .dot: ./{ref} for a file here)"
    )


def read_files(files: list[str]) -> tuple[list[str], list]:
    """Each file's export (a graph dump or a node export: capture/export/kinds.py's
    read_export) and a name for it, unique and safe as part of a file name (its stem)."""
    from graph_harness.capture.export.kinds import read_export

    exports = [read_export(f) for f in files]
    names: list[str] = []
    for f in files:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", os.path.basename(str(f).partition("#")[0]))
        stem = stem.rsplit(".", 1)[0] or "file"
        name, k = stem, 2
        while name in names:
            name, k = f"{stem}-{k}", k + 1
        names.append(name)
    return names, exports
