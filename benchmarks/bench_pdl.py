"""Programmatic dependent launch on the H200: the round with and without `--pdl` (PDL
now only behind a signalling launch of ours, kernels/pdl.py), and what a PDL launch behind
a kernel that never signals costs.

    python3 benchmarks/bench_pdl.py --out DIR [--trials 30] [--builds 3]

1. The fused round, pdl off vs on, interleaved over fresh builds (measure_round_configs):
   the saving with its 95% interval, and how many nodes carry a programmatic edge.
2. Pairs (a one-element torch add, then the empty Triton kernel) chained 1..256 times,
   the empty kernel in three forms, every chain in one interleaved timing:
   - plain: the USE_PDL=False build, launched plainly;
   - signal: the USE_PDL build (it runs `griddepcontrol.wait` and `launch_dependents`),
     launched plainly: what the instructions cost without the launch attribute;
   - pdl: the USE_PDL build launched with PDL (forced, as before the gating): a
     programmatic edge behind the add.
   The slope per pair of each, 95% bootstrap intervals: signal - plain is the cost of
   the instructions, pdl - signal the cost of the programmatic edge itself.
3. Our own chain (empty kernels, pdl=True): each launch behind a signalling one keeps
   PDL (the gating's other side), against the plain chain.
Writes DIR/pdl-round.csv, DIR/pdl-pairs.csv, DIR/pdl-summary.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph_harness.capture import RoundParams
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.replay.timing import capture_unrolled, time_replays_us
from graph_harness.capture.round.timing import measure_round_configs
from graph_harness.capture.stats import (
    fit_chain,
    median_by_variant,
    round_series,
    saving_interval,
    saving_point,
)
from graph_harness.kernels.empty import empty_kernel

LENGTHS = (1, 16, 64, 256)


def pair_call(form: str, x: torch.Tensor, y: torch.Tensor):
    kernel = empty_kernel.compiled[(1,)]

    def call():
        torch.add(y, 1, out=y)  # a torch kernel: never signals its dependents
        if form == "plain":
            kernel(x, USE_PDL=False, num_warps=1)
        elif form == "signal":
            kernel(x, USE_PDL=True, num_warps=1)
        else:  # forced PDL, bypassing the gating in kernels/launch.py
            kernel(x, USE_PDL=True, num_warps=1, launch_pdl=True)

    return call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--builds", type=int, default=3)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}

    # 1. the round
    settings = ReplaySettings(trials=args.trials, builds=args.builds)
    t, exports = measure_round_configs(
        RoundParams(), {"fused": ("fused", False), "fused+pdl": ("fused", True)}, settings
    )
    t.to_csv(args.out / "pdl-round.csv", index=False)
    s = round_series(t)
    summary["round_us"] = {k: float(v) for k, v in median_by_variant(t).items()}
    summary["round_pdl_saves_us"] = saving_point(s["fused"], s["fused+pdl"])
    summary["round_pdl_saves_us_95"] = saving_interval(s["fused"], s["fused+pdl"])
    summary["round_programmatic_edges"] = sum(
        1 for n in exports["fused+pdl"].nodes if n.get("programmatic_deps")
    )
    summary["round_nodes"] = {k: e.total for k, e in exports.items()}

    # 2. pairs behind a torch kernel, 3. our own chain
    x = torch.zeros(1, device="cuda")
    y = torch.zeros(1, device="cuda")
    calls = {f: pair_call(f, x, y) for f in ("plain", "signal", "pdl")}
    calls["ours-plain"] = lambda: empty_kernel.launch(x.device, (1,), x, num_warps=1)
    calls["ours-pdl"] = lambda: empty_kernel.launch(x.device, (1,), x, num_warps=1, pdl=True)
    graphs, edges = {}, {}
    for name, call in calls.items():
        for n in LENGTHS:
            g = capture_unrolled(call, n)
            edges[f"{name}x{n}"] = sum(
                1 for r in read_graph(g.raw_cuda_graph()) if r.programmatic_deps
            )
            g.instantiate()
            graphs[(name, n)] = g
    times = time_replays_us(
        {f"{k[0]}x{k[1]}": g for k, g in graphs.items()}, replays=20, trials=args.trials
    )
    rows = [
        dict(form=k.rsplit("x", 1)[0], calls=int(k.rsplit("x", 1)[1]), trial=i, us=v)
        for k, vs in times.items()
        for i, v in enumerate(vs)
    ]
    df = pd.DataFrame(rows)
    df.to_csv(args.out / "pdl-pairs.csv", index=False)
    fits = {}
    for form, g in df.groupby("form"):
        wide = g.pivot(index="calls", columns="trial", values="us")  # [lengths, trials]
        f = fit_chain(wide.index.to_numpy(), wide.to_numpy())
        fits[form] = {"us_per_call": f.slope, "lo": f.slope_lo, "hi": f.slope_hi}
    summary["per_call_us"] = fits
    summary["programmatic_edges"] = edges
    (args.out / "pdl-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
