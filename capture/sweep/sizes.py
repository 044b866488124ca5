"""A sweep's first stage: each size built and captured, largest first, into a pool of its
own (or, for a step compiled with mode="reduce-overhead", its own graphs recorded in
Inductor's one pool), warm-ups timed, then checked where asked (capture/sweep/run.py
says the whole order)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import torch

from graph_harness.capture.count import Counted, capture_and_keep
from graph_harness.capture.graph.exec_size import ExecSize, exec_size
from graph_harness.capture.graph.lifecycle import Executable, instantiate_and_upload
from graph_harness.capture.graph.memory import pool_memory
from graph_harness.capture.record.steps import RecordedStep, StepCalls, outside_scopes
from graph_harness.capture.replay.guard import sync
from graph_harness.capture.state.steps import StateWatch, require_repeatable, start_of
from graph_harness.capture.sweep.alloc_trace import Trace, trace_from_history
from graph_harness.capture.sweep.document import size_name
from graph_harness.capture.sweep.truth import SharedRow

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult

Step = Callable[[], object]
ModuleOf = Callable[[Step], "torch.nn.Module | None"]


class TimedWatch(StateWatch):
    """A StateWatch that also times each warm-up call (synced, so a call's device work is
    in its time): the first call's excess over the median of the others is where lazy
    initialization and, in a compiled step, compilation happen."""

    def __init__(self, step: Step) -> None:
        super().__init__(step, watch=True)
        self.seconds: list[float] = []

    def before(self, i: int, n: int) -> None:
        super().before(i, n)
        sync()
        self._t0 = time.perf_counter()

    def after(self, i: int, n: int, output: object) -> None:
        sync()
        self.seconds.append(time.perf_counter() - self._t0)
        super().after(i, n, output)

    def first_call_excess(self) -> float | None:
        if len(self.seconds) < 2:
            return None
        return max(0.0, self.seconds[0] - statistics.median(self.seconds[1:]))


@contextmanager
def recompiles(sizes: int) -> Iterator[dict[str, list[int]]]:
    """Dynamo's recompile limit raised to cover a compile per size, restored after."""
    cfg = torch._dynamo.config
    name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
    before = getattr(cfg, name)
    setattr(cfg, name, max(before, 2 * sizes + 8))
    try:
        yield {"dynamo_recompile_limit": [before, getattr(cfg, name)]}
    finally:
        setattr(cfg, name, before)


@dataclass
class Size:
    batch: int
    step: Step
    counted: Counted
    watch: TimedWatch
    capture_s: float
    check: CheckResult | None = None
    calls: StepCalls | None = None  # a step that captures its own graphs: its calls
    shared: SharedRow | None = None  # and Inductor's one pool, read after it
    replayed: str | None = None  # its replays' graphs, where not the counted ones
    executable: Executable | None = None  # its graph made executable (ours only)
    each: ExecSize | None = None  # one executable's bytes below the page (ours only)


def default_gate() -> Callable[[dict[str, CheckResult]], None]:
    from graph_harness.capture.check.step import gate

    return gate


def _module(module_of: ModuleOf | None, step: Step) -> torch.nn.Module | None:
    return module_of(step) if module_of is not None else None


class SizesRun(Protocol):
    """What own_pools reads of a sweep (capture/sweep/run.py's `_Sweep`): how each size
    is built, named, scoped, warmed up and checked, and where progress and notes go."""

    make: Callable[[int], Step]
    sizes: Sequence[int]
    name: str
    module_of: ModuleOf | None
    warmup: int
    check_steps: int | None
    gate: Callable[[dict[str, CheckResult]], None] | None
    say: Callable[[str], None]

    def tell(self, watch: StateWatch, label: str) -> None: ...


def own_pools(run: SizesRun, stream: torch.cuda.Stream | None) -> list[Size]:
    """Each size built and captured, largest first, into a pool of its own on `stream`
    (None: the CPU, each size's dispatched operations counted), then checked."""
    gate = run.gate or default_gate()
    cuda = stream is not None
    out = []
    known: set[tuple[int, int]] = set()  # Inductor's pools, a step that records its own
    for b in sorted(run.sizes, reverse=True):
        run.say(f"batch {b}: " + ("building and capturing (own pool)" if cuda else "counting"))
        step = run.make(b)
        watch = TimedWatch(step)
        # Inductor's pool as it was before this size (known from an earlier size's graphs;
        # before the first, unknown: graphs recorded before the sweep may be in it)
        before = read_pools(known)[0] if known else None
        size = _capture_size(run, b, step, watch, stream)
        counted = size.counted
        if counted.recorded is not None:  # Inductor's graphs, in Inductor's one pool
            known |= _own_graphs(run, size, before)
        if cuda and counted.recorded is None:
            # what its first replay would pay inside the launch, timed apart, and the
            # executable's memory outside the allocator (capture/graph/lifecycle.py)
            size.executable = instantiate_and_upload(counted.captured.graph, stream)
        run.tell(watch, f"{run.name} batch {b}")
        if cuda:  # replays follow: a step they would run past its end is refused now
            require_repeatable(watch.repeatability, f"{run.name} batch {b}")
        if run.check_steps is not None:
            size.check = _check_size(run, size, counted, cuda)
            gate({size_name(b): size.check})
        out.append(size)
    return out


