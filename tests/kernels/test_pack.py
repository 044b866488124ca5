"""Fused pack vs the shipped eight ops: bit for bit, through int32 views."""

import shutil
from functools import partial

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_harness.kernels import pack_scores_ids, pack_scores_ids_shipped
from tests.conftest import DEVICES
from tests.exact import assert_bits_equal, poison_
from tests.kernels.inputs import make_indices, make_scores


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


@pytest.mark.smoke
@pytest.mark.parametrize("device", DEVICES)
def test_pack_empty(device):
    # Nothing to pack: no kernel is launched, and the (empty) out is returned as given.
    from graph_harness.kernels import add_launch_listener, remove_launch_listener

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


# --- every accepted rank dtype and value: fused, shipped, compiled and numpy agree ----------


def numpy_pack(indices, scores, rank, width) -> torch.Tensor:
    """The contract computed independently in numpy: int32 `[rows, k, 2]` bits."""
    idx = indices.cpu().numpy().astype(np.int64)
    score_bits = scores.cpu().view(torch.int32).numpy().astype(np.int64)
    r = int(rank.item()) if torch.is_tensor(rank) else rank
    # int32(index) + int32(rank) * int32(width), two's complement: all of it mod 2**32.
    low = idx.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    gid = (low + np.uint64((r * width) % 2**32)) & np.uint64(0xFFFFFFFF)
    gid = gid.astype(np.int64)
    gid = np.where(gid >= 2**31, gid - 2**32, gid)
    live = idx >= 0
    out = np.stack([np.where(live, score_bits, -8388608), np.where(live, gid, -1)], axis=-1)
    return torch.from_numpy(out.astype(np.int32))


RANK_DTYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
# Values at each accepted dtype's edges: the rank tensor is never range-checked (reading
# it would sync), so whatever it holds, every path must compute the same int32 id.
RANK_VALUES = {
    torch.int8: [3, 127, -128, -3],
    torch.uint8: [3, 200, 255],
    torch.int16: [3, 32767, -32768],
    torch.int32: [3, 2**31 - 1, -(2**31)],
    torch.int64: [3, 2**31 + 5, -(2**40) - 3, 2**63 - 1],
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", [pack_scores_ids, pack_scores_ids_shipped])
@pytest.mark.parametrize("rank_dtype", RANK_DTYPES)
def test_pack_issue_example_every_rank_dtype(device, fn, rank_dtype):
    # Index 5, rank 3, width 1000: id 3005 whatever the rank's dtype (a uint8 multiply
    # once gave 189 in the shipped path).
    indices = torch.tensor([[5, -1]], device=device)
    out = poison_(torch.empty(1, 2, 2, device=device))
    fn(
        indices,
        torch.ones(1, 2, device=device),
        torch.tensor(3, dtype=rank_dtype, device=device),
        1000,
        out,
    )
    assert out[0, :, 1].view(torch.int32).tolist() == [3005, -1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rank_dtype", RANK_DTYPES)
@pytest.mark.parametrize("width", [1000, 2**28 + 3, 2**31 - 1])
def test_pack_rank_extremes(device, rank_dtype, width):
    rows, k = 3, 70
    indices = make_indices(rows, k, min(width, 2**40), torch.int64, device)
    scores = make_scores(rows, k, device)
    for value in RANK_VALUES[rank_dtype]:
        rank = torch.tensor(value, dtype=rank_dtype, device=device)
        want = numpy_pack(indices, scores, rank, width)
        actual, expected = run_both(indices, scores, rank, width, contiguous_out(rows, k, device))
        assert_bits_equal(expected.view(torch.int32), want, f"shipped, rank {value} {rank_dtype}")
        assert_bits_equal(actual.view(torch.int32), want, f"fused, rank {value} {rank_dtype}")
    for value in (0, 2**31 - 1):  # a Python int rank: range-checked to [0, 2**31)
        actual, expected = run_both(indices, scores, value, width, contiguous_out(rows, k, device))
        want = numpy_pack(indices, scores, value, width)
        assert_bits_equal(expected.view(torch.int32), want, f"shipped, rank {value}")
        assert_bits_equal(actual.view(torch.int32), want, f"fused, rank {value}")


def _has_cxx() -> bool:
    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))


@pytest.mark.parametrize(
    "device",
    [
        pytest.param(
            "cpu",
            marks=pytest.mark.skipif(not _has_cxx(), reason="Inductor on CPU needs a C++ compiler"),
        ),
        pytest.param("cuda", marks=pytest.mark.gpu),
    ],
)
def test_compiled_shipped_every_rank_dtype(device):
    # The compiled shipped path (Inductor) computes the same int32 id for every accepted
    # rank dtype. One compile per rank dtype (its guards; dynamic=False also specializes
    # on a Python int rank and the width), so one shape, one width where rank * width
    # wraps, and a reset first so earlier tests' compiles do not count against dynamo's
    # recompile limit.
    from graph_harness.capture.round.decode import compiled_shipped_pack

    torch._dynamo.reset()
    compiled = compiled_shipped_pack()
    rows, k, width = 2, 40, 2**31 - 1
    indices = make_indices(rows, k, 2**40, torch.int64, device)
    scores = make_scores(rows, k, device)
    ranks = [5] + [
        torch.tensor(v, dtype=d, device=device) for d in RANK_DTYPES for v in RANK_VALUES[d][1:3]
    ]
    for rank in ranks:
        out = poison_(torch.empty(rows, k, 2, device=device))
        compiled(indices, scores, rank, width, out)
        want = numpy_pack(indices, scores, rank, width)
        assert_bits_equal(out.view(torch.int32), want, f"rank {rank!r}")


