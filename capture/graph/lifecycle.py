"""What a graph costs beyond its replays: capture, instantiate, upload, update in place,
and the device memory its executable holds outside the caching allocator.

For a callable, after `warmup` calls on a side stream, `repeats` rounds of each, timed on
the host (time.perf_counter_ns) from an idle device; update is cudaGraphExecUpdate from a
second capture, beside re-capturing's cost, with the driver's result; executable memory is
cudaMemGetInfo around instantiate + upload and destroy (2 MiB pages). Each measure:
docs/sweep.md, "What a graph costs beyond its replays". Needs CUDA; syncs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import torch

from graph_harness.capture.graph.capture import abandon_capture, warm_up
from graph_harness.capture.graph.pages import PAGE
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.graph.settings import StepSettings


@dataclass(frozen=True, kw_only=True)
class Lifecycle:
    """One callable's graph, from capture to destroy: medians over `samples`' rounds
    (microseconds; bytes)."""

    nodes: int
    capture_us: float
    instantiate_us: float
    upload_us: float
    update_us: float  # cudaGraphExecUpdate from an equal-topology re-capture
    recapture_us: float  # that re-capture's capture + instantiate: what update replaces
    update_result: str  # "success", or the driver's reason for refusing
    exec_bytes: int  # free device memory lost across instantiate + upload
    returned_bytes: int  # free device memory back once the graph is destroyed
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def below_a_page(self) -> bool:
        """The executable's memory is under the driver's 2 MiB page: not resolved here."""
        return self.exec_bytes < PAGE


def runtime() -> ModuleType:
    """cuda-bindings' runtime module (imported on first use: the CPU never needs it)."""
    from cuda.bindings import runtime as rt

    return rt


def ok(got: tuple, what: str) -> tuple:
    """What a cuda-bindings call returned after its error code, the code checked
    (RuntimeError naming the call and the code)."""
    err, *rest = got
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")
    return tuple(rest)


def timed_us(fn: Callable[[], object]) -> tuple[float, object]:
    """`fn()` timed on the host from an idle device (it syncs first): microseconds, and
    what it returned."""
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    out = fn()
    return (time.perf_counter_ns() - t0) / 1e3, out


def capture_kept(
    fn: Callable[[], object], stream: torch.cuda.Stream, pool: tuple[int, int]
) -> torch.cuda.CUDAGraph:
    """One call of `fn` captured on `stream` into `pool`, the graph kept (nothing
    instantiated); a capture that fails is ended before `fn`'s error goes up."""
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.stream(stream):
        graph.capture_begin(pool=pool)
        try:
            fn()
            graph.capture_end()
        except BaseException:
            abandon_capture(graph)  # fn's own error goes up, not an invalidated capture's
            raise
    return graph


def update_result(rt: ModuleType, got: tuple) -> str:
    """ "success", or why the driver refused the update (the executable is then left as
    it was). The refusal is also cleared from the runtime that returned it (cuda-bindings'
    own: torch's launch checks never see it)."""
    err, *rest = got
    if int(err) == 0:
        return "success"
    rt.cudaGetLastError()
    result = getattr(rest[0], "result", None) if rest else None
    name = getattr(result, "name", None) or getattr(err, "name", str(err))
    return name.removeprefix("cudaGraphExecUpdate")


def recapture_us(
    fn: Callable[[], object], stream: torch.cuda.Stream, pool: tuple[int, int], repeats: int
) -> tuple[float, float]:
    """What re-capturing `fn` and instantiating the graph costs, as an engine pays it
    instead of updating an executable it has: the medians over `repeats` rounds of the
    capture's and the instantiate's host time (microseconds), each graph destroyed after
    (its blocks back to `pool`). `fn` is captured, never run. Needs CUDA; syncs."""
    capture, instantiate = [], []
    for _ in range(repeats):
        us, graph = timed_us(lambda: capture_kept(fn, stream, pool))
        capture.append(us)
        instantiate.append(timed_us(graph.instantiate)[0])
        graph.reset()
    torch.cuda.synchronize()
    return statistics.median(capture), statistics.median(instantiate)


@dataclass(frozen=True)
class Executable:
    """One kept graph made executable ahead of its first replay (instantiate_and_upload):
    host times in seconds, and the device memory its executable took outside the caching
    allocator (free memory lost across the two, to the driver's 2 MiB page)."""

    instantiate_s: float
    upload_s: float
    exec_bytes: int


