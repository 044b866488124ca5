"""Pack timings per call inside a captured graph: shipped eager, Inductor-compiled, fused.

    python3 benchmarks/bench_pack.py --out pack.csv [--sweep] [--int64-offsets]

Each provider's call is unrolled `--calls` times into one CUDA graph; a trial times
`--replays` replays between CUDA events; providers are interleaved across trials; the
figure is the median per call with p20/p80 over all trials of `--placements` separate
allocations of the inputs and the (shared) output buffer: for tiny shapes where data lands
(L2 partition) moves the time by several percent, so one placement is not enough to order
two kernels. `--sweep` also times every fused (BLOCK, num_warps) config, to check the
heuristic `_pack_config` picks. `--int64-offsets` also times the fused kernel with its
64-bit offsets forced (`fused-int64-offsets`, the variant a launch takes past 2**31
elements), interleaved with the usual 32-bit one on the same buffers.
"""

from __future__ import annotations

import argparse
import csv
import platform
import sys
from functools import partial
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_harness.capture.replay.timing import Quantiles, capture_unrolled, time_replays_us
from graph_harness.kernels import pack_scores_ids, pack_scores_ids_shipped
from graph_harness.kernels.pack import _pack_config

SHAPES = [(1, 48), (8, 2048), (256, 2048)]
WORLD, RANK = 8, 3


def inputs(rows, k, width, device):
    idx = torch.randint(0, width, (rows, k), device=device)
    idx[torch.rand(rows, k, device=device) < 0.1] = -1
    scores = torch.randn(rows, k, device=device)
    rank = torch.tensor(RANK, dtype=torch.int32, device=device)
    return idx, scores, rank


def providers(idx, scores, rank, width, out, compiled, sweep, int64_offsets=False):
    """name -> zero-argument call writing `out`. Every provider writes the same buffer
    from the same inputs: the A/B differs in the kernel alone, not in where its data
    lives (at 1 x 48 the addresses alone move the time by several percent)."""
    rows, k = idx.shape
    fns = {
        "shipped-eager": lambda: pack_scores_ids_shipped(idx, scores, rank, width, out),
        "shipped-compiled": lambda: compiled(idx, scores, rank, width, out),
        "fused": lambda: pack_scores_ids(idx, scores, rank, width, out),
    }
    if int64_offsets:
        fns["fused-int64-offsets"] = partial(
            pack_scores_ids, idx, scores, rank, width, out, _int64_offsets=True
        )
    if sweep:
        n = rows * k
        for block in (32, 64, 128, 256, 512, 1024, 2048):
            if block > max(64, 2 * triton.next_power_of_2(n)):
                continue
            for warps in (1, 2, 4, 8, 16, 32):  # up to CUDA's 1024 threads
                if warps * 32 <= block:
                    fns[f"fused[B{block},w{warps}]"] = partial(
                        pack_scores_ids, idx, scores, rank, width, out, _config=(block, warps)
                    )
    return fns


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--trials", type=int, default=31)
    ap.add_argument("--placements", type=int, default=3)
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument(
        "--shapes",
        nargs="+",
        metavar="ROWSxK",
        default=[f"{r}x{k}" for r, k in SHAPES],
        help="shapes to time (default: " + " ".join(f"{r}x{k}" for r, k in SHAPES) + ")",
    )
    ap.add_argument(
        "--int64-offsets", action="store_true", help="also time the fused kernel's 64-bit offsets"
    )
    args = ap.parse_args()

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
    graph_pool = torch.cuda.graph_pool_handle()
    for rows, k in [tuple(int(x) for x in shape.split("x")) for shape in args.shapes]:
        width = max(k, 64)
        trials: dict[str, list[float]] = {}
        per_placement: dict[str, list[float]] = {}
        for placement in range(args.placements):
            # A spacer shifts where this placement's buffers land (L2 slice and partition).
            spacer = torch.empty(4096 * (37 * placement + 1), dtype=torch.uint8, device=device)
            idx, scores, rank = inputs(rows, k, width, device)
            out = torch.empty(rows, k, 2, device=device)
            ref = torch.empty_like(out)
            pack_scores_ids_shipped(idx, scores, rank, width, ref)
            fns = providers(idx, scores, rank, width, out, compiled, args.sweep, args.int64_offsets)
            graphs = {
                n: capture_unrolled(f, args.calls, graph_pool=graph_pool) for n, f in fns.items()
            }
            for n, g in graphs.items():  # every provider writes the same bits
                out.fill_(float("nan"))
                g.replay()
                torch.cuda.synchronize()
                if not torch.equal(out.view(torch.int32), ref.view(torch.int32)):
                    raise SystemExit(f"{n} differs from shipped-eager at rows={rows} k={k}")
            times = time_replays_us(graphs, replays=args.replays, trials=args.trials)
            for n, ts in times.items():
                per_call = [t / args.calls for t in ts]
                trials.setdefault(n, []).extend(per_call)
                per_placement.setdefault(n, []).append(Quantiles.of(per_call).median)
            del graphs, spacer
        for n, ts in trials.items():
            q = Quantiles.of(ts)
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
                    placements=args.placements,
                    placement_medians=" ".join(f"{m:.4f}" for m in per_placement[n]),
                    config=str(_pack_config(rows, k))
                    if n in ("fused", "fused-int64-offsets")
                    else "",
                    **env,
                )
            )
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
