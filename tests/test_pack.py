"""Fused pack vs the shipped eight ops: bit for bit, through int32 views."""

import pytest
import torch

from kernels import pack_scores_ids, pack_scores_ids_shipped
from tests.conftest import DEVICES
from tests.exact import assert_bits_equal, poison_

# Odd NaN payloads, both signs, a signalling one: both paths must copy their bits.
NAN_BITS = [0x7FC00000, 0x7FC00001, 0xFFC00000 - 2**32, 0x7F800001, 0x7FFFFFFF]


def make_scores(rows, k, device):
    # Ties (coarse rounding), NaN with odd payloads, -inf, +inf: everything a select copies.
    s = (torch.randn(rows, k) * 4).round() / 4
    bits = s.view(torch.int32)
    pick = torch.rand(rows, k)
    nan = torch.tensor(NAN_BITS, dtype=torch.int32)[torch.randint(len(NAN_BITS), (rows, k))]
    bits[:] = torch.where(pick < 0.03, nan, bits)
    s[(pick >= 0.03) & (pick < 0.06)] = float("-inf")
    s[(pick >= 0.06) & (pick < 0.07)] = float("inf")
    return s.to(device)


def make_indices(rows, k, width, dtype, device, dead=0.2):
    idx = torch.randint(0, width, (rows, k), dtype=torch.int64)
    kill = torch.rand(rows, k) < dead
    idx[kill] = -torch.randint(1, 2**40, (int(kill.sum()),))  # any negative is dead
    return idx.to(dtype).to(device)


def run_both(indices, scores, rank, width, out_factory):
    """Poison two outputs, run shipped and fused, return both."""
    expected, actual = out_factory(), out_factory()
    poison_(expected)
    poison_(actual)
    pack_scores_ids_shipped(indices, scores, rank, width, expected)
    pack_scores_ids(indices, scores, rank, width, actual)
    return actual, expected


def contiguous_out(rows, k, device):
    return lambda: torch.empty(rows, k, 2, device=device)


