"""Where the recorder's time a graph goes, on the GPU (issue 59): examples/tiny_engine.py's
capture ladder run under cProfile and timed, with the garbage collector's passes counted
(gc.callbacks). Run it alone and under `record` for the difference:

    python benchmarks/experiments/recorder_profile.py --sizes 64 --out DIR
    graph-harness record -- python benchmarks/experiments/recorder_profile.py --sizes 64 --out DIR

Writes DIR/<alone|recorded>-<pid>.txt: the loop's seconds (profiled and not: the second
ladder is a fresh engine), the collector's passes and seconds by generation, and the
functions that took the most time by cumulative and own seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import os
import pstats
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from tiny_engine import Engine


@contextlib.contextmanager
def collector_passes() -> Iterator[dict]:
    """The garbage collector's passes and seconds by generation while the block runs
    (gc.callbacks): {"passes": [g0, g1, g2], "s": [g0, g1, g2]}. recorder_gc.py's too."""
    spent = {"s": [0.0, 0.0, 0.0], "passes": [0, 0, 0]}
    began = [0.0]

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            g = info["generation"]
            spent["s"][g] += time.perf_counter() - began[0]
            spent["passes"][g] += 1

    gc.callbacks.append(watch)
    try:
        yield spent
    finally:
        gc.callbacks.remove(watch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, default=64)
    ap.add_argument("--piecewise", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    sizes = list(range(1, a.sizes + 1))
    recorded = "graph_harness.capture.record.hooks" in sys.modules
    lines = [f"recorded: {recorded}  sizes: 1..{a.sizes}  piecewise: {a.piecewise}"]
    # first a plain timed ladder (no profiler), then a profiled one, each a fresh engine
    for profiled in (False, True):
        engine = Engine(sizes, piecewise=a.piecewise)
        prof = cProfile.Profile() if profiled else None
        with collector_passes() as spent:
            t0 = time.perf_counter()
            if prof is not None:
                prof.enable()
            engine.capture()
            if prof is not None:
                prof.disable()
            loop = time.perf_counter() - t0
        graphs = sum(len(g) for g in engine.graphs.values())
        lines.append(
            f"{'profiled' if profiled else 'timed'}: {graphs} graphs, loop {loop:.4f} s "
            f"({loop / max(graphs, 1) * 1e3:.3f} ms a graph); gc passes {spent['passes']} "
            f"seconds {[round(s, 4) for s in spent['s']]}"
        )
        if prof is not None:
            for key in ("cumulative", "tottime"):
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats(key).print_stats(45)
                lines += [f"--- by {key}", text.getvalue()]
        del engine
    a.out.mkdir(parents=True, exist_ok=True)
    name = f"{'recorded' if recorded else 'alone'}-{os.getpid()}.txt"
    (a.out / name).write_text("\n".join(lines) + "\n")
    print(lines[0], lines[1], lines[2], sep="\n")


if __name__ == "__main__":
    main()
