"""One executable's bytes two ways, for test_exec_size.py's GPU test, in a process of its
own so that no pages are held from before: a 1,000-node graph's 48 copies held at once
(one drop, over 48), then exec_size's jumps. Prints one JSON line.

    python -m tests.capture.graph.exec_copies
"""

from __future__ import annotations

import json

import torch

from graph_harness.capture.graph.exec_size import AUTO_FREE_ON_LAUNCH, exec_size
from graph_harness.capture.graph.lifecycle import ok, runtime

COPIES = 48


def kept_chain(nodes: int) -> tuple[torch.cuda.CUDAGraph, torch.cuda.Stream]:
    """A kept graph of `nodes` in-place adds on a small tensor (alive with the graph), and
    the stream it was captured on."""
    x = torch.zeros(64, device="cuda")
    x.add_(1)  # the kernel loaded before the capture
    torch.cuda.synchronize()
    graph, stream = torch.cuda.CUDAGraph(keep_graph=True), torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph.capture_begin()
        for _ in range(nodes):
            x.add_(1)
        graph.capture_end()
    graph._x = x
    return graph, stream


def copy_of(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream) -> object:
    """One more executable of `graph`, instantiated as torch does and uploaded, as the
    sweep's are (the caller destroys it)."""
    rt = runtime()
    (ex,) = ok(rt.cudaGraphInstantiateWithFlags(graph.raw_cuda_graph(), AUTO_FREE_ON_LAUNCH),
               "instantiate")  # fmt: skip
    ok(rt.cudaGraphUpload(ex, stream.cuda_stream), "cudaGraphUpload")
    return ex


def main() -> None:
    graph, stream = kept_chain(1000)
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    held = []
    try:
        for _ in range(COPIES):
            held.append(copy_of(graph, stream))
        torch.cuda.synchronize()
        bulk = (free0 - torch.cuda.mem_get_info()[0]) / COPIES
    finally:
        for ex in held:
            runtime().cudaGraphExecDestroy(ex)
    got = exec_size(graph, stream)
    print(json.dumps({"bulk": bulk, "bytes": got.bytes, "spread": got.spread}))


if __name__ == "__main__":
    main()
