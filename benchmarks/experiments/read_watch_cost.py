"""What the read watch (capture/record/reads_mode.py, issue 59 item 2) costs a capture:
a stack of small layers captured (CUDA) or run (CPU) plain, under a pass-through dispatch
mode, under the watch as shipped (it stops looking once QUIET operators read no new input,
then sleeps: capture/record/dormant.py), under one that passes the rest through awake,
and under one that looks at the whole region, interleaved; medians of the region's wall
time, per operator and per graph, for a few operator counts. Goal: at most 2 ms a graph.

    python benchmarks/experiments/read_watch_cost.py [--layers 8 64 256] [--repeats 15] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from graph_harness.capture.record.reads_mode import RegionWatch


class PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def model(layers: int, device: str) -> nn.Module:
    blocks = [nn.Sequential(nn.Linear(64, 64), nn.SiLU()) for _ in range(layers)]
    return nn.Sequential(*blocks).to(device)


WHOLE = 1 << 30  # quiet and most for a watch that looks at the whole region
WATCHES = {"watch": {}, "awake": {"sleeps": False}, "whole": {"quiet": WHOLE, "most": WHOLE}}


def count_ops(m: nn.Module, x: torch.Tensor, watch: RegionWatch) -> int:
    """The operators `watch` looked at in one run of `m`."""
    watch.start()
    m(x)
    watch.stop()
    return watch.reads.ops


def region(m: nn.Module, x: torch.Tensor, how: str) -> float:
    """One region's wall seconds: captured on CUDA, run on the CPU."""
    cuda = x.is_cuda
    g = torch.cuda.CUDAGraph() if cuda else None
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    ctx = torch.cuda.graph(g) if cuda else _Null()
    with ctx:
        if how == "plain":
            m(x)
        elif how == "pass-through":
            with PassThrough():
                m(x)
        else:
            watch = RegionWatch(**WATCHES[how])
            watch.start()
            m(x)
            watch.stop()
    dt = time.perf_counter() - t0
    del g
    return dt


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hows = ["plain", "pass-through", "watch", "awake", "whole"]
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
           "torch": torch.__version__, "rows": []}  # fmt: skip
    for layers in a.layers:
        m = model(layers, device)
        x = torch.randn(8, 64, device=device)
        with torch.no_grad():
            ops = count_ops(m, x, RegionWatch(WHOLE, WHOLE))
            looked = count_ops(m, x, RegionWatch())
            for how in hows:  # warm-up
                region(m, x, how)
            times = {h: [] for h in hows}
            for _ in range(a.repeats):
                for how in hows:
                    times[how].append(region(m, x, how))
        med = {h: statistics.median(v) for h, v in times.items()}
        row = {
            "layers": layers,
            "ops": ops,
            "looked_at": looked,
            **{f"{h}_ms": med[h] * 1e3 for h in hows},
            "watch_over_plain_ms": (med["watch"] - med["plain"]) * 1e3,
            "awake_over_plain_ms": (med["awake"] - med["plain"]) * 1e3,
            "whole_over_plain_ms": (med["whole"] - med["plain"]) * 1e3,
            "whole_us_per_op": (med["whole"] - med["plain"]) / ops * 1e6,
            "pass_us_per_op": (med["pass-through"] - med["plain"]) / ops * 1e6,
            "runs_s": times,
        }
        out["rows"].append(row)
        shown = {k: v for k, v in row.items() if k != "runs_s"}
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in shown.items()})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