# (rows, k): one row; under, at and over a power-of-two block; non-powers of two.
SHAPES = [
    (1, 1),  # one element
    (1, 48),  # the timing matrix's smallest: one block of 64, 16 masked lanes
    (3, 127),  # a block minus one
    (2, 128),  # exactly a block
    (5, 129),  # a block plus one: a second, masked block
    (8, 1000),  # non-power of two
    (7, 1024),  # the largest single block
    (4, 1025),  # the largest block plus one
    (8, 2048),  # the seed's setting: two full blocks
    (256, 48),  # many rows of a tiny k
    (256, 2048),  # the timing matrix's largest
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,k", SHAPES)
@pytest.mark.parametrize("world", [8, 16])
def test_pack_matches_shipped(device, rows, k, world):
    width = {1: 48, 48: 48, 1000: 1000}.get(k, 2048) if k > 1 else 3
    for dtype in (torch.int64, torch.int32):
        for rank in (0, world - 1, int(torch.randint(world, ()))):
            indices = make_indices(rows, k, width, dtype, device)
            scores = make_scores(rows, k, device)
            actual, expected = run_both(
                indices, scores, rank, width, contiguous_out(rows, k, device)
            )
            assert_bits_equal(actual, expected, f"rank={rank} {dtype}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rank_dtype", [torch.int32, torch.int64])
def test_pack_rank_from_memory(device, rank_dtype):
    # A 0-d device tensor rank is read by the kernel, never synced to the host.
    rows, k, width, world = 8, 300, 777, 8
    for rank in (0, 5, world - 1):
        rank_t = torch.tensor(rank, dtype=rank_dtype, device=device)
        indices = make_indices(rows, k, width, torch.int64, device)
        scores = make_scores(rows, k, device)
        actual, expected = run_both(indices, scores, rank_t, width, contiguous_out(rows, k, device))
        assert_bits_equal(actual, expected)
        # and equal to the int-rank result
        as_int, _ = run_both(indices, scores, rank, width, contiguous_out(rows, k, device))
        assert_bits_equal(actual, as_int)


@pytest.mark.parametrize("device", DEVICES)
def test_pack_int32_wrap(device):
    # Local index near 2**28 at world 16: rank * width passes 2**31 and wraps.
    rows, k, width = 4, 257, 2**28 + 3
    for rank in (7, 8, 15):
        indices = torch.randint(2**28 - 1000, width, (rows, k), dtype=torch.int64)
        indices[:, ::7] = -1
        indices = indices.to(device)
        scores = make_scores(rows, k, device)
        actual, expected = run_both(indices, scores, rank, width, contiguous_out(rows, k, device))
        assert_bits_equal(actual, expected)
        ids = actual[..., 1].view(torch.int32).cpu().long()
        live = indices.cpu() >= 0
        want = (indices.cpu() + rank * width + 2**31) % 2**32 - 2**31
        assert torch.equal(ids[live], want[live]), "the id is not the wrapped int32 sum"
        if rank >= 8:
            assert (ids[live] < 0).any(), "this case was meant to wrap"


@pytest.mark.parametrize("device", DEVICES)
def test_pack_int64_narrowing_wraps(device):
    # int64 indices past 2**31: int32(index) keeps the low 32 bits, in both paths.
    rows, k = 3, 64
    indices = torch.randint(2**31, 2**40, (rows, k), dtype=torch.int64)
    indices[0, :5] = -5
    indices = indices.to(device)
    scores = make_scores(rows, k, device)
    actual, expected = run_both(indices, scores, 3, 1000, contiguous_out(rows, k, device))
    assert_bits_equal(actual, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_pack_all_dead_and_all_live(device):
    rows, k, width = 4, 130, 500
    indices = make_indices(rows, k, width, torch.int64, device, dead=0.0)
    indices[0] = -1  # an all-dead row
    scores = make_scores(rows, k, device)
    actual, expected = run_both(indices, scores, 2, width, contiguous_out(rows, k, device))
    assert_bits_equal(actual, expected)
    assert (actual[0, :, 1].view(torch.int32) == -1).all()
    assert (actual[0, :, 0] == float("-inf")).all()
    assert (actual[1:, :, 1].view(torch.int32) >= 2 * width).all()


@pytest.mark.parametrize("device", DEVICES)
def test_pack_into_gather_slot(device):
    # out is one rank's slot of a [world, rows, k, 2] gather buffer: other slots untouched.
    world, rows, k, width, rank = 8, 8, 200, 333, 5
    indices = make_indices(rows, k, width, torch.int64, device)
    scores = make_scores(rows, k, device)
    gather = poison_(torch.empty(world, rows, k, 2, device=device))
    before = gather.clone()
    expected = poison_(torch.empty(rows, k, 2, device=device))
    pack_scores_ids_shipped(indices, scores, rank, width, expected)
    pack_scores_ids(indices, scores, rank, width, gather[rank])
    assert_bits_equal(gather[rank], expected)
    others = [r for r in range(world) if r != rank]
    assert_bits_equal(gather[others], before[others], "other ranks' slots")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["odd_row_stride", "misaligned_base", "padded_rows"])
def test_pack_free_row_stride(device, layout):
    # Pairs not 8-byte aligned take the two-store path; padded rows keep the wide store.
    rows, k, width = 6, 100, 400
    indices = make_indices(rows, k, width, torch.int32, device)
    scores = make_scores(rows, k, device)
    row_stride = {"odd_row_stride": 2 * k + 1, "misaligned_base": 2 * k, "padded_rows": 2 * k + 6}
    base = 1 if layout == "misaligned_base" else 0

    def factory():
        flat = torch.empty(base + rows * row_stride[layout] + 2, device=device)
        return flat[base:].as_strided((rows, k, 2), (row_stride[layout], 2, 1))

    actual, expected = run_both(indices, scores, 4, width, factory)
    assert_bits_equal(actual, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_pack_strided_inputs(device):
    rows, k, width = 5, 90, 1000
    indices = make_indices(rows, 2 * k, width, torch.int64, device)[:, ::2]
    scores = make_scores(k, rows, device).t()
    actual, expected = run_both(indices, scores, 1, width, contiguous_out(rows, k, device))
    assert_bits_equal(actual, expected)


@pytest.mark.parametrize("device", DEVICES)
def test_pack_empty(device):
    # Nothing to pack: no kernel is launched, and the (empty) out is returned as given.
    from kernels import add_launch_listener, remove_launch_listener

    launches = []
    listener = lambda name, dev, grid: launches.append(name)
    add_launch_listener(listener)
    try:
        for rows, k in ((0, 5), (5, 0)):
            out = torch.empty(rows, k, 2, device=device)
            got = pack_scores_ids(
                torch.empty(rows, k, dtype=torch.int64, device=device),
                torch.empty(rows, k, device=device),
                0,
                1,
                out,
            )
            assert got is out
    finally:
        remove_launch_listener(listener)
    assert launches == []
    # the listener does see a real launch, so the empty case is not vacuous
    add_launch_listener(listener)
    try:
        pack_scores_ids(
            torch.zeros(1, 1, dtype=torch.int64, device=device) + 3,
            torch.ones(1, 1, device=device),
            0,
            8,
            torch.empty(1, 1, 2, device=device),
        )
    finally:
        remove_launch_listener(listener)
    assert launches == ["_pack_flat_kernel"]
