"""A pool's bytes from the allocator's snapshot (capture/graph/memory.py `pool_memory`),
on the CPU with torch's snapshot stood in: its segments of that pool summed, the history's
trace left out where this torch can leave it out, and read whole where it cannot."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture.graph import memory

SEGMENTS = [
    {"segment_pool_id": (0, 0), "total_size": 1 << 30, "allocated_size": 1 << 29},
    {"segment_pool_id": (1, 3), "total_size": 2 << 20, "allocated_size": 1 << 20},
    {"segment_pool_id": [1, 3], "total_size": 20 << 20, "allocated_size": 0},
    {"segment_pool_id": (1, 4), "total_size": 4 << 20, "allocated_size": 4 << 20},
]


@pytest.fixture
def snapshots(monkeypatch):
    """torch.cuda.memory_snapshot stood in, with or without `include_traces` (the
    answer cached per torch is cleared either side); the calls it was given."""
    calls: list[dict] = []

    def install(traces_optional: bool) -> None:
        if traces_optional:

            def snap(mempool_id=None, include_traces=True):
                calls.append({"mempool_id": mempool_id, "include_traces": include_traces})
                return SEGMENTS
        else:

            def snap():
                calls.append({})
                return SEGMENTS

        monkeypatch.setattr(torch.cuda, "memory_snapshot", snap)
        memory._traces_optional.cache_clear()

    yield install, calls
    memory._traces_optional.cache_clear()


@pytest.mark.parametrize("traces_optional", [True, False], ids=["trace-optional", "trace-always"])
def test_a_pools_segments_summed_and_the_trace_left_out_where_it_can_be(snapshots, traces_optional):
    install, calls = snapshots
    install(traces_optional)
    got = memory.pool_memory((1, 3))
    assert (got.reserved, got.allocated, got.segments) == (22 << 20, 1 << 20, 2)
    want = {"mempool_id": None, "include_traces": False} if traces_optional else {}
    assert calls == [want]
