# What CUPTI adds to a replayed graph, and where (issue 34, item 2). Every graph is
# event-timed (trials of 10 replays between CUDA events) and right after profiled (a
# lead-in and 10 replays under torch.profiler, CUDA events around the 10 as well), the
# graphs in turn (order reversed every round), R rounds. Graphs: chains of one unit of
# work at two lengths (the per-node excess is the slope, free of the launch's fixed cost),
# for several kinds of kernel (tiny, wide, long, cuBLAS, a mix of functions, a long kernel
# before short ones), copies and sets; and the workloads of the issue: the round (shipped,
# fused), the llama and HF examples and gpt-fast's model, eager and compiled.
#   OUT=dir python3 benchmarks/experiments/cupti_excess.py [--rounds R] [--only chains]
#   python3 benchmarks/experiments/cupti_excess.py --table DIR/cupti-excess.json
# Writes $OUT/cupti-excess.json: per graph its nodes by type, per round the event-timed
# median, the event time under CUPTI and CUPTI's periods, and per node position (start
# order) the median profiled duration and gap with its type, for modelling offline.
import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import torch  # noqa: E402

from graph_harness.capture import RoundParams, count_round  # noqa: E402
from graph_harness.capture.count import capture_and_keep  # noqa: E402
from graph_harness.capture.graph.reader import read_graph  # noqa: E402
from graph_harness.capture.profile.activities import (  # noqa: E402
    activities_from_trace,
    cupti_trace,
    split_replays,
)
from graph_harness.capture.replay.kinds import get_kind  # noqa: E402
from graph_harness.capture.replay.timing import capture_unrolled  # noqa: E402

REPLAYS = 10
resets = {}  # graph name -> what returns its step to call 0
keep = []  # the units' tensors, alive as long as their graphs
TRIALS = 5
LENGTHS = (64, 256)


def units(dev):
    """name -> (one call, nodes it adds)."""
    x1m = torch.randn(1 << 20, device=dev)
    y1m = torch.randn(1 << 20, device=dev)
    a = torch.randn(64, 512, device=dev, dtype=torch.bfloat16)
    w = torch.randn(512, 1536, device=dev, dtype=torch.bfloat16)
    c = torch.empty(64, 1536, device=dev, dtype=torch.bfloat16)
    add1 = get_kind("torch-add").make(dev)
    empty = get_kind("triton-empty").make(dev)
    mm = lambda: torch.mm(a, w, out=c)
    spin = lambda n: lambda: torch.cuda._sleep(n)

    def mix():
        add1()
        y1m.mul_(1.0001)
        empty()
        mm()

    def long_short():
        torch.cuda._sleep(20000)
        add1()
        add1()
        add1()

    return {
        "torch-add": add1,
        "triton-empty": empty,
        "add-1M": lambda: x1m.add_(1.0),
        "spin-1000": spin(1000),
        "mm-64x512x1536": mm,
        "mix": mix,
        "long+3short": long_short,
        "memcpy": get_kind("memcpy").make(dev),
        "memset": get_kind("memset").make(dev),
    }


