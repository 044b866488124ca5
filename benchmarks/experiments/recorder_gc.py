"""The recorder's own time a capture on the CPU, with the driver's side stood in (as
tests/capture/record/conftest.py does), and what Python's garbage collector takes of it
(issue 59: the mean a graph is what a ladder pays; the median leaves out full passes):
`record` wrapped around a stand-in CUDAGraph whose capture reads NODES stood-in nodes,
a small eager step (20 matmuls) in each region, the records kept as `record` keeps them.

    python benchmarks/experiments/recorder_gc.py [--captures 200] [--nodes 200] [--alone]
        [--json F]

Prints record_s's mean, median and largest, the capture loop's milliseconds a capture,
and the collector's time and passes by generation over the same captures (gc.callbacks).
`--alone`: the same loop with nobody listening (the program alone), for the difference.
No GPU: node reads and pool reads are stood in, so their cost is not in it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from graph_harness.capture.graph.reader import RawNode
from graph_harness.capture.record import hooks, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.capture.record.standin import Graph, Sink, stand_in_driver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recorder_profile import collector_passes


def stand_in(nodes: int) -> Sink:
    """The recorder's wrappers on the stand-in graph class, its driver reads stood in."""
    raw = [
        RawNode(handle=i, kind="kernel", kernel=f"kernel_{i % 7}", grid=(1, 1, 1),
                block=(32, 1, 1), deps=(i - 1,) if i else ())
        for i in range(nodes)
    ]  # fmt: skip
    stand_in_driver(setattr, raw)
    settings.configure(adapters=[], module_scopes=False)
    sink = Sink()
    hooks.listen(sink)
    return sink


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--captures", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--alone", action="store_true", help="nobody listening: the program alone")
    ap.add_argument("--json")
    a = ap.parse_args()
    sink = stand_in(a.nodes)
    if a.alone:
        hooks.unlisten(sink)
    ids, w = torch.arange(8), torch.randn(16, 16)

    def capture(b: int) -> None:
        g = Graph([])
        g.capture_begin()
        x = torch.nn.functional.embedding(ids[:b], w)
        for _ in range(20):
            x = torch.relu(x @ w)
        g.capture_end()

    for b in (1, 2):  # warm-up
        capture(b)
    sink.records.clear()
    with collector_passes() as spent:
        t0 = time.perf_counter()
        for i in range(a.captures):
            capture(1 + i % 8)
        loop_s = time.perf_counter() - t0
    own = [r.record_s * 1e3 for r in sink.records] or [0.0]
    out = {
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "captures": a.captures,
        "nodes": a.nodes,
        "record_ms_mean": statistics.mean(own),
        "record_ms_median": statistics.median(own),
        "record_ms_max": max(own),
        "alone": a.alone,
        "loop_ms_per_capture": loop_s / a.captures * 1e3,
        "gc_ms_per_capture": sum(spent["s"]) / a.captures * 1e3,
        "gc_passes_by_generation": spent["passes"],
    }
    print(json.dumps(out))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
