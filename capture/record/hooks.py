"""Every CUDA graph a process captures through PyTorch, seen as it is captured: the
methods of `torch.cuda.CUDAGraph` wrapped on the class, once per process.

`capture_begin` reads the site and key (sites.py, keys.py) and starts the capture's scope
recorder; `capture_end` reads the graph from the stream before torch ends the capture (so
the program's graphs are unchanged), then its pool; `replay` counts; `reset` and collection
mark the graph released. A failure inside the recorder never reaches the program; what the
program's own calls raise is re-raised unchanged. Each method, and why not torch's graph
hooks: docs/record.md, "The wrapped methods".
"""

from __future__ import annotations

import contextlib
import sys
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from graph_harness.capture.record.settings import lock, settings
from graph_harness.capture.record.sites import frames_of

# A process's recorder installs these wrappers as torch's import completes, in every
# process that imports torch (a DataLoader's workers too): what a capture needs (the
# export, the reader, pandas' and Triton's imports behind them) comes at its first capture,
# never to a process that captures nothing.
if TYPE_CHECKING:
    from graph_harness.capture.record.capturing import Capture
    from graph_harness.capture.record.graphs import GraphRecord

_CAPTURE = "_graph_harness_capture"  # the capture in progress on a graph object
_RECORD = "_graph_harness_record"  # the graph object's latest record (replays count here)


class Listener(Protocol):
    """What is told of each capture (a process's recorder, a step's count)."""

    def captured(self, record: GraphRecord) -> None: ...


_originals: dict[str, Callable] = {}


# --- installing ------------------------------------------------------------------------------


def listen(listener: Listener) -> None:
    """Tell `listener` of every capture from now on (installs the wrappers once)."""
    with lock:
        _install()
        settings.listeners.append(listener)


def unlisten(listener: Listener) -> None:
    with lock:
        settings.listeners = [x for x in settings.listeners if x is not listener]


_periodic: list[Callable[[], None]] = []  # told every 4,096 replays of a graph
MANY_REPLAYS = 4096
_MASK = MANY_REPLAYS - 1  # a power of two: `n & _MASK` is `n % MANY_REPLAYS`


def on_many_replays(fn: Callable[[], None], *, remove: bool = False) -> None:
    """Call `fn` whenever a graph's replays reach a multiple of MANY_REPLAYS (a process's
    recorder flushes its counts then, at most every few seconds)."""
    with lock:
        if remove:
            _periodic[:] = [f for f in _periodic if f != fn]
        elif fn not in _periodic:
            _periodic.append(fn)


def _many_replays() -> None:
    for fn in list(_periodic):
        with contextlib.suppress(Exception):
            fn()


def listening() -> bool:
    return bool(settings.listeners)


def _install() -> None:
    import torch

    cls = torch.cuda.CUDAGraph
    wrappers = {
        "capture_begin": _capture_begin,
        "capture_end": _capture_end,
        "replay": _replay,
        "reset": _reset,
    }
    for name, make in wrappers.items():
        original = getattr(cls, name)
        if _ours(original):  # each method on its own: someone may have put one back
            continue
        _originals[name] = original
        wrapper = make(original)
        wrapper._graph_harness = True
        wrapper.__wrapped__ = original
        wrapper.__name__ = name
        wrapper.__qualname__ = f"CUDAGraph.{name}"
        wrapper.__doc__ = original.__doc__
        setattr(cls, name, wrapper)


def _ours(fn: object) -> bool:
    """Whether `fn`, or a wrapper around it (another tool's, installed after ours), is
    ours."""
    seen = 0
    while fn is not None and seen < 8:
        if getattr(fn, "_graph_harness", False):
            return True
        fn, seen = getattr(fn, "__wrapped__", None), seen + 1
    return False


# --- one capture ---------------------------------------------------------------------------


def _tell(record: GraphRecord) -> None:
    for listener in list(settings.listeners):
        # a listener's failure is its own, never the program's
        with contextlib.suppress(Exception):
            listener.captured(record)


# --- the wrappers ----------------------------------------------------------------------------


