"""One executable's device memory, resolved below the driver's 2 MiB page (issue 58, item 3):
a graph of N kernel nodes (a chain of in-place adds on a small tensor, captured once, kept),
instantiated C times (cudaGraphInstantiateWithFlags on the kept graph: C executables of one
graph), each uploaded where the flag asks; the device's free memory (cudaMemGetInfo, the
caching allocator untouched between the reads) before and after, divided by C, and again
after all C are destroyed (what comes back). Per node count and per instantiate flag set:
none, auto-free-on-launch (torch's), upload (cudaGraphUpload after instantiating), device
launch (the graph must then hold kernels only). A flag set the driver refuses is said.

    python benchmarks/experiments/exec_memory.py [--nodes 1 10 100 1000 5000] [--copies 64]
        [--json FILE]

Prints one JSON document: rows of nodes, flags, copies, bytes per executable, bytes
returned, and the page count the C executables took. Needs CUDA and cuda-bindings.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from graph_harness.capture.graph.lifecycle import PAGE, ok, runtime

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
    """`copies` executables of `graph` with flag set `name`; free memory around them."""
    rt = runtime()
    stream = torch.cuda.current_stream().cuda_stream
    raw = graph.raw_cuda_graph()
    before = free_bytes()
    made = []
    try:
        for _ in range(copies):
            (ex,) = ok(rt.cudaGraphInstantiateWithFlags(raw, FLAGS[name]), f"instantiate {name}")
            made.append(ex)
            if name == "upload":
                ok(rt.cudaGraphUpload(ex, stream), "cudaGraphUpload")
    except RuntimeError as e:
        rt.cudaGetLastError()
        for ex in made:
            rt.cudaGraphExecDestroy(ex)
        return {"flags": name, "refused": str(e)}
    held = before - free_bytes()
    for ex in made:
        ok(rt.cudaGraphExecDestroy(ex), "cudaGraphExecDestroy")
    back = free_bytes() - (before - held)
    return {
        "flags": name,
        "copies": copies,
        "bytes_per_executable": held / copies,
        "pages_taken": held / PAGE,
        "bytes_returned": back,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 10, 100, 1000, 5000])
    ap.add_argument("--copies", type=int, default=64)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for n in a.nodes:
        graph = chain(n)
        for name in FLAGS:
            rows.append({"nodes": n, **measure(graph, name, a.copies)})
            print(json.dumps(rows[-1]), flush=True)
        graph.reset()
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
