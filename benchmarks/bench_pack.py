"""Pack timings per call inside a captured graph: shipped eager, Inductor-compiled, fused.

    python3 benchmarks/bench_pack.py --out pack.csv [--sweep]

Each provider's call is unrolled `--calls` times into one CUDA graph; a trial times
`--replays` replays between CUDA events; providers are interleaved across trials; the
figure is the median per call with p20/p80. `--sweep` also times every fused (BLOCK,
num_warps) config, to check the heuristic `_pack_config` picks.
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capture.timing import Quantiles, capture_unrolled, time_replays_us
from kernels import pack_scores_ids, pack_scores_ids_shipped
from kernels.pack import _pack_config

SHAPES = [(1, 48), (8, 2048), (256, 2048)]
WORLD, RANK = 8, 3


def inputs(rows, k, width, device):
    idx = torch.randint(0, width, (rows, k), device=device)
    idx[torch.rand(rows, k, device=device) < 0.1] = -1
    scores = torch.randn(rows, k, device=device)
    rank = torch.tensor(RANK, dtype=torch.int32, device=device)
    return idx, scores, rank


def providers(idx, scores, rank, width, compiled, sweep):
    """name -> zero-argument call writing its own output buffer; and those buffers."""
    rows, k = idx.shape
    fns, outs = {}, {}

    def add(name, fn, **kw):
        out = torch.empty(rows, k, 2, device=idx.device)
        outs[name] = out
        fns[name] = lambda: fn(idx, scores, rank, width, out, **kw)

    add("shipped-eager", pack_scores_ids_shipped)
    add("shipped-compiled", compiled)
    add("fused", pack_scores_ids)
    if sweep:
        n = rows * k
        for block in (32, 64, 128, 256, 512, 1024, 2048):
            if block > max(32, 2 * n):
                continue
            for warps in (1, 2, 4, 8):
                if warps * 32 <= block:
                    add(f"fused[B{block},w{warps}]", pack_scores_ids, _config=(block, warps))
    return fns, outs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--trials", type=int, default=31)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()

    import triton

    device = torch.device("cuda")
    env = dict(
        gpu=torch.cuda.get_device_name(),
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
    )
    print(env)
    # dynamic=False: a serving stack compiles for its fixed shapes. (With a symbolic width,
    # Inductor in torch 2.11 computes the id in int64 and then fails to bitcast it.)
    compiled = torch.compile(pack_scores_ids_shipped, fullgraph=True, dynamic=False)
    rows_out = []
    mempool = torch.cuda.graph_pool_handle()
    for rows, k in SHAPES:
        width = max(k, 64)
        idx, scores, rank = inputs(rows, k, width, device)
        fns, outs = providers(idx, scores, rank, width, compiled, args.sweep)
        graphs = {n: capture_unrolled(f, args.calls, pool=mempool) for n, f in fns.items()}
        # Every provider must have written the same bits.
        for n, g in graphs.items():
            outs[n].fill_(float("nan"))
            g.replay()
        torch.cuda.synchronize()
        ref = outs["shipped-eager"].view(torch.int32)
        for n, o in outs.items():
            if not torch.equal(o.view(torch.int32), ref):
                raise SystemExit(f"{n} differs from shipped-eager at rows={rows} k={k}")
        times = time_replays_us(graphs, replays=args.replays, trials=args.trials)
        for n, ts in times.items():
            q = Quantiles.of([t / args.calls for t in ts])
            rows_out.append(
                dict(
                    kernel="pack",
                    provider=n,
                    rows=rows,
                    k=k,
                    metric="us_per_call_in_graph",
                    median=q.median,
                    p20=q.p20,
                    p80=q.p80,
                    calls_per_graph=args.calls,
                    config=str(_pack_config(rows, k)) if n == "fused" else "",
                    **env,
                )
            )
        del graphs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows_out[0]))
        w.writeheader()
        w.writerows(rows_out)
    tmp.replace(args.out)
    print(f"\n{'provider':<22}{'rows':>5}{'k':>6}{'median us':>11}{'p20':>8}{'p80':>8}")
    for r in rows_out:
        print(
            f"{r['provider']:<22}{r['rows']:>5}{r['k']:>6}{r['median']:>11.3f}"
            f"{r['p20']:>8.3f}{r['p80']:>8.3f}"
        )


if __name__ == "__main__":
    main()