def _capture_begin(original: Callable) -> Callable:
    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not settings.listeners:
            return original(self, *args, **kwargs)
        try:  # the site and key, read before the capture begins
            from graph_harness.capture.record.capturing import Capture

            cap = Capture(self, frames_of(sys._getframe(1)))
        except Exception:  # not even the stack: a capture known by its order alone
            cap = None
        try:
            result = original(self, *args, **kwargs)
        except BaseException as e:
            if cap is not None:
                cap._frames = None
                with contextlib.suppress(Exception):  # the program's error goes on as it was
                    _failed_begin(cap, e)
            raise
        if cap is not None:
            mode = kwargs.get("capture_error_mode", args[1] if len(args) > 1 else "global")
            try:
                cap.begin(str(mode))
            except Exception as e:  # read at its end all the same, as far as it can be
                cap.notes.append(f"begin not read: {type(e).__name__}: {e}")
            self.__dict__[_CAPTURE] = cap
        return result

    return capture_begin


def _failed_begin(cap: Capture, e: BaseException) -> None:
    from graph_harness.capture.graph.capture import first_line
    from graph_harness.capture.record.capturing import failure_record

    _tell(failure_record(cap, "failed", f"capture_begin: {type(e).__name__}: {first_line(e)}"))


def _capture_end(original: Callable) -> Callable:
    def capture_end(self: Any, *args: Any, **kwargs: Any) -> Any:
        cap = self.__dict__.pop(_CAPTURE, None)
        if cap is None:
            return original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # first: the reads of the region alone
            cap.end_reads()
        t0 = time.perf_counter()
        if cap.form is not None:
            with contextlib.suppress(Exception):
                cap.ended(frames_of(sys._getframe(1)))
        raw, read_error = cap.read()
        cap.record_s += time.perf_counter() - t0
        try:
            result = original(self, *args, **kwargs)
        except BaseException as e:
            # the program's error goes on as it was, whatever of ours fails here
            with contextlib.suppress(Exception):
                cap.release()
            with contextlib.suppress(Exception):
                _finish(cap, self, raw, read_error, e)
            raise
        # the capture ended: nothing of ours may fail it (each part on its own)
        with contextlib.suppress(Exception):
            cap.release()
        if cap.keep_graph is None:  # torch < 2.12 keeps it in C++: a kept graph reads
            try:
                self.raw_cuda_graph()
                cap.keep_graph = True
            except Exception:
                cap.keep_graph = False
        with contextlib.suppress(Exception):
            _finish(cap, self, raw, read_error, None)
        return result

    return capture_end


def _finish(
    cap: Capture,
    graph: Any,
    raw: list | None,
    read_error: str | None,
    failed: BaseException | None,
) -> None:
    try:
        record = cap.finish(graph, raw, read_error, failed)
    except Exception as e:  # never the program's problem: a record that says so
        from graph_harness.capture.record.capturing import failure_record

        why = f"graph-harness could not record this capture: {type(e).__name__}: {e}"
        record = failure_record(cap, "failed" if failed is not None else "unread", why)
    if failed is None and cap.form is not None and settings.check is not None:
        with contextlib.suppress(Exception):  # a checker's failure leaves it unchecked
            record.live = settings.check.attach(cap.form, record, cap.pointers)
    if failed is None:
        graph.__dict__[_RECORD] = record
        # not at the interpreter's exit: a graph alive then is alive at the end
        weakref.finalize(graph, _collected, record).atexit = False
    _tell(record)


def _collected(record: GraphRecord) -> None:
    if record.released is None:
        record.released = "collected"


def _replay(original: Callable) -> Callable:
    # The hot path: no *args (replay takes none), one attribute read and write, a mask.
    def replay(self: Any) -> Any:
        record = self.__dict__.get(_RECORD)
        if record is not None:
            n = record.replays = record.replays + 1
            if not n & _MASK:
                _many_replays()
            live = record.live  # record --check: this replay checked, if it is due
            if live is not None:
                got = live.replay(self, original, n) if n >= live.next else original(self)
                live.launched(n)  # counted on the device: which replay did not finish
                return got
        return original(self)

    return replay


def _reset(original: Callable) -> Callable:
    def reset(self: Any, *args: Any, **kwargs: Any) -> Any:
        record = self.__dict__.pop(_RECORD, None)
        if record is not None and record.released is None:
            record.released = "reset"
        # a capture in progress stays: torch's reset waits for its end (capture_end
        # records it)
        return original(self, *args, **kwargs)

    return reset
