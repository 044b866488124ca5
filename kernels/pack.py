"""Score/id pack: each rank's top-k candidates as (score, global id) pairs in a cursor buffer.

Contract, bit for bit, for `indices`/`scores` `[rows, k]` and `out` float32 `[rows, k, 2]`:
    out[r, j, 0]             = scores[r, j]  if indices[r, j] >= 0 else -inf
    out[r, j, 1].view(int32) = int32(indices[r, j]) + int32(rank) * int32(width)
                               (two's-complement wrap)  if indices[r, j] >= 0 else -1
A dead id's -1 reads as a NaN through float32: compare through int32 views; NaN scores keep
their bits. `pack_scores_ids_shipped` (eight eager ops) beside `pack_scores_ids` (one Triton
kernel). The rank's dtypes, offset widths, bytes moved: docs/builtin-round.md, "The
score/id pack"."""

from __future__ import annotations

import torch

from graph_harness.kernels.checks import (
    check_rank,
    check_shape,
    check_tensor,
    check_width,
    check_writable,
    wrap_int32,
)
from graph_harness.kernels.guard import check_no_alias
from graph_harness.kernels.launch import HAS_TRITON, needs_int64_offsets, triton_kernel

if HAS_TRITON:
    import triton
    import triton.language as tl

    NEG_INF_BITS = tl.constexpr(-8388608)  # 0xFF800000: float32 -inf as int32


def _check_pack_args(
    indices: torch.Tensor,
    scores: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    out: torch.Tensor,
) -> tuple[int | torch.Tensor, int]:
    check_tensor("indices", indices, dtypes=(torch.int64, torch.int32), ndim=2)
    device = indices.device
    check_tensor("scores", scores, dtypes=(torch.float32,), ndim=2, device=device)
    check_shape("scores", scores, tuple(indices.shape))
    check_tensor("out", out, dtypes=(torch.float32,), ndim=3, device=device)
    rows, k = indices.shape
    check_shape("out", out, (rows, k, 2))
    check_writable("out", out)
    if out.stride(2) != 1 or (k > 1 and out.stride(1) != 2):
        raise ValueError(
            "out's last two dims must be contiguous (strides (..., 2, 1)), got strides "
            f"{tuple(out.stride())}; a row stride of your choosing is fine"
        )
    if rows > 1 and out.stride(0) < 2 * k:
        raise ValueError(
            f"out's rows overlap: row stride {out.stride(0)} < 2 * k = {2 * k} elements"
        )
    rank = check_rank(rank, device)
    width = check_width(width)
    check_no_alias(
        {"out": out},
        {"indices": indices, "scores": scores, "rank": rank if torch.is_tensor(rank) else None},
    )
    return rank, width


# --- the shipped reference: eight eager ops --------------------------------------------
# Per element (int64 indices) they move 63 B: ge 8+1, where 1+4+4, copy 4+4, cast 8+4,
# add 4+4, where 1+4+4, copy 4+4 (mul touches one scalar). In a CUDA graph they become about
# a dozen kernel nodes per call (counted by `capture`, not assumed here).


def pack_scores_ids_shipped(
    indices: torch.Tensor,
    scores: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    out: torch.Tensor,
) -> torch.Tensor:
    """The shipped pack: exactly eight eager ops (ge, where, copy, cast, mul, add, where,
    copy). A Python-int rank is first held as a host scalar tensor, so `mul` runs on the
    host; give a 0-d device tensor (as the captured round does) to keep it on the device.
    A rank tensor other than int32 is cast to int32 first (one more op): the multiply in
    a narrow dtype would wrap there (uint8 rank 3 * width 1000 = 3000 -> 184)."""
    rank, width = _check_pack_args(indices, scores, rank, width, out)
    if not torch.is_tensor(rank):
        rank = torch.tensor(rank, dtype=torch.int32)  # host scalar, not a device op
    rank = rank.to(torch.int32)  # no-op for an int32 rank: the id is int32 arithmetic
    live = torch.ge(indices, 0)  # 1 ge     [rows, k] bool
    packed_scores = torch.where(live, scores, float("-inf"))  # 2 where  [rows, k] f32
    out[..., 0].copy_(packed_scores)  # 3 copy (strided store into the pairs)
    ids = indices.to(torch.int32)  # 4 cast   [rows, k] int32, wraps
    offset = torch.mul(rank, width)  # 5 mul    0-d int32: this rank's first global id
    gids = torch.add(ids, offset)  # 6 add    [rows, k] int32, wraps
    gids = torch.where(live, gids, -1)  # 7 where  dead -> -1
    out[..., 1].view(torch.int32).copy_(gids)  # 8 copy
    return out


# --- the fused Triton kernel -------------------------------------------------------------
# Load id (8 B) and score (4 B), select, one 8-byte store of the pair: 20 B per element,
# one node, nothing allocated. Contiguous buffers take a 1-D launch with few arguments; any
# row strides a 2-D one.

