"""What a command's export argument names (`delta A B`, `advise EXPORT`): a variant of the
built-in round, or an export file (`c.json#fused`: one export of count's output)."""

from __future__ import annotations

import os
import re

from graph_harness.capture.export.kinds import DUMP_SUFFIXES, split_ref
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