def chain_graphs(dev):
    out = {}
    calls = units(dev)
    keep.append(calls)  # a graph does not keep alive the tensors it captured: these do
    for name, call in calls.items():
        probe = capture_unrolled(call, 1)
        per = len(read_graph(probe.raw_cuda_graph()))
        for n in LENGTHS:
            g = capture_unrolled(call, max(1, n // per))
            out[f"chain:{name}|{n}"] = g
    return out


def workload_graphs(which):
    from bench_model import load_example

    out, keep = {}, []
    if "round" in which:
        for v in ("shipped", "fused"):
            counted = count_round(RoundParams(), v, "cuda")
            out[f"round:{v}"] = counted.captured.graph
            keep.append(counted)
    examples = {
        "llama": load_example(),
        "hf": _load(ROOT / "examples" / "hf_decode.py"),
        "gptfast": _load(ROOT / "benchmarks" / "targets" / "gpt_fast_step.py"),
    }
    for m, ex in examples.items():
        if m not in which:
            continue
        for name, compiled in (("eager", False), ("compiled", True)):
            step = ex.make_step(compiled=compiled)
            kept = capture_and_keep(step, module=step.module, depth=2)
            out[f"{m}:{name}"] = kept.captured.graph
            resets[f"{m}:{name}"] = _start(step)
            keep.append((step, kept))
    return out, keep


def _start(step):
    """The step back at call 0 (its reset, then its feed of call 0), before every run of
    replays: the HF step's cache advances a position per replay."""

    def start():
        step.reset()
        step.feed(0)
        torch.cuda.synchronize()

    return start


def _load(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed(graph, reset):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    xs = []
    for _ in range(TRIALS):
        if reset:
            reset()
        s.record()
        for _ in range(REPLAYS):
            graph.replay()
        e.record()
        e.synchronize()
        xs.append(s.elapsed_time(e) * 1e3 / REPLAYS)
    return statistics.median(xs)


def profiled(graph, reset):
    if reset:
        reset()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def run():
        graph.replay()  # lead-in
        s.record()
        for _ in range(REPLAYS):
            graph.replay()
        e.record()

    trace = cupti_trace(run)
    reps = split_replays(activities_from_trace(trace), REPLAYS + 1)
    ends = [max(a.end_us for a in r) for r in reps]
    periods = [b - a for a, b in itertools.pairwise(ends)]
    per_pos = []
    for i, r in enumerate(reps[1:], start=1):
        prev = ends[i - 1]
        rows = []
        for a in r:
            rows.append((a.kind, a.name[:60], a.end_us - a.start_us, a.start_us - prev))
            prev = max(prev, a.end_us)
        per_pos.append(rows)
    return s.elapsed_time(e) * 1e3 / REPLAYS, periods, per_pos


def table(path):
    """The tables BENCHMARKS.md quotes, from a cupti-excess.json: per chain kind the excess
    per node (the slope between its two lengths, per round, median) and per graph the
    excess per node; and for every graph per node the profiled duration and gap against
    the event-timed time per node (so the gap the GPU left without the profiler, if
    CUPTI's durations are the kernels' own)."""
    d = json.loads(Path(path).read_text())
    med = statistics.median
    rows = {}
    for n, v in d.items():
        if n.startswith("_"):
            continue
        pos = v["pos"]
        k = len(pos[0])
        dur = sum(med(r[j][2] for r in pos) for j in range(k)) / k
        gap = med(med(r[j][3] for r in pos) for j in range(1, k))
        ex = [med(p) - t for p, t in zip(v["periods"], v["timed"])]
        rows[n] = dict(nodes=k, dur=dur, gap=gap, timed=med(v["timed"]) / k, ex=ex)
    print("| chain | excess per node, us (median over rounds) | profiled duration per node "
          "| profiled gap (median) | event-timed per node | unprofiled gap |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    kinds = list(dict.fromkeys(n.split("|")[0] for n in rows if "|" in n))
    for kind in kinds:
        a, b = (rows[f"{kind}|{n}"] for n in LENGTHS)
        slopes = [(y - x) / (b["nodes"] - a["nodes"]) for x, y in zip(a["ex"], b["ex"])]
        print(f"| {kind[6:]} | {med(slopes):.3f} | {b['dur']:.3f} | {b['gap']:.3f} | "
              f"{b['timed']:.3f} | {b['timed'] - b['dur']:.3f} |")  # fmt: skip
    print()
    print("| graph | nodes | excess us | per node | profiled duration per node | profiled gap "
          "(median) | event-timed per node | unprofiled gap |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, r in rows.items():
        if "|" in n:
            continue
        e = med(r["ex"])
        print(f"| {n} | {r['nodes']} | {e:.1f} | {e / r['nodes']:.3f} | {r['dur']:.3f} | "
              f"{r['gap']:.3f} | {r['timed']:.3f} | {r['timed'] - r['dur']:.3f} |")  # fmt: skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="chains,round,llama,hf,gptfast")
    ap.add_argument("--table", metavar="JSON", help="print the tables of a finished run")
    args = ap.parse_args()
    if args.table:
        return table(args.table)
    which = set(args.only.split(","))
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    t0 = time.time()
    graphs = chain_graphs(dev) if "chains" in which else {}
    more, _keep = workload_graphs(which)
    graphs.update(more)
    print(f"captured {len(graphs)} graphs in {time.time() - t0:.0f} s", flush=True)
    types = {}
    for n, g in list(graphs.items()):
        kinds = [r.kind for r in read_graph(g.raw_cuda_graph())]
        types[n] = {k: kinds.count(k) for k in sorted(set(kinds))}
        try:
            for _ in range(5):
                g.replay()
            torch.cuda.synchronize()
        except Exception as e:  # an API error (not sticky): say which, go on without it
            print(f"{n}: replay failed ({types[n]}): {e!s:.200}", flush=True)
            del graphs[n]
            continue
        if n in resets:
            resets[n]()
    torch.cuda.synchronize()
    rec = {n: dict(types=types[n], timed=[], timed_cupti=[], periods=[], pos=None) for n in graphs}
    names = list(graphs)
    for r in range(args.rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            g = graphs[n]
            rec[n]["timed"].append(timed(g, resets.get(n)))
            tc, periods, per_pos = profiled(g, resets.get(n))
            rec[n]["timed_cupti"].append(tc)
            rec[n]["periods"].append(periods)
            if rec[n]["pos"] is None:
                rec[n]["pos"] = []
            rec[n]["pos"].append(
                [
                    (
                        rows[0][0],
                        rows[0][1],
                        statistics.median(p[j][2] for p in per_pos),
                        statistics.median(p[j][3] for p in per_pos),
                    )
                    for j, rows in enumerate(zip(*per_pos))
                ]
            )
        print(f"round {r + 1} of {args.rounds}: {time.time() - t0:.0f} s", flush=True)
    print(f"{'graph':28s} {'acts':>5s} {'timed':>9s} {'t.cupti':>9s} {'period':>9s} "
          f"{'excess':>8s} {'per act':>8s} {'spread':>7s}")  # fmt: skip
    for n, d in rec.items():
        t = statistics.median(d["timed"])
        p_r = [statistics.median(p) for p in d["periods"]]
        p = statistics.median(p_r)
        tc = statistics.median(d["timed_cupti"])
        acts = len(d["pos"][0])
        ex = [pp - tt for pp, tt in zip(p_r, d["timed"])]
        print(f"{n:28s} {acts:5d} {t:9.2f} {tc:9.2f} {p:9.2f} {p - t:8.2f} "
              f"{(p - t) / acts:8.4f} {max(ex) - min(ex):7.2f}")  # fmt: skip
    rec["_env"] = dict(
        gpu=torch.cuda.get_device_name(),
        torch=torch.__version__,
        rounds=args.rounds,
        replays=REPLAYS,
        trials=TRIALS,
    )
    (out / "cupti-excess.json").write_text(json.dumps(rec))


if __name__ == "__main__":
    main()