def instantiate_and_upload(
    graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream | None = None
) -> Executable:
    """Instantiate a kept graph (`graph.instantiate()`) and upload it (cudaGraphUpload on
    `stream`, default the current one), each timed on the host from an idle device, free
    memory read before and after: what its first replay would otherwise pay inside the
    first launch. Needs CUDA; syncs."""
    rt = runtime()
    stream = stream or torch.cuda.current_stream()
    torch.cuda.synchronize()
    free0 = torch.cuda.mem_get_info()[0]
    instantiate_us = timed_us(graph.instantiate)[0]

    def upload() -> None:
        ok(rt.cudaGraphUpload(graph.raw_cuda_graph_exec(), stream.cuda_stream), "cudaGraphUpload")
        stream.synchronize()

    upload_us = timed_us(upload)[0]
    torch.cuda.synchronize()
    return Executable(instantiate_us / 1e6, upload_us / 1e6, free0 - torch.cuda.mem_get_info()[0])


def measure_lifecycle(
    fn: Callable[[], object], *, repeats: int = 5, warmup: int = StepSettings.warmup
) -> Lifecycle:
    """`fn`'s graph from capture to destroy (module docstring), over `repeats` rounds.
    `fn` is called `warmup` times, and captured 2 x `repeats` times (never run by a
    capture); the updated executable is replayed once per round."""
    if not torch.cuda.is_available():
        raise RuntimeError(
            "a graph's instantiate, upload and update are the driver's: they need CUDA"
        )
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    rt = runtime()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        warm_up(fn, warmup, None)
    torch.cuda.synchronize()
    keys = ("capture", "instantiate", "upload", "update", "recapture", "exec", "returned")
    s: dict[str, list[float]] = {k: [] for k in keys}
    results, nodes = [], 0
    for _ in range(repeats):
        # A pool of its own each round, the cache emptied first (outside every timed span):
        # a pool whose graphs have all been destroyed cannot be captured into again (the
        # allocator's `use_count > 0`), and free memory is read against a steady allocator.
        torch.cuda.empty_cache()
        pool = torch.cuda.graph_pool_handle()
        us, graph = timed_us(lambda pool=pool: capture_kept(fn, stream, pool))
        s["capture"].append(us)
        nodes = len(read_graph(graph.raw_cuda_graph()))
        torch.cuda.synchronize()
        free0 = torch.cuda.mem_get_info()[0]
        s["instantiate"].append(timed_us(graph.instantiate)[0])

        def upload(graph: torch.cuda.CUDAGraph = graph) -> None:
            got = rt.cudaGraphUpload(graph.raw_cuda_graph_exec(), stream.cuda_stream)
            ok(got, "cudaGraphUpload")
            stream.synchronize()

        s["upload"].append(timed_us(upload)[0])
        torch.cuda.synchronize()
        free1 = torch.cuda.mem_get_info()[0]
        s["exec"].append(free0 - free1)
        capture_us, again = timed_us(lambda pool=pool: capture_kept(fn, stream, pool))
        update_us, got = timed_us(
            lambda g=graph, a=again: rt.cudaGraphExecUpdate(
                g.raw_cuda_graph_exec(), a.raw_cuda_graph()
            )
        )
        results.append(update_result(rt, got))
        s["update"].append(update_us)
        s["recapture"].append(capture_us + timed_us(again.instantiate)[0])
        with torch.cuda.stream(stream):
            graph.replay()  # the updated executable runs
        torch.cuda.synchronize()
        again.reset()  # the re-capture's executable first: the window below is graph's alone
        torch.cuda.synchronize()
        held = torch.cuda.mem_get_info()[0]
        graph.reset()
        torch.cuda.synchronize()
        s["returned"].append(torch.cuda.mem_get_info()[0] - held)
    med = {k: statistics.median(v) for k, v in s.items()}
    return Lifecycle(
        nodes=nodes,
        capture_us=med["capture"],
        instantiate_us=med["instantiate"],
        upload_us=med["upload"],
        update_us=med["update"],
        recapture_us=med["recapture"],
        update_result=statistics.mode(results),
        exec_bytes=int(med["exec"]),
        returned_bytes=int(med["returned"]),
        samples=s,
    )
