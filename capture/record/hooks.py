"""Every CUDA graph a process captures through PyTorch, seen as it is captured: the
methods of `torch.cuda.CUDAGraph` wrapped on the class, once per process.

`torch.cuda.graph`, `make_graphed_callables`, Inductor's cudagraph trees
(`mode="reduce-overhead"`) and the engines built on them (vLLM's `CUDAGraphWrapper`,
SGLang's runner) all capture through `CUDAGraph.capture_begin` and `capture_end`, and
replay through `CUDAGraph.replay`; wrapping those four methods (and `reset`) sees every
graph they make, with no change to the program:

- `capture_begin`: the site and key are read off the stack (capture/record/sites.py, an
  engine's adapter first: keys.py), the capture's stream and pool noted, and a scope
  recorder made active for it (module scopes, when asked for).
- `capture_end`: before torch ends the capture, the graph under construction is read
  from the stream (`cudaStreamGetCaptureInfo` gives the graph being captured, which the
  driver lets a reader walk while the capture is open), so the count is the driver's
  whatever `keep_graph` the program chose: its graphs instantiate, replay and are freed
  exactly as without the recorder. Then torch's own `capture_end` runs, and the graph's
  pool is read from the caching allocator.
- `replay`: a counter on the graph's record, one addition per replay.
- `reset`, and the graph object's collection: the record says the graph was released.

Torch 2.14 adds global hooks on instantiate and destroy, and per-graph hooks on capture
end and replay. They are not used: no global hook fires at capture begin (the site, the
key and module scopes need it), a `keep_graph=True` graph never instantiated (captured and
never replayed: the case worth finding) fires no instantiate hook, and per-graph hooks
need the graph at its creation. One mechanism serves every torch from 2.4 on.

A failure inside the recorder never reaches the program: the capture goes on, and the
graph's record says what could not be read. What the program's own calls raise is
re-raised unchanged, after the failed capture is recorded.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from graph_harness.capture.graph.capture import first_line
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.keys import CaptureContext, KeyFn, ask
from graph_harness.capture.record.sites import (
    CaptureSite,
    arguments_key,
    frames_of,
    inductor_key,
    site_of,
)

_CAPTURE = "_graph_harness_capture"  # the capture in progress on a graph object
_RECORD = "_graph_harness_record"  # the graph object's latest record (replays count here)


class Listener(Protocol):
    """What is told of each capture (a process's recorder, a step's count)."""

    def captured(self, record: GraphRecord) -> None: ...


@dataclass
class _Settings:
    listeners: list[Listener] = field(default_factory=list)
    adapters: list[tuple[str, KeyFn]] = field(default_factory=list)
    module_scopes: bool = False  # open module scopes in each capture (program.py)
    pool_memory: bool = True  # read the pool's bytes after each capture
    attribute: Callable[[list, Any], str | None] | None = None  # compiled code's modules
    started: float = field(default_factory=time.perf_counter)


_settings = _Settings()
_lock = threading.RLock()
_counter = itertools.count()
_originals: dict[str, Callable] = {}


def _reset_after_fork() -> None:
    # a forked child's captures are its own, numbered from 0; its listeners are told by
    # their own fork handlers (process.py) whether they go on
    global _counter, _lock
    _counter = itertools.count()
    _lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


# --- installing ------------------------------------------------------------------------------


def listen(listener: Listener) -> None:
    """Tell `listener` of every capture from now on (installs the wrappers once)."""
    with _lock:
        _install()
        _settings.listeners.append(listener)


def unlisten(listener: Listener) -> None:
    with _lock:
        _settings.listeners = [x for x in _settings.listeners if x is not listener]


def configure(
    *,
    adapters: list[tuple[str, KeyFn]] | None = None,
    module_scopes: bool | None = None,
    pool_memory: bool | None = None,
    attribute: Callable[[list, Any], str | None] | None = None,
) -> dict[str, Any]:
    """Process-wide settings of the recorder (process.py sets them from the command); the
    settings before, for `restore` (those not given are left as they are)."""
    with _lock:
        saved = {k: getattr(_settings, k) for k in _SETTINGS}
        if adapters is not None:
            _settings.adapters = list(adapters)
        if module_scopes is not None:
            _settings.module_scopes = module_scopes
        if pool_memory is not None:
            _settings.pool_memory = pool_memory
        if attribute is not None:
            _settings.attribute = attribute
        return saved


_SETTINGS = ("adapters", "module_scopes", "pool_memory", "attribute")


def restore(saved: dict[str, Any]) -> None:
    """Put back settings `configure` returned (a recording ends: the one around it goes
    on with its own)."""
    with _lock:
        for k in _SETTINGS:
            setattr(_settings, k, saved[k])


_periodic: list[Callable[[], None]] = []  # told every 4,096 replays of a graph
MANY_REPLAYS = 4096
_MASK = MANY_REPLAYS - 1  # a power of two: `n & _MASK` is `n % MANY_REPLAYS`


def on_many_replays(fn: Callable[[], None], *, remove: bool = False) -> None:
    """Call `fn` whenever a graph's replays reach a multiple of MANY_REPLAYS (a process's
    recorder flushes its counts then, at most every few seconds)."""
    with _lock:
        if remove:
            _periodic[:] = [f for f in _periodic if f != fn]
        elif fn not in _periodic:
            _periodic.append(fn)


def _many_replays() -> None:
    for fn in list(_periodic):
        with contextlib.suppress(Exception):
            fn()


def listening() -> bool:
    return bool(_settings.listeners)


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


class _Capture:
    """A capture in progress. Made in two steps: from the stack, before torch begins the
    capture (so that reading keys, an engine's adapter included, never runs inside the
    program's capture), then `begin`, once it has begun (its stream, scope recorder and
    module scopes). Every part is read on its own: one that fails leaves a note and its
    fallback, and the graph is recorded all the same."""

    def __init__(self, graph: object, frames: list) -> None:
        t0 = time.perf_counter()
        self.began = t0
        self.index = next(_counter)
        self.notes: list[str] = []
        self.keep_graph = getattr(graph, "_keep_graph", None)  # torch >= 2.12 says it
        nowhere = CaptureSite(user=None, library=None)
        self.site = self._safely("site", lambda: site_of(frames), nowhere)
        order = (f"#{self.index}", "order", None, None)
        self.key, self.source, note, self.inductor = self._safely(
            "key", lambda: self._key(graph, frames), order
        )
        if note:
            self.notes.append(note)
        self.rank = self._safely("rank", _rank, None)
        self._frames: list | None = frames if _settings.module_scopes else None
        self.stream = self.device = self.mode = None
        self.recorder = None
        self.modules = None
        self._token = self._mod_token = None
        self.modules_note: str | None = None  # why module scopes were not opened
        self.record_s = time.perf_counter() - t0

    def _safely(self, what: str, read: Callable[[], Any], fallback: Any) -> Any:
        try:
            return read()
        except Exception as e:
            self.notes.append(f"{what} not read: {type(e).__name__}: {e}")
            return fallback

    def begin(self, mode: str) -> None:
        """The capture has begun: its stream, and the scopes recorded in it."""
        import torch

        from graph_harness.capture.graph.reader import capture_frontier
        from graph_harness.capture.scopes.recorder import Recorder, activate_recorder

        t0 = time.perf_counter()
        self.mode = mode
        self.stream = torch.cuda.current_stream()
        self.device = self.stream.device.index
        stream = self.stream
        self.recorder = Recorder(frontier=lambda: capture_frontier(stream))
        self.recorder.yields = True
        self._token = activate_recorder(self.recorder)
        frames, self._frames = self._frames, None
        if frames is not None and self._token is None:
            self.modules_note = "another capture's scope recorder was active"
        elif frames is not None:
            from graph_harness.capture.scopes.modules import activate
            from graph_harness.capture.scopes.program import CaptureModules

            try:
                self.modules = CaptureModules(self.recorder, frames)
                self._mod_token = activate(self.modules)
            except Exception as e:  # a frame's locals that cannot be read: none
                self.modules, self._mod_token = None, None
                self.modules_note = f"{type(e).__name__}: {e}"
        self.record_s += time.perf_counter() - t0

    def _key(self, graph: object, frames: list) -> tuple[str, str, str | None, dict | None]:
        note = None
        got = inductor_key(frames)
        tree = got[1] if got is not None else None
        if _settings.adapters:
            key, note = ask(_settings.adapters, CaptureContext(frames, graph, self.index))
            if key is not None:
                return key, "engine", note, tree
        if got is not None:
            return got[0], "inductor", note, tree
        args = arguments_key(frames)
        if args is not None:
            return args, "arguments", note, None
        return f"#{self.index}", "order", note, None

    def release(self) -> None:
        """The scope recorder and module scopes given back (the capture is over; once).
        `modules` stays: finish() names the graph's nodes by it after the capture."""
        from graph_harness.capture.scopes.modules import deactivate
        from graph_harness.capture.scopes.recorder import deactivate_recorder

        if self._mod_token is not None:
            deactivate(self._mod_token)
            self._mod_token = None
        deactivate_recorder(self._token)
        self._token = None

    def read(self) -> tuple[list | None, str | None]:
        """The graph under capture, read from the capture stream (before torch ends it)."""
        from graph_harness.capture.graph.reader import read_capturing

        try:
            if self.stream is None:
                raise RuntimeError("the capture's stream was not read when it began")
            return read_capturing(self.stream), None
        except Exception as e:
            return None, f"{type(e).__name__}: {e}"

    def finish(
        self, graph: object, raw: list | None, read_error: str | None, failed: BaseException | None
    ) -> GraphRecord:
        from graph_harness.capture.attribution.records import nodes_from_graph
        from graph_harness.capture.environment import now
        from graph_harness.capture.export.nodes import NodeExport
        from graph_harness.capture.graph.memory import pool_memory

        t0 = time.perf_counter()
        error, status = None, "captured"
        if failed is not None:
            error, status = f"{type(failed).__name__}: {first_line(failed)}", "failed"
        elif raw is None:
            error, status = f"graph-harness could not read the graph: {read_error}", "unread"
        export = None
        options: dict[str, Any] = {"recorded": True, "site": self.site.label}
        if raw is not None:
            nodes = nodes_from_graph(raw, self.recorder.marks if self.recorder else [])
            options.update(self._attribute(nodes))
            export = NodeExport(
                source="cuda-graph",
                workload=self.key,
                variant=None,
                params=None,
                nodes=nodes,
                env=_environment(self.device),
                created=now(),
                rank=self.rank,
                options=options,
            )
        pool = reserved = allocated = segments = None
        try:
            pool = tuple(int(x) for x in graph.pool())
            if _settings.pool_memory and failed is None:
                mem = pool_memory(pool)
                reserved, allocated, segments = mem.reserved, mem.allocated, mem.segments
        except Exception:  # a graph whose pool cannot be read (failed capture): none
            pass
        end = time.perf_counter()
        return GraphRecord(
            index=self.index,
            pid=os.getpid(),
            rank=self.rank,
            key=self.key,
            key_source=self.source,
            key_note="; ".join(self.notes) or None,
            inductor=self.inductor,
            site=self.site,
            device=self.device,
            stream=None if self.stream is None else int(self.stream.cuda_stream),
            capture_mode=self.mode,
            pool=pool,
            pool_reserved=reserved,
            pool_allocated=allocated,
            pool_segments=segments,
            keep_graph=self.keep_graph,
            status=status,
            error=error,
            export=export,
            capture_s=end - self.began,
            record_s=self.record_s + (end - t0),
            at_s=self.began - _settings.started,
        )

    def _attribute(self, nodes: list) -> dict[str, Any]:
        """Module options of the export, and compiled code moved into its modules."""
        from graph_harness.capture.scopes.modules import (
            EVERY_LEVEL,
            active_module_scopes,
            block_depth,
        )

        out: dict[str, Any] = {}
        # this capture's own module scopes (record --module-scopes), or graph-harness's
        # module_scopes open around a step whose graphs are recorded (count --target)
        ms = self.modules if self.modules is not None else active_module_scopes()
        if ms is None:
            if self.modules_note is not None:
                why = f"module scopes not opened: {self.modules_note}"
                out["compiled_attribution"] = f"enclosing scope ({why})"
            return out
        blocks = ms.blocks
        out.update(module_depth=EVERY_LEVEL, blocks=blocks, block_depth=block_depth(blocks))
        if getattr(ms, "broken", None):  # CaptureModules stopped recording scopes
            out["module_scopes_stopped"] = ms.broken
        if _settings.attribute is not None:
            how = _settings.attribute(nodes, ms)
            if how is not None:
                out["compiled_attribution"] = how
        return out


