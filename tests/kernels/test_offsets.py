"""Offset width: int32 element offsets where they fit, int64 where a view passes 2**31.

The choice is a pure function of the tensors a launch addresses (tested here on meta
tensors, which have shapes and strides but no memory); both kernels are then run on views
whose extent passes 2**31 elements, over sparse memory, against the torch references.
"""

import pytest
import torch

import graph_harness.kernels.pack as pack_module
from graph_harness.kernels import (
    add_launch_listener,
    pack_scores_ids,
    pack_scores_ids_shipped,
    remove_launch_listener,
    selected_local_records,
    selected_local_records_shipped,
)
from graph_harness.kernels.launch import max_element_offset, needs_int64_offsets
from tests.conftest import DEVICES
from tests.exact import assert_bits_equal, poison_
from tests.kernels.inputs import make_indices, make_scores
from tests.sparse import GiB, require_cuda_free, sparse_cpu_bytes, sparse_cuda_bytes


def meta(shape, stride, dtype=torch.int32):
    return torch.empty_strided(shape, stride, dtype=dtype, device="meta")


# (shape, stride, largest element offset): the boundary is 2**31 - 1 (int32's largest).
OFFSET_CASES = [
    ((2**31,), (1,), 2**31 - 1),  # 2**31 contiguous elements: the last one still fits
    ((2**31 + 1,), (1,), 2**31),  # one more: it does not
    ((2, 2), (2**31 - 1, 1), 2**31),  # row stride at int32's limit, plus one column
    ((2,), (2**31 - 1,), 2**31 - 1),  # a stride that itself fits, exactly at the limit
    ((2,), (2**31,), 2**31),  # a stride of 2**31
    ((2**15, 2), (2**16, 1), 2**31 - 2**16 + 1),  # the layout, 64 columns fewer
    ((2**15 + 64, 1), (2**16, 1), 2**31 + 63 * 2**16),  # the layout
    ((2**20, 2**20), (0, 0), 0),  # expanded: zero strides reach nothing
    ((0, 5), (2**40, 2**40), 0),  # empty: no element, no offset
    ((1, 3), (2**40, 1), 2),  # a size-1 dim's stride is never multiplied
]


@pytest.mark.parametrize("shape,stride,largest", OFFSET_CASES)
def test_max_element_offset(shape, stride, largest):
    t = meta(shape, stride)
    assert max_element_offset(t) == largest
    assert needs_int64_offsets(t) == (largest >= 2**31)


def test_needs_int64_offsets_any_tensor():
    small, big = meta((4,), (1,)), meta((2,), (2**31,))
    assert not needs_int64_offsets(small, small, None)
    assert needs_int64_offsets(small, None, big)  # any one tensor decides
    assert not needs_int64_offsets()
    # A view deep inside a large storage: offsets count from its own data pointer.
    deep = torch.empty(0, dtype=torch.int32, device="meta").set_(
        torch.empty(2**32, dtype=torch.int32, device="meta").untyped_storage(), 2**31 + 5, (8,)
    )
    assert deep.storage_offset() == 2**31 + 5 and not needs_int64_offsets(deep)


