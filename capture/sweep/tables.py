"""A sweep's records, each a frozen dataclass whose fields are its table's columns
(capture/rows.py): a row per size (SizeRow), per size and trial, and per size and scope's
memory. capture/sweep/document.py assembles them into the document and its files.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_harness.capture.rows import columns

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.count import Counted
    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.graph.exec_size import ExecSize
    from graph_harness.capture.graph.lifecycle import Executable


@dataclass(frozen=True, kw_only=True)
class SizeRow:
    """One captured size. Times in seconds (first-run costs) and microseconds (a replay);
    memory in bytes; None where not measured (the CPU, an eager step's compile)."""

    batch: int
    nodes: int
    by_type: dict[str, int]
    capture_s: float  # the step's warm-ups and its capture (a compile included)
    compile_s: float | None = None  # a compiled step's first warm-up call over the others
    replay_us: float | None = None  # median over trials
    replay_lo: float | None = None  # its 95% bootstrap interval
    replay_hi: float | None = None
    trials: tuple[float, ...] = ()
    host_launch_us: float | None = None  # one launch's CPU time from an idle device, median
    # its graph made executable before its first replay (capture/graph/lifecycle.py): host
    # seconds
    instantiate_s: float | None = None
    upload_s: float | None = None
    reserved: int | None = None  # its own pool's segments just after capture
    allocated: int | None = None  # of those, the blocks in use
    # the executable's device memory outside the allocator (2 MiB pages; lifecycle.py)
    exec_bytes: int | None = None
    # one executable's bytes resolved below the page from copies (graph/exec_size.py), and
    # to within how many; None where not resolved
    exec_each: int | None = None
    exec_each_spread: int | None = None
    leak: int | None = None  # bytes the pool grew by over the leak check's replays
    leak_device: int | None = None  # bytes in use on the device, grown over the same
    check: str | None = None  # the check's status, when checked
    interleaved: str | None = None  # its status in the interleaved check, when run
    updated: str | None = None  # its status in the updated-executable check, when run

    @property
    def rows_per_s(self) -> float | None:
        return None if not self.replay_us else self.batch / (self.replay_us * 1e-6)

    @classmethod
    def counted(
        cls, batch: int, export: NodeExport, capture_s: float, *, check: str | None = None
    ) -> SizeRow:
        return cls(
            batch=batch,
            nodes=export.total,
            by_type={str(k): int(v) for k, v in export.counts("type").items()},
            capture_s=capture_s,
            check=check,
        )

    @classmethod
    def measured(
        cls,
        batch: int,
        counted: Counted,
        *,
        capture_s: float,
        compile_s: float | None,
        trials: list[float],
        lo: float,
        hi: float,
        leak: tuple[int, int],
        check: CheckResult | None,
        host_launch_us: float | None = None,
        executable: Executable | None = None,
        each: ExecSize | None = None,
    ) -> SizeRow:
        mem = counted.memory.pool if counted.memory is not None else None  # recorded: none
        return cls(
            batch=batch,
            nodes=counted.export.total,
            by_type={str(k): int(v) for k, v in counted.export.counts("type").items()},
            capture_s=capture_s,
            compile_s=compile_s,
            replay_us=statistics.median(trials),
            replay_lo=lo,
            replay_hi=hi,
            trials=tuple(trials),
            reserved=None if mem is None else mem.reserved,
            allocated=None if mem is None else mem.allocated,
            leak=leak[0],
            leak_device=leak[1],
            check=None if check is None else check.status,
            host_launch_us=host_launch_us,
            instantiate_s=None if executable is None else executable.instantiate_s,
            upload_s=None if executable is None else executable.upload_s,
            exec_bytes=None if executable is None else executable.exec_bytes,
            exec_each=None if each is None else each.bytes,
            exec_each_spread=None if each is None else each.spread,
        )


# The sizes table: a SizeRow's fields, its trials (the trials table's rows) replaced by its
# rows per second.
SIZE_COLUMNS = ["rows_per_s" if c == "trials" else c for c in columns(SizeRow)]


@dataclass(frozen=True)
class SizeTrial:
    """One timed trial of a size: its replay's time."""

    batch: int
    trial: int
    us: float


@dataclass(frozen=True, kw_only=True)
class ScopeMemory:
    """A size's memory in one scope (capture/graph/memory.py ScopeBytes), bytes."""

    batch: int
    scope_path: str  # JSON: the enclosing scopes' labels, outermost first
    reserved: int
    requested: int
    held: int


@dataclass(frozen=True, kw_only=True)
class ModuleMemory:
    """A size's memory in one position of the scope tree (memory_by_module), bytes."""

    batch: int
    scope: str
    reserved: int
    requested: int
    held: int
