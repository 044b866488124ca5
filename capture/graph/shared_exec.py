"""One executable shared by several kept graphs, switched between them by
cudaGraphExecUpdate, as an engine that keeps one for all its batch sizes does (SGLang,
sgl-project/sglang #29625); and a kept graph's own executable launched the same way.

Both launch with cudaGraphLaunch on the current stream, never `CUDAGraph.replay()` (which
also advances torch's random generators), and the shared one is instantiated with the first
graph's own flags, so the two differ only in the executable (docs/sweep.md, "Launching
shared and own executables"). Needs CUDA and cuda-bindings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from graph_harness.capture.graph.lifecycle import ok, runtime, update_result

# torch instantiates with this flag (CUDA 11.4 on); used where a graph's own executable
# cannot be asked
AUTO_FREE_ON_LAUNCH = 1


@dataclass(frozen=True)
class Update:
    """One cudaGraphExecUpdate: "success", or the driver's reason for refusing it
    (cudaGraphExecUpdateResult without its prefix: "ErrorTopologyChanged"), the node of
    the new graph it named (its handle, None where it named none) and the host time of
    the call (ns)."""

    result: str
    error_node: int | None
    host_ns: int

    @property
    def succeeded(self) -> bool:
        return self.result == "success"


def instantiate_flags(graph: torch.cuda.CUDAGraph) -> int:
    """The flags `graph`'s own executable was instantiated with (instantiated already)."""
    rt = runtime()
    err, flags = rt.cudaGraphExecGetFlags(graph.raw_cuda_graph_exec())
    if int(err) != 0:  # a driver before CUDA 12.0
        rt.cudaGetLastError()
        return AUTO_FREE_ON_LAUNCH
    return int(flags)


def launch_exec(raw_exec: int) -> None:
    """cudaGraphLaunch of an executable on the current stream (no generator advanced)."""
    ok(runtime().cudaGraphLaunch(raw_exec, torch.cuda.current_stream().cuda_stream),
       "cudaGraphLaunch")  # fmt: skip


class OwnExecutable:
    """A kept graph's own executable (torch's, instantiated), launched as the shared one
    is (module docstring)."""

    def __init__(self, graph: torch.cuda.CUDAGraph) -> None:
        self.graph = graph

    def replay(self) -> None:
        launch_exec(self.graph.raw_cuda_graph_exec())


class SharedExecutable:
    """One executable of our own, instantiated from `graph` (its `origin`: the graph whose
    values it keeps for whatever an update does not carry), then updated to others."""

    def __init__(self, graph: torch.cuda.CUDAGraph) -> None:
        self.flags = instantiate_flags(graph)
        self.raw = 0
        self.origin = graph
        self.reinstantiate(graph)

    def reinstantiate(self, graph: torch.cuda.CUDAGraph) -> None:
        """What an engine does where an update is refused: a new executable of `graph`."""
        rt = runtime()
        self.close()
        (exe,) = ok(rt.cudaGraphInstantiateWithFlags(graph.raw_cuda_graph(), self.flags),
                    "cudaGraphInstantiateWithFlags")  # fmt: skip
        self.raw, self.origin = int(exe), graph

    def update(self, graph: torch.cuda.CUDAGraph) -> Update:
        """cudaGraphExecUpdate to `graph`, timed on the host around the call alone. A
        refusal leaves the executable as it was (the driver's contract)."""
        rt = runtime()
        raw = graph.raw_cuda_graph()
        t0 = time.perf_counter_ns()
        got = rt.cudaGraphExecUpdate(self.raw, raw)
        ns = time.perf_counter_ns() - t0
        info = got[1] if len(got) > 1 else None
        node = int(getattr(info, "errorNode", 0) or 0) if info is not None else 0
        return Update(update_result(rt, got), node or None, ns)

    def replay(self) -> None:
        launch_exec(self.raw)

    def close(self) -> None:
        if self.raw:
            ok(runtime().cudaGraphExecDestroy(self.raw), "cudaGraphExecDestroy")
            self.raw = 0
