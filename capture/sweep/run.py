"""A step captured at every batch size of a ladder: `sweep_step`.

`make(batch)` builds the step for one batch size. Per size: captured into its own pool
(largest first), memory read by scope, warm-ups and capture timed, checked with `check`,
timed (trials interleaved across sizes) and leak-checked; then every size captured again
into one shared pool; then the interleaved and updated checks of the shared pool's graphs.
A `reduce-overhead` step is counted by recording its graphs; on the CPU dispatches are
counted, and time, memory and the shared-pool checks say why they are left out. Each
phase, and how often `make` and the step run: docs/sweep.md, "The phases, per size".
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.check.settings import CheckSettings
from graph_harness.capture.count import default_device
from graph_harness.capture.environment import environment, now
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.state.steps import StateWatch
from graph_harness.capture.stats import median_interval
from graph_harness.capture.sweep.document import SweepResult, size_name
from graph_harness.capture.sweep.replays import leak, steady, timed
from graph_harness.capture.sweep.settings import SharedMode, SweepSettings, check_sizes
from graph_harness.capture.sweep.shared import SHARED_CHECKS, Turns, shared_pool
from graph_harness.capture.sweep.sizes import (
    ModuleOf,
    Size,
    Step,
    default_gate,
    own_pools,
    recompiles,
    resolve_execs,
    trace_of,
    weights_of,
)
from graph_harness.capture.sweep.tables import SizeRow

if TYPE_CHECKING:
    from graph_harness.capture.check.findings import CheckResult
    from graph_harness.capture.check.interleaved_verdict import InterleavedResult
    from graph_harness.capture.check.updated_verdict import UpdatedResult
    from graph_harness.capture.export.nodes import NodeExport

NO_GPU = "replay time and graph memory need a CUDA GPU: here, dispatched operations per size"
Gate = Callable[[dict[str, "CheckResult | InterleavedResult | UpdatedResult"]], None]


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
    updated: bool = False,
    gate: Gate | None = None,
    progress: Callable[[str], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> SweepResult:
    """Capture `make(batch)` at every size (docs/sweep.md, "The phases, per size").
    `module_of(step)`: the model to attribute nodes and memory by (module_scopes), or None.
    `check_steps`: check each size's graph over that many calls first; `gate` judges each
    check (default capture/check/step.py's: one that does not pass stops the sweep,
    CheckFailed or CheckUnverified). `interleaved`: after the shared pool's captures, the
    interleaved check over `check_steps` calls per size (default CheckSettings.steps), dealt
    with `settings.seed`, judged as `{"interleaved": result}`; `updated`: likewise
    (`{"updated": result}`). `note`: told, once each, what the warm-ups showed that a person
    should know. Syncs. Whole ladders' memory predicted: the result's `with_forecast`."""
    modes = tuple(m for m, on in (("interleaved", interleaved), ("updated", updated)) if on)
    if modes and check_steps is None:  # each size alone first: its reset, its host values
        check_steps = CheckSettings.steps
    run = _Sweep(
        make=make,
        sizes=check_sizes(sizes),
        settings=settings or SweepSettings(),
        name=name,
        module_of=module_of,
        warmup=warmup,
        check_steps=check_steps,
        modes=modes,
        gate=gate,
        say=progress or (lambda _line: None),
        note=note,
    )
    if modes and run.calls != check_steps and note is not None:
        note(
            f"the {modes[0]} check takes {run.calls} calls per size: --check-steps "
            f"{check_steps} is one size's own length, and the sizes' differ (each size's own "
            "check runs it)"
        )
    device = default_device()
    return _on_gpu(run, device) if device.type == "cuda" else _on_cpu(run, device)


@dataclass(kw_only=True)
class _Sweep:
    """One sweep's inputs (sweep_step's arguments), and the notes already told."""

    make: Callable[[int], Step]
    sizes: list[int]
    settings: SweepSettings
    name: str
    module_of: ModuleOf | None
    warmup: int
    check_steps: int | str | None
    modes: tuple[SharedMode, ...]  # the checks of the shared pool's graphs (SHARED_CHECKS)
    gate: Gate | None
    say: Callable[[str], None]
    note: Callable[[str], None] | None
    told: set[str] = field(default_factory=set)

    @property
    def calls(self) -> int:
        return _interleaved_calls(self.check_steps)

    def turns(self) -> list[Turns]:
        seed = self.settings.seed
        return [Turns(m, self.calls, seed, self.name, self.warmup) for m in self.modes]

    def options(self) -> dict:
        return {"step_warmup": self.warmup, "check_steps": self.check_steps}

    def tell(self, watch: StateWatch, label: str) -> None:
        for line in watch.repeatability.notes(label) if self.note is not None else ():
            if line not in self.told:
                self.told.add(line)
                self.note(line)

    def own_pools(self, stream: torch.cuda.Stream | None) -> list[Size]:
        return own_pools(self, stream)


def _on_cpu(run: _Sweep, device: torch.device) -> SweepResult:
    """Counts only, each size's check its eager part; the shared pool's checks skipped."""
    counted = run.own_pools(None)
    order = sorted(run.sizes, reverse=True)
    skipped = {t.mode: SHARED_CHECKS[t.mode].skipped(t, order) for t in run.turns()}
    rows = [
        SizeRow.counted(s.batch, s.counted.export, s.capture_s,
                        check=None if s.check is None else s.check.status)
        for s in counted
    ]  # fmt: skip
    return SweepResult(
        rows=sorted(rows, key=lambda r: r.batch),
        exports=_by_size({s.batch: s.counted.export for s in counted}),
        name=run.name,
        env=environment(device),
        created=now(),
        options=run.options(),
        checks={size_name(s.batch): s.check for s in counted if s.check is not None},
        **skipped,
        why_not=NO_GPU,
    )


def _on_gpu(run: _Sweep, device: torch.device) -> SweepResult:
    """Own pools, timed and leak-checked; then the shared pool (and its checks), or for a
    step that captures its own graphs, Inductor's pool as recorded."""
    options = run.options()
    # One capture stream for every size, as torch.cuda.graph keeps one: the allocator
    # hands a freed block back only on the stream it was freed on, so a pool shared by
    # captures on fresh streams reuses nothing (measured on the H200: BENCHMARKS.md).
    stream = torch.cuda.Stream()
    with recompiles(len(run.sizes)) as limit:
        options.update(limit)
        own = run.own_pools(stream)
        # for predictions (SweepResult.with_forecast): each size's requests, the weights
        traces, weights = {s.batch: trace_of(s) for s in own}, weights_of(own[0].step)
        run.say(f"timing {len(own)} sizes, trials interleaved")
        with steady(own):
            times, host = timed(own, run.settings)
            leaks = {s.batch: leak(s, run.settings) for s in own}
        resolve_execs([s for s in own if s.batch in run.settings.resolve], stream)
        rows = [
            _row(s, times[size_name(s.batch)], leaks[s.batch], host.get(size_name(s.batch)))
            for s in own
        ]
        exports = _by_size({s.batch: s.counted.export for s in own})
        checks = {size_name(s.batch): s.check for s in own if s.check is not None}
        if own[0].calls is not None:  # its own graphs: Inductor's one pool
            shared, scopes, turns, returned = _recorded(run, own, options), None, {}, None
        else:
            scopes = {size_name(s.batch): s.counted.memory.by_scope for s in own}
            steps = [(s.batch, s.step, s.watch.repeatability) for s in own]  # largest first
            del own  # the own-pool graphs, and their pools back to the driver
            shared, turns, returned, rows = _shared(run, steps, stream, rows)
            del steps
    # the seed deals the shared pool's checks' orders, and nothing else: recorded with them
    kept = {k: v for k, v in run.settings.__dict__.items() if k != "seed" or run.modes}
    return SweepResult(
        rows=sorted(rows, key=lambda r: r.batch),
        exports=exports,
        name=run.name,
        env=environment(device),
        created=now(),
        options={**options, **{f"replay_{k}" if k == "warmup" else k: v for k, v in kept.items()}},
        shared=shared,
        memory_by_scope=scopes,
        checks=checks,
        **turns,
        returned=returned,
        traces=traces,
        weights=weights,
    )


