"""GraphBufferPool: disjoint, aligned views sharing chunk storage; freeze, budget, poison."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_harness.kernels import byte_range, overlaps
from graph_harness.pools import GraphBufferPool, PoolExhausted, PoolFrozen, PoolStats
from tests.conftest import DEVICES

DTYPES = [torch.float32, torch.int32, torch.int64, torch.uint8, torch.bfloat16, torch.bool]


@settings(max_examples=150, deadline=None)
@given(
    alignment=st.sampled_from([1, 8, 64, 256, 512, 4096]),
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
        if r.nbytes == 0:  # holds nothing: in no chunk
            assert r.chunk is None and r.offset == 0 and v.numel() == 0
            continue
        chunk = pool.chunk(r.chunk)
        # The view lives at the recorded offset of the recorded chunk's storage.
        assert v.untyped_storage().data_ptr() == chunk.untyped_storage().data_ptr()
        assert v.data_ptr() == chunk.data_ptr() + r.offset
        assert byte_range(v) == (v.data_ptr(), v.data_ptr() + r.nbytes)
        # Aligned as an address, not as an offset from the chunk's start.
        assert v.data_ptr() % max(alignment, v.element_size()) == 0, (v.data_ptr(), r)
        assert r.end <= chunk.numel()
    for i in range(len(views)):
        for j in range(i + 1, len(views)):
            assert not overlaps(views[i], views[j]), (regions[i], regions[j])
            same_chunk = regions[i].chunk == regions[j].chunk
            if same_chunk and regions[i].nbytes and regions[j].nbytes:
                assert regions[i].end <= regions[j].offset  # carve order within a chunk
    s = pool.stats()
    # A chunk opens for a region that holds bytes, and only then.
    assert s.chunks == len({r.chunk for r in regions if r.chunk is not None})
    assert s.bytes_used == sum(r.nbytes for r in regions)
    assert s.bytes_reserved == sum(pool.chunk(c).numel() for c in range(s.chunks))
    # Padding is exactly the gaps before views (chunk starts included).
    first = {}
    for r in regions:
        if r.chunk is not None:
            first.setdefault(r.chunk, []).append(r)
    gaps = sum(
        b.offset - (a.end if a else 0)
        for rs in first.values()
        for a, b in zip([None, *rs[:-1]], rs)
    )
    assert s.bytes_lost_to_alignment == gaps
    assert s.bytes_used + s.bytes_lost_to_alignment <= s.bytes_reserved


@pytest.mark.smoke
def test_views_share_one_storage_and_write_through():
    pool = GraphBufferPool("cpu", chunk_bytes=4096, alignment=256)
    a = pool.carve("a", (10,), torch.float32)  # [10] scores
    b = pool.carve("b", (3, 5), torch.int64)  # [3, 5] ids
    raw = pool.chunk(0)
    oa, ob = pool.region("a").offset, pool.region("b").offset
    assert (raw.data_ptr() + oa) % 256 == 0 and (raw.data_ptr() + ob) % 256 == 0
    assert ob == oa + 256  # 40 B of a, padded to the next 256-byte address
    a.fill_(1.5)
    b.fill_(-7)
    assert torch.equal(raw[oa : oa + 40].view(torch.float32), torch.full((10,), 1.5))
    assert torch.equal(raw[ob : ob + 120].view(torch.int64), torch.full((15,), -7))
    assert pool.stats().bytes_lost_to_alignment == oa + 256 - 40


def test_alignment_is_of_the_address():
    # The CPU allocator aligns chunks to 64 B, so a 4096-byte alignment counted from the
    # chunk's start once gave addresses = 64 (mod 4096).
    starts = []
    for size in (1000, 5000, 70_000, 1 << 20):
        pool = GraphBufferPool("cpu", chunk_bytes=size, alignment=4096)
        views = [pool.carve(f"v{i}", (n,), torch.float32) for i, n in enumerate((3, 1000, 17))]
        assert all(v.data_ptr() % 4096 == 0 for v in views), [v.data_ptr() % 4096 for v in views]
        starts += [pool.chunk(c).data_ptr() % 4096 for c in range(pool.stats().chunks)]
    assert any(starts), "no chunk started off a 4096-byte address: this test could not fail"


def test_zero_size_carve_reserves_nothing():
    pool = GraphBufferPool("cpu", budget_bytes=0)
    e = pool.carve("e", (0, 5), torch.float32)  # [0, 5]: no bytes
    assert e.shape == (0, 5) and pool.stats() == PoolStats(0, 0, 0, 0)
    assert pool.region("e").chunk is None
    with pytest.raises(PoolExhausted, match="needs 1 B in a new chunk, but only 0 B"):
        pool.carve("x", (1,), torch.uint8)  # once took the byte the empty carve reserved
    # Beside other carves: the cursor does not move.
    pool = GraphBufferPool("cpu", alignment=4)
    pool.carve("a", (3,), torch.uint8)
    pool.carve("e", (0,), torch.int64)
    pool.carve("b", (1,), torch.int32)
    assert pool.region("b").offset - pool.region("a").offset == 4
    assert pool.stats().bytes_used == 7


def test_big_request_gets_own_chunk():
    # Alignment 64 = the CPU allocator's own: no padding at a chunk's start, so the layout
    # below does not depend on where the allocator puts the chunks.
    pool = GraphBufferPool("cpu", chunk_bytes=1024, alignment=64)
    pool.carve("small", (8,), torch.int32)
    big = pool.carve("big", (1000,), torch.int32)  # 4000 B > a chunk
    # Its own chunk, with room to align it wherever the allocator puts it.
    assert pool.region("big").chunk == 1 and pool.chunk(1).numel() == 4000 + 63
    assert pool.region("big").offset == 0 and big.numel() == 1000
    pool.carve("after", (8,), torch.int32)  # 32 B at 4032 > 4063 - 32: a new chunk
    assert pool.region("after").chunk == 2


def test_duplicate_name_and_bad_arguments():
    pool = GraphBufferPool("cpu")
    pool.carve("x", (4,), torch.float32)
    with pytest.raises(ValueError, match="'x' exists already"):
        pool.carve("x", (4,), torch.float32)
    with pytest.raises(ValueError, match="power of two"):
        GraphBufferPool("cpu", alignment=48)
    with pytest.raises(ValueError, match="alignment must be a power of two >= 1, got True"):
        GraphBufferPool("cpu", alignment=True)
    with pytest.raises(KeyError, match="no region named 'nope'"):
        pool.region("nope")


# (shape, dtype, exception, exact message): each refused before anything is carved.
BAD_CARVES = [
    (
        2.0,
        torch.float32,
        TypeError,
        "shape of 'y' must be an int or a tuple/list of ints, got 2.0 (float)",
    ),
    (
        None,
        torch.float32,
        TypeError,
        "shape of 'y' must be an int or a tuple/list of ints, got None (NoneType)",
    ),
    (
        "3",
        torch.float32,
        TypeError,
        "shape of 'y' must be an int or a tuple/list of ints, got '3' (str)",
    ),
    ((True, 2), torch.float32, TypeError, "shape[0] of 'y' must be an int, got True (bool)"),
    (
        (2, np.True_),
        torch.float32,
        TypeError,
        "shape[1] of 'y' must be an int, got np.True_ (bool)",
    ),
    ((2.0,), torch.float32, TypeError, "shape[0] of 'y' must be an int, got 2.0 (float)"),
    (
        (torch.tensor(3),),
        torch.float32,
        TypeError,
        "shape[0] of 'y' must be an int, got tensor(3) (Tensor)",
    ),
    ((-1, 4), torch.float32, ValueError, "shape[0] of 'y' must be >= 0, got -1"),
    (-3, torch.float32, ValueError, "shape of 'y' must be >= 0, got -3"),
    (
        (2**70,),
        torch.float32,
        ValueError,
        f"shape ({2**70},) of 'y' spans {2**72} B of torch.float32: more than a tensor can "
        "address (2**63 - 1 B)",
    ),
    (
        (0, 2**62),
        torch.int32,
        ValueError,
        f"shape (0, {2**62}) of 'y' spans {2**64} B of torch.int32: more than a tensor can "
        "address (2**63 - 1 B)",
    ),
    ((4,), "float32", TypeError, "dtype of 'y' must be a torch.dtype, got 'float32'"),
    (
        (4,),
        torch.qint8,
        TypeError,
        "dtype torch.qint8 of 'y' is quantized: a view of raw bytes would have no scale or "
        "zero point; carve its integer storage (torch.int8, torch.uint8 or torch.int32) and "
        "quantize from that",
    ),
    ((4,), torch.quint4x2, TypeError, "dtype torch.quint4x2 of 'y' is quantized"),
]


@pytest.mark.parametrize(
    "shape,dtype,exc,message", BAD_CARVES, ids=[repr(c[:2]) for c in BAD_CARVES]
)
def test_bad_carves_name_the_argument(shape, dtype, exc, message):
    pool = GraphBufferPool("cpu", poison=True)
    x = pool.carve("x", (4,), torch.int32)
    before = (pool.stats(), pool.regions(), x.clone())
    with pytest.raises(exc) as info:
        pool.carve("y", shape, dtype)
    assert str(info.value).startswith(message), str(info.value)
    assert (pool.stats(), pool.regions()) == before[:2] and torch.equal(x, before[2])


def test_numpy_integers_are_ints():
    pool = GraphBufferPool("cpu")
    v = pool.carve("n", (np.int64(3), np.int32(2)), torch.float32)
    w = pool.carve("m", np.uint8(5), torch.int64)
    assert v.shape == (3, 2) and w.shape == (5,)
    assert all(type(d) is int for d in pool.region("n").shape + pool.region("m").shape)


def test_every_dtype_is_carved_or_refused_clearly():
    dtypes = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)}
    carved = 0
    for i, dtype in enumerate(sorted(dtypes, key=str)):
        pool = GraphBufferPool("cpu", poison=True, alignment=16)
        try:
            v = pool.carve(f"d{i}", (2, 3), dtype)
        except TypeError as e:
            assert str(e).startswith(f"dtype {dtype} of 'd{i}' "), e
            continue
        assert v.dtype == dtype and v.shape == (2, 3) and v.data_ptr() % 16 == 0
        assert pool.region(f"d{i}").nbytes == 6 * dtype.itemsize
        carved += 1
    assert carved >= 20, "meant to carve the ordinary dtypes"


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
    # Alignment 64 = the CPU allocator's own, so no chunk needs padding at its start.
    pool = GraphBufferPool("cpu", chunk_bytes=1024, alignment=64, budget_bytes=1500)
    pool.carve("a", (200,), torch.int32)  # 800 B in a 1024 B chunk
    pool.carve("b", (50,), torch.int32)  # 200 B at 832 > 1024 - 200: a chunk of the 476 B left
    with pytest.raises(PoolExhausted, match=r"needs 2000 B in a new chunk, but only 0 B"):
        pool.carve("c", (500,), torch.int32)
    assert "c" not in [r.name for r in pool.regions()]
    assert pool.bytes_reserved == 1500 and pool.stats().chunks == 2


def test_budget_counts_the_room_to_align():
    # A request that sizes its own chunk takes alignment - 1 bytes more, within the budget;
    # where the budget leaves less, the carve fits only if the address happens to align.
    pool = GraphBufferPool("cpu", chunk_bytes=64, alignment=4096, budget_bytes=4096 + 4095)
    v = pool.carve("a", (1024,), torch.float32)  # 4096 B
    assert v.data_ptr() % 4096 == 0 and pool.bytes_reserved == 4096 + 4095
    tight = GraphBufferPool("cpu", chunk_bytes=64, alignment=4096, budget_bytes=4096)
    try:
        w = tight.carve("a", (1024,), torch.float32)
    except PoolExhausted as e:
        assert "needs 4096 B at a 4096-byte aligned address" in str(e)
        assert tight.stats() == PoolStats(0, 0, 0, 0), "a refused carve keeps nothing"
    else:
        assert w.data_ptr() % 4096 == 0 and tight.bytes_reserved == 4096


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
    # Without poison the pool writes nothing: bytes set beforehand stay as they were.
    quiet = GraphBufferPool(device, poison=False, alignment=4)
    quiet.carve("first", (1,), torch.int32)
    quiet.chunk(0).fill_(0x11)
    g = quiet.carve("g", (5,), torch.float32)
    assert (g.view(torch.int32) == 0x11111111).all()


@pytest.mark.gpu
def test_pool_on_cuda_addresses_aligned_and_kept():
    # Alignment above the caching allocator's 512 B holds for the address itself; a new
    # chunk never moves an earlier view, which keeps writing into its own chunk.
    pool = GraphBufferPool("cuda", chunk_bytes=1 << 20, alignment=4096)
    a = pool.carve("a", (1000,), torch.float32)
    views = [pool.carve(f"v{i}", (300 + i,), torch.int32) for i in range(6)]
    big = pool.carve("big", (1 << 20,), torch.float32)  # its own, larger chunk
    pool.freeze()
    assert pool.stats().chunks == 2 and pool.region("big").chunk == 1
    for v in [a, *views, big]:
        assert v.data_ptr() % 4096 == 0 and v.device.index is not None
    a.fill_(2.5)
    off = pool.region("a").offset
    assert a.data_ptr() == pool.chunk(0).data_ptr() + off
    assert (pool.chunk(0)[off : off + 4000].view(torch.float32) == 2.5).all()
