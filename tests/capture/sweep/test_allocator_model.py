"""The caching allocator's model for one graph pool (capture/sweep/allocator_model.py),
against cases worked by hand from c10/cuda/CUDACachingAllocator.cpp's rules, and the
reading of a capture's trace from an allocator snapshot (capture/sweep/alloc_trace.py).
CPU only: plain arithmetic."""

import pytest

from graph_harness.capture.sweep.alloc_trace import Alloc, Free, Trace, trace_from_snapshot
from graph_harness.capture.sweep.allocator_model import (
    PoolModel,
    own_pool_reserved,
    round_size,
    segment_size,
    shared_pool_reserved,
)

KIB = 1 << 10
MIB = 1 << 20


@pytest.mark.parametrize(
    ("size", "rounded"),
    [
        (1, 512),  # under kMinBlockSize: 512
        (512, 512),  # a multiple: kept
        (513, 1024),  # one over: the next multiple
        (600 * KIB, 600 * KIB),  # a multiple of 512 already
    ],
)
def test_requests_round_to_512(size, rounded):
    assert round_size(size) == rounded


@pytest.mark.parametrize(
    ("rounded", "segment"),
    [
        (512, 2 * MIB),  # small
        (MIB, 2 * MIB),  # 1 MiB exactly is still small (<= kSmallSize)
        (MIB + 512, 20 * MIB),  # the smallest large request: a 20 MiB segment
        (10 * MIB - 512, 20 * MIB),  # just under kMinLargeAlloc
        (10 * MIB, 10 * MIB),  # at kMinLargeAlloc: its own, rounded to 2 MiB
        (12 * MIB + 1, 14 * MIB),  # rounded up to the next 2 MiB
    ],
)
def test_segment_sizes(rounded, segment):
    assert segment_size(rounded) == segment


def test_a_600_kib_request_takes_a_2_mib_small_segment():
    pool = PoolModel()
    pool.malloc(600 * KIB)
    assert (pool.reserved, pool.segments) == (2 * MIB, 1)


def test_small_requests_share_a_segment_until_it_is_full():
    pool = PoolModel()
    for _ in range(3):  # 3 x 600 KiB = 1800 KiB of a 2048 KiB segment
        pool.malloc(600 * KIB)
    assert pool.segments == 1
    pool.malloc(600 * KIB)  # 248 KiB left: a second segment
    assert (pool.reserved, pool.segments) == (4 * MIB, 2)


def test_two_12_mib_requests_take_a_12_mib_segment_each():
    pool = PoolModel()
    pool.malloc(12 * MIB)
    pool.malloc(12 * MIB)
    assert (pool.reserved, pool.segments) == (24 * MIB, 2)


def test_3_then_4_mib_share_one_20_mib_segment():
    pool = PoolModel()
    pool.malloc(3 * MIB)
    pool.malloc(4 * MIB)  # 17 MiB remained after the 3 MiB split off
    assert (pool.reserved, pool.segments) == (20 * MIB, 1)


def test_small_and_large_never_share_a_segment():
    pool = PoolModel()
    pool.malloc(3 * MIB)  # a 20 MiB large segment, 17 MiB free in it
    pool.malloc(512)  # a small request: a small segment of its own
    assert (pool.reserved, pool.segments) == (22 * MIB, 2)


def test_a_freed_block_is_reused_best_fit():
    pool = PoolModel()
    a = pool.malloc(12 * MIB)
    b = pool.malloc(16 * MIB)
    pool.free(a)
    pool.free(b)
    c = pool.malloc(11 * MIB)  # both fit; the smaller (12 MiB) is the best fit
    assert c == a
    assert pool.reserved == 28 * MIB


def test_best_fit_ties_go_to_the_lowest_address():
    pool = PoolModel()
    a, b = pool.malloc(12 * MIB), pool.malloc(12 * MIB)
    pool.free(b)
    pool.free(a)
    assert pool.malloc(12 * MIB) == min(a, b)


def test_a_large_remainder_of_1_mib_or_less_is_not_split():
    pool = PoolModel()
    a = pool.malloc(12 * MIB)
    pool.free(a)
    pool.malloc(11 * MIB)  # 1 MiB would remain: not > kSmallSize, the block is taken whole
    assert pool.allocated == 12 * MIB
    pool.malloc(512 * KIB + MIB)  # nothing free of the large kind: a new 20 MiB segment
    assert pool.reserved == 32 * MIB