_envs: dict[int | None, dict] = {}


def _environment(device: int | None) -> dict:
    """The environment stamped into each export, read once per device (it imports
    Triton and asks the driver: once per process is enough)."""
    import torch

    from graph_harness.capture.environment import environment

    if device not in _envs:
        _envs[device] = environment(torch.device("cuda", device))
    return dict(_envs[device])


def _rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    env = os.environ.get("RANK")
    return int(env) if env is not None and env.isdigit() else None


def _tell(record: GraphRecord) -> None:
    for listener in list(_settings.listeners):
        # a listener's failure is its own, never the program's
        with contextlib.suppress(Exception):
            listener.captured(record)


# --- the wrappers ----------------------------------------------------------------------------


def _capture_begin(original: Callable) -> Callable:
    def capture_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _settings.listeners:
            return original(self, *args, **kwargs)
        try:  # the site and key, read before the capture begins
            cap = _Capture(self, frames_of(sys._getframe(1)))
        except Exception:  # not even the stack: a capture known by its order alone
            cap = None
        try:
            result = original(self, *args, **kwargs)
        except BaseException as e:
            if cap is not None:
                cap._frames = None
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


def _failed_begin(cap: _Capture, e: BaseException) -> None:
    record = GraphRecord(
        index=cap.index,
        pid=os.getpid(),
        rank=cap.rank,
        key=cap.key,
        key_source=cap.source,
        site=cap.site,
        status="failed",
        error=f"capture_begin: {type(e).__name__}: {first_line(e)}",
        at_s=cap.began - _settings.started,
    )
    _tell(record)


