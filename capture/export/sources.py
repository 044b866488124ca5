"""Where a node export is read from (`read_export`, capture/export/kinds.py): SOURCES, the
registry, in the order each is tried. Each source is a `Source` its own module defines:
taken by its file's name (a graph dump) or by its document's schema (a node export,
count's output, a sweep); a new node-count source is one module and one line here. No
torch, no pandas: each source's reader brings what it needs when it reads."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graph_harness.capture.export import count_output, dump, nodes, recording_output, sweep_output
from graph_harness.capture.export.documents import ExportError, show
from graph_harness.capture.export.kinds import Source, load_document, schema_of
from graph_harness.capture.export.nodes import NodeExport

SOURCES: tuple[Source, ...] = (
    dump.SOURCE,  # a graph dump (.dot, .gv): one graph
    nodes.SOURCE,  # a node export: one
    count_output.SOURCE,  # count's output: every export it counted
    sweep_output.SOURCE,  # a sweep: each size's export
    recording_output.SOURCE,  # a recording: each graph's export
)
# what `#NAME` may name an export of, as a refusal says it
_SEVERAL = " or of ".join(s.name for s in SOURCES if s.several is not None)


def read_source(ref: str | Path, path: str | Path, name: str | None) -> NodeExport:
    """The export `ref` names (`path`, and after a `#` its `name`), from the first source
    that takes it; a document no source names is read as a node export, whose own checks
    judge it."""
    by_file = next((s for s in SOURCES if Path(path).suffix.lower() in s.suffixes), None)
    if by_file is not None and by_file.read is not None:
        if name is not None:
            raise ExportError(
                f"{ref}: #{name} names an export of {_SEVERAL}, and {path} is {by_file.name} "
                f"(one graph): drop #{name}"
            )
        return by_file.read(path)
    doc = load_document(path, "export")
    schema = schema_of(doc)
    source = next((s for s in SOURCES if s.schema is not None and s.schema == schema), None)
    if source is None or source.several is None:
        if name is not None:
            raise ExportError(
                f"{ref}: #{name} names an export of {_SEVERAL}, and {path} is neither: drop #{name}"
            )
        return NodeExport.from_dict(doc, where=str(path))
    return _one_of(ref, path, name, source, source.several(doc, str(path)))


def _one_of(
    ref: str | Path, path: str | Path, name: str | None, source: Source, exports: Mapping[str, Any]
) -> NodeExport:
    """The export `name` of a document holding several; the one it holds where `name` is
    None."""
    names = ", ".join(exports)
    if name is None:
        if len(exports) != 1:
            first = next(iter(exports))
            raise ExportError(
                f"{path}: {source.called} holds {len(exports)} exports ({names}); name one "
                f"after a '#': {shlex.quote(f'{path}#{first}')}"
            )
        name = next(iter(exports))
    elif name not in exports:
        raise ExportError(f"{ref}: {source.called} has no export {show(name)} (it holds {names})")
    return NodeExport.from_dict(exports[name], where=f"{path}#{name}")
