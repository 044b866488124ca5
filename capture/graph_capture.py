"""Capturing work into a CUDA graph the way PyTorch does (torch/cuda/graphs.py): warm up
on a side stream, share one graph memory pool, capture on a non-default stream, keep the
graph (`keep_graph=True`) so it can be read, and record scope frontiers as it goes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from graph_harness.capture.graph_reader import capture_frontier
from graph_harness.capture.params import StepSettings
from graph_harness.capture.scopes import Recorder, ScopeMark, recording


class CaptureError(RuntimeError):
    """Capture failed; says in which scope (stage and step) it happened."""


@dataclass
class Captured:
    graph: torch.cuda.CUDAGraph  # kept: raw_cuda_graph() is readable
    marks: list[ScopeMark]  # the scope boundaries, with their capture frontiers
    output: object = None  # what the captured call returned: each replay rewrites it


class WarmupWatch(Protocol):
    """Hooks around each warm-up call (capture/state.py StateWatch: resets, fingerprints)."""

    def before(self, i: int, n: int) -> None: ...

    def after(self, i: int, n: int, output: object) -> None: ...


def warm_up(fn: Callable[[], object], warmup: int, watch: WarmupWatch | None = None) -> None:
    """Call `fn` `warmup` times (on the current stream), `watch` around each call."""
    for i in range(warmup):
        if watch is not None:
            watch.before(i, warmup)
        out = fn()
        if watch is not None:
            watch.after(i, warmup, out)
        del out


def capture_graph(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    graph_pool=None,
    stream: torch.cuda.Stream | None = None,
    capture_error_mode: str = "global",
    watch: WarmupWatch | None = None,
) -> Captured:
    """Warm `fn` up on a side stream (`watch` around each warm-up call), then capture one
    call of it (syncs the device); the captured call's return value is kept.

    A failure inside a scope raises CaptureError naming that scope; the failed capture is
    ended and discarded, so the process can capture again. `capture_error_mode` as in
    torch.cuda.graph: "thread_local" lets other threads (NCCL's watchdog) keep working."""
    if stream is not None and stream == torch.cuda.default_stream(stream.device):
        raise ValueError(
            "cannot capture on the default stream (legacy default-stream semantics forbid "
            "it); pass stream=None to use a side stream, or a torch.cuda.Stream() of yours"
        )
    stream = stream or torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # lazy init (compiles, handles, allocator growth) stays out of the capture
        warm_up(fn, warmup, watch)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    # As torch.cuda.graph does: release cached device and pinned-host blocks, which also
    # retires shared pools whose graphs have all died (capturing into such a pool again
    # trips the allocators' assertion `use_count > 0`).
    torch.cuda.empty_cache()
    if hasattr(torch._C, "_host_emptyCache"):
        torch._C._host_emptyCache()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    recorder = Recorder(frontier=lambda: capture_frontier(stream))
    with torch.cuda.stream(stream):
        graph.capture_begin(pool=graph_pool, capture_error_mode=capture_error_mode)
        try:
            with recording(recorder):
                output = fn()
        except BaseException as e:
            _abandon(graph)
            failed = recorder.innermost_failed()
            where = failed.label if failed else "outside any scope"
            raise CaptureError(
                f"capture failed in {where}: {type(e).__name__}: {e}. Inside a capture, "
                "nothing may synchronize (.item(), .cpu(), printing a CUDA tensor) or "
                "allocate from a frozen pool; move that work before capture."
            ) from e
        graph.capture_end()
    return Captured(graph, recorder.marks, output)


def _abandon(graph: torch.cuda.CUDAGraph) -> None:
    # End the (invalidated) capture so the stream leaves capture mode; its error is the
    # one we already have.
    with contextlib.suppress(Exception):
        graph.capture_end()
    with contextlib.suppress(Exception):
        graph.reset()
    torch.cuda.synchronize()