# --- a property test over accepted dtypes, strides and offsets ------------------------------

IN_LAYOUTS = ["contiguous", "transposed", "sliced", "offset", "expanded_rows", "expanded_cols"]
OUT_LAYOUTS = ["contiguous", "gather_slot", "padded_rows", "odd_row_stride", "misaligned"]


def laid_out(values: torch.Tensor, layout: str) -> torch.Tensor:
    """A view of `layout` holding (for the expanded layouts: derived from) `values`."""
    rows, k = values.shape
    if layout == "contiguous":
        return values.clone()
    if layout == "transposed":
        return values.t().contiguous().t()
    if layout == "sliced":
        wide = torch.empty(rows, 2 * k + 1, dtype=values.dtype, device=values.device)
        wide[:, 1::2] = values
        return wide[:, 1::2]
    if layout == "offset":
        flat = torch.empty(rows * k + 3, dtype=values.dtype, device=values.device)
        flat[3:] = values.reshape(-1)
        return flat[3:].view(rows, k)
    if layout == "expanded_rows":  # row stride 0: every row the first
        return values[:1].clone().expand(rows, k)
    return values[:, :1].clone().expand(rows, k)  # column stride 0


def out_backing(rows: int, k: int, layout: str, device) -> tuple[torch.Tensor, tuple]:
    """(poisoned float32 backing, (shape, stride, offset)) of an out in `layout`."""
    row_stride = {"padded_rows": 2 * k + 6, "odd_row_stride": 2 * k + 1}.get(layout, 2 * k)
    offset = {"gather_slot": rows * 2 * k, "misaligned": 1}.get(layout, 0)
    size = (
        offset + (rows - 1) * row_stride + 2 * k + (rows * 2 * k if layout == "gather_slot" else 0)
    )
    backing = poison_(torch.empty(size, device=device))
    return backing, ((rows, k, 2), (row_stride, 2, 1), offset)


@st.composite
def pack_cases(draw):
    rows, k = draw(st.integers(1, 5)), draw(st.integers(1, 300))
    width = draw(st.one_of(st.integers(1, 5000), st.integers(1, 2**31 - 1)))
    if draw(st.booleans()):
        rank = draw(st.integers(0, 2**31 - 1))
    else:
        dtype = draw(st.sampled_from(RANK_DTYPES))
        info = torch.iinfo(dtype)
        rank = (dtype, draw(st.integers(info.min, info.max)))
    return dict(
        rows=rows,
        k=k,
        width=width,
        rank=rank,
        idx_dtype=draw(st.sampled_from([torch.int32, torch.int64])),
        idx_layout=draw(st.sampled_from(IN_LAYOUTS)),
        score_layout=draw(st.sampled_from(IN_LAYOUTS)),
        out_layout=draw(st.sampled_from(OUT_LAYOUTS)),
        int64_offsets=draw(st.booleans()),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=60, deadline=None)
@given(case=pack_cases())
def test_pack_property_fused_shipped_numpy(device, case):
    torch.manual_seed(case["seed"])
    rows, k, width = case["rows"], case["k"], case["width"]
    raw = make_indices(rows, k, width, torch.int64, "cpu")
    raw[torch.rand(rows, k) < 0.1] = torch.randint(2**31, 2**62, ())  # past int32: low bits
    indices = laid_out(raw.to(case["idx_dtype"]).to(device), case["idx_layout"])
    scores = laid_out(make_scores(rows, k, device), case["score_layout"])
    rank = case["rank"]
    if isinstance(rank, tuple):
        rank = torch.tensor(rank[1], dtype=rank[0], device=device)
    want = numpy_pack(indices, scores, rank, width)
    for name, fn in (
        ("shipped", pack_scores_ids_shipped),
        ("fused", partial(pack_scores_ids, _int64_offsets=case["int64_offsets"])),
    ):
        backing, (shape, stride, offset) = out_backing(rows, k, case["out_layout"], device)
        before = backing.clone()
        out = backing.as_strided(shape, stride, offset)
        fn(indices, scores, rank, width, out)
        assert_bits_equal(out.view(torch.int32), want, f"{name}: {case}")
        # Nothing outside out was written: blank out's elements in both, compare the rest.
        before.as_strided(shape, stride, offset).fill_(0)
        out.fill_(0)
        assert_bits_equal(backing, before, f"{name} wrote outside out: {case}")
