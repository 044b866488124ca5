"""The aliasing guard compares byte ranges, never storages."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_harness.kernels import (
    byte_range,
    overlaps,
    pack_scores_ids,
    pack_scores_ids_shipped,
    selected_local_records,
)
from graph_harness.kernels.guard import check_no_alias
from graph_harness.pools import GraphBufferPool
from tests.conftest import DEVICES


def touched_bytes(t: torch.Tensor) -> set[int]:
    """Brute force: every byte address the tensor's elements occupy."""
    if t.numel() == 0:
        return set()
    item = t.element_size()
    base = t.data_ptr()
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = (offsets.unsqueeze(-1) + torch.arange(size) * stride).flatten()
    return {base + int(o) * item + b for o in offsets.unique() for b in range(item)}


@st.composite
def views(draw, storage_elems=64):
    ndim = draw(st.integers(1, 3))
    shape = [draw(st.integers(0, 4)) for _ in range(ndim)]
    strides = [draw(st.integers(1, 9)) for _ in range(ndim)]
    span = sum((s - 1) * st_ for s, st_ in zip(shape, strides) if s > 0)
    offset = draw(st.integers(0, max(0, storage_elems - 1 - span)))
    if span + offset >= storage_elems:
        shape = [0] * ndim
    return tuple(shape), tuple(strides), offset


@settings(max_examples=400, deadline=None)
@given(a=views(), b=views(), dtypes=st.sampled_from([(4, 4), (4, 1), (1, 4), (2, 4)]))
def test_guard_against_brute_force(a, b, dtypes):
    # One shared storage; views of several element sizes. The guard may over-report for
    # strided views (bounding box), never under-report; contiguous views are exact.
    size_of = {1: torch.uint8, 2: torch.int16, 4: torch.int32}
    storage = torch.zeros(64 * 4, dtype=torch.uint8)
    ta = storage.view(size_of[dtypes[0]]).as_strided(a[0], a[1], a[2])
    tb = storage.view(size_of[dtypes[1]]).as_strided(b[0], b[1], b[2])
    truth = bool(touched_bytes(ta) & touched_bytes(tb))
    said = overlaps(ta, tb)
    if truth:
        assert said, f"missed a real overlap: {a} {b}"
    if ta.is_contiguous() and tb.is_contiguous():
        assert said == truth
    lo, hi = byte_range(ta)
    assert touched_bytes(ta) <= set(range(lo, hi))


def test_guard_rules():
    x = torch.empty(100, dtype=torch.int32)
    assert overlaps(x[:50], x[49:])  # partial overlap
    assert not overlaps(x[:50], x[50:])  # adjacent, disjoint
    assert not overlaps(x[:0], x)  # empty overlaps nothing
    assert overlaps(x[::2], x[1::2])  # interleaved: bounding boxes meet (conservative)
    assert not overlaps(x[:10], torch.empty(10, dtype=torch.int32))  # other storage
    with pytest.raises(ValueError, match=r"'out' bytes \[0x[0-9a-f]+, 0x[0-9a-f]+\) overlap 'ids'"):
        check_no_alias({"out": x[10:20]}, {"ids": x[15:30]})
    check_no_alias({"out": x[10:20], "count_out": None}, {"ids": x[20:30]})