# --- the wide variant computes the same bits on ordinary shapes ------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["flat", "strided", "two_stores"])
def test_pack_forced_int64_offsets(device, layout):
    rows, k, width = 5, 300, 1000
    indices = make_indices(rows, k, width, torch.int64, device)
    scores = make_scores(rows, k, device)
    if layout == "strided":
        indices = make_indices(rows, 2 * k, width, torch.int64, device)[:, ::2]
    base = 1 if layout == "two_stores" else 0  # a misaligned base: two 4-byte stores

    def factory():
        flat = poison_(torch.empty(base + rows * k * 2, device=device))
        return flat[base:].view(rows, k, 2)

    rank = torch.tensor(6, dtype=torch.int16, device=device)
    expected, actual = factory(), factory()
    pack_scores_ids_shipped(indices, scores, rank, width, expected)
    pack_scores_ids(indices, scores, rank, width, actual, _int64_offsets=True)
    assert_bits_equal(actual, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_forced_int64_offsets(device):
    rows, k, width = 4, 1500, 300
    # Sliced on the device (.to(device) of a sliced CPU tensor would be contiguous).
    ids = torch.randint(-50, 8 * width, (rows, 2 * k), dtype=torch.int32).to(device)[:, ::2]
    slot_map = (torch.randperm(2 * width, dtype=torch.int32).to(device) + 7)[::2]
    out = poison_(torch.empty(k, rows, dtype=torch.int32, device=device)).t()
    count_out = poison_(torch.empty(rows, 2, dtype=torch.int32, device=device))[:, 0]
    expected = selected_local_records_shipped(ids, 3, width, slot_map=slot_map)
    selected_local_records(
        ids, 3, width, slot_map=slot_map, out=out, count_out=count_out, _int64_offsets=True
    )
    assert_bits_equal(out, expected[0], "physical")
    assert_bits_equal(count_out, expected[1], "counts")
    assert expected[1].sum() > 0, "meant to hold local records"


# --- CUDA's 65535 grid rows: the 2-D pack launches again for further rows ------------------


@pytest.mark.parametrize("device", DEVICES)
def test_pack_rows_past_the_grid_limit(device, monkeypatch):
    # The limit lowered to 3 rows, so 8 strided rows take three launches here; the real
    # limit is exercised on CUDA below.
    monkeypatch.setattr(pack_module, "_MAX_GRID_ROWS", 3)
    rows, k, width = 8, 70, 500
    indices = make_indices(k, rows, width, torch.int32, device).t()  # strided: the 2-D launch
    scores = make_scores(rows, k, device)
    expected = poison_(torch.empty(rows, k, 2, device=device))
    actual = poison_(torch.empty(rows, k, 2, device=device))
    pack_scores_ids_shipped(indices, scores, 2, width, expected)
    launches = []
    listener = lambda name, dev, grid: launches.append((name, grid))
    add_launch_listener(listener)
    try:
        pack_scores_ids(indices, scores, 2, width, actual)
    finally:
        remove_launch_listener(listener)
    assert launches == [
        ("_pack_kernel", (1, 3)),
        ("_pack_kernel", (1, 3)),
        ("_pack_kernel", (1, 2)),
    ]
    assert_bits_equal(actual, expected)


@pytest.mark.gpu
def test_pack_many_strided_rows_cuda():
    rows, k, width = 70_000, 3, 50  # more rows than CUDA's grid holds along y
    indices = make_indices(k, rows, width, torch.int64, "cuda").t()
    scores = make_scores(rows, k, "cuda")
    expected = poison_(torch.empty(rows, k, 2, device="cuda"))
    actual = poison_(torch.empty(rows, k, 2, device="cuda"))
    pack_scores_ids_shipped(indices, scores, 1, width, expected)
    pack_scores_ids(indices, scores, 1, width, actual)
    assert_bits_equal(actual, expected)


# --- past 2**31 elements: views over sparse memory ----------------------------------------

K_BIG, STRIDE_BIG = 2**15 + 64, 2**16  # the layout: extent 2**31 + 63 * 2**16
BIG_ELEMENTS = (K_BIG - 1) * STRIDE_BIG + 4  # int32/float32 elements, ~8.6 GB


def _big_pack_case(raw: torch.Tensor, rows: int = 2):
    """ids and scores `[rows, K_BIG]` with column stride 2**16, interleaved in `raw`."""
    words = raw.view(torch.int32)
    ids = words.as_strided((rows, K_BIG), (1, STRIDE_BIG), 0)
    scores = words.view(torch.float32).as_strided((rows, K_BIG), (1, STRIDE_BIG), rows)
    ids.copy_(make_indices(rows, K_BIG, 1000, torch.int32, raw.device))
    scores.copy_(make_scores(rows, K_BIG, raw.device))
    assert needs_int64_offsets(ids) and needs_int64_offsets(scores), "meant to pass 2**31"
    return ids, scores


def _check_big_pack(ids, scores):
    rows = ids.shape[0]
    rank = torch.tensor(5, dtype=torch.int32, device=ids.device)
    expected = poison_(torch.empty(rows, K_BIG, 2, device=ids.device))
    actual = poison_(torch.empty(rows, K_BIG, 2, device=ids.device))
    pack_scores_ids_shipped(ids, scores, rank, 1000, expected)
    pack_scores_ids(ids, scores, rank, 1000, actual)
    assert_bits_equal(actual, expected, "pack past 2**31 elements")


def _big_compaction_case(raw_in: torch.Tensor, raw_out: torch.Tensor, rows: int = 2):
    """ids `[rows, K_BIG]` and slot_map `[K_BIG]` with stride 2**16 in `raw_in`, out
    `[rows, K_BIG]` with column stride 2**16 in `raw_out`."""
    words = raw_in.view(torch.int32)
    width, world, rank = K_BIG, 4, 1
    ids = words.as_strided((rows, K_BIG), (1, STRIDE_BIG), 0)
    slot_map = words.as_strided((width,), (STRIDE_BIG,), rows)
    ids.copy_(torch.randint(-100, world * width, (rows, K_BIG), dtype=torch.int32))
    slot_map.copy_(torch.randperm(width, dtype=torch.int32) * 3 + 1)
    out = poison_(raw_out.view(torch.int32).as_strided((rows, K_BIG), (1, STRIDE_BIG), 0))
    count_out = poison_(torch.empty(rows, dtype=torch.int32, device=raw_in.device))
    assert needs_int64_offsets(ids) and needs_int64_offsets(slot_map, out)
    expected = selected_local_records_shipped(ids, rank, width, slot_map=slot_map)
    selected_local_records(ids, rank, width, slot_map=slot_map, out=out, count_out=count_out)
    assert_bits_equal(count_out, expected[1], "counts past 2**31 elements")
    assert_bits_equal(out, expected[0], "physical past 2**31 elements")
    assert (expected[1] > 1000).all(), "meant to hold many local records"


def test_pack_past_int32_extent_cpu():
    # Before 64-bit offsets this wrapped to a negative offset and crashed the process.
    ids, scores = _big_pack_case(sparse_cpu_bytes(BIG_ELEMENTS * 4))
    _check_big_pack(ids, scores)


def test_compaction_past_int32_extent_cpu():
    raw_in = sparse_cpu_bytes(BIG_ELEMENTS * 4)
    raw_out = sparse_cpu_bytes(BIG_ELEMENTS * 4)
    _big_compaction_case(raw_in, raw_out)


@pytest.mark.gpu
def test_pack_past_int32_extent_cuda():
    ids, scores = _big_pack_case(sparse_cuda_bytes(BIG_ELEMENTS * 4))
    _check_big_pack(ids, scores)


@pytest.mark.gpu
def test_compaction_past_int32_extent_cuda():
    require_cuda_free(2 * BIG_ELEMENTS * 4)
    _big_compaction_case(sparse_cuda_bytes(BIG_ELEMENTS * 4), sparse_cuda_bytes(BIG_ELEMENTS * 4))


@pytest.mark.gpu
def test_pack_flat_past_int32_elements_cuda():
    # Contiguous, n = rows * k > 2**31: the 1-D launch with int64 offsets. ~35 GB; the
    # reference runs per block of rows to bound its temporaries.
    rows, k, width = 2**15 + 1, 2**16, 70_000
    n = rows * k
    need = n * (4 + 4 + 8)  # int32 ids, float32 scores, 8-byte pairs
    require_cuda_free(need, margin=10 * GiB)  # and the reference's per-block temporaries
    ids = torch.randint(-1000, width, (rows, k), dtype=torch.int32, device="cuda")
    scores = torch.randn(rows, k, device="cuda")
    # Poisoned on the device (poison_ draws its bits on the host: 17 GB here).
    out = torch.empty(rows, k, 2, device="cuda")
    out.view(torch.int32).fill_(0x7FC0DEAD)
    assert needs_int64_offsets(out.view(torch.int64).squeeze(-1))
    pack_scores_ids(ids, scores, 7, width, out)
    step = 1024
    for r0 in range(0, rows, step):
        part = slice(r0, min(r0 + step, rows))
        expected = torch.empty(part.stop - part.start, k, 2, device="cuda")
        expected.view(torch.int32).fill_(0x7FC0BEEF)  # unlike out's poison
        pack_scores_ids_shipped(ids[part], scores[part], 7, width, expected)
        # Compared on the device; the explaining comparison (on the host) only on a miss.
        if not torch.equal(out[part].view(torch.int32), expected.view(torch.int32)):
            assert_bits_equal(out[part], expected, f"rows {part.start}:{part.stop}")
