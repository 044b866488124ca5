"""One executable's device memory, resolved below the driver's 2 MiB page (issue 58, item 3):
a graph of N kernel nodes (a chain of in-place adds on a small tensor, captured once, kept),
per instantiate flag set (none, auto-free-on-launch: torch's, upload: cudaGraphUpload after
instantiating, device launch: the graph must then hold kernels only), measured two ways: C
copies held at once, read as one drop (cudaMemGetInfo before and after, over C; then what
comes back once they are destroyed), then copies made one at a time, free memory read after
each (capture/graph/exec_size.py: the pages the driver held before cancel out). The driver
keeps the pages of destroyed executables and hands them to the next, so every held figure
after the first node count's first flag set is short by what came before: the jumps'
figure is the one to read. A refused flag is said.

    python benchmarks/experiments/exec_memory.py [--nodes 1 10 100 1000 5000] [--copies 64]
        [--flags none auto-free upload device-launch] [--json FILE]

`--flags` picks the flag sets and their order: a set measured first in a fresh process
finds no pages held by earlier rows (device launch at 5,000 nodes read 93 KB after three
sets of 5,000, session 28: copies that fit the held pages move free memory by noise).

Prints one JSON line per row (nodes, flags, bytes per executable with its spread, the held
copies' figure, bytes returned). Needs CUDA and cuda-bindings.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from graph_harness.capture.graph.exec_size import exec_size
from graph_harness.capture.graph.lifecycle import ok, runtime

FLAGS = {"none": 0, "auto-free": 1, "upload": 0, "device-launch": 4}  # cudaGraphInstantiateFlag*


def chain(nodes: int) -> torch.cuda.CUDAGraph:
    """A kept graph of `nodes` kernel nodes: in-place adds on one small tensor."""
    x = torch.zeros(256, device="cuda")
    x.add_(1)  # the kernel loaded before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph.capture_begin()
        for _ in range(nodes):
            x.add_(1)
        graph.capture_end()
    graph._x = x  # the tensor the graph writes stays alive with it
    return graph


def free_bytes() -> int:
    torch.cuda.synchronize()
    return int(ok(runtime().cudaMemGetInfo(), "cudaMemGetInfo")[0])


def measure(graph: torch.cuda.CUDAGraph, name: str, copies: int) -> dict:
    """Flag set `name`: `copies` copies held at once, read as one drop (short by what the
    driver held before: the first flag set's is the one to set beside the jumps'); then one
    executable's bytes from the page jumps (exec_size: what was held cancels out)."""
    rt = runtime()
    stream = torch.cuda.current_stream()
    raw, upload = graph.raw_cuda_graph(), name == "upload"
    before, made = free_bytes(), []
    try:
        for _ in range(copies):
            (ex,) = ok(rt.cudaGraphInstantiateWithFlags(raw, FLAGS[name]), f"instantiate {name}")
            made.append(ex)
            if upload:
                ok(rt.cudaGraphUpload(ex, stream.cuda_stream), "cudaGraphUpload")
        held = before - free_bytes()
    except RuntimeError as e:
        rt.cudaGetLastError()
        return {"flags": name, "refused": str(e)}
    finally:
        for ex in made:
            rt.cudaGraphExecDestroy(ex)
    back = free_bytes() - (before - held)
    each = exec_size(graph, stream, flags=FLAGS[name], upload=upload)
    return {
        "flags": name,
        "bytes_per_executable": each.bytes,
        "spread": each.spread,
        "jump_copies": each.copies,
        "held_copies": copies,
        "held_bytes_per_executable": held / copies,
        "bytes_returned": back,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 10, 100, 1000, 5000])
    ap.add_argument("--copies", type=int, default=64)
    ap.add_argument("--flags", nargs="+", choices=list(FLAGS), default=list(FLAGS))
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for n in a.nodes:
        graph = chain(n)
        for name in a.flags:
            rows.append({"nodes": n, **measure(graph, name, a.copies)})
            print(json.dumps(rows[-1]), flush=True)
        graph.reset()
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
