"""selected_local_records: Triton kernel vs the torch reference, bit for bit."""

import pytest
import torch

from graph_harness.kernels import (
    pack_scores_ids_shipped,
    selected_local_records,
    selected_local_records_shipped,
)
from graph_harness.pools import GraphBufferPool
from tests.conftest import DEVICES
from tests.exact import assert_bits_equal, poison_


def make_ids(rows, k, world, width, device, dead=0.15, local_rank=None, local_share=None):
    """Global ids over `world` shards of `width`, with dead entries (any negative)."""
    ids = torch.randint(0, world * width, (rows, k), dtype=torch.int64)
    if local_rank is not None and local_share is not None:
        mine = torch.rand(rows, k) < local_share
        ids[mine] = local_rank * width + torch.randint(0, width, (int(mine.sum()),))
    kill = torch.rand(rows, k) < dead
    ids[kill] = -torch.randint(1, 2**31, (int(kill.sum()),))
    return ids.clamp(-(2**31), 2**31 - 1).to(torch.int32).to(device)


def check(ids, rank, width, slot_map=None, *, with_out=True):
    expected = selected_local_records_shipped(ids, rank, width, slot_map=slot_map)
    if with_out:
        out = poison_(torch.empty_like(ids))
        count_out = poison_(torch.empty(ids.shape[0], dtype=torch.int32, device=ids.device))
        got = selected_local_records(
            ids, rank, width, slot_map=slot_map, out=out, count_out=count_out
        )
        assert got[0] is out and got[1] is count_out, "must return the given buffers"
    else:
        got = selected_local_records(ids, rank, width, slot_map=slot_map)
    assert_bits_equal(got[1], expected[1], "counts")
    assert_bits_equal(got[0], expected[0], "physical")
    return got


