"""One capture's allocations, as the caching allocator saw them: the requests it served for
a graph's private pool, in order, each freed or still live when the capture ended.

The input of the pool's model (allocator_model.py) and of the prediction across batch sizes
(predict.py). On a GPU it is read from the allocator's history (capture/graph/memory.py's
AllocationLog), an entry belonging to the pool when its address lies in one of the pool's
segments (docs/sweep.md, "Allocation traces"). Plain data; tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Pool = tuple[int, int]


@dataclass(frozen=True)
class Alloc:
    """A request for `size` bytes (as asked, before the allocator rounds it)."""

    size: int


@dataclass(frozen=True)
class Free:
    """The return to the pool of the trace's allocation number `alloc` (0 = its first)."""

    alloc: int


Event = Alloc | Free


@dataclass(frozen=True, kw_only=True)
class Trace:
    """A capture's requests in order, and the allocations (by number) still live at its
    end: the graph's outputs and what the step keeps. `reserved`, where read, is what the
    pool held from the driver at the end (the sum of its `segment_alloc`s), a check of
    the model on the same trace."""

    events: tuple[Event, ...]
    live: frozenset[int]
    reserved: int | None = None

    @property
    def allocs(self) -> list[int]:
        """The size of each allocation, by number."""
        return [e.size for e in self.events if isinstance(e, Alloc)]


def _pool_spans(snapshot: Mapping[str, Any], pool: Pool) -> list[tuple[int, int]]:
    segs = [s for s in snapshot["segments"] if tuple(s["segment_pool_id"]) == tuple(pool)]
    return sorted((s["address"], s["address"] + s["total_size"]) for s in segs)


def trace_from_history(
    entries: Sequence[Mapping[str, Any]], spans: list[tuple[int, int]] | None = None
) -> Trace:
    """The Trace of the history `entries` (one device's, oldest first) whose addresses lie
    in `spans` (the pool's segments, [lo, hi); None: every entry, already the pool's, as
    AllocationLog.pool_history gives them), from the pool's first segment on (a fresh
    pool's first event; an address the driver handed out before belongs to no graph). A
    free of an address with no allocation in the window is left out."""
    if spans is None:
        spans = [(0, 1 << 64)]
    first = next((i for i, e in enumerate(entries) if e["action"] == "segment_alloc"
                  and any(lo <= e["addr"] < hi for lo, hi in spans)), len(entries))  # fmt: skip
    entries = entries[first:]
    events: list[Event] = []
    at: dict[int, int] = {}  # address -> the number of its live allocation
    reserved = 0
    count = 0  # allocations so far
    live: set[int] = set()
    for e in entries:
        addr = e["addr"]
        if not any(lo <= addr < hi for lo, hi in spans):
            continue
        action = e["action"]
        if action == "segment_alloc":
            reserved += e["size"]
        elif action == "alloc":
            at[addr] = count
            events.append(Alloc(e["size"]))
            live.add(count)
            count += 1
        elif action == "free_completed" and addr in at:
            n = at.pop(addr)
            events.append(Free(n))
            live.discard(n)
    return Trace(events=tuple(events), live=frozenset(live), reserved=reserved)


def trace_from_snapshot(snapshot: Mapping[str, Any], pool: Pool, device: int = 0) -> Trace:
    """The Trace of `pool` in an allocator snapshot (`torch.cuda.memory._snapshot()`, taken
    with the history recording since before the pool's first capture)."""
    traces = snapshot["device_traces"]
    entries = traces[device] if device < len(traces) else []
    return trace_from_history(entries, _pool_spans(snapshot, pool))


def record_trace(capture: Any, device: int = 0) -> Trace:
    """Run `capture()` (it captures into a fresh private pool and returns the pool's id)
    with the allocator's history recording, and return that pool's Trace. Replaces any
    history a user records, as AllocationLog does; syncs nothing. Needs a GPU."""
    import torch

    torch.cuda.memory._record_memory_history(enabled="all", context=None, max_entries=1_000_000)
    try:
        pool = capture()
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return trace_from_snapshot(snapshot, pool, device)