def resolve_execs(own: list[Size], stream: torch.cuda.Stream) -> None:
    """Each size's executable resolved below the page (capture/graph/exec_size.py), once
    every size's own executable has been made: copies made before would hand their freed
    pages to the later sizes, whose own reading would then drop less. Only the sizes a
    prediction samples: each resolution leaves its copies' pages with the driver, and
    the next must use those up before it sees a page taken."""
    for s in own:
        if s.executable is not None:
            s.each = exec_size(s.counted.captured.graph, stream)


def _capture_size(
    run: SizesRun, b: int, step: Step, watch: TimedWatch, stream: torch.cuda.Stream | None
) -> Size:
    """One size's step captured into a pool of its own (on the CPU: counted), timed."""
    cuda = stream is not None
    t0 = time.perf_counter()
    counted = capture_and_keep(
        step,
        warmup=run.warmup,
        name=f"{run.name} batch {b}",
        watch=watch,
        module=_module(run.module_of, step),
        graph_pool=torch.cuda.graph_pool_handle() if cuda else None,
        memory=cuda,
        stream=stream,
        own_graphs=run.check_steps is None,  # a check replays graphs of ours only
    )
    return Size(b, step, counted, watch, time.perf_counter() - t0)


def _own_graphs(run: SizesRun, size: Size, before: int | None) -> set[tuple[int, int]]:
    """A step that captures its own graphs: its calls (under module_of, those the program
    runs outside module scopes) and Inductor's one pool read after it (`size.shared`);
    the pools its graphs are in. `before`: that pool's bytes before this size."""
    step, counted, b = size.step, size.counted, size.batch
    size.calls = StepCalls(step, counted.recorded)
    if run.module_of is not None:  # outside module scopes, the graphs the program runs
        run.say(f"batch {b}: recording outside module scopes")
        before = read_pools(tree_pools(counted.recorded))[0]
        moved = outside_scopes(step, counted.export, counted.recorded, start=start_of(step))
        size.calls, size.replayed = moved.calls, None if moved.same else moved.note
        # counted and timed alike: the graphs the program runs, scoped where they
        # are the counted ones node for node
        size.counted = replace(counted, export=moved.export, recorded=moved.calls.recorded)
    pools = tree_pools(size.calls.recorded)
    total, in_use = read_pools(pools)
    size.shared = SharedRow(
        batch=b,
        total_reserved=total,
        adds=None if before is None else total - before,
        total_allocated=in_use,
    )
    return pools


def _check_size(run: SizesRun, size: Size, counted: Counted, cuda: bool) -> CheckResult:
    """One size's graph checked against its eager step over `run.check_steps` calls (on
    the CPU: its eager part)."""
    from graph_harness.capture.check.step import check_captured

    b = size.batch
    run.say(f"batch {b}: checking over {run.check_steps} calls" + ("" if cuda else " (eager)"))
    return check_captured(
        size.step,
        counted.export,
        counted.captured,
        size.watch.repeatability,
        name=f"{run.name} batch {b}",
        steps=run.check_steps,
    )


def tree_pools(recorded: RecordedStep) -> set[tuple[int, int]]:
    """The pools of a step's recorded graphs: Inductor keeps one for every graph of a
    device's cudagraph trees, every size's."""
    return {g.pool for g in recorded.graphs if g.pool is not None}


def read_pools(pools: set[tuple[int, int]]) -> tuple[int, int]:
    """Their bytes now: reserved, and in use."""
    mem = [pool_memory(p) for p in pools]
    return sum(m.reserved for m in mem), sum(m.allocated for m in mem)


def trace_of(s: Size) -> Trace | None:
    """The allocator's requests of the size's own-pool capture (None: not read: this
    torch tags no allocations, or the step records its own graphs)."""
    mem = s.counted.memory
    history = None if mem is None else mem.history
    return None if history is None else trace_from_history(history)


def weights_of(step: Step) -> int | None:
    """The bytes of `step.module`'s parameters and buffers, each storage once (its
    weights; a KV cache kept as a buffer of the model counts here too); None without one."""
    module = getattr(step, "module", None)
    if not isinstance(module, torch.nn.Module):
        return None
    tensors = [*module.parameters(), *module.buffers()]
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def pool_reserved(s: Size) -> int:
    if s.calls is not None:
        return read_pools(tree_pools(s.calls.recorded))[0]
    return pool_memory(s.counted.captured.graph.pool()).reserved