# (rows, K, width): K around the kernel's block (next power of two, up to 4096).
CASES = [
    (1, 1, 48),  # one record
    (1, 48, 48),  # one row, K = width
    (3, 127, 100),  # a power of two minus one
    (4, 128, 2048),  # exactly a power of two
    (5, 129, 1000),  # plus one
    (8, 2048, 2048),  # the seed's setting
    (2, 4095, 97),  # the largest block minus one
    (2, 4097, 1999),  # two blocks: the running count crosses a block
    (256, 2048, 2048),  # many rows
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows,k,width", CASES)
@pytest.mark.parametrize("world", [8, 16])
def test_compaction_matches_reference(device, rows, k, width, world):
    for rank in (0, world - 1, int(torch.randint(world, ()))):
        for use_map in (False, True):
            ids = make_ids(rows, k, world, width, device, local_rank=rank, local_share=0.3)
            slot_map = (
                torch.randperm(width, dtype=torch.int32).to(device) * 3 + 11 if use_map else None
            )
            _, counts = check(ids, rank, width, slot_map)
            assert counts.sum() > 0 or rows * k < 8, "case meant to hold local records"
    # The allocating path (out=None) returns the same bits.
    check(make_ids(rows, k, world, width, device), 1, width, with_out=False)


@pytest.mark.smoke
@pytest.mark.parametrize("device", DEVICES)
def test_compaction_stable_order_and_tail(device):
    # An independent check of the contract, not just kernel == reference.
    ids = torch.tensor([[5, 12, -1, 10, 11, 3, 14, -7]], dtype=torch.int32, device=device)
    physical, counts = check(ids, 1, 5)  # rank 1 owns ids 5..9: only 5
    assert counts.tolist() == [1] and physical.tolist() == [[0, -1, -1, -1, -1, -1, -1, -1]]
    physical, counts = check(ids, 2, 5)  # rank 2 owns 10..14: 12, 10, 11, 14 in order
    assert counts.tolist() == [4]
    assert physical.tolist() == [[2, 0, 1, 4, -1, -1, -1, -1]]
    slot_map = torch.tensor([40, 41, 42, 43, 44], dtype=torch.int32, device=device)
    physical, _ = check(ids, 2, 5, slot_map)
    assert physical.tolist() == [[42, 40, 41, 44, -1, -1, -1, -1]]


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_all_dead_and_all_local_rows(device):
    rows, k, width, world, rank = 4, 300, 512, 8, 3
    ids = make_ids(rows, k, world, width, device)
    ids[0] = -1  # all dead
    ids[1] = rank * width + torch.randint(0, width, (k,), dtype=torch.int32, device=device)
    ids[2] = (rank + 1) * width  # all remote
    physical, counts = check(ids, rank, width)
    assert counts[0] == 0 and counts[1] == k and counts[2] == 0
    assert (physical[0] == -1).all() and (physical[2] == -1).all()
    assert (physical[1] >= 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_rank_tensor(device):
    rows, k, width, world = 6, 500, 300, 16
    for dtype in (torch.int32, torch.int64):
        for rank in (0, 9, 15):
            ids = make_ids(rows, k, world, width, device, local_rank=rank, local_share=0.25)
            rank_t = torch.tensor(rank, dtype=dtype, device=device)
            got, _ = check(ids, rank_t, width)
            as_int, _ = check(ids, rank, width)
            assert_bits_equal(got, as_int)


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_of_wrapped_pack_ids(device):
    # World 16, local index near 2**28: the pack's int32 ids wrap negative for high
    # ranks, and the compaction must treat those exactly as the reference does (dead).
    world, width, rows, k = 16, 2**28 + 3, 4, 256
    gather = torch.empty(world, rows, k, 2, device=device)
    for r in range(world):
        local = torch.randint(2**28 - 50, width, (rows, k), dtype=torch.int64)
        local[:, ::5] = -1
        scores = torch.randn(rows, k)
        pack_scores_ids_shipped(local.to(device), scores.to(device), r, width, gather[r])
    ids = gather[..., 1].view(torch.int32).permute(1, 0, 2).reshape(rows, world * k)
    ids = ids.contiguous()
    assert (ids < -1).any(), "meant to include wrapped ids"
    for rank in (0, 7, 8, 15):
        check(ids, rank, width)


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_into_pool_views(device):
    # Retained buffers carved from one pool chunk, beside the ids: written directly.
    rows, k, width, world, rank = 8, 2048, 2048, 8, 2
    pool = GraphBufferPool(device, chunk_bytes=1 << 20, poison=True)
    ids = pool.carve("ids", (rows, k), torch.int32)  # [rows, K] global ids
    out = pool.carve("physical", (rows, k), torch.int32)  # [rows, K] retained slots
    count_out = pool.carve("counts", (rows,), torch.int32)  # [rows] retained counts
    ids.copy_(make_ids(rows, k, world, width, device, local_rank=rank, local_share=0.2))
    expected = selected_local_records_shipped(ids, rank, width)
    selected_local_records(ids, rank, width, out=out, count_out=count_out)
    assert_bits_equal(out, expected[0])
    assert_bits_equal(count_out, expected[1])


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_strided_buffers(device):
    rows, k, width, world = 5, 333, 100, 8
    ids = make_ids(rows, 2 * k, world, width, device)[:, 1::2]
    out = poison_(torch.empty(k, rows, dtype=torch.int32, device=device)).t()
    count_out = poison_(torch.empty(rows, 3, dtype=torch.int32, device=device))[:, 1]
    expected = selected_local_records_shipped(ids, 4, width)
    selected_local_records(ids, 4, width, out=out, count_out=count_out)
    assert_bits_equal(out, expected[0])
    assert_bits_equal(count_out, expected[1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["every_other", "expanded"])
def test_compaction_strided_slot_map(device, layout):
    # The kernel once indexed slot_map as if contiguous: a strided map gave wrong slots.
    rows, k, width, world, rank = 4, 600, 250, 8, 5
    ids = make_ids(rows, k, world, width, device, local_rank=rank, local_share=0.3)
    if layout == "every_other":
        # sliced on the device: .to(device) of a sliced CPU tensor would be contiguous
        slot_map = (torch.randperm(2 * width, dtype=torch.int32).to(device) * 5 + 9)[1::2]
    else:  # stride 0: every slot maps to one physical slot
        slot_map = torch.tensor([77], dtype=torch.int32, device=device).expand(width)
    assert slot_map.stride() == ((2,) if layout == "every_other" else (0,))
    physical, counts = check(ids, rank, width, slot_map)
    assert counts.sum() > 0, "meant to hold local records"
    if layout == "expanded":
        assert set(physical[physical >= 0].tolist()) == {77}


@pytest.mark.parametrize("device", DEVICES)
def test_compaction_rank_tensor_every_dtype(device):
    # A rank tensor is compared as int32(rank), by kernel and reference alike: an int64
    # 2**32 + 3 is rank 3 and -2**40 is rank 0 (the kernel once compared in int64, and
    # found no local records where the reference found them).
    rows, k, width, world = 3, 400, 50, 8
    cases = {
        torch.int8: [3, -128, 127],
        torch.uint8: [3, 255],
        torch.int16: [3, -32768],
        torch.int32: [3, -(2**31)],
        torch.int64: [3, 2**32 + 3, -(2**40), 2**63 - 1],
    }
    for dtype, values in cases.items():
        for value in values:
            rank = torch.tensor(value, dtype=dtype, device=device)
            as_int32 = (value + 2**31) % 2**32 - 2**31
            ids = make_ids(
                rows, k, world, width, device, local_rank=as_int32 % world, local_share=0.2
            )
            got, counts = check(ids, rank, width)
            if 0 <= as_int32 < world:
                assert counts.sum() > 0, f"rank {value} {dtype} meant to own records"
                same, _ = check(ids, as_int32, width)
                assert_bits_equal(got, same, f"rank {value} {dtype} vs int {as_int32}")
            else:
                assert counts.sum() == 0, f"rank {value} {dtype} owns no ids"