def _capture_end(original: Callable) -> Callable:
    def capture_end(self: Any, *args: Any, **kwargs: Any) -> Any:
        cap = self.__dict__.pop(_CAPTURE, None)
        if cap is None:
            return original(self, *args, **kwargs)
        t0 = time.perf_counter()
        raw, read_error = cap.read()
        cap.record_s += time.perf_counter() - t0
        try:
            result = original(self, *args, **kwargs)
        except BaseException as e:
            cap.release()
            _finish(cap, self, raw, read_error, e)
            raise
        cap.release()
        if cap.keep_graph is None:  # torch < 2.12 keeps it in C++: a kept graph reads
            try:
                self.raw_cuda_graph()
                cap.keep_graph = True
            except Exception:
                cap.keep_graph = False
        _finish(cap, self, raw, read_error, None)
        return result

    return capture_end


def _finish(
    cap: _Capture,
    graph: Any,
    raw: list | None,
    read_error: str | None,
    failed: BaseException | None,
) -> None:
    try:
        record = cap.finish(graph, raw, read_error, failed)
    except Exception as e:  # never the program's problem: a record that says so
        record = GraphRecord(
            index=cap.index,
            pid=os.getpid(),
            rank=cap.rank,
            key=cap.key,
            key_source=cap.source,
            site=cap.site,
            status="failed" if failed is not None else "unread",
            error=f"graph-harness could not record this capture: {type(e).__name__}: {e}",
        )
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
