"""Which node of a graph writes a tensor that differs: the nodes whose parameters point
into the tensor's bytes (capture/graph/pointers.py, read as the capture ended), named by
their index, kind, kernel and module scope in the graph's export.

A memset's or memcpy's destination is a write; a kernel's arguments say only that it
points into the tensor (it may read it), so that is what is said of it.
"""

from __future__ import annotations

from typing import Any

import torch

from graph_harness.capture.graph.pointers import NodePointers, first_writer, touching
from graph_harness.capture.graph.reader import demangle
from graph_harness.capture.scopes.names import UNSCOPED

_KERNEL_SHOWN = 60  # characters of a kernel's name


def byte_range(t: torch.Tensor) -> tuple[int, int] | None:
    """[start, end) of the bytes `t` spans (None: it has none)."""
    if t.numel() == 0:
        return None
    lo = t.data_ptr()
    span = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if s > 0) + 1
    return lo, lo + span * t.element_size()


def describe_writer(
    span: tuple[int, int] | None,
    pointers: list[NodePointers | None],
    nodes: list[dict[str, Any]] | None,
) -> str | None:
    """The first node that writes the bytes `span` for certain, else the first whose
    arguments point into them, in words; None where no node's parameters point there."""
    if span is None:
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
