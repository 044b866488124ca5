"""Graph memory, read from the graph's own pool: what the caching allocator holds for a
captured graph, and which scope each of its bytes was allocated in.

A graph's memory is its private pool's segments in the allocator's snapshot (not deltas of
`memory_reserved()`, which swing as blocks are reused); graphs sharing a pool share its
figures. By scope: the allocator's memory metadata set to the open scopes while the capture
runs, its history recording. Turning the history on replaces any history a user records
(`capture_and_keep(memory=True)` says so). docs/sweep.md, "Graph memory, from the pool".
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graph_harness.capture.scopes.recorder import ScopeKey

Pool = tuple[int, int]


@dataclass(frozen=True, kw_only=True)
class PoolMemory:
    """A pool's memory, in bytes: `reserved`, its segments (what it holds from the driver);
    `allocated`, the blocks of them in use (tensors the graphs keep: their outputs, and
    what a step allocated while captured and still holds)."""

    reserved: int
    allocated: int
    segments: int


def pool_memory(pool: Pool) -> PoolMemory:
    """The caching allocator's segments of `pool` now (reads a snapshot; no sync)."""
    segs = [s for s in _snapshot() if tuple(s["segment_pool_id"]) == tuple(pool)]
    return PoolMemory(
        reserved=sum(s["total_size"] for s in segs),
        allocated=sum(s["allocated_size"] for s in segs),
        segments=len(segs),
    )


def _snapshot() -> list[dict]:
    """The allocator's segments, without its history's trace where this torch can leave
    it out (a recorder reads them after every capture, and a program that records the
    history would have every trace entry copied each time). Every segment, not one
    pool's: torch's snapshot of one pool lists an expandable segment's first piece only."""
    import torch

    if _traces_optional():
        return torch.cuda.memory_snapshot(include_traces=False)
    return torch.cuda.memory_snapshot()


@functools.cache
def _traces_optional() -> bool:
    import torch

    return "include_traces" in inspect.signature(torch.cuda.memory_snapshot).parameters


def can_tag_allocations() -> bool:
    """Whether this torch tags allocations with metadata (memory by scope)."""
    import torch

    return hasattr(torch.cuda.memory, "_set_memory_metadata")


@dataclass(frozen=True, kw_only=True)
class ScopeBytes:
    """What the capture allocated in a pool while `scope_path` was open (outermost first;
    [] outside every scope): `reserved`, the segments it made the pool take from the
    driver; `requested`, every allocation's size (a block reused counts again); `held`,
    the allocations still live when the capture ended."""

    scope_path: tuple[str, ...]
    reserved: int
    requested: int
    held: int


class AllocationLog:
    """Tags every allocation a capture makes with the scopes open (a Recorder's
    `on_change`); `begin` before the capture, `end` after it, then `by_scope(pool)`."""

    _OUTSIDE = "[]"  # the tag of allocations outside every scope

    def __init__(self) -> None:
        self._snapshot: dict | None = None
        self._device = 0

    def begin(self) -> None:
        import torch

        self._device = torch.cuda.current_device()
        torch.cuda.memory._record_memory_history(
            enabled="all", context="alloc", stacks="python", max_entries=1_000_000
        )
        torch.cuda.memory._set_memory_metadata(self._OUTSIDE)

    def change(self, stack: tuple[ScopeKey, ...]) -> None:
        import torch

        torch.cuda.memory._set_memory_metadata(json.dumps([k.label for k in stack]))

    def end(self) -> None:
        """Stop tagging and keep the allocator's snapshot (history off again)."""
        import torch

        torch.cuda.memory._set_memory_metadata("")
        try:
            self._snapshot = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)

    def pool_history(self, pool: Pool) -> list[dict[str, int | str]]:
        """The allocator's history entries in `pool`'s segments (action, addr, size), oldest
        first: the capture's requests, for the prediction across batch sizes
        (capture/sweep/alloc_trace.py reads them)."""
        if self._snapshot is None:
            raise RuntimeError("AllocationLog.pool_history before end()")
        segs = [s for s in self._snapshot["segments"] if tuple(s["segment_pool_id"]) == pool]
        spans = [(s["address"], s["address"] + s["total_size"]) for s in segs]
        traces = self._snapshot["device_traces"]
        return [
            {"action": t["action"], "addr": t["addr"], "size": t["size"]}
            for t in (traces[self._device] if self._device < len(traces) else [])
            if any(lo <= t["addr"] < hi for lo, hi in spans)
        ]

    def by_scope(self, pool: Pool) -> list[ScopeBytes]:
        """The capture's allocations in `pool`, by the scopes open as each was made, in
        the order each scope first allocated."""
        if self._snapshot is None:
            raise RuntimeError("AllocationLog.by_scope before end()")
        segs = [s for s in self._snapshot["segments"] if tuple(s["segment_pool_id"]) == pool]
        spans = sorted((s["address"], s["address"] + s["total_size"]) for s in segs)
        live = {
            b["address"]: b["size"]
            for s in segs
            for b in s["blocks"]
            if b["state"] == "active_allocated"
        }

        def in_pool(addr: int) -> bool:
            return any(lo <= addr < hi for lo, hi in spans)

        out: dict[str, dict[str, int]] = {}
        last_alloc: dict[int, str] = {}  # address -> the tag of its latest allocation
        traces = self._snapshot["device_traces"]
        for t in traces[self._device] if self._device < len(traces) else []:
            tag = t.get("user_metadata", "")
            if not tag or not in_pool(t["addr"]):  # before the capture, or another pool
                continue
            row = out.setdefault(tag, {"reserved": 0, "requested": 0, "held": 0})
            if t["action"] == "segment_alloc":
                row["reserved"] += t["size"]
            elif t["action"] == "alloc":
                row["requested"] += t["size"]
                last_alloc[t["addr"]] = tag
        for addr, size in live.items():
            if addr in last_alloc:
                out[last_alloc[addr]]["held"] += size
        return [ScopeBytes(scope_path=tuple(json.loads(tag)), **row) for tag, row in out.items()]
