"""The example decoder's step (examples/llama_decode.py), eager against compiled, on the GPU.

    python3 benchmarks/bench_model.py --out DIR            # the H200 figures
    python3 benchmarks/bench_model.py --out DIR --smoke    # CPU: tiny preset, counts only

Writes into DIR:
- nodes-eager.json, nodes-compiled.json: the exports (module scopes, every level);
- per_module.csv: nodes per module at depths 1 to 4, eager and compiled;
- replay.csv: every timed trial (what, trial, us): the step launched op by op without a
  graph ("eager-ops", "compiled-ops") and its graph replayed ("eager-graph",
  "compiled-graph"), all interleaved;
- chains.csv: the per-node cost fits (torch-add, memcpy, memset chains);
- summary.json: nodes, capture+export wall after warm-up, attribution time of a
  10,000-node graph with nested scopes, the saving graph capture buys (op by op minus
  replay, per variant) and the compiled step's saving over the eager one: predicted
  (removed nodes of each type x that type's per-node cost) and measured (difference of
  replay medians, 95% bootstrap interval over interleaved trials).

The measured compiled saving includes what fusion saves in memory traffic, not only in
dispatch; the predicted one prices dispatch alone. Their ratio says how much of the
saving is dispatch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graph_harness.capture import capture_and_count, capture_graph, module_scopes  # noqa: E402
from graph_harness.capture.attribution.records import nodes_from_graph  # noqa: E402
from graph_harness.capture.attribution.rollup import per_scope  # noqa: E402
from graph_harness.capture.export.delta import node_delta  # noqa: E402
from graph_harness.capture.graph.reader import RawNode  # noqa: E402
from graph_harness.capture.replay.pricing import predicted_saving_us  # noqa: E402
from graph_harness.capture.scopes.recorder import ScopeKey, ScopeMark  # noqa: E402
from graph_harness.capture.stats import saving_interval, saving_point  # noqa: E402


def load_example():
    path = ROOT / "examples" / "llama_decode.py"
    spec = importlib.util.spec_from_file_location("llama_decode_bench", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def attribution_seconds(n: int = 10_000, layers: int = 100, per: int = 10) -> float:
    """Attribute a synthetic n-node chain under nested scopes (layers x modules x ops):
    the part of reading a graph that grows with scopes. Pure CPU."""
    raw = [RawNode(h, "kernel", "k", deps=[h - 1] if h > 1 else []) for h in range(1, n + 1)]
    marks, h, stack = [], 0, []
    ops = n // (layers * per)
    for i in range(layers):
        layer = ScopeKey(None, f"layers.{i}")
        marks.append(ScopeMark(tuple(stack), [h] if h else []))
        stack.append(layer)
        for j in range(per):
            marks.append(ScopeMark(tuple(stack), [h] if h else []))
            stack.append(ScopeKey(None, f"layers.{i}.m{j}"))
            h += ops
            marks.append(ScopeMark(tuple(stack), [h]))
            stack.pop()
        marks.append(ScopeMark(tuple(stack), [h]))
        stack.pop()
    t0 = time.perf_counter()
    nodes = nodes_from_graph(raw, marks)
    took = time.perf_counter() - t0
    assert sum(1 for x in nodes if x["scope"] != "unscoped") == h
    return took


def time_interleaved(calls: dict, replays: int, trials: int) -> pd.DataFrame:
    """Per-trial time of one call of each, in us: `replays` back-to-back calls between two
    CUDA events, the order of the callables reversed every other trial (syncs)."""
    names = list(calls)
    for name in names:
        for _ in range(3):
            calls[name]()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows = []
    for t in range(trials):
        for name in names if t % 2 == 0 else names[::-1]:
            fn = calls[name]
            start.record()
            for _ in range(replays):
                fn()
            end.record()
            end.synchronize()
            rows.append(dict(what=name, trial=t, us=start.elapsed_time(end) * 1e3 / replays))
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="CPU: tiny preset, eager counts only")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ex = load_example()
    gpu = torch.cuda.is_available() and not args.smoke
    preset = args.preset if not args.smoke else "tiny"
    summary: dict = {
        "preset": preset,
        "device": "cuda" if gpu else "cpu",
        "torch": torch.__version__,
    }
    summary["attribute_10k_nested_s"] = attribution_seconds()

    variants = (False, True) if gpu else (False,)  # a compiled step is refused on the CPU
    steps, exports, frames = {}, {}, []
    for compiled in variants:
        name = "compiled" if compiled else "eager"
        step = ex.make_step(compiled=compiled, preset=preset, device=None if gpu else "cpu")
        with module_scopes(step.module):
            t0 = time.perf_counter()
            capture_and_count(step)  # first: compiles, warms, captures once
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            e = capture_and_count(step, warmup=1)
            e.write_json(args.out / f"nodes-{name}.json")
            again = time.perf_counter() - t0
        steps[name], exports[name] = step, e
        summary[f"{name}_nodes"] = e.total
        summary[f"{name}_attribution"] = e.options.get("compiled_attribution", "module scopes")
        summary[f"{name}_capture_export_first_s"] = first
        summary[f"{name}_capture_export_s"] = again
        df = e.frame()
        for depth in (1, 2, 3, 4):
            counts = per_scope(df, depth)
            frames.append(
                pd.DataFrame(
                    dict(variant=name, depth=depth, scope=counts.index, nodes=counts.values)
                )
            )
        print(f"{name}: {e.total} nodes; capture+export {first:.2f} s first, {again:.3f} s again")
    pd.concat(frames).to_csv(args.out / "per_module.csv", index=False)

    if gpu:
        from graph_harness.capture.replay.chains import measure_chains

        d = node_delta(exports["eager"], exports["compiled"])
        removed = d.removed_by_type()
        _, fits = measure_chains(("torch-add", "memcpy", "memset"))
        fits.to_csv(args.out / "chains.csv", index=False)
        slope = fits.set_index("kind").slope
        cost = {"kernel": float(slope["torch-add"]), "memcpy": float(slope["memcpy"])}
        cost["memset"] = float(slope["memset"])
        predicted = predicted_saving_us(removed, cost)
        graphs = {n: capture_graph(steps[n]).graph for n in steps}
        calls = {
            "eager-ops": steps["eager"],
            "eager-graph": graphs["eager"].replay,
            "compiled-ops": steps["compiled"],
            "compiled-graph": graphs["compiled"].replay,
        }
        trials = time_interleaved(calls, args.replays, args.trials)
        trials.to_csv(args.out / "replay.csv", index=False)
        series = {w: g.us.to_numpy() for w, g in trials.groupby("what")}
        for name in ("eager", "compiled"):
            ops, graph = series[f"{name}-ops"], series[f"{name}-graph"]
            summary[f"{name}_capture_saves_us"] = saving_point(ops, graph)
            summary[f"{name}_capture_saves_us_95"] = saving_interval(ops, graph)
        a, b = series["eager-graph"], series["compiled-graph"]
        summary["compiled_removed_by_type"] = removed
        summary["compiled_saving_predicted_us"] = predicted
        summary["compiled_saving_measured_us"] = saving_point(a, b)
        summary["compiled_saving_measured_us_95"] = saving_interval(a, b)
        summary["median_us"] = trials.groupby("what").us.median().to_dict()
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