@pytest.mark.parametrize("device", DEVICES)
def test_kernels_refuse_overlap(device):
    rows, k = 4, 64
    pool = GraphBufferPool(device, chunk_bytes=1 << 16)
    ids = pool.carve("ids", (rows, k), torch.int32)
    ids.copy_(torch.randint(0, 8 * 64, (rows, k), dtype=torch.int32))
    storage = torch.empty(rows * k * 2 + 64, dtype=torch.int32, device=device)

    with pytest.raises(ValueError, match="'out'.*overlap 'ids'"):  # out over ids
        selected_local_records(ids, 1, 64, out=ids)
    with pytest.raises(ValueError, match="'count_out'.*overlap 'out'|'out'.*overlap 'count_out'"):
        selected_local_records(
            ids,
            1,
            64,
            out=storage[: rows * k].view(rows, k),
            count_out=storage[rows * k - 2 : rows * k + 2],
        )
    with pytest.raises(ValueError, match="'out'.*overlap 'ids'"):  # partial overlap
        selected_local_records(ids, 1, 64, out=_shifted(ids, k // 2))
    wide = torch.randn(rows, 2 * k, device=device)
    scores = wide[:, :k]  # strided input: row stride 2k
    with pytest.raises(ValueError, match="'out'.*overlap 'scores'"):  # strided views
        pack_scores_ids(ids, scores, 0, 64, wide.as_strided((rows, k, 2), (2 * k, 2, 1)))
    pairs = torch.empty(rows, k, 2, device=device)
    # Disjoint views of one pool chunk share a storage and must pass.
    out = pool.carve("physical", (rows, k), torch.int32)
    counts = pool.carve("counts", (rows,), torch.int32)
    assert out.untyped_storage().data_ptr() == ids.untyped_storage().data_ptr()
    selected_local_records(ids, 1, 64, out=out, count_out=counts)
    pack_scores_ids(ids, scores, 0, 64, pairs)


def _shifted(t: torch.Tensor, by: int) -> torch.Tensor:
    """A view of t's storage starting `by` elements into t: a partial overlap."""
    return t.as_strided(t.shape, t.stride(), t.storage_offset() + by)


def test_guard_meta_tensors_never_overlap():
    # Meta tensors hold no memory: every one's data pointer counts from 0, which once read
    # as an overlap of any two.
    a, b = torch.empty(8, device="meta"), torch.empty(8, device="meta")
    assert a.data_ptr() == b.data_ptr() == 0, "the reason the guard must not compare them"
    assert not overlaps(a, b) and not overlaps(a, a[2:])
    check_no_alias({"out": a}, {"x": b})
    # The shipped pack propagates shapes on meta tensors without a false refusal.
    idx = torch.empty(2, 3, dtype=torch.int64, device="meta")
    out = torch.empty(2, 3, 2, device="meta")
    pack_scores_ids_shipped(idx, torch.empty(2, 3, device="meta"), 1, 10, out)
    # The same layout on the CPU is still refused where it really overlaps.
    x = torch.empty(16)
    with pytest.raises(ValueError, match="'out'.*overlap 'x'"):
        check_no_alias({"out": x[:8]}, {"x": x[4:]})


def test_fused_kernels_on_meta_tensors_behave_as_their_references():
    # Shape-only tracing (meta tensors) ran the references and refused the kernels.
    from graph_harness.kernels import (
        pack_scores_ids,
        selected_local_records,
        selected_local_records_shipped,
    )

    m = "meta"
    idx, sc = torch.empty(4, 32, dtype=torch.int64, device=m), torch.empty(4, 32, device=m)
    for rank in (1, torch.tensor(1, dtype=torch.int32, device=m)):
        out = torch.empty(4, 32, 2, device=m)
        assert pack_scores_ids(idx, sc, rank, 100, out) is out
        assert pack_scores_ids_shipped(idx, sc, rank, 100, out) is out
    ids, slots = (
        torch.empty(4, 32, dtype=torch.int32, device=m),
        torch.empty(100, dtype=torch.int32, device=m),
    )
    for kw in ({}, {"slot_map": slots}):
        got = selected_local_records(ids, 1, 100, **kw)
        want = selected_local_records_shipped(ids, 1, 100, **kw)
        assert [(t.shape, t.dtype, t.device) for t in got] == [
            (t.shape, t.dtype, t.device) for t in want
        ]
    out, count = (
        torch.empty(4, 32, dtype=torch.int32, device=m),
        torch.empty(4, dtype=torch.int32, device=m),
    )
    got = selected_local_records(ids, 1, 100, out=out, count_out=count)
    assert got[0] is out and got[1] is count
    # checks still run on meta: a wrong dtype is refused as by the reference
    with pytest.raises(TypeError, match="ids must be torch.int32"):
        selected_local_records(idx, 1, 100)
