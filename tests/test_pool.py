"""GraphBufferPool: disjoint, aligned views sharing chunk storage; freeze, budget, poison."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import byte_range, overlaps
from pools import GraphBufferPool, PoolExhausted, PoolFrozen
from tests.conftest import DEVICES

DTYPES = [torch.float32, torch.int32, torch.int64, torch.uint8, torch.bfloat16, torch.bool]


@settings(max_examples=150, deadline=None)
@given(
    alignment=st.sampled_from([1, 8, 64, 256, 512]),
    chunk_bytes=st.sampled_from([1024, 4096, 1 << 16]),
    requests=st.lists(
        st.tuples(st.lists(st.integers(0, 40), min_size=0, max_size=3), st.sampled_from(DTYPES)),
        min_size=1,
        max_size=25,
    ),
)
def test_random_carves_are_disjoint_aligned_and_shared(alignment, chunk_bytes, requests):
    pool = GraphBufferPool("cpu", chunk_bytes=chunk_bytes, alignment=alignment)
    views = []
    for i, (shape, dtype) in enumerate(requests):
        v = pool.carve(f"buf{i}", tuple(shape), dtype)
        assert v.shape == tuple(shape) and v.dtype == dtype and v.is_contiguous()
        views.append(v)
    regions = pool.regions()
    assert [r.name for r in regions] == [f"buf{i}" for i in range(len(requests))]
    for v, r in zip(views, regions):
        chunk = pool.chunk(r.chunk)
        # The view lives at the recorded offset of the recorded chunk's storage.
        assert v.untyped_storage().data_ptr() == chunk.untyped_storage().data_ptr()
        if v.numel():
            assert v.data_ptr() == chunk.data_ptr() + r.offset
            assert byte_range(v) == (v.data_ptr(), v.data_ptr() + r.nbytes)
        assert r.offset % max(alignment, v.element_size()) == 0 or r.offset == 0
        assert r.end <= chunk.numel()
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            assert not overlaps(views[i], views[j]), (regions[i], regions[j])
            same_chunk = regions[i].chunk == regions[j].chunk
            if same_chunk and regions[i].nbytes and regions[j].nbytes:
                assert regions[i].end <= regions[j].offset  # carve order within a chunk
    s = pool.stats()
    assert s.chunks == len({r.chunk for r in regions})  # a chunk opens for a region
    assert s.bytes_used == sum(r.nbytes for r in regions)
    assert s.bytes_reserved == sum(pool.chunk(c).numel() for c in range(s.chunks))
    assert s.bytes_used + s.bytes_lost_to_alignment <= s.bytes_reserved


def test_views_share_one_storage_and_write_through():
    pool = GraphBufferPool("cpu", chunk_bytes=4096, alignment=256)
    a = pool.carve("a", (10,), torch.float32)  # [10] scores
    b = pool.carve("b", (3, 5), torch.int64)  # [3, 5] ids
    assert pool.region("b").offset == 256
    a.fill_(1.5)
    b.fill_(-7)
    raw = pool.chunk(0)
    assert torch.equal(raw[:40].view(torch.float32), torch.full((10,), 1.5))
    assert torch.equal(raw[256 : 256 + 120].view(torch.int64), torch.full((15,), -7))
    assert pool.stats().bytes_lost_to_alignment == 256 - 40


def test_big_request_gets_own_chunk():
    pool = GraphBufferPool("cpu", chunk_bytes=1024)
    pool.carve("small", (8,), torch.int32)
    big = pool.carve("big", (1000,), torch.int32)  # 4000 B > a chunk
    assert pool.region("big").chunk == 1 and pool.chunk(1).numel() == 4000
    assert big.numel() == 1000
    pool.carve("after", (8,), torch.int32)
    assert pool.region("after").chunk == 2  # the oversized chunk is full


def test_duplicate_name_and_bad_arguments():
    pool = GraphBufferPool("cpu")
    pool.carve("x", (4,), torch.float32)
    with pytest.raises(ValueError, match="'x' exists already"):
        pool.carve("x", (4,), torch.float32)
    with pytest.raises(ValueError, match="non-negative ints"):
        pool.carve("y", (-1, 4), torch.float32)
    with pytest.raises(TypeError, match="torch.dtype"):
        pool.carve("y", (4,), "float32")
    with pytest.raises(ValueError, match="power of two"):
        GraphBufferPool("cpu", alignment=48)
    with pytest.raises(KeyError, match="no region named 'nope'"):
        pool.region("nope")


def test_freeze():
    pool = GraphBufferPool("cpu")
    v = pool.carve("x", (4,), torch.float32)
    pool.freeze()
    assert pool.frozen
    with pytest.raises(PoolFrozen, match="frozen"):
        pool.carve("y", (4,), torch.float32)
    v.fill_(2.0)  # views stay usable
    assert [r.name for r in pool.regions()] == ["x"]


def test_budget():
    pool = GraphBufferPool("cpu", chunk_bytes=1024, budget_bytes=1500)
    pool.carve("a", (200,), torch.int32)  # 800 B in a 1024 B chunk
    pool.carve("b", (50,), torch.int32)  # 200 B at 1024: a second chunk of the 476 B left
    with pytest.raises(PoolExhausted, match=r"needs 2000 B in a new chunk, but only \d+ B"):
        pool.carve("c", (500,), torch.int32)
    assert "c" not in [r.name for r in pool.regions()]
    assert pool.bytes_reserved == 1500 and pool.stats().chunks == 2


@pytest.mark.parametrize("device", DEVICES)
def test_poison(device):
    pool = GraphBufferPool(device, poison=True)
    f = pool.carve("f", (5,), torch.float32)
    h = pool.carve("h", (5,), torch.bfloat16)
    i = pool.carve("i", (5,), torch.int32)
    u = pool.carve("u", (5,), torch.uint8)
    z = pool.carve("z", (), torch.int64)  # 0-d: a rank held on the device
    assert torch.isnan(f).all() and torch.isnan(h).all()
    assert (i == -1).all() and (u == 255).all() and z.item() == -1
    quiet = GraphBufferPool(device, poison=False)
    assert quiet.carve("f", (5,), torch.float32).shape == (5,)


@pytest.mark.gpu
def test_pool_on_cuda_keeps_addresses():
    pool = GraphBufferPool("cuda", chunk_bytes=1 << 20)
    a = pool.carve("a", (1024,), torch.float32)
    ptr = a.data_ptr()
    pool.carve("b", (1024,), torch.int32)
    pool.freeze()
    assert a.data_ptr() == ptr and a.device.type == "cuda" and a.device.index is not None