def _recorded(run: _Sweep, own: list[Size], options: dict) -> list:
    """A step that captures its own graphs: Inductor's one pool, read as each size was
    recorded (the shared rows); where module scopes changed the graphs replayed, said."""
    options["cudagraphs"] = "inductor"
    replayed = {size_name(s.batch): s.replayed for s in own if s.replayed}
    if replayed:  # under module scopes, graphs not the counted ones node for node
        options["replayed"] = replayed
        if run.note is not None:
            for k, line in replayed.items():
                run.note(f"{run.name} {k}: {line}")
    return [s.shared for s in own]


def _shared(
    run: _Sweep, steps: list, stream: torch.cuda.Stream, rows: list[SizeRow]
) -> tuple[list, dict[str, InterleavedResult | UpdatedResult], int | None, list[SizeRow]]:
    """Every size captured again into one pool (and its checks by mode, each judged: one
    that does not pass stops here, as each size's does); the rows with their verdicts."""
    gc.collect()
    torch.cuda.empty_cache()
    shared, turns, returned = shared_pool(steps, run.name, run.warmup, run.say, stream, run.turns())
    own = {r.batch: r.exec_bytes for r in rows}  # the same sizes' executables, made first
    shared = [replace(r, own_exec_bytes=own.get(r.batch)) for r in shared]
    for mode, result in turns.items():
        (run.gate or default_gate())({mode: result})
        rows = [replace(r, **{mode: result.by_size.get(r.batch)}) for r in rows]
    return shared, turns, returned, rows


def _interleaved_calls(check_steps: int | str | None) -> int:
    """Calls per size in the shared pool's checks: check's own count; its default where
    that is not a number (`--check-steps to-end` is one size's own length: the sizes' differ)."""
    return check_steps if isinstance(check_steps, int) else CheckSettings.steps


def _by_size(exports: dict[int, NodeExport]) -> dict[str, NodeExport]:
    """Exports by size name, ascending."""
    return {size_name(b): exports[b] for b in sorted(exports)}


def _row(s: Size, us: list[float], leak: tuple[int, int], host: list[float] | None) -> SizeRow:
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
        host_launch_us=statistics.median(host) if host else None,
        executable=s.executable,
        each=s.each,
    )