def test_a_large_remainder_over_1_mib_is_split():
    pool = PoolModel()
    a = pool.malloc(12 * MIB)
    pool.free(a)
    pool.malloc(10 * MIB + 512 * KIB)  # 1.5 MiB remains: split off
    assert pool.allocated == 10 * MIB + 512 * KIB
    pool.malloc(MIB + 512)  # fits the 1.5 MiB remainder: no new segment
    assert pool.reserved == 12 * MIB


def test_a_small_remainder_of_512_is_split():
    # Blocks and requests are multiples of 512, so a small remainder is 0 or >= 512.
    pool = PoolModel()
    pool.malloc(MIB)  # of a 2 MiB small segment: 1 MiB remains, split off
    pool.malloc(MIB - 512)  # 512 remains: split off (>= kMinBlockSize)
    pool.malloc(512)  # takes it: no second segment
    assert (pool.reserved, pool.segments, pool.allocated) == (2 * MIB, 1, 2 * MIB)


def test_freed_neighbours_merge_into_one_block():
    pool = PoolModel()
    a, b = pool.malloc(3 * MIB), pool.malloc(4 * MIB)  # [a 3][b 4][free 13] of 20 MiB
    pool.free(a)
    pool.free(b)  # merges with a before it and the 13 MiB after it: 20 MiB whole
    pool.malloc(19 * MIB)  # fits only the merged block
    assert pool.reserved == 20 * MIB


def test_unmerged_free_blocks_do_not_serve_a_request_that_fits_only_their_sum():
    pool = PoolModel()
    a, _, c = pool.malloc(6 * MIB), pool.malloc(6 * MIB), pool.malloc(6 * MIB)
    pool.free(a)
    pool.free(c)  # 6 MiB free, b, then 6 + 2 MiB free: no run of 10 MiB
    pool.malloc(9 * MIB)
    assert pool.reserved == 40 * MIB


def _trace(*events, live=()):
    return Trace(events=tuple(events), live=frozenset(live))


def test_a_ladder_largest_first_worked_by_hand():
    big = _trace(Alloc(16 * MIB), Alloc(16 * MIB), Free(0), Alloc(4 * MIB), live=[1, 2])
    small = _trace(Alloc(8 * MIB), Alloc(8 * MIB), Free(0), Alloc(MIB), live=[1, 2])
    # big alone: two 16 MiB segments; its 4 MiB takes the freed 16 MiB block (best fit),
    # split: [4 live][12 free] and [16 live]. 32 MiB.
    # small alone: 8 and 8 MiB share a 20 MiB segment, 1 MiB a 2 MiB small one. 22 MiB.
    assert [own_pool_reserved(t) for t in (big, small)] == [32 * MIB, 22 * MIB]
    # small after big: its first 8 MiB takes big's free 12 MiB (split, 4 left); the second
    # fits nothing free: a 20 MiB segment; 1 MiB, a 2 MiB small segment. 32 + 20 + 2.
    assert shared_pool_reserved([big, small]) == [32 * MIB, 54 * MIB]


def _entry(action, addr, size):
    return {"action": action, "addr": addr, "size": size}


def test_a_trace_is_read_from_the_pools_addresses_only():
    base, other = 1 << 32, 1 << 40
    snapshot = {
        "segments": [
            {"segment_pool_id": (0, 7), "address": base, "total_size": 20 * MIB},
            {"segment_pool_id": (0, 0), "address": other, "total_size": 2 * MIB},
        ],
        "device_traces": [
            [
                _entry("alloc", other, 512),  # another pool: left out
                _entry("segment_alloc", base, 20 * MIB),
                _entry("alloc", base, 3 * MIB),
                _entry("alloc", base + 3 * MIB, 4 * MIB),
                _entry("free_requested", base, 3 * MIB),
                _entry("free_completed", base, 3 * MIB),
                _entry("alloc", base, MIB + 512),  # the same address, a new allocation
                _entry("free_completed", base + 19 * MIB, 512),  # made before: left out
            ]
        ],
    }
    t = trace_from_snapshot(snapshot, (0, 7))
    assert t.events == (Alloc(3 * MIB), Alloc(4 * MIB), Free(0), Alloc(MIB + 512))
    assert t.live == frozenset({1, 2})
    assert t.reserved == 20 * MIB == own_pool_reserved(t)
