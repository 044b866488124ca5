"""Which node of a graph writes a tensor that differs: the nodes whose parameters point
into the tensor's bytes (capture/graph/pointers.py, read as the capture ended), named by
their index, kind, kernel and module scope in the graph's export.

A memset's or memcpy's destination is a write; a kernel's arguments say only that it
points into the tensor (it may read it), so that is what is said of it.
"""

from __future__ import annotations

from typing import Any

from graph_harness.capture.graph.pointers import NodePointers, first_writer, touching
from graph_harness.capture.graph.reader import demangle
from graph_harness.capture.scopes.names import UNSCOPED

_KERNEL_SHOWN = 60  # characters of a kernel's name


def describe_writer(
    span: tuple[int, int] | None,
    pointers: list[NodePointers | None],
    nodes: list[dict[str, Any]] | None,
) -> str | None:
    """The first node that writes the bytes `span` ([lo, hi): kernels/guard.py's
    byte_range) for certain, else the first whose arguments point into them, in words;
    None where no node's parameters point there."""
    if span is None or span[0] >= span[1]:
        return None
    touches = touching(pointers, *span)
    first = first_writer(touches)
    if first is None:
        return None
    node = nodes[first.index] if nodes is not None and first.index < len(nodes) else {}
    what = str(node.get("type") or "node")
    kernel = demangle(node.get("kernel") or "")
    if kernel:
        what += f" {kernel[:_KERNEL_SHOWN]}{'...' * (len(kernel) > _KERNEL_SHOWN)}"
    scope = node.get("scope")
    where = f" in {scope}" if scope and scope != UNSCOPED else ""
    verb = "written first by" if first.writes else "first pointed into by"
    more = len(touches) - 1
    tail = f"; {more} more node{'s point' if more > 1 else ' points'} into it" if more else ""
    hedge = "" if first.writes else " (a kernel's arguments do not say whether it writes)"
    return f"{verb} node {first.index}: {what}{where}{tail}{hedge}"