if HAS_TRITON:
    # Parameters bare (noqa): Triton reads an annotation as the type to compile for;
    # `int` would pin a stride to i32 and wrap it past 2**31.
    @triton_kernel
    def _pack_kernel(  # noqa: PLR0913 - a kernel's pointers, strides and constexprs
        idx_ptr,  # [rows, k] int64 or int32  # noqa: ANN001
        score_ptr,  # [rows, k] float32  # noqa: ANN001
        rank_ptr,  # 0-d integer tensor (read only when RANK_FROM_MEMORY)  # noqa: ANN001
        out_ptr,  # int64 view [rows, k] when WIDE_STORE, else int32 view [rows, k, 2]  # noqa: ANN001
        rank_offset,  # int32(rank) * int32(width) when the rank is a Python int  # noqa: ANN001
        width,  # noqa: ANN001
        k,  # noqa: ANN001
        s_idx_r,  # noqa: ANN001
        s_idx_c,  # noqa: ANN001
        s_sc_r,  # noqa: ANN001
        s_sc_c,  # noqa: ANN001
        s_out_r,  # row stride of out in units of out_ptr's element  # noqa: ANN001
        RANK_FROM_MEMORY: tl.constexpr,
        WIDE_STORE: tl.constexpr,
        INT64_OFFSETS: tl.constexpr,  # some column offset reaches 2**31: widen cols
        BLOCK: tl.constexpr,
        USE_PDL: tl.constexpr,  # launched with programmatic dependent launch
    ) -> None:
        row = tl.program_id(1).to(tl.int64)
        if INT64_OFFSETS:
            # cols * stride in int64: an int32 product would wrap past 2**31 elements.
            cols = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        else:
            cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = cols < k
        if USE_PDL:
            tl.extra.cuda.gdc_wait()  # the predecessor's writes are visible after this
        idx = tl.load(idx_ptr + row * s_idx_r + cols * s_idx_c, mask=mask, other=-1)
        score = tl.load(score_ptr + row * s_sc_r + cols * s_sc_c, mask=mask, other=0.0)
        if USE_PDL:
            tl.extra.cuda.gdc_launch_dependents()  # they still wait for our completion
        if RANK_FROM_MEMORY:
            offset = tl.load(rank_ptr).to(tl.int32) * width  # int32, wraps
        else:
            offset = rank_offset
        live = idx >= 0
        # Integer selects only: a NaN score keeps its bits, a dead id becomes -1.
        gid = tl.where(live, idx.to(tl.int32) + offset, -1)
        sbits = tl.where(live, score.to(tl.int32, bitcast=True), NEG_INF_BITS)
        if WIDE_STORE:
            # One 8-byte store per element: score bits low (lower address), id high.
            pair = (gid.to(tl.int64) << 32) | (sbits.to(tl.int64) & 0xFFFFFFFF)
            tl.store(out_ptr + row * s_out_r + cols, pair, mask=mask)
        else:
            base = out_ptr + row * s_out_r + cols * 2
            tl.store(base, sbits, mask=mask)
            tl.store(base + 1, gid, mask=mask)

    # Parameters bare (noqa): Triton reads an annotation as the type to compile for;
    # `int` would pin a stride to i32 and wrap it past 2**31.
    @triton_kernel
    def _pack_flat_kernel(
        idx_ptr,  # [n] int64 or int32: rows * k contiguous ids  # noqa: ANN001
        score_ptr,  # [n] float32  # noqa: ANN001
        rank_ptr,  # 0-d integer tensor (read only when RANK_FROM_MEMORY)  # noqa: ANN001
        pair_ptr,  # [n] int64: out viewed as one 8-byte pair per element  # noqa: ANN001
        rank_offset,  # int32(rank) * int32(width) when the rank is a Python int  # noqa: ANN001
        width,  # noqa: ANN001
        n,  # noqa: ANN001
        RANK_FROM_MEMORY: tl.constexpr,
        INT64_OFFSETS: tl.constexpr,  # n > 2**31: offsets past int32
        BLOCK: tl.constexpr,
        USE_PDL: tl.constexpr,
    ) -> None:
        # The common case (contiguous inputs, contiguous out, as a gather slot is) as a
        # 1-D launch with few arguments: at 1-3 us per call, launch overhead is the cost.
        # Same selects as _pack_kernel; the interpreter cannot call shared @jit helpers.
        if INT64_OFFSETS:
            offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        else:
            # n <= 2**31 and BLOCK divides 2**31: the last lane's offset fits in int32.
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
        idx = tl.load(idx_ptr + offs, mask=mask, other=-1)
        score = tl.load(score_ptr + offs, mask=mask, other=0.0)
        if USE_PDL:
            tl.extra.cuda.gdc_launch_dependents()
        if RANK_FROM_MEMORY:
            offset = tl.load(rank_ptr).to(tl.int32) * width  # int32, wraps
        else:
            offset = rank_offset
        live = idx >= 0
        gid = tl.where(live, idx.to(tl.int32) + offset, -1)
        sbits = tl.where(live, score.to(tl.int32, bitcast=True), NEG_INF_BITS)
        pair = (gid.to(tl.int64) << 32) | (sbits.to(tl.int64) & 0xFFFFFFFF)
        tl.store(pair_ptr + offs, pair, mask=mask)


