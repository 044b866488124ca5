"""What locating a replay's device-side assertion costs (issue 57, item 2): a run of
replays of the tiny llama decode step's graph (its reset between runs), plain, with
check's marks after each replay (capture/replay/progress.py: a counter's add and a copy
to pinned memory, no sync), and with a sync after each replay (the other way to know
which replay failed). Each a median of interleaved rounds, wall time of the run, synced
at its end.

    python benchmarks/bench_marks.py [--calls 32] [--rounds 15] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from graph_harness.capture.count import capture_and_keep  # noqa: E402
from graph_harness.capture.replay.progress import Marks  # noqa: E402
from tests.llama_example import load_example  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    a = ap.parse_args()
    step = load_example("llama").make_step(preset="tiny")
    graph = capture_and_keep(step, warmup=3).captured.graph
    marks = Marks()
    ways = {
        "plain": lambda: graph.replay(),
        "marks": lambda: (graph.replay(), marks.mark()),
        "sync each": lambda: (graph.replay(), torch.cuda.synchronize()),
    }
    times: dict[str, list[float]] = {k: [] for k in ways}
    for r in range(a.rounds + 2):
        for name, way in ways.items():
            step.reset()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                way()
            torch.cuda.synchronize()
            if r >= 2:  # two rounds of warm-up
                times[name].append((time.perf_counter() - t0) / a.calls * 1e6)
    step.reset()
    med = {k: statistics.median(v) for k, v in times.items()}
    doc = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "calls": a.calls,
        "rounds": a.rounds,
        "us_per_call_median": med,
        "us_per_call_range": {k: [min(v), max(v)] for k, v in times.items()},
        "marks_minus_plain_us": med["marks"] - med["plain"],
        "sync_minus_plain_us": med["sync each"] - med["plain"],
    }
    print(json.dumps(doc, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
