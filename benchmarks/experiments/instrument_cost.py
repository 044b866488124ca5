# What does CUPTI itself add to a replayed graph, node by node (issue 16)? Profiled
# savings land above measured ones because each graph runs longer under the profiler;
# this asks whether that excess follows from what the nodes are, so it could be priced
# from graphs other than the two compared.
#   OUT=dir python3 benchmarks/experiments/instrument_cost.py [--rounds R]
# Every graph is event-timed (10 replays between CUDA events) and profiled (torch.profiler,
# CUDA activities, a lead-in and 10 replays, with CUDA events around the 10 too), the two
# adjacent in time and the graphs taken in turn, R rounds. Graphs: calibration chains
# (spin kernels of set lengths, tiny elementwise kernels, device copies, and long kernels
# followed by short ones), the round's shipped and fused variants, the example decoder
# eager and compiled. Writes $OUT/instrument.json: per graph the node count, the medians
# (event-timed; event-timed under CUPTI; CUPTI's period) and one profiled replay's
# activities (kind, name, start, end), for modelling offline.
import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from graph_harness.capture import RoundParams, count_round  # noqa: E402
from graph_harness.capture.count import capture_and_keep  # noqa: E402
from graph_harness.capture.graph.capture import capture_graph  # noqa: E402
from graph_harness.capture.profile.activities import activities_from_trace, split_replays  # noqa: E402

REPLAYS = 10


def chain(fn, n):
    def run():
        for _ in range(n):
            fn()

    return run


def calibration_graphs():
    x = torch.randn(1024, device="cuda")
    src = torch.randn(16384, device="cuda")
    dst = torch.empty_like(src)
    keep = [x, src, dst]
    spin = lambda c: lambda: torch.cuda._sleep(c)
    add = lambda: x.add_(1.0)
    copy = lambda: dst.copy_(src)
    fns = {f"spin{c}x100": chain(spin(c), 100) for c in (0, 1000, 4000, 10000, 40000)}
    fns["add1kx200"] = chain(add, 200)
    fns["copy64kx200"] = chain(copy, 200)

    def long_then_adds():
        for _ in range(20):
            torch.cuda._sleep(40000)
            for _ in range(8):
                add()

    def long_then_copies():
        for _ in range(40):
            torch.cuda._sleep(40000)
            copy()
            copy()

    fns["(spin40000+8add)x20"] = long_then_adds
    fns["(spin40000+2copy)x40"] = long_then_copies
    graphs = {}
    for name, fn in fns.items():
        cap = capture_graph(fn)
        graphs[name] = cap.graph
    return graphs, keep


def workload_graphs():
    graphs, keep = {}, []
    for v in ("shipped", "fused"):
        counted = count_round(RoundParams(), v, "cuda")
        counted.captured.graph.instantiate()
        graphs[f"round:{v}"] = counted.captured.graph
        keep.append(counted)
    from bench_model import load_example

    ex = load_example()
    for name, compiled in (("eager", False), ("compiled", True)):
        step = ex.make_step(compiled=compiled, preset="small")
        kept = capture_and_keep(step)
        captured = kept.captured
        graphs[f"decoder:{name}"] = captured.graph
        keep.append((step, captured))
    return graphs, keep


def timed(graph):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(REPLAYS):
        graph.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / REPLAYS


def profiled(graph):
    """(event time under CUPTI, CUPTI's median period, one replay's activities)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()  # lead-in
        s.record()
        for _ in range(REPLAYS):
            graph.replay()
        e.record()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        prof.export_chrome_trace(str(path))
        acts = activities_from_trace(json.loads(path.read_text()))
    reps = split_replays(acts, REPLAYS + 1)
    ends = [max(a.end_us for a in r) for r in reps]
    periods = [b - a for a, b in itertools.pairwise(ends)]
    one = [(a.kind, a.name[:80], a.start_us - ends[0], a.end_us - ends[0]) for a in reps[1]]
    return s.elapsed_time(e) * 1e3 / REPLAYS, statistics.median(periods), one


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    graphs, _keep = calibration_graphs()  # buffers outlive graphs
    more, _keep2 = workload_graphs()
    graphs.update(more)
    for g in graphs.values():
        for _ in range(5):
            g.replay()
    torch.cuda.synchronize()
    rec = {n: dict(timed=[], timed_cupti=[], period=[], replay=None) for n in graphs}
    names = list(graphs)
    for r in range(args.rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            g = graphs[n]
            rec[n]["timed"].append(timed(g))
            tc, period, one = profiled(g)
            rec[n]["timed_cupti"].append(tc)
            rec[n]["period"].append(period)
            rec[n]["replay"] = one
    doc = {}
    print(f"{'graph':26s} {'acts':>5s} {'timed':>9s} {'t.cupti':>9s} {'period':>9s} "
          f"{'excess':>8s} {'per act':>8s} {'spread':>7s}")  # fmt: skip
    for n, d in rec.items():
        t, tc, p = (statistics.median(d[k]) for k in ("timed", "timed_cupti", "period"))
        acts = len(d["replay"])
        per = [(pp - tt) for pp, tt in zip(d["period"], d["timed"])]
        spread = max(per) - min(per)
        print(f"{n:26s} {acts:5d} {t:9.2f} {tc:9.2f} {p:9.2f} {p - t:8.2f} "
              f"{(p - t) / acts:8.4f} {spread:7.2f}")  # fmt: skip
        doc[n] = dict(d, activities=acts, timed_us=t, timed_cupti_us=tc, period_us=p)
    doc["_env"] = dict(
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, rounds=args.rounds
    )
    (out / "instrument.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
