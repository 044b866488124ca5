"""PyTorch's CUDA caching allocator, replayed for one private pool on one stream: what a
graph pool reserves from the driver for a sequence of requests (alloc_trace.Trace).

The rules (rounding to 512 bytes, small and large blocks, best fit at the lowest address,
segment sizes, splitting, merging; no segment given back while the pool's graphs live)
follow c10/cuda/CUDACachingAllocator.cpp at default settings; each, with the function that
holds it: docs/sweep.md, "The allocator's rules". A pool's bytes are a staircase of the
requests, not a line through them. Addresses are the model's own (segments end to end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .alloc_trace import Alloc, Trace

MIN_BLOCK = 512  # kMinBlockSize: every request rounds to a multiple of it
SMALL_SIZE = 1 << 20  # kSmallSize: the largest "small" request, 1 MiB
SMALL_BUFFER = 2 << 20  # kSmallBuffer: a small segment, 2 MiB
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc: large requests under it share a 20 MiB segment
LARGE_BUFFER = 20 << 20  # kLargeBuffer: 20 MiB
ROUND_LARGE = 2 << 20  # kRoundLarge: a segment of its own is rounded up to 2 MiB


def round_size(size: int) -> int:
    """The block size a request of `size` bytes takes (round_size)."""
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(rounded: int) -> int:
    """The segment taken from the driver for a rounded request no free block fits
    (get_allocation_size)."""
    if rounded <= SMALL_SIZE:
        return SMALL_BUFFER
    if rounded < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-rounded // ROUND_LARGE) * ROUND_LARGE


def should_split(small: bool, block: int, rounded: int) -> bool:
    """Whether a free block of `block` bytes serving `rounded` is split (should_split)."""
    remaining = block - rounded
    return remaining >= MIN_BLOCK if small else remaining > SMALL_SIZE


@dataclass
class _Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: _Block | None = field(default=None, repr=False)
    next: _Block | None = field(default=None, repr=False)


class PoolModel:
    """One private pool's blocks and segments; `malloc` and `free` as the allocator does
    them (module docstring). `reserved` is what the pool holds from the driver."""

    def __init__(self) -> None:
        self._free: list[_Block] = []  # free blocks, either kind
        self._used: dict[int, _Block] = {}  # address -> allocated block
        self._end = 0  # the next segment's address in the model
        self.reserved = 0
        self.segments = 0

    @property
    def allocated(self) -> int:
        """Bytes in allocated blocks (rounded sizes)."""
        return sum(b.size for b in self._used.values())

    def malloc(self, size: int) -> int:
        """Serve a request of `size` bytes; returns the block's address in the model."""
        rounded = round_size(size)
        small = rounded <= SMALL_SIZE
        fits = [b for b in self._free if b.small == small and b.size >= rounded]
        if fits:
            block = min(fits, key=lambda b: (b.size, b.addr))
            self._free.remove(block)
        else:
            block = _Block(self._end, segment_size(rounded), small)
            self._end += block.size
            self.reserved += block.size
            self.segments += 1
        if should_split(small, block.size, rounded):
            rest = _Block(block.addr + rounded, block.size - rounded, small)
            rest.prev, rest.next = block, block.next
            if block.next is not None:
                block.next.prev = rest
            block.next, block.size = rest, rounded
            self._free.append(rest)
        block.free = False
        self._used[block.addr] = block
        return block.addr

    def free(self, addr: int) -> None:
        """Return the block at `addr` to the pool, merged with its free neighbours."""
        block = self._used.pop(addr)
        block.free = True
        for other in (block.prev, block.next):
            if other is not None and other.free:
                self._free.remove(other)
                _merge(block, other)
        self._free.append(block)


def _merge(block: _Block, other: _Block) -> None:
    """Fold the free neighbour `other` into `block` (try_merge_blocks)."""
    if other is block.prev:
        block.addr, block.prev = other.addr, other.prev
        if block.prev is not None:
            block.prev.next = block
    else:
        block.next = other.next
        if block.next is not None:
            block.next.prev = block
    block.size += other.size


def replay(pool: PoolModel, trace: Trace) -> None:
    """Run one capture's requests into `pool`: its allocations in order, each freed where
    the trace frees it; those still live at its end stay allocated (the graph keeps them).
    """
    addrs: list[int] = []
    for event in trace.events:
        if isinstance(event, Alloc):
            addrs.append(pool.malloc(event.size))
        else:
            pool.free(addrs[event.alloc])


def own_pool_reserved(trace: Trace) -> int:
    """What a fresh pool reserves for one capture alone (the sweep's own-pool figure)."""
    pool = PoolModel()
    replay(pool, trace)
    return pool.reserved


def shared_pool_reserved(traces: Sequence[Trace]) -> list[int]:
    """A shared pool's reserved bytes after each capture, `traces` in capture order (the
    engines' order: largest first), every graph's live set kept to the end."""
    pool = PoolModel()
    out = []
    for trace in traces:
        replay(pool, trace)
        out.append(pool.reserved)
    return out
