"""Copies between host and device memory inside a captured graph, read from its memcpy
nodes (cuda-bindings: the node's parameters, and what memory each address is).

A memcpy node copies between the same two addresses at every replay: from a pinned host
buffer it sends whatever that buffer holds at that replay (a value the step computed on
the host at capture is not recomputed), into one it writes at every replay. Pageable
host memory cannot be captured at all (the copy synchronizes), so a host source here is
pinned or registered memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.graph.reader import memcpy_params, read_graph

if TYPE_CHECKING:
    import torch

    from graph_harness.capture.check.evidence import Evidence
    from graph_harness.capture.export.nodes import NodeExport


def copies_rule(e: Evidence) -> list[Finding]:
    """Check's rule (capture/check/rules.py) of host copies: found before the trajectories
    ran (they sync after each call where there are any), a GPU's only."""
    return list(e.copies)


def host_copies(graph: torch.cuda.CUDAGraph, export: NodeExport) -> list[Finding]:
    """A finding for every memcpy node of `graph` (the kept graph `export` was read from)
    whose source or destination is host memory."""
    raw = read_graph(graph.raw_cuda_graph())
    if [r.kind for r in raw] != [n["type"] for n in export.nodes]:
        return []  # another graph than the export's: nothing to name
    out = []
    for i, (r, n) in enumerate(zip(raw, export.nodes)):
        if r.kind != "memcpy":
            continue
        p = memcpy_params(r.handle)
        if not (p.from_host or p.to_host):
            continue
        if p.from_host:
            what = (
                f"copies {p.nbytes} bytes from {p.src_memory} host memory at {p.src:#x} to the "
                "device: its source is read at every replay, whatever it holds then"
            )
        else:
            what = (
                f"copies {p.nbytes} bytes from the device to {p.dst_memory} host memory at "
                f"{p.dst:#x}: it writes there at every replay"
            )
        scope = n.get("scope")
        out.append(
            Finding(
                kind="host-copy",
                severity="warn",
                message=f"node {i} ({n['type']}, in {scope}) {what}",
                node=i,
                kernel=n.get("kernel") or n["type"],
                scope=scope,
            )
        )
    return out
