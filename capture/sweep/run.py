"""A step captured at every batch size of a ladder: `sweep_step`.

`make(batch)` builds the step for one batch size (the CLI calls the target's factory as
`FUNCTION(batch=B)`). Per size, in this order:

1. **Own pools.** The sizes are built and captured largest first (the engines' order),
   each into a pool of its own, with its memory read from that pool and tagged by scope
   (capture/graph/memory.py); warm-ups and capture timed, and for a compiled step the
   first warm-up call's excess over the later ones, which is where it compiles. With
   `check`, each graph is checked over a short trajectory (capture/check/step.py) before
   it is timed. Then every size's graph is timed, trials interleaved across sizes
   (capture/replay/timing.py), and a leak check replays each once and then
   `leak_replays` more times, reading its pool after each: a graph that grows its pool
   as it replays holds more after the second reading.
2. **One shared pool.** The own-pool graphs freed, every size's step is captured again,
   largest first, into one pool (`torch.cuda.graph_pool_handle()`, as vLLM's runner
   shares one across its sizes), the pool read after each capture: its total, and what
   each size adds to it.
3. **Interleaved** (`interleaved`, after each size's own check): the shared pool's graphs
   kept alive, every size replayed in turns, in a serving order shuffled with
   `settings.seed`, each replay compared with its size's eager call
   (capture/check/interleaved.py): a size whose buffers another size's capture or
   replays overwrote fails there, naming both. Then the graphs are freed.

`make` is called once per size; each step runs warm-up + 1 times per capture (two
captures), plus its check (interleaved: 2 x its calls more, and as many replays) and its
replays, and is left at its start (its reset). A
compiled step is compiled anew at each size: Dynamo's recompile limit (8 by default, after which
it runs the code eagerly, silently) is raised for the sweep to cover them and restored
after (recorded in the document's options).

A step compiled with mode="reduce-overhead" captures its own graphs (Inductor's
cudagraph trees) into the one pool Inductor keeps for every tree of the device, so there
are no own pools and no second capture: each size is counted by recording its graphs
(capture/record/steps.py), the pool read after each size is recorded (the shared rows),
and its replays are calls of the step, checked to be steady calls (StepCalls: each
replays the size's graphs and records none). Such a step cannot be checked (`check`
replays graphs of graph-harness's own).

On the CPU there are no graphs: each size's dispatched operations are counted (as
`count` does), and time and memory are left out, saying why; the interleaved check, which
replays graphs, does not run and says so (InterleavedResult.skipped).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.check.settings import CheckSettings
from graph_harness.capture.count import Counted, capture_and_keep, default_device
from graph_harness.capture.environment import environment, now
from graph_harness.capture.graph.memory import pool_memory
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.record.steps import RecordedStep, StepCalls, outside_scopes
from graph_harness.capture.replay.guard import Replayer, sync
from graph_harness.capture.replay.timing import time_replays_us
from graph_harness.capture.state.steps import (
    Repeatability,
    StateWatch,
    require_repeatable,
    start_of,
)
from graph_harness.capture.stats import median_interval
from graph_harness.capture.sweep.document import SizeRow, SweepResult, size_name
from graph_harness.capture.sweep.settings import SweepSettings, check_sizes

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.check.interleaved_verdict import InterleavedResult
    from graph_harness.capture.export.nodes import NodeExport

Step = Callable[[], object]
ModuleOf = Callable[[Step], "torch.nn.Module | None"]
NO_GPU = "replay time and graph memory need a CUDA GPU: here, dispatched operations per size"
NO_GPU_INTERLEAVED = (
    "the interleaved check replays every size's CUDA graph from one shared pool: it needs a "
    "CUDA GPU; here, each size's eager check alone"
)
Gate = Callable[[dict[str, "CheckResult | InterleavedResult"]], None]


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
def _recompiles(sizes: int) -> Iterator[dict[str, list[int]]]:
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
class _Size:
    batch: int
    step: Step
    counted: Counted
    watch: TimedWatch
    capture_s: float
    check: CheckResult | None = None
    calls: StepCalls | None = None  # a step that captures its own graphs: its calls
    shared: dict[str, int] | None = None  # and Inductor's one pool, read after it
    replayed: str | None = None  # its replays' graphs, where not the counted ones


def sweep_step(
    make: Callable[[int], Step],
    sizes: Sequence[int],
    settings: SweepSettings | None = None,
    *,
    name: str = "the step",
    module_of: ModuleOf | None = None,
    warmup: int = StepSettings.warmup,
    check_steps: int | None = None,
    interleaved: bool = False,
    gate: Gate | None = None,
    progress: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> SweepResult:
    """Capture `make(batch)` at every size (module docstring says how, and how often it
    runs). `module_of(step)`: the model to attribute nodes and memory by (module_scopes),
    or None. `check_steps`: check each size's graph over that many calls first; `gate`
    judges each check (default capture/check/step.py's: one that does not pass stops
    the sweep, CheckFailed or CheckUnverified). `interleaved`: after the shared pool's
    captures, also the interleaved check over `check_steps` calls per size (default
    CheckSettings.steps; each size checked alone first), its order dealt with
    `settings.seed`, judged by `gate` as `{"interleaved": result}`. `note`: told, once
    each, what the warm-ups showed of the step that a person should know before it is
    replayed. Syncs."""
    sizes = check_sizes(sizes)
    settings = settings or SweepSettings()
    if interleaved and check_steps is None:  # each size alone first: its reset, its host values
        check_steps = CheckSettings.steps
    say = progress or (lambda _line: None)
    told: set[str] = set()

    def tell(watch: StateWatch, label: str) -> None:
        for line in watch.repeatability.notes(label) if note is not None else ():
            if line not in told:
                told.add(line)
                note(line)

    device = default_device()
    options: dict = {"step_warmup": warmup, "check_steps": check_steps}
    calls = _interleaved_calls(check_steps)
    if interleaved and calls != check_steps and note is not None:
        note(
            f"the interleaved check takes {calls} calls per size: --check-steps {check_steps} "
            "is one size's own length, and the sizes' differ (each size's own check runs it)"
        )
    if device.type != "cuda":  # counts only, each size's check its eager part
        counted = _own_pools(make, sizes, name, module_of, warmup, check_steps, gate, say,
                             None, tell)  # fmt: skip
        skipped = None
        if interleaved:
            from graph_harness.capture.check.interleaved_verdict import InterleavedResult

            order = sorted(sizes, reverse=True)
            skipped = InterleavedResult.skipped(
                name, order, calls, settings.seed, warmup, NO_GPU_INTERLEAVED
            )
        rows = [
            SizeRow.counted(s.batch, s.counted.export, s.capture_s,
                            check=None if s.check is None else s.check.status)
            for s in counted
        ]  # fmt: skip
        return SweepResult(
            rows=sorted(rows, key=lambda r: r.batch),
            exports=_by_size({s.batch: s.counted.export for s in counted}),
            name=name,
            env=environment(device),
            created=now(),
            options=options,
            checks={size_name(s.batch): s.check for s in counted if s.check is not None},
            interleaved=skipped,
            why_not=NO_GPU,
        )
    # One capture stream for every size, as torch.cuda.graph keeps one: the allocator
    # hands a freed block back only on the stream it was freed on, so a pool shared by
    # captures on fresh streams reuses nothing (measured on the H200: BENCHMARKS.md).
    stream = torch.cuda.Stream()
    with _recompiles(len(sizes)) as limit:
        options.update(limit)
        own = _own_pools(make, sizes, name, module_of, warmup, check_steps, gate, say, stream, tell)
        recorded = own[0].calls is not None
        say(f"timing {len(own)} sizes, trials interleaved")
        with _steady(own):
            times = _timed(own, settings)
            leaks = {s.batch: _leak(s, settings) for s in own}
        rows = [_row(s, times[size_name(s.batch)], leaks[s.batch]) for s in own]
        exports = _by_size({s.batch: s.counted.export for s in own})
        checks = {size_name(s.batch): s.check for s in own if s.check is not None}
        turns = None  # the interleaved check's result, when it ran (sizes taking turns)
        if recorded:  # its own graphs: Inductor's one pool, read as each size was recorded
            options["cudagraphs"] = "inductor"
            replayed = {size_name(s.batch): s.replayed for s in own if s.replayed}
            if replayed:  # under module scopes, graphs not the counted ones node for node
                options["replayed"] = replayed
                if note is not None:
                    for k, line in replayed.items():
                        note(f"{name} {k}: {line}")
            shared = [s.shared for s in own]
            scopes = None
        else:
            scopes = {size_name(s.batch): s.counted.memory.by_scope for s in own}
            steps = [(s.batch, s.step, s.watch.repeatability) for s in own]  # largest first
            del own  # the own-pool graphs, and their pools back to the driver
            gc.collect()
            torch.cuda.empty_cache()
            interleave = _Interleave(calls, settings.seed, name, warmup) if interleaved else None
            shared, turns = _shared_pool(steps, name, warmup, say, stream, interleave)
            del steps
            if turns is not None:  # a check that does not pass stops here, as each size's does
                (gate or _default_gate())({"interleaved": turns})
                rows = [replace(r, interleaved=turns.by_size.get(r.batch)) for r in rows]
    # the seed deals the interleaved check's order, and nothing else: recorded with it alone
    recorded_settings = {k: v for k, v in settings.__dict__.items() if k != "seed" or interleaved}
    return SweepResult(
        rows=sorted(rows, key=lambda r: r.batch),
        exports=exports,
        name=name,
        env=environment(device),
        created=now(),
        options={
            **options,
            **{f"replay_{k}" if k == "warmup" else k: v for k, v in recorded_settings.items()},
        },
        shared=shared,
        memory_by_scope=scopes,
        checks=checks,
        interleaved=turns,
    )


def _interleaved_calls(check_steps: int | str | None) -> int:
    """Calls per size in the interleaved check: check's own count; its default where that is
    not a number (`--check-steps to-end` is one size's own length: the sizes' differ)."""
    return check_steps if isinstance(check_steps, int) else CheckSettings.steps


def _by_size(exports: dict[int, NodeExport]) -> dict[str, NodeExport]:
    """Exports by size name, ascending."""
    return {size_name(b): exports[b] for b in sorted(exports)}


def _default_gate() -> Callable[[dict[str, CheckResult]], None]:
    from graph_harness.capture.check.step import gate

    return gate


def _row(s: _Size, us: list[float], leak: tuple[int, int]) -> SizeRow:
    lo, hi = median_interval(us)
    compiled = s.counted.export.options.get("compiled")
    return SizeRow.measured(
        s.batch,
        s.counted,
        capture_s=s.capture_s,
        compile_s=s.watch.first_call_excess() if compiled else None,
        trials=us,
        lo=float(lo),
        hi=float(hi),
        leak=leak,
        check=s.check,
    )


def _module(module_of: ModuleOf | None, step: Step) -> torch.nn.Module | None:
    return module_of(step) if module_of is not None else None


def _own_pools(
    make: Callable[[int], Step],
    sizes: Sequence[int],
    name: str,
    module_of: ModuleOf | None,
    warmup: int,
    check_steps: int | None,
    gate: Callable[[dict[str, CheckResult]], None] | None,
    say: Callable[[str], None],
    stream: torch.cuda.Stream | None,
    tell: Callable[[StateWatch, str], None],
) -> list[_Size]:
    """Each size built and captured, largest first, into a pool of its own on `stream`
    (None: the CPU, each size's dispatched operations counted), then checked."""
    from graph_harness.capture.check.step import check_captured

    gate = gate or _default_gate()
    cuda = stream is not None
    out = []
    known: set[tuple[int, int]] = set()  # Inductor's pools, a step that records its own
    for b in sorted(sizes, reverse=True):
        say(f"batch {b}: " + ("building and capturing (own pool)" if cuda else "counting"))
        step = make(b)
        watch = TimedWatch(step)
        # Inductor's pool as it was before this size (known from an earlier size's graphs;
        # before the first, unknown: graphs recorded before the sweep may be in it)
        before = _read_pools(known)[0] if known else None
        t0 = time.perf_counter()
        counted = capture_and_keep(
            step,
            warmup=warmup,
            name=f"{name} batch {b}",
            watch=watch,
            module=_module(module_of, step),
            graph_pool=torch.cuda.graph_pool_handle() if cuda else None,
            memory=cuda,
            stream=stream,
            own_graphs=check_steps is None,  # a check replays graphs of ours only
        )
        size = _Size(b, step, counted, watch, time.perf_counter() - t0)
        if counted.recorded is not None:  # Inductor's graphs, in Inductor's one pool
            size.calls = StepCalls(step, counted.recorded)
            if module_of is not None:  # outside module scopes, the graphs the program runs
                say(f"batch {b}: recording outside module scopes")
                before = _read_pools(_tree_pools(counted.recorded))[0]
                moved = outside_scopes(step, counted.export, counted.recorded, start=start_of(step))
                size.calls, size.replayed = moved.calls, None if moved.same else moved.note
                # counted and timed alike: the graphs the program runs, scoped where they
                # are the counted ones node for node
                size.counted = replace(counted, export=moved.export, recorded=moved.calls.recorded)
            pools = _tree_pools(size.calls.recorded)
            total, in_use = _read_pools(pools)
            size.shared = dict(
                batch=b,
                total_reserved=total,
                adds=None if before is None else total - before,
                total_allocated=in_use,
            )
            known |= pools
        tell(watch, f"{name} batch {b}")
        if cuda:  # replays follow: a step they would run past its end is refused now
            require_repeatable(watch.repeatability, f"{name} batch {b}")
        if check_steps is not None:
            say(f"batch {b}: checking over {check_steps} calls" + ("" if cuda else " (eager)"))
            size.check = check_captured(
                step,
                counted.export,
                counted.captured,
                watch.repeatability,
                name=f"{name} batch {b}",
                steps=check_steps,
            )
            gate({size_name(b): size.check})
        out.append(size)
    return out


def _tree_pools(recorded: RecordedStep) -> set[tuple[int, int]]:
    """The pools of a step's recorded graphs: Inductor keeps one for every graph of a
    device's cudagraph trees, every size's."""
    return {g.pool for g in recorded.graphs if g.pool is not None}


def _read_pools(pools: set[tuple[int, int]]) -> tuple[int, int]:
    """Their bytes now: reserved, and in use."""
    mem = [pool_memory(p) for p in pools]
    return sum(m.reserved for m in mem), sum(m.allocated for m in mem)


def _pool_reserved(s: _Size) -> int:
    if s.calls is not None:
        return _read_pools(_tree_pools(s.calls.recorded))[0]
    return pool_memory(s.counted.captured.graph.pool()).reserved


@contextmanager
def _steady(own: list[_Size]) -> Iterator[None]:
    """The replays in this block, of a step that captures its own graphs, checked to be
    its steady calls (capture/record/steps.py StepCalls.steady)."""
    with ExitStack() as stack:
        for s in own:
            if s.calls is not None:
                stack.enter_context(s.calls.steady(f"the sweep's replays of batch {s.batch}"))
        yield


def _replayer(s: _Size) -> Replayer:
    return Replayer(
        s.calls if s.calls is not None else s.counted.captured.graph,
        f"batch {s.batch}",
        reset=start_of(s.step),
        repeatability=s.watch.repeatability,
    )


def _timed(own: list[_Size], settings: SweepSettings) -> dict[str, list[float]]:
    runs = {size_name(s.batch): _replayer(s) for s in own}
    times = time_replays_us(
        runs, replays=settings.replays, trials=settings.trials, warmup=settings.warmup
    )
    for r in runs.values():
        r.finish()
    return times


def _leak(s: _Size, settings: SweepSettings) -> tuple[int, int]:
    """Bytes the graph's pool, and the device's memory in use, grew by over
    `leak_replays` replays (in runs from the step's reset and feed) after the first. A
    replay itself allocates nothing from the pool; what a reset or a feed allocates and
    keeps shows in the second figure."""
    r = _replayer(s)
    with r.window("the leak check's first replay"):
        r.replay(1)
    first = _pool_reserved(s)
    device_first = torch.cuda.memory_allocated()
    done = 0
    while done < settings.leak_replays:  # in runs from the reset, as the timing replays
        n = min(settings.replays, settings.leak_replays - done)
        with r.window("the leak check's replays"):
            r.replay(n)
        done += n
    r.finish()
    pool = _pool_reserved(s) - first
    return pool, torch.cuda.memory_allocated() - device_first


@dataclass(frozen=True)
class _Interleave:
    """The interleaved check to run on the shared pool's graphs (capture/check/interleaved.py)."""

    calls: int
    seed: int
    name: str
    warmup: int


def _shared_pool(
    steps: list[tuple[int, Step, Repeatability | None]],
    name: str,
    warmup: int,
    say: Callable[[str], None],
    stream: torch.cuda.Stream,
    interleave: _Interleave | None = None,
) -> tuple[list[dict[str, int]], InterleavedResult | None]:
    """The same steps captured again, largest first, into one pool: the pool after each;
    with `interleave`, the interleaved check of their graphs before they are freed."""
    from graph_harness.capture.check.interleaved import SizeGraph, check_interleaved

    pool = torch.cuda.graph_pool_handle()
    keep, graphs, rows, before = [], [], [], 0
    for b, step, rep in steps:
        say(f"batch {b}: capturing again (shared pool)")
        counted = capture_and_keep(
            step, warmup=warmup, name=f"{name} batch {b}", graph_pool=pool, stream=stream
        )
        keep.append((step, counted))  # alive to the end: the pool's blocks are theirs
        graphs.append(SizeGraph(batch=b, step=step, graph=counted.captured.graph,
                                output=counted.captured.output, repeatability=rep))  # fmt: skip
        mem = pool_memory(pool)
        rows.append(
            dict(batch=b, total_reserved=mem.reserved, adds=mem.reserved - before,
                 total_allocated=mem.allocated)
        )  # fmt: skip
        before = mem.reserved
    turns = None
    if interleave is not None:  # before the graphs go: it replays them
        i = interleave
        say(f"interleaved check: {len(graphs)} sizes x {i.calls} calls, order seed {i.seed}")
        turns = check_interleaved(graphs, steps=i.calls, seed=i.seed, name=i.name, warmup=i.warmup)
    del keep, graphs
    gc.collect()
    torch.cuda.empty_cache()
    return rows, turns
