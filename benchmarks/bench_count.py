"""Node counts of the default decode round per variant, on the GPU; capture/export times.

    python3 benchmarks/bench_count.py --out DIR

Writes DIR/nodes-<variant>.json (the exports), DIR/counts.csv (per variant, stage, step)
and prints totals, per-step counts of one stage, the deltas, and the wall times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_harness.capture import VARIANTS, RoundParams, capture_and_count, count_round
from graph_harness.capture.attribution.records import nodes_from_graph
from graph_harness.capture.graph.capture import capture_graph
from graph_harness.capture.graph.reader import read_graph


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    params = RoundParams()
    frames, totals, walls = [], {}, {}
    for v in VARIANTS:
        t0 = time.perf_counter()
        count_round(params, v)  # first: compiles, warms
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        counted = count_round(params, v)
        walls[v] = (first, time.perf_counter() - t0)
        e = counted.export
        e.write_json(args.out / f"nodes-{v}.json")
        df = e.frame()
        assert (df.step != "unscoped").all(), "every node attributed"
        totals[v] = e.total
        frames.append(
            df.groupby(["stage", "step"]).size().rename("nodes").reset_index().assign(variant=v)
        )
        del counted
    counts = pd.concat(frames)
    counts.to_csv(args.out / "counts.csv", index=False)
    grid = counts.pivot_table(
        index=["variant", "stage"], columns="step", values="nodes", fill_value=0
    )
    print(f"params: {params}")
    print(f"gpu: {torch.cuda.get_device_name()} torch {torch.__version__}")
    print("\ntotals per round:")
    for v, n in totals.items():
        print(
            f"  {v:<18}{n:>6}   build+capture+export: first {walls[v][0]:.2f} s, "
            f"again {walls[v][1]:.3f} s"
        )
    same = all((grid.xs(v, level="variant").nunique() == 1).all() for v in VARIANTS)
    print(f"\nper step, stage 0 (all stages equal: {same}):")
    print(grid.xs(0, level="stage").to_string())
    print("\ndeltas per round:")
    for a, b in [
        ("shipped", "fused"),
        ("shipped-compiled", "fused"),
        ("shipped", "direct-compaction"),
        ("shipped", "fused-pack"),
    ]:
        print(f"  {a} - {b}: {totals[a] - totals[b]}")

    # capture + read alone, on an already-built round (what the CLI adds per variant)
    from graph_harness.capture.round.decode import DecodeRound

    rnd = DecodeRound(params, "fused", "cuda")
    captured = capture_graph(rnd.run)
    t0 = time.perf_counter()
    captured = capture_graph(rnd.run, warmup=0)
    t1 = time.perf_counter()
    nodes = nodes_from_graph(read_graph(captured.graph.raw_cuda_graph()), captured.marks)
    t2 = time.perf_counter()
    print(
        f"\n24-stage fused round: capture {t1 - t0:.3f} s, read+attribute {t2 - t1:.4f} s, "
        f"{len(nodes)} nodes"
    )

    # a 10,000-node graph: read + attribute time
    x = torch.zeros(1, device="cuda")
    e = capture_and_count(lambda: [x.add_(1) for _ in range(10_000)], warmup=1)
    big = capture_graph(lambda: [x.add_(1) for _ in range(10_000)], warmup=0)
    t0 = time.perf_counter()
    raw = read_graph(big.graph.raw_cuda_graph())
    t1 = time.perf_counter()
    nodes = nodes_from_graph(raw, big.marks)
    t2 = time.perf_counter()
    print(
        f"10,000-node graph: {len(raw)} nodes (export said {e.total}); read {t1 - t0:.3f} s, "
        f"attribute {t2 - t1:.3f} s"
    )


if __name__ == "__main__":
    main()
