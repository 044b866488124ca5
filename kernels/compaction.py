"""Compaction of selected local records: after the global top-k, keep this rank's records.

Contract for `ids` int32 `[rows, K]` (global ids, negative = dead), `rank`, `width`:
    local[r, j]   = ids[r, j] >= 0 and ids[r, j] // width == int32(rank)
    physical[r, :counts[r]] = the local slots ids - rank * width, in order of appearance
                              (stable), mapped through slot_map (int32 `[width]`) if given
    physical[r, counts[r]:] = -1;  counts int32 `[rows]`
`selected_local_records_shipped` (pure torch, allocates) beside `selected_local_records`
(one Triton program per row, writing `out=`/`count_out=` directly). Overflow, strides,
offset widths, bytes moved: docs/builtin-round.md, "The compaction"."""

from __future__ import annotations

import torch

from graph_harness.kernels.checks import (
    INT32_LIMIT,
    check_rank,
    check_shape,
    check_tensor,
    check_width,
    check_writable,
)
from graph_harness.kernels.guard import check_no_alias
from graph_harness.kernels.launch import HAS_TRITON, needs_int64_offsets, triton_kernel

if HAS_TRITON:
    import triton.language as tl

    # tl.sum/tl.cumsum are themselves @jit functions, which Triton's interpreter can only
    # call when the whole process runs interpreted (TRITON_INTERPRET=1 before import).
    # The builtins tl.reduce/tl.associative_scan with Triton's own add combiner work in
    # both modes, and the interpreter runs them as numpy sum/cumsum.
    _ADD = tl.standard._sum_combine


def _check_args(
    ids: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    slot_map: torch.Tensor | None,
    out: torch.Tensor | None,
    count_out: torch.Tensor | None,
) -> tuple[int | torch.Tensor, int]:
    check_tensor("ids", ids, dtypes=(torch.int32,), ndim=2)
    device = ids.device
    rows, k = ids.shape
    if k >= INT32_LIMIT:
        raise ValueError(
            f"ids has {k} columns; a row's count is int32, so K must be < 2**31: split the row"
        )
    rank = check_rank(rank, device)
    width = check_width(width)
    if slot_map is not None:
        check_tensor("slot_map", slot_map, dtypes=(torch.int32,), ndim=1, device=device)
        check_shape("slot_map", slot_map, (width,))
    if out is not None:
        check_tensor("out", out, dtypes=(torch.int32,), ndim=2, device=device)
        check_shape("out", out, (rows, k))
        check_writable("out", out)
        if rows * k > 1 and _has_internal_overlap(out):
            raise ValueError(f"out's elements overlap each other (strides {out.stride()})")
    if count_out is not None:
        check_tensor("count_out", count_out, dtypes=(torch.int32,), ndim=1, device=device)
        check_shape("count_out", count_out, (rows,))
        check_writable("count_out", count_out)
        if rows > 1 and count_out.stride(0) == 0:
            raise ValueError("count_out's elements overlap each other (stride 0)")
    check_no_alias(
        {"out": out, "count_out": count_out},
        {"ids": ids, "slot_map": slot_map, "rank": rank if torch.is_tensor(rank) else None},
    )
    return rank, width


def _has_internal_overlap(t: torch.Tensor) -> bool:
    # Dense-enough test for 2-D outputs: sort dims by stride; each stride must clear the
    # span of the dims inside it.
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n > 1)
    span = 1
    for stride, size in dims:
        if stride < span:
            return True
        span = stride * size
    return False


