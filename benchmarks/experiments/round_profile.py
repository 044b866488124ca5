# Inside the round, what does each node take? CUPTI (torch.profiler) records the kernels
# and copies of replayed graphs: per-name mean duration and mean idle gap before it, for
# shipped-compiled / fused-pack / compiled-direct / fused. Shows where compiled->fused's
# extra ~1 us per stage goes (kernel time of the pack, or gaps).
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, ".")
import pandas as pd
import torch
from torch.profiler import ProfilerActivity, profile

from graph_harness.capture import count_round
from graph_harness.capture.round import params as P

OUT = os.environ.get("OUT", "/tmp/out")
P.VARIANTS["compiled-direct"] = ("compiled", "direct")
VAR = ["shipped-compiled", "fused-pack", "compiled-direct", "fused"]


def short(name):
    for key in (
        "triton_poi",
        "_pack_flat_kernel",
        "selected_local",
        "Memcpy",
        "Memset",
        "topk",
        "sort",
        "radix",
        "gather",
        "bitonic",
        "fill",
        "Fill",
        "copy",
        "where",
    ):
        if key.lower() in name.lower():
            return key + ":" + name[:60]
    return name[:70]


def main():
    params = P.RoundParams()
    rows = []
    keep = []
    for v in VAR:
        counted = count_round(params, v, "cuda")
        keep.append(counted)
        g = counted.captured.graph
        g.instantiate()
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
        path = f"/tmp/trace_{v}.json"
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
        ev = [
            e
            for e in trace["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        ]
        ev.sort(key=lambda e: e["ts"])
        print(
            f"{v}: {len(ev)} device events over 3 replays (graph has {counted.export.total} nodes)",
            flush=True,
        )
        per = defaultdict(lambda: [0, 0.0, 0.0])
        prev_end = None
        for e in ev:
            gap = 0.0 if prev_end is None else max(0.0, e["ts"] - prev_end)
            if prev_end is not None and e["ts"] - prev_end > 50:  # between replays
                gap = 0.0
            s = per[short(e["name"])]
            s[0] += 1
            s[1] += e["dur"]
            s[2] += gap
            prev_end = e["ts"] + e["dur"]
        total_dur = sum(e["dur"] for e in ev) / 3
        span = (ev[-1]["ts"] + ev[-1]["dur"] - ev[0]["ts"]) / 3 if ev else 0
        print(f"  busy {total_dur:.1f} us per replay, span ~{span:.1f} us", flush=True)
        for name, (cnt, dur, gap) in sorted(per.items(), key=lambda kv: -kv[1][1]):
            rows.append(
                dict(
                    variant=v,
                    name=name,
                    count_per_round=cnt / 3,
                    dur_us=dur / cnt,
                    gap_before_us=gap / cnt,
                    total_per_round_us=(dur + gap) / 3,
                )
            )
            print(
                f"  {name:70s} n={cnt / 3:5.0f} dur={dur / cnt:8.3f} gap={gap / cnt:6.3f} "
                f"total/round={(dur + gap) / 3:8.1f}",
                flush=True,
            )
    pd.DataFrame(rows).to_csv(f"{OUT}/round_profile.csv", index=False)


if __name__ == "__main__":
    main()
