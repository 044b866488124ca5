# What CUPTI calls a captured round's activities: category and name of each, to match the
# graph's node types (a memcpy node may run as a kernel).
import json
import sys
from collections import Counter

import torch
from torch.profiler import ProfilerActivity, profile

from graph_harness.capture import RoundParams, count_round

p = RoundParams(stages=2, rows=2, k=32, world=2, rank=1, shard=64, seed=3)
counted = count_round(p, "shipped", "cuda")
g = counted.captured.graph
g.replay()
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    g.replay()
    torch.cuda.synchronize()
prof.export_chrome_trace("/tmp/t.json")
with open("/tmp/t.json") as f:
    ev = json.load(f)["traceEvents"]
ran = [
    e for e in ev if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
]
for (cat, name), n in Counter((e["cat"], e["name"]) for e in ran).items():
    print(n, cat, name[:150])
print(Counter(n["type"] for n in counted.export.nodes))
for n in counted.export.nodes:
    if n["type"] == "memcpy":
        print("memcpy node", n)
        break
sys.stdout.flush()