def _alloc(
    ids: torch.Tensor, out: torch.Tensor | None, count_out: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    rows, k = ids.shape
    if out is None:
        out = torch.empty((rows, k), dtype=torch.int32, device=ids.device)
    if count_out is None:
        count_out = torch.empty((rows,), dtype=torch.int32, device=ids.device)
    return out, count_out


# --- the shipped path: pure torch -----------------------------------------------------------
# Floor-divide, argsort, gather, where: about ten [rows, K] temporaries, ~60 B per element.


def selected_local_records_shipped(
    ids: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    *,
    slot_map: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    count_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure torch, same contract. Allocates its temporaries; copies into out/count_out
    when they are given."""
    rank, width = _check_args(ids, rank, width, slot_map, out, count_out)
    if torch.is_tensor(rank):
        rank = rank.to(torch.int32)  # compared as int32(rank), whatever its dtype
    k = ids.shape[1]
    nonneg = ids.clamp_min(0)  # [rows, K] int32: keeps the quotient in range
    quotient = torch.div(nonneg, width, rounding_mode="floor")
    local = (ids >= 0) & (quotient == rank)  # [rows, K] bool
    counts = local.sum(dim=1, dtype=torch.int32)  # [rows]
    slots = nonneg - quotient * width  # [rows, K] int32, in [0, width)
    if slot_map is not None:
        slots = slot_map[slots.long()]
    order = torch.argsort((~local).to(torch.int8), dim=1, stable=True)  # local ones first
    gathered = torch.gather(slots, 1, order)
    position = torch.arange(k, device=ids.device, dtype=torch.int32)
    physical = torch.where(position < counts[:, None], gathered, -1).to(torch.int32)
    if out is None and count_out is None:
        return physical, counts
    out, count_out = _alloc(ids, out, count_out)
    out.copy_(physical)
    count_out.copy_(counts)
    return out, count_out


# --- the Triton kernel -----------------------------------------------------------------------
# One program per row: reads each id once (4 B), writes each output slot once (4 B) and one
# count; nothing allocated when out/count_out are given.

if HAS_TRITON:
    # Parameters bare (noqa): Triton reads an annotation as the type to compile for;
    # `int` would pin a stride to i32 and wrap it past 2**31.
    @triton_kernel
    def _compaction_kernel(  # noqa: PLR0913 - a kernel's pointers, strides and constexprs
        ids_ptr,  # [rows, K] int32  # noqa: ANN001
        rank_ptr,  # 0-d integer tensor (read only when RANK_FROM_MEMORY)  # noqa: ANN001
        slot_map_ptr,  # [width] int32 (read only when HAS_SLOT_MAP)  # noqa: ANN001
        out_ptr,  # [rows, K] int32  # noqa: ANN001
        count_ptr,  # [rows] int32  # noqa: ANN001
        rank_value,  # noqa: ANN001
        width,  # noqa: ANN001
        K,  # noqa: ANN001
        s_ids_r,  # noqa: ANN001
        s_ids_c,  # noqa: ANN001
        s_out_r,  # noqa: ANN001
        s_out_c,  # noqa: ANN001
        s_count,  # noqa: ANN001
        s_map,  # slot_map's stride (any: a strided or expanded view is fine)  # noqa: ANN001
        RANK_FROM_MEMORY: tl.constexpr,
        HAS_SLOT_MAP: tl.constexpr,
        INT64_OFFSETS: tl.constexpr,  # some offset reaches 2**31: widen before multiplying
        BLOCK: tl.constexpr,
        NUM_BLOCKS: tl.constexpr,  # cdiv(K, BLOCK): a constant trip count (the interpreter
        # under numpy >= 2.4 cannot take a runtime loop bound)
        USE_PDL: tl.constexpr,  # launched with programmatic dependent launch
    ) -> None:
        row = tl.program_id(0).to(tl.int64)
        if USE_PDL:
            tl.extra.cuda.gdc_wait()  # the predecessor's writes are visible after this
            tl.extra.cuda.gdc_launch_dependents()  # they still wait for our completion
        if RANK_FROM_MEMORY:
            rank = tl.load(rank_ptr).to(tl.int32)  # int32(rank), as the reference compares
        else:
            rank = rank_value  # a Python int in [0, 2**31)
        ids_row = ids_ptr + row * s_ids_r
        out_row = out_ptr + row * s_out_r
        count = tl.full((), 0, tl.int32)
        # Pass 1: each local record to its compacted position (a prefix sum of the mask).
        for b in range(NUM_BLOCKS):
            # round_up(K, BLOCK) <= 2**31 (BLOCK divides 2**31): cols fits in int32
            cols = b * BLOCK + tl.arange(0, BLOCK)
            in_row = cols < K
            if INT64_OFFSETS:
                ids = tl.load(ids_row + cols.to(tl.int64) * s_ids_c, mask=in_row, other=-1)
            else:
                ids = tl.load(ids_row + cols * s_ids_c, mask=in_row, other=-1)
            nonneg = tl.maximum(ids, 0)
            quotient = nonneg // width
            local = (ids >= 0) & (quotient == rank)
            slot = nonneg - quotient * width  # in [0, width)
            if HAS_SLOT_MAP:
                if INT64_OFFSETS:
                    slot = tl.load(slot_map_ptr + slot.to(tl.int64) * s_map, mask=local, other=0)
                else:
                    slot = tl.load(slot_map_ptr + slot * s_map, mask=local, other=0)
            flags = local.to(tl.int32)
            position = count + tl.associative_scan(flags, 0, _ADD) - 1  # in [-1, K)
            if INT64_OFFSETS:
                tl.store(out_row + position.to(tl.int64) * s_out_c, slot, mask=local)
            else:
                tl.store(out_row + position * s_out_c, slot, mask=local)
            count += tl.reduce(flags, 0, _ADD)
        tl.store(count_ptr + row * s_count, count)
        # Pass 2: -1 after the records; every slot of the row is written exactly once.
        for b in range(NUM_BLOCKS):
            cols = b * BLOCK + tl.arange(0, BLOCK)
            tail = (cols < K) & (cols >= count)
            if INT64_OFFSETS:
                tail_ptr = out_row + cols.to(tl.int64) * s_out_c
            else:
                tail_ptr = out_row + cols * s_out_c
            tl.store(tail_ptr, tl.full([BLOCK], -1, tl.int32), mask=tail)


def _compaction_config(k: int) -> tuple[int, int]:
    """(BLOCK, num_warps): one block covers a row up to 4096 records."""
    block = min(max(1 << (max(k, 1) - 1).bit_length(), 16), 4096)
    num_warps = 1 if block <= 128 else 4 if block <= 1024 else 8
    return block, num_warps


def selected_local_records(
    ids: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    *,
    slot_map: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    count_out: torch.Tensor | None = None,
    pdl: bool = False,
    _int64_offsets: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(physical, counts) of this rank's selected records; see the module docstring.

    Allocates both outputs when out/count_out are None (the old path); else writes the
    given buffers directly. Runs the Triton kernel on CUDA tensors and, under Triton's
    interpreter, on CPU tensors; without Triton, CPU tensors take the reference.
    `pdl=True` launches it with programmatic dependent launch (Hopper+), same bits.
    `_int64_offsets=True` forces the wide-offset variant (for tests and benchmarks)."""
    rank, width = _check_args(ids, rank, width, slot_map, out, count_out)
    if not HAS_TRITON and ids.device.type == "cpu":
        return selected_local_records_shipped(
            ids, rank, width, slot_map=slot_map, out=out, count_out=count_out
        )
    out, count_out = _alloc(ids, out, count_out)
    rows, k = ids.shape
    if rows == 0 or ids.device.type == "meta":  # meta: shape only, as the reference's
        return out, count_out
    block, num_warps = _compaction_config(k)
    from_memory = torch.is_tensor(rank)
    _compaction_kernel.launch(
        ids.device,
        (rows,),
        ids,
        rank if from_memory else ids,  # unused pointer when the rank is an int
        slot_map if slot_map is not None else ids,  # unused pointer without a slot map
        out,
        count_out,
        0 if from_memory else rank,
        width,
        k,
        ids.stride(0),
        ids.stride(1),
        out.stride(0),
        out.stride(1),
        count_out.stride(0),
        slot_map.stride(0) if slot_map is not None else 0,
        RANK_FROM_MEMORY=from_memory,
        HAS_SLOT_MAP=slot_map is not None,
        INT64_OFFSETS=_int64_offsets or needs_int64_offsets(ids, out, count_out, slot_map),
        BLOCK=block,
        NUM_BLOCKS=-(-k // block),
        num_warps=num_warps,
        pdl=pdl,
    )
    return out, count_out
