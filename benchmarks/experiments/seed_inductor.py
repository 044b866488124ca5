# The seed says the shipped pack is eight kernels per call and Inductor's fused form of
# it three graph nodes per call (issue 25). Which pattern gives what on this torch?
#   python3 benchmarks/experiments/seed_inductor.py [--out FILE.csv]
# Each pattern's pack is captured alone (warm-up, then one call in a CUDA graph) and its
# nodes counted by capture_and_count (cudaGraphGetNodes), by type and kernel. A pattern
# that does not compile is a row with its error in one line. Needs a GPU.
import argparse
import csv
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import torch

from graph_harness.capture import capture_and_count
from graph_harness.kernels import pack_scores_ids_shipped

ROWS, K, SHARD, WORLD, RANK = 8, 2048, 8192, 8, 3


def shipped_tensor_scalars(indices, scores, rank, width, out):
    """The eight ops with the two `where` scalars as 0-d device tensors: no fill kernels."""
    live = torch.ge(indices, 0)
    out[..., 0].copy_(torch.where(live, scores, NEG_INF))
    gids = torch.add(indices.to(torch.int32), torch.mul(rank.to(torch.int32), width))
    out[..., 1].view(torch.int32).copy_(torch.where(live, gids, MINUS_ONE))
    return out


def topk_and_pack(scores_all, rank, width, out):
    """The pack inside a larger compiled region: the stage's top-k and its pack."""
    values, index = torch.topk(scores_all, K, dim=1)
    return pack_scores_ids_shipped(index, values, rank, width, out)


def inputs():
    g = torch.Generator(device="cuda").manual_seed(0)
    scores_all = torch.randn(ROWS, SHARD, device="cuda", generator=g)
    values, index = torch.topk(scores_all, K, dim=1)
    index[0, ::7] = -1  # dead entries
    rank = torch.tensor(RANK, dtype=torch.int32, device="cuda")
    cursor = torch.full((WORLD, ROWS, K, 2), float("nan"), device="cuda")
    return scores_all, index.contiguous(), values.contiguous(), rank, cursor


def patterns():
    """name -> (function, its arguments' builder, torch.compile kwargs, inductor config)."""
    contiguous = lambda s, i, v, r, c: (i, v, r, SHARD, torch.empty(ROWS, K, 2, device="cuda"))
    slot = lambda s, i, v, r, c: (i, v, r, SHARD, c[RANK])
    py_rank = lambda s, i, v, r, c: (i, v, RANK, SHARD, c[RANK])
    region = lambda s, i, v, r, c: (s, r, SHARD, c[RANK])
    eager = {}
    return {
        "eager shipped (where vs Python scalars)": (pack_scores_ids_shipped, slot, None, eager),
        "eager, where vs 0-d tensors": (shipped_tensor_scalars, slot, None, eager),
        "compiled, contiguous out": (pack_scores_ids_shipped, contiguous, {}, eager),
        "compiled, out a cursor-buffer slot": (pack_scores_ids_shipped, slot, {}, eager),
        "compiled, inside top-k + pack": (topk_and_pack, region, {}, eager),
        "compiled, Python-int rank": (pack_scores_ids_shipped, py_rank, {}, eager),
        "compiled, dynamic=True": (pack_scores_ids_shipped, slot, {"dynamic": True}, eager),
        # torch.compile's default (dynamic=None): a second rank recompiles with the rank
        # made symbolic (automatic dynamic shapes)
        "compiled, dynamic=None, Python-int rank, 2 ranks": (
            pack_scores_ids_shipped,
            py_rank,
            {"dynamic": None, "two_ranks": True},
            eager,
        ),
        "compiled, max-autotune-no-cudagraphs": (
            pack_scores_ids_shipped,
            slot,
            {"mode": "max-autotune-no-cudagraphs"},
            eager,
        ),
        "compiled, max_fusion_size=1": (pack_scores_ids_shipped, slot, {}, {"max_fusion_size": 1}),
        "compiled, no epilogue fusion": (
            pack_scores_ids_shipped,
            slot,
            {},
            {"epilogue_fusion": False},
        ),
        "compiled, where vs 0-d tensors": (shipped_tensor_scalars, slot, {}, eager),
    }


def count(name, fn, build_args, compile_kwargs, config):
    torch._dynamo.reset()
    args = build_args(*inputs())
    run = fn
    two_ranks = False
    if compile_kwargs is not None:
        kw = {"fullgraph": True, "dynamic": False, **compile_kwargs}
        two_ranks = kw.pop("two_ranks", False)
        compiled = torch.compile(fn, **kw)
        run = functools.partial(_patched, compiled, {"compile_threads": 1, **config})
    step = lambda: run(*args)
    try:
        if two_ranks:  # a call at another rank first: the count is of the recompiled pack
            run(*args[:2], RANK + 1, *args[3:])
        export = capture_and_count(step)
    except Exception as e:  # one line: a pattern that does not compile is a finding
        first = (str(e).strip().splitlines() or [""])[0][:160]
        return dict(pattern=name, nodes=None, kernels=None, error=f"{type(e).__name__}: {first}")
    df = export.frame()
    kernels = df[df.type == "kernel"].kernel.tolist()
    return dict(
        pattern=name,
        nodes=export.total,
        kernel_nodes=len(kernels),
        by_type={k: int(v) for k, v in df.type.value_counts().items()},
        kernels="; ".join(k[:60] for k in kernels),
        error="",
    )


def _patched(compiled, config, *args):
    from torch._inductor import config as inductor_config

    with inductor_config.patch(**config):
        return compiled(*args)


NEG_INF = MINUS_ONE = None


def main() -> None:
    global NEG_INF, MINUS_ONE
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    NEG_INF = torch.tensor(float("-inf"), device="cuda")
    MINUS_ONE = torch.tensor(-1, dtype=torch.int32, device="cuda")
    rows = [count(name, *p) for name, p in patterns().items()]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, rows {ROWS} k {K}")
    for r in rows:
        what = r["error"] or f"{r['nodes']} nodes ({r['by_type']}): {r['kernels']}"
        print(f"{r['pattern']:42s} {what}")
    if args.out:
        with args.out.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
