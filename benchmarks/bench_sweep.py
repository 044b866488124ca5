"""The capture-size ladder on a GPU (issue 33): the HF and llama examples, eager and
compiled, swept over batch sizes 1 to 256 (`capture.sweep.run.sweep_step`, as
`graph-harness sweep` runs it); per model the shared pool's total against the sum of own
pools; the ladders chosen for two request distributions against vLLM's default ladder;
and the sweep's own wall time against capturing the same sizes by hand (a plain loop of
warm-ups and `torch.cuda.graph` into one pool, largest first).

    python benchmarks/bench_sweep.py --out DIR [--sizes 1 2 4 ...] [--models llama hf]

Writes DIR/NAME/ (each sweep's files, as `sweep --out`), DIR/summary.csv and
DIR/ladders.csv, and prints a summary.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

# Every compile a real one, for the sweep and the loop by hand alike: with Inductor's
# caches on, whichever runs second finds the first's kernels and looks cheap.
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graph_harness.capture.sweep.padding import builtin_requests  # noqa: E402
from graph_harness.capture.sweep.run import sweep_step  # noqa: E402
from graph_harness.reports import plots  # noqa: E402

SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# A compiled size costs a compile (5-15 s on the H200): compiled steps sweep every other
# size of the ladder, 1 to 256, to fit one device call.
COMPILED_SIZES = (1, 4, 16, 64, 256)
REQUESTS = ("uniform:1-{largest}", "zipf:1.2")  # over every size up to the largest swept


def example(name: str):
    path = REPO / "examples" / f"{name}_decode.py"
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def by_hand(make, sizes, warmup: int = 3) -> float:
    """Seconds to build, warm up and capture every size into one pool, largest first,
    with nothing measured: what a user's own loop costs."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    pool, keep = torch.cuda.graph_pool_handle(), []
    for b in sorted(sizes, reverse=True):
        step = make(b)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            step()
        keep.append((step, g))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    del keep
    gc.collect()
    torch.cuda.empty_cache()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--compiled-sizes", type=int, nargs="+", default=list(COMPILED_SIZES))
    ap.add_argument("--models", nargs="+", default=["llama", "hf"])
    ap.add_argument("--modes", nargs="+", default=["eager", "compiled"])
    ap.add_argument("--trials", type=int, default=10)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    summary, ladders = [], []
    from graph_harness.capture.sweep.settings import SweepSettings

    settings = SweepSettings(trials=args.trials)
    for model in args.models:
        mod = example(model)
        for mode in args.modes:
            compiled = mode == "compiled"
            name = f"{model}-{mode}"
            sizes = args.compiled_sizes if compiled else args.sizes

            def make(b, compiled=compiled, mod=mod):
                return mod.make_step(compiled=compiled, batch=b)

            torch._dynamo.reset()
            t0 = time.perf_counter()
            result = sweep_step(
                make,
                sizes,
                settings,
                name=name,
                module_of=lambda s: s.module,
                progress=lambda line, n=name: print(f"[{n}] {line}", flush=True),
            )
            sweep_s = time.perf_counter() - t0
            for spec in REQUESTS:
                spec = spec.format(largest=max(sizes))
                dist = builtin_requests(spec, max(sizes))
                result = result.with_padding(dist, spec, most=4)
            folder = args.out / name
            folder.mkdir(exist_ok=True)
            result.write(folder)
            plots.sweep(result, folder / "sweep.png")
            plots.padding(result, folder / "padding.png")
            torch._dynamo.reset()
            hand_s = by_hand(make, sizes)
            own = sum(r.reserved for r in result.rows)
            shared = result.shared[-1].total_reserved
            summary.append(
                dict(model=model, mode=mode, sizes=" ".join(map(str, sizes)), sweep_s=sweep_s,
                     by_hand_s=hand_s, own_pools_bytes=own, shared_pool_bytes=shared,
                     nodes_min=min(r.nodes for r in result.rows),
                     nodes_max=max(r.nodes for r in result.rows))
            )  # fmt: skip
            for p in result.padding:
                for c in p.ladders:
                    ladders.append(
                        dict(model=model, mode=mode, requests=p.requests, ladder=c.name,
                             sizes=" ".join(map(str, c.sizes)), expected_us=c.expected_us,
                             lost_us=c.lost_us, padding_share=c.padding_share,
                             interpolated=c.interpolated)
                    )  # fmt: skip
            print(result.sizes_table().drop(columns=["by_type"]).to_string(), flush=True)
            print(result.shared_table().to_string(), flush=True)
            del result
            gc.collect()
            torch.cuda.empty_cache()
    pd.DataFrame(summary).to_csv(args.out / "summary.csv", index=False)
    pd.DataFrame(ladders).to_csv(args.out / "ladders.csv", index=False)
    print(pd.DataFrame(summary).to_string())
    print(pd.DataFrame(ladders).to_string())


if __name__ == "__main__":
    main()
