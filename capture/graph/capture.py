"""Capturing work into a CUDA graph the way PyTorch does (torch/cuda/graphs.py): warm up
on a side stream, share one graph memory pool, capture on a non-default stream, keep the
graph (`keep_graph=True`) so it can be read, and record scope frontiers as it goes.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.graph.memory import AllocationLog
from graph_harness.capture.graph.reader import capture_frontier
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.scopes.recorder import Recorder, ScopeKey, ScopeMark, recording

# torch.cuda.graph's capture_error_mode: what other threads may do during a capture
CaptureErrorMode = Literal["global", "thread_local", "relaxed"]


class CaptureError(HarnessError, RuntimeError):
    """Capture failed; says at which op, in which module or scope, and why, in one line."""


@dataclass
class Captured:
    graph: torch.cuda.CUDAGraph  # kept: raw_cuda_graph() is readable
    marks: list[ScopeMark]  # the scope boundaries, with their capture frontiers
    output: object = None  # what the captured call returned: each replay rewrites it


class WarmupWatch(Protocol):
    """Hooks around each warm-up call (capture/state/steps.py StateWatch: resets, fingerprints)."""

    def before(self, i: int, n: int) -> None: ...

    def after(self, i: int, n: int, output: object) -> None: ...

    def before_capture(self) -> None: ...


class WarmupError(RuntimeError):
    """The step failed at a warm-up call after the first, with no reset between them: the
    message says the calls before it advanced its state; the step's error is the cause."""


def warm_up(fn: Callable[[], object], warmup: int, watch: WarmupWatch | None = None) -> None:
    """Call `fn` `warmup` times (on the current stream), `watch` around each call."""
    for i in range(warmup):
        if watch is not None:
            watch.before(i, warmup)
        try:
            out = fn()
        except Exception as e:
            if i == 0 or getattr(watch, "reset", None) is not None:
                raise
            # the first call worked: a step with state (a cache filled call by call) may have
            # run past its end because nothing took it back between the calls
            raise WarmupError(
                f"warm-up call {i + 1} of {warmup} failed ({type(e).__name__}: "
                f"{first_line(e)}) after {i} that worked; the step has no step.reset, so "
                f"each call advanced whatever state it keeps: a static cache must hold "
                f"--warmup + 1 calls ({warmup + 1} here), or give the step a reset "
                "(docs/steps-and-check.md)"
            ) from e
        if watch is not None:
            watch.after(i, warmup, out)
        del out


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def capture_graph(
    fn: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    graph_pool: tuple[int, int] | None = None,
    stream: torch.cuda.Stream | None = None,
    capture_error_mode: CaptureErrorMode = "global",
    watch: WarmupWatch | None = None,
    allocations: AllocationLog | None = None,
) -> Captured:
    """Warm `fn` up on a side stream (`watch` around each warm-up call), then capture one
    call of it (syncs the device); the captured call's return value is kept.

    A failure raises CaptureError naming the op in flight, its module (or scope) and the
    class of failure, found by capturing the step again (capture/graph/diagnose/failure.py says how
    often); every failed capture is ended and discarded, so the process can capture again.
    `capture_error_mode` as in torch.cuda.graph: "thread_local" lets other threads (NCCL's
    watchdog) keep working. `allocations`: tags every allocation the capture makes with
    the scopes open (capture/graph/memory.py)."""
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
        if watch is not None:
            watch.before_capture()  # eager work, on this stream, before capture begins
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()

    # As torch.cuda.graph does: release cached device and pinned-host blocks, which also
    # retires shared pools whose graphs have all died (capturing into such a pool again
    # trips the allocators' assertion `use_count > 0`).
    torch.cuda.empty_cache()
    if hasattr(torch._C, "_host_emptyCache"):
        torch._C._host_emptyCache()
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    recorder = Recorder(
        frontier=lambda: capture_frontier(stream),
        on_change=allocations.change if allocations is not None else None,
    )
    with torch.cuda.stream(stream):
        if allocations is not None:
            allocations.begin()
        graph.capture_begin(pool=graph_pool, capture_error_mode=capture_error_mode)
        try:
            with recording(recorder):
                output = fn()
            graph.capture_end()  # where work forked to another stream was never joined
        except Exception as e:
            abandon_capture(graph)
            if allocations is not None:  # before the diagnosis captures the step again
                allocations.end()
                allocations = None
            failed = recorder.innermost_failed()
            raise CaptureError(_failure_line(fn, e, failed, stream, capture_error_mode)) from e
        except BaseException:  # Ctrl-C, SystemExit: end the capture, then let it go on
            abandon_capture(graph)
            raise
        finally:
            if allocations is not None:
                allocations.end()
    return Captured(graph, recorder.marks, output)


