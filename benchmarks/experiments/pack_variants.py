# Can the fused pack's code (not its geometry) take the last 1-2% off at 8 x 2048
# (issue 16, goal 0.90 of Inductor)? Variants of the flat kernel, each checked bit for bit
# against the shipped pack, timed per call in a captured graph against Inductor's compiled
# shipped pack, interleaved, over 5 placements of the inputs (as bench_pack.py does):
#   python3 benchmarks/experiments/pack_variants.py [--shapes 8x2048 256x2048 1x48]
# Variants: the shipped kernel; the pair stored as two int32 lanes joined (one v2.b32
# store, no 64-bit shift/or); loads cached at L2 only (.cg) with a streaming store (.cs);
# both; and, as a diagnostic only, the rank passed as an argument instead of loaded.
import argparse
import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch
import triton
import triton.language as tl

from graph_harness.capture.replay.timing import capture_unrolled, time_replays_us
from graph_harness.capture.round.decode import compiled_shipped_pack
from graph_harness.kernels import pack_scores_ids, pack_scores_ids_shipped

NEG_INF_BITS = tl.constexpr(-8388608)
RANK = 3


@triton.jit
def _variant_kernel(
    idx_ptr,
    score_ptr,
    rank_ptr,
    out_ptr,  # int32 [n, 2] when JOIN else int64 [n]
    rank_offset,
    width,
    n,
    RANK_FROM_MEMORY: tl.constexpr,
    JOIN: tl.constexpr,
    HINTS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if HINTS:
        idx = tl.load(idx_ptr + offs, mask=mask, other=-1, cache_modifier=".cg")
        score = tl.load(score_ptr + offs, mask=mask, other=0.0, cache_modifier=".cg")
    else:
        idx = tl.load(idx_ptr + offs, mask=mask, other=-1)
        score = tl.load(score_ptr + offs, mask=mask, other=0.0)
    if RANK_FROM_MEMORY:
        offset = tl.load(rank_ptr).to(tl.int32) * width
    else:
        offset = rank_offset
    live = idx >= 0
    gid = tl.where(live, idx.to(tl.int32) + offset, -1)
    sbits = tl.where(live, score.to(tl.int32, bitcast=True), NEG_INF_BITS)
    if JOIN:
        pair = tl.join(sbits, gid)  # [BLOCK, 2]: score bits at the lower address
        ptrs = out_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :]
        m2 = mask[:, None] & (tl.arange(0, 2)[None, :] < 2)
        if HINTS:
            tl.store(ptrs, pair, mask=m2, cache_modifier=".cs")
        else:
            tl.store(ptrs, pair, mask=m2)
    else:
        pair = (gid.to(tl.int64) << 32) | (sbits.to(tl.int64) & 0xFFFFFFFF)
        if HINTS:
            tl.store(out_ptr + offs, pair, mask=mask, cache_modifier=".cs")
        else:
            tl.store(out_ptr + offs, pair, mask=mask)


def variant(idx, scores, rank, width, out, *, join, hints, from_memory=True, block=256, warps=4):
    n = idx.numel()
    target = out.view(torch.int32).view(n, 2) if join else out.view(torch.int64).view(n)
    offset = 0 if from_memory else RANK * width  # rank.item() would sync inside a capture
    _variant_kernel[(triton.cdiv(n, block),)](
        idx, scores, rank, target, offset, width, n,
        RANK_FROM_MEMORY=from_memory, JOIN=join, HINTS=hints, BLOCK=block, num_warps=warps,
    )  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["8x2048", "256x2048", "1x48"])
    ap.add_argument("--placements", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    print(
        dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__)
    )
    compiled = compiled_shipped_pack()
    pool = torch.cuda.graph_pool_handle()
    for shape in args.shapes:
        rows, k = (int(x) for x in shape.split("x"))
        width = max(k, 64)
        per: dict[str, list[float]] = {}
        for placement in range(args.placements):
            spacer = torch.empty(4096 * (37 * placement + 1), dtype=torch.uint8, device="cuda")
            idx = torch.randint(0, width, (rows, k), device="cuda")
            idx[torch.rand(rows, k, device="cuda") < 0.1] = -1
            scores = torch.randn(rows, k, device="cuda")
            rank = torch.tensor(RANK, dtype=torch.int32, device="cuda")
            out = torch.empty(rows, k, 2, device="cuda")
            ref = torch.empty_like(out)
            pack_scores_ids_shipped(idx, scores, rank, width, ref)
            a = (idx, scores, rank, width, out)
            fns = {
                "inductor": partial(compiled, *a),
                "fused (shipped)": partial(pack_scores_ids, *a),
            }
            for warps in (4, 8):
                for join in (False, True):
                    for hints in (False, True):
                        fns[f"w{warps} join={join:d} hints={hints:d}"] = partial(
                            variant, *a, join=join, hints=hints, warps=warps
                        )
                fns[f"w{warps} rank-arg (diagnostic)"] = partial(
                    variant, *a, join=False, hints=False, from_memory=False, warps=warps
                )
            graphs = {
                name: capture_unrolled(f, args.calls, graph_pool=pool) for name, f in fns.items()
            }
            for name, g in graphs.items():
                out.fill_(float("nan"))
                g.replay()
                torch.cuda.synchronize()
                if not torch.equal(out.view(torch.int32), ref.view(torch.int32)):
                    raise SystemExit(f"{name} differs from the shipped pack at {shape}")
            times = time_replays_us(graphs, replays=10, trials=31)
            for name, ts in times.items():
                per.setdefault(name, []).append(statistics.median(t / args.calls for t in ts))
            del graphs, spacer
        ind = statistics.median(per["inductor"])
        print(f"\n{shape}: median over placements of per-placement medians, us per call")
        for name, ms in per.items():
            m = statistics.median(ms)
            each = " ".join(f"{x:.4f}" for x in ms)
            print(f"  {name:28s} {m:7.4f}  vs inductor {m / ind:.4f}   [{each}]")


if __name__ == "__main__":
    main()
