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


def main() -> None:
    x = torch.zeros(256, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph.capture_begin()
        for _ in range(1000):
            x.add_(1)
        graph.capture_end()
    rt, raw = runtime(), graph.raw_cuda_graph()
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    held = []
    try:
        for _ in range(COPIES):
            (ex,) = ok(rt.cudaGraphInstantiateWithFlags(raw, AUTO_FREE_ON_LAUNCH), "instantiate")
            held.append(ex)
            ok(rt.cudaGraphUpload(ex, stream.cuda_stream), "cudaGraphUpload")
        torch.cuda.synchronize()
        bulk = (free0 - torch.cuda.mem_get_info()[0]) / COPIES
    finally:
        for ex in held:
            rt.cudaGraphExecDestroy(ex)
    got = exec_size(graph, stream)
    print(json.dumps({"bulk": bulk, "bytes": got.bytes, "spread": got.spread}))


if __name__ == "__main__":
    main()