def _failure_line(
    fn: Callable[[], object],
    exc: BaseException,
    failed: ScopeKey | None,
    stream: torch.cuda.Stream,
    capture_error_mode: CaptureErrorMode,
) -> str:
    # Imported here: diagnosing is for failures only (capture/graph/diagnose/failure.py says
    # how often it captures the step again to name the op, its module and the class of
    # failure).
    from graph_harness.capture.graph.diagnose.failure import failure_line

    def attempt(call: Callable[[], object]) -> BaseException | None:
        return try_capture(call, stream=stream, capture_error_mode=capture_error_mode)

    return failure_line(fn, exc, scope=failed.label if failed else None, attempt=attempt)


def try_capture(
    call: Callable[[], object], *, stream: torch.cuda.Stream, capture_error_mode: CaptureErrorMode
) -> BaseException | None:
    """Capture one call of `call` on a fresh graph and throw the graph away (nothing is
    instantiated or run): what the call or the capture's end raised, None if it captured.
    Ends with `stream` not capturing and the device synchronized, or raises saying so."""
    graph = torch.cuda.CUDAGraph(keep_graph=True)  # kept: no instantiation at its end
    stream.wait_stream(torch.cuda.current_stream())
    failed = None
    # an attempt may capture nothing (a submodule alone, up to the op that fails): torch's
    # "The CUDA Graph is empty" warning there is ours to know, not the user's to read
    quiet = warnings.catch_warnings()
    with quiet, torch.cuda.stream(stream):
        warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
        graph.capture_begin(capture_error_mode=capture_error_mode)
        try:
            call()
            graph.capture_end()
        except Exception as e:
            failed = e
            abandon_capture(graph)
        except BaseException:
            abandon_capture(graph)
            raise
        else:
            graph.reset()
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("the stream is still capturing after a capture attempt")
    torch.cuda.synchronize()
    return failed


def abandon_capture(graph: torch.cuda.CUDAGraph) -> None:
    """End a capture that failed (invalidated or not) so the stream leaves capture mode,
    and discard its graph; the error is the one the caller already has."""
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
        graph.capture_end()
    with contextlib.suppress(Exception):
        graph.reset()
    torch.cuda.synchronize()
    _end_generator_capture()


def _end_generator_capture() -> None:
    """A capture that failed can leave the CUDA default generator marked as capturing
    (torch runs its capture epilogue only in a capture_end that succeeds), and every
    random op after it raises "Offset increment outside graph capture encountered
    unexpectedly" (seen on the H200, torch 2.11: a test drawing torch.randn after a
    failed capture). One throwaway capture that draws a random number and ends cleanly
    runs the generator's prologue and epilogue again; its state (seed, offset) is put back
    as it was, so the step's random numbers are not moved. Best effort: never raises."""
    with contextlib.suppress(Exception):
        dev = torch.cuda.current_device()
        saved = torch.cuda.get_rng_state(dev)
        buf = torch.empty(1, device=dev)  # allocated before the capture, not inside it
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream())
        healer = torch.cuda.CUDAGraph()
        if hasattr(healer, "register_generator_state"):  # where graphs take it explicitly
            healer.register_generator_state(torch.cuda.default_generators[dev])
        with torch.cuda.stream(side):
            healer.capture_begin()
            try:
                buf.uniform_()
            finally:
                healer.capture_end()
        torch.cuda.synchronize()
        del healer
        torch.cuda.set_rng_state(saved, dev)
