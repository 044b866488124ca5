"""One capture in progress, from the moment the program asks to begin it to its record:
what is read off the stack before it begins (site, key), what is set up once it has (its
stream, scope recorder and module scopes), and the record made when it ends
(capture/record/hooks.py calls these from its wrappers)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from graph_harness.capture.graph.capture import CaptureErrorMode, first_line
from graph_harness.capture.record.graphs import GraphRecord
from graph_harness.capture.record.keys import CaptureContext, ask
from graph_harness.capture.record.settings import next_index, settings
from graph_harness.capture.record.sites import (
    CaptureSite,
    arguments_key,
    inductor_key,
    site_of,
)


class Capture:
    """A capture in progress. Made in two steps: from the stack, before torch begins the
    capture (so that reading keys, an engine's adapter included, never runs inside the
    program's capture), then `begin`, once it has begun (its stream, scope recorder and
    module scopes). Every part is read on its own: one that fails leaves a note and its
    fallback, and the graph is recorded all the same."""

    def __init__(self, graph: object, frames: list) -> None:
        t0 = time.perf_counter()
        self.began = t0
        self.index = next_index()
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
        # no engine's or Inductor's key: named by what the region reads, if it reads any
        # (unless --no-read-names: the watch costs a Python call per operator)
        self.by_reads = self.source in ("arguments", "order") and settings.read_names
        self.watch = None  # the region's reads, looked at from begin() to end_reads()
        self.reads: list[str] | None = None
        self.rank = self._safely("rank", rank, None)
        # record --check: the capture's eager form, found before torch begins the capture
        self.form = None
        if settings.check is not None:
            why = "the eager form could not be looked for"
            find = settings.check.find
            self.form = self._safely("eager form", lambda: find(frames, graph, self.index), why)
        self._frames: list | None = frames if settings.module_scopes else None
        self.stream = self.device = self.mode = None
        self.recorder = None
        self.modules = None
        self._token = self._mod_token = None
        self.modules_note: str | None = None  # why module scopes were not opened
        self.pointers: list | None = None  # under --check: each node's addresses
        self.record_s = time.perf_counter() - t0

    def _safely(self, what: str, read: Callable[[], Any], fallback: Any) -> Any:
        try:
            return read()
        except Exception as e:
            self.notes.append(f"{what} not read: {type(e).__name__}: {e}")
            return fallback

    def begin(self, mode: CaptureErrorMode) -> None:
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
        if self.by_reads:  # last: nothing of the recorder's own is looked at
            self._safely("what the region reads", self._watch, None)
        self.record_s += time.perf_counter() - t0

    def _watch(self) -> None:
        from graph_harness.capture.record.reads_mode import RegionWatch, available

        why = available()
        if why is not None:
            raise RuntimeError(why)
        watch = RegionWatch()
        watch.start()
        self.watch = watch

    def end_reads(self) -> None:
        """The region's reads, as the program ends the capture (before torch does): the
        graph named by them where no better key was found (capture/record/reads.py)."""
        from graph_harness.capture.record.reads import MAX_READS, shapes_key

        watch, self.watch = self.watch, None
        if watch is None:
            return
        t0 = time.perf_counter()
        why = self._safely("what the region read", watch.stop, None)
        if why is not None:
            self.notes.append(f"what the region read: {why}")
        inputs = self._safely("what the region read", watch.reads.inputs, [])
        self.reads = inputs[:MAX_READS]
        key = shapes_key(inputs)
        if key is not None:
            self.key, self.source = key, "shapes"
        self.record_s += time.perf_counter() - t0

    def _key(self, graph: object, frames: list) -> tuple[str, str, str | None, dict | None]:
        note = None
        got = inductor_key(frames)
        tree = got[1] if got is not None else None
        if settings.adapters:
            key, note = ask(settings.adapters, CaptureContext(frames, graph, self.index))
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

    def ended(self, frames: list) -> None:
        """The capture's end, as the program's frames show it (a form that reads what the
        captured code returned: make_graphed_callables' static outputs)."""
        captured = getattr(self.form, "captured", None)
        if captured is not None:
            self._safely("eager form's outputs", lambda: captured(frames), None)

    def read(self) -> tuple[list | None, str | None]:
        """The graph under capture, read from the capture stream (before torch ends it)."""
        from graph_harness.capture.graph.reader import read_capturing

        try:
            if self.stream is None:
                raise RuntimeError("the capture's stream was not read when it began")
            raw = read_capturing(self.stream)
        except Exception as e:
            return None, f"{type(e).__name__}: {e}"
        if settings.check is not None and not isinstance(self.form, (str, type(None))):
            # a difference's first node, told from each node's addresses (live/writers.py)
            from graph_harness.capture.graph.pointers import read_pointers

            try:
                self.pointers = read_pointers(raw)
            except Exception:  # unknown: a difference is then told without its node
                self.pointers = None
        return raw, None

    def finish(
        self, graph: object, raw: list | None, read_error: str | None, failed: BaseException | None
    ) -> GraphRecord:
        from graph_harness.capture.attribution.records import nodes_from_graph
        from graph_harness.capture.environment import now
        from graph_harness.capture.export.nodes import NodeExport
        from graph_harness.capture.record.kept import settle

        t0 = time.perf_counter()
        error, status = None, "captured"
        if failed is not None:
            error, status = f"{type(failed).__name__}: {first_line(failed)}", "failed"
        elif raw is None:
            error, status = f"graph-harness could not read the graph: {read_error}", "unread"
        export = None
        options: dict[str, Any] = {"recorded": True, "site": self.site.label}
        if raw is not None:
            marks = self.recorder.marks if self.recorder else []
            nodes = nodes_from_graph(raw, marks, frozen=True)
            options.update(self._attribute(nodes))
            settle(nodes)  # kept as long as the program runs: out of the collector's way
            export = NodeExport(
                source="cuda-graph",
                workload=self.key,
                variant=None,
                params=None,
                nodes=nodes,
                env=environment_of(self.device),
                created=now(),
                rank=self.rank,
                options=options,
            )
        pool, reserved, allocated, segments = pool_of(graph, read_memory=failed is None)
        end = time.perf_counter()
        return GraphRecord(
            index=self.index,
            pid=os.getpid(),
            rank=self.rank,
            key=self.key,
            key_source=self.source,
            key_note="; ".join(self.notes) or None,
            reads=self.reads,
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
            at_s=self.began - settings.started,
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
        if settings.attribute is not None:
            how = settings.attribute(nodes, ms)
            if how is not None:
                out["compiled_attribution"] = how
        return out


def pool_of(graph: Any, *, read_memory: bool) -> tuple:
    """A graph's pool id and, with `read_memory` (and --pool-memory), its reserved,
    allocated bytes and segments; None for what cannot be read (a failed capture's)."""
    from graph_harness.capture.graph.memory import pool_memory

    pool = reserved = allocated = segments = None
    try:
        pool = tuple(int(x) for x in graph.pool())
        if settings.pool_memory and read_memory:
            mem = pool_memory(pool)
            reserved, allocated, segments = mem.reserved, mem.allocated, mem.segments
    except Exception:  # a graph whose pool cannot be read (failed capture): none
        pass
    return pool, reserved, allocated, segments


_ENVS: dict[int | None, dict] = {}


def environment_of(device: int | None) -> dict:
    """The environment stamped into each export, read once per device (it imports
    Triton and asks the driver: once per process is enough)."""
    import torch

    from graph_harness.capture.environment import environment

    if device not in _ENVS:
        _ENVS[device] = environment(torch.device("cuda", device))
    return dict(_ENVS[device])


def rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    env = os.environ.get("RANK")
    return int(env) if env is not None and env.isdigit() else None


def failure_record(cap: Capture, status: str, error: str) -> GraphRecord:
    """The record of a capture that failed (the program's) or that could not be read."""
    return GraphRecord(
        index=cap.index,
        pid=os.getpid(),
        rank=cap.rank,
        key=cap.key,
        key_source=cap.source,
        reads=cap.reads,
        site=cap.site,
        status=status,
        error=error,
        at_s=cap.began - settings.started,
    )