def _pack_config(rows: int, k: int) -> tuple[int, int]:
    """(BLOCK, num_warps), from sweeps on the H200 (BENCHMARKS.md): 256 elements per 4-warp
    program, and for tiny work (<= 128 elements) one 128-thread, 4-warp program, the
    geometry Inductor picks there. At 1 x 48 it matched or beat Inductor's kernel in every
    placement of the inputs tried, where 32 or 64 threads won in some and lost in others
    (the time itself moves ~5% with where the data lands)."""
    n = rows * k
    return (128, 4) if n <= 128 else (256, 4)


def _as_pairs(out: torch.Tensor) -> torch.Tensor | None:
    """out `[rows, k, 2]` float32 as int64 `[rows, k]` (one element a pair), when its pairs
    are 8-byte aligned; else None."""
    if out.data_ptr() % 8:
        return None
    try:
        return out.view(torch.int64).squeeze(-1)
    except RuntimeError:  # an odd row stride or storage offset
        return None


# CUDA's grid holds at most 65535 programs along y: the 2-D launch takes rows there, and
# launches again for each further 65535 rows (the flat launch has no such limit).
_MAX_GRID_ROWS = 65535


def pack_scores_ids(
    indices: torch.Tensor,
    scores: torch.Tensor,
    rank: int | torch.Tensor,
    width: int,
    out: torch.Tensor,
    *,
    pdl: bool = False,
    _config: tuple[int, int] | None = None,
    _int64_offsets: bool = False,
) -> torch.Tensor:
    """Fused pack: one Triton kernel writing straight into `out`, allocating nothing.

    Runs compiled on CUDA tensors and under Triton's interpreter on CPU tensors; without
    Triton, CPU tensors take the shipped eight ops (same bits). `pdl=True` launches it
    with programmatic dependent launch (Hopper+), same bits. `_config` (BLOCK, num_warps)
    and `_int64_offsets=True` (the wide-offset variant even where int32 would do; it
    never narrows a launch that needs int64) are for benchmarks."""
    rank, width = _check_pack_args(indices, scores, rank, width, out)
    rows, k = indices.shape
    # Nothing to write; and meta tensors (shape-only tracing) launch nothing, as the
    # reference's torch ops on them compute nothing.
    if rows == 0 or k == 0 or indices.device.type == "meta":
        return out
    if not HAS_TRITON:
        if indices.device.type != "cpu":
            raise RuntimeError("pack_scores_ids needs triton for non-CPU tensors")
        return pack_scores_ids_shipped(indices, scores, rank, width, out)
    block, num_warps = _config or _pack_config(rows, k)
    from_memory = torch.is_tensor(rank)
    rank_ptr = rank if from_memory else indices  # unused pointer when the rank is an int
    rank_offset = 0 if from_memory else wrap_int32(rank * width)
    # The pair as one int64 needs 8-byte aligned pairs: base and row stride.
    out_view = _as_pairs(out)
    flat = out_view is not None and out_view.is_contiguous()
    if flat and indices.is_contiguous() and scores.is_contiguous():
        n = rows * k
        _pack_flat_kernel.launch(
            indices.device,
            (triton.cdiv(n, block),),
            indices,
            scores,
            rank_ptr,
            out_view,
            rank_offset,
            width,
            n,
            RANK_FROM_MEMORY=from_memory,
            INT64_OFFSETS=_int64_offsets or needs_int64_offsets(indices, scores, out_view),
            BLOCK=block,
            num_warps=num_warps,
            pdl=pdl,
        )
        return out
    wide = out_view is not None
    if not wide:
        out_view = out.view(torch.int32)
    int64_offsets = _int64_offsets or needs_int64_offsets(indices, scores, out_view)
    for r0 in range(0, rows, _MAX_GRID_ROWS):
        part = slice(r0, min(r0 + _MAX_GRID_ROWS, rows))
        idx_p, sc_p, out_p = indices, scores, out_view  # one launch: as given
        if rows > _MAX_GRID_ROWS:
            idx_p, sc_p, out_p = indices[part], scores[part], out_view[part]
        _pack_kernel.launch(
            indices.device,
            (triton.cdiv(k, block), part.stop - part.start),
            idx_p,
            sc_p,
            rank_ptr,
            out_p,
            rank_offset,
            width,
            k,
            indices.stride(0),
            indices.stride(1),
            scores.stride(0),
            scores.stride(1),
            out_view.stride(0),
            RANK_FROM_MEMORY=from_memory,
            WIDE_STORE=wide,
            INT64_OFFSETS=int64_offsets,
            BLOCK=block,
            num_warps=num_warps,
            pdl=pdl,
        )
    return out
