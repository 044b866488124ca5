# Why does rebuilding a shipped-compiled round take seconds? For every variant, three
# builds in a row: time each phase (build the round, capture with warm-up, read the graph
# and export), Dynamo's counters (frames compiled, recompiles, guard failures) and, for
# the slowest variant's last build, a cProfile of the whole rebuild.
import cProfile
import io
import json
import os
import pstats
import sys
import time

sys.path.insert(0, ".")
import torch
from torch._dynamo.utils import counters

from graph_harness.capture import RoundParams, count_round
from graph_harness.capture.round.params import VARIANTS

OUT = os.environ.get("OUT", "/tmp/out")
params = RoundParams()
rows = []


def once(variant):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    c = count_round(params, variant, "cuda")
    torch.cuda.synchronize()
    return time.perf_counter() - t0, c


ONLY = os.environ.get("ONLY")  # one variant, every build profiled (PROFILE=1)
for variant in [ONLY] if ONLY else VARIANTS:
    for build in range(4 if ONLY else 3):
        before = {k: dict(v) for k, v in counters.items()}
        prof = cProfile.Profile() if os.environ.get("PROFILE") else None
        if prof:
            prof.enable()
        wall, c = once(variant)
        if prof:
            prof.disable()
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
            print(s.getvalue()[:3500])
        after = {k: dict(v) for k, v in counters.items()}
        diff = {
            f"{k}.{kk}": vv - before.get(k, {}).get(kk, 0)
            for k, v in after.items()
            for kk, vv in v.items()
            if vv != before.get(k, {}).get(kk, 0)
        }
        rows.append(
            {"variant": variant, "build": build, "s": wall, "nodes": c.export.total, "dynamo": diff}
        )
        print(variant, build, f"{wall:.3f} s", c.export.total, json.dumps(diff)[:400], flush=True)
        del c
        torch.cuda.empty_cache()

if ONLY:
    sys.exit(0)
slow = max(
    VARIANTS, key=lambda v: max(r["s"] for r in rows if r["variant"] == v and r["build"] > 0)
)
prof = cProfile.Profile()
prof.enable()
once(slow)
prof.disable()
s = io.StringIO()
pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(45)
print("slowest rebuild:", slow)
print(s.getvalue()[:12000])
with open(f"{OUT}/rebuild-speed.json", "w") as f:
    json.dump(rows, f, indent=1)
