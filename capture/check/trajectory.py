"""Check's trajectories: the step run `steps` calls from its start, twice eagerly (A, B)
and twice replayed (C, D, free memory filled with one pattern, then another), its outputs
and reachable state fingerprinted after every call (capture/state/fingerprint.py, kept on
the host). A step with a reset runs each run whole from its start; one without runs the
four calls of each step in turn. A against B is the step's own spread, A against C the
graph against the step, C against D the graph against itself. How the runs are fed, timed,
sampled (`--steps to-end`) and started alike: docs/steps-and-check.md, "Check's
trajectories".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from graph_harness.capture.check.outputs import OutputPoison, outputs_to_poison
from graph_harness.capture.check.poison import poisoned
from graph_harness.capture.check.restore import restore
from graph_harness.capture.replay.guard import KEPT, Replayer, ReplayFailed, cuda_in_use, sync
from graph_harness.capture.replay.progress import Marks
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint, reachable
from graph_harness.capture.state.rng import rng_moved, rng_state, set_rng_state
from graph_harness.capture.state.steps import Repeatability, feed_of, reset_of, start_of

POISONS = (0xFF, 0x3C)  # two fillings of free memory, differing in every byte


@dataclass
class Run:
    """One run over the trajectory: the state at its start (None where the step has no
    reset: there is no start to return to) and after each call, the output included."""

    start: Fingerprint | None = None
    after: list[Fingerprint] = field(default_factory=list)


@dataclass
class Trajectories:
    steps: int  # calls in each run
    sequential: bool  # each run whole from the reset (else call by call)
    a: Run
    b: Run
    c: Run | None = None  # None on the CPU: no graph
    d: Run | None = None
    drawn: list[str] = field(default_factory=list)  # generators call 0 drew from
    poisoned: list[dict] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # put back to A's start (steps-and-check.md)
    unrestorable: list[str] = field(default_factory=list)
    outputs: OutputPoison | None = None  # the graph's outputs filled before each call
    at: list[int] = field(default_factory=list)  # the calls compared; Run.after follows it
    rngs: list[dict] = field(default_factory=list)  # the generators before each call of A
    seconds: dict[str, float] = field(default_factory=dict)  # each run's wall time


class _Runner:
    def __init__(
        self,
        step: Callable[[], object],
        steps: int,
        replayer: Replayer | None,
        output: object,
        sync_each: bool = False,
    ) -> None:
        self.step = step
        self.sync_each = sync_each or _holds_host_tensors(step, output)
        self.steps = steps
        self.start = start_of(step)
        self.feed = feed_of(step)
        self.r = replayer
        self.output = output  # the graph's output tensor(s), read after a replay
        self.outputs = outputs_to_poison(step, output) if replayer is not None else None
        self.rngs: list[dict[str, torch.Tensor]] = []
        self.drawn: list[str] = []
        self.poisoned: list[dict] = []
        self._filled: set[int] = set()
        self.restored: list[str] = []
        self.unrestorable: list[str] = []

    def fill_outputs(self) -> None:
        """The graph's outputs to the pattern (before a call's feed: steps-and-check.md)."""
        if self.outputs is not None:
            self.outputs.fill()

    def _before(self, i: int, *, record: bool, fed: bool) -> None:
        if self.sync_each:
            sync()  # the call before, its copies from or to the host, landed (steps-and-check.md)
        if not fed:  # a fed call 0 was filled before its reset and feed (run_trajectories)
            self.fill_outputs()
        if self.feed is not None and not fed:
            self.feed(i)
        if record:
            self.rngs.append(rng_state())
        else:
            set_rng_state(self.rngs[i])

    def eager(
        self, i: int, *, record: bool = False, fed: bool = False, keep: bool = True
    ) -> Fingerprint | None:
        """Call i, eagerly; its fingerprint if `keep` (queued: steps-and-check.md)."""
        self._before(i, record=record, fed=fed)
        out = self.step()
        if record and i == 0:
            self.drawn = rng_moved(self.rngs[0], rng_state())
        fp = _print(self.step, out) if keep else None
        del out
        return fp

    def replayed(
        self, i: int, pattern: int | None, *, fed: bool = False, keep: bool = True
    ) -> Fingerprint | None:
        """Call i, replayed; `pattern`: free memory filled around it (None: the caller
        holds it filled for the whole run)."""
        self._before(i, record=False, fed=fed)
        if pattern is None:
            self.r.replay()
            return _print(self.step, self.output) if keep else None
        with self.poison(pattern):
            self.r.replay()
            return _print(self.step, self.output) if keep else None

    @contextlib.contextmanager
    def poison(self, pattern: int) -> Iterator[None]:
        """Free memory filled with `pattern` while open; what the first fill found kept."""
        with poisoned(pattern) as p:
            yield
        if pattern not in self._filled:  # what the first fill of each pattern found
            self._filled.add(pattern)
            self.poisoned.append(p.to_dict())

    def begin(self, like: Fingerprint | None = None, *, reset: bool = True) -> Fingerprint:
        """Back to the start (reset, feed(0)) unless `reset` is False (a window did it);
        with `like`, the watched tensors put back to their values there; the state now."""
        if reset and self.start is not None:
            self.start()
        sync()
        fp = _print(self.step, None, with_output=False)
        sync()  # read at once: restore compares it with `like`
        if like is None:
            return fp
        back = restore(self.step, like, fp)
        self.restored += [n for n in back.restored if n not in self.restored]
        self.unrestorable += [n for n in back.unrestorable if n not in self.unrestorable]
        if not back.restored:
            return fp
        sync()
        fp = _print(self.step, None, with_output=False)
        sync()
        return fp


def _holds_host_tensors(step: Callable[[], object], output: object) -> bool:
    found, _ = reachable(step, output)
    return any(isinstance(v, torch.Tensor) and v.device.type == "cpu" for _, v, _ in found)


def _print(step: Callable[[], object], output: object, *, with_output: bool = True) -> Fingerprint:
    """A fingerprint kept on the host, its copies queued (steps-and-check.md)."""
    return fingerprint(step, output, with_output=with_output, clone_to="cpu", non_blocking=True)


def run_trajectories(
    step: Callable[[], object],
    steps: int,
    graph: torch.cuda.CUDAGraph | None,
    output: object,
    name: str,
    rep: Repeatability,
    at: list[int] | None = None,
    *,
    sync_each: bool = False,
) -> Trajectories:
    """The four runs (steps-and-check.md) of `steps` calls, compared at the calls `at` (all
    of them by default); `graph` None (the CPU): A and B only. Replays go through one
    Replayer (capture/replay/guard.py): a CUDA error is one line. Ends with the step at
    its start. Syncs."""
    at = list(range(steps)) if at is None else at
    sequential = reset_of(step) is not None
    replayer = None if graph is None else _replayer(graph, name, step, rep, sequential)
    run = _Runner(step, steps, replayer, output, sync_each and graph is not None)
    t = Trajectories(steps, sequential, Run(), Run(), at=at)
    clock = _Clock(t.seconds)
    if sequential:
        _whole_runs(run, t, replayer, set(at), clock)
    else:
        _call_by_call(run, t, replayer, set(at), clock)
    if replayer is not None and sequential:
        replayer.finish()  # the closing reset (and feed(0)), guarded as the replays are
    elif run.start is not None:  # the step as it was found: at its start
        run.start()
        sync()
    t.drawn, t.poisoned, t.rngs = run.drawn, run.poisoned, run.rngs
    t.restored, t.unrestorable = run.restored, run.unrestorable
    t.outputs = run.outputs
    return t


def _whole_runs(
    run: _Runner, t: Trajectories, replayer: Replayer | None, keep: set[int], clock: _Clock
) -> None:
    """A step with a reset: each run whole from its start, A and B eagerly, then C and D
    replayed, each with free memory held filled with its pattern."""
    steps = t.steps
    with clock("a"):
        run.fill_outputs()  # before the reset and feed(0) of each run: call 0 is fed there
        t.a.start = run.begin()
        t.a.after = _kept(
            run.eager(i, record=True, fed=i == 0, keep=i in keep) for i in range(steps)
        )
        sync()
    with clock("b"):
        run.fill_outputs()
        t.b.start = run.begin(t.a.start)
        t.b.after = _kept(run.eager(i, fed=i == 0, keep=i in keep) for i in range(steps))
        sync()
    if replayer is None:
        return
    t.c, t.d = Run(), Run()
    for r, pattern, key in zip((t.c, t.d), POISONS, "cd"):
        what = f"check's replays with free memory filled with {pattern:#04x}"
        run.fill_outputs()
        with clock(key), _called(key, steps), replayer.window(what):  # resets, feeds 0
            r.start = run.begin(t.a.start, reset=False)
            with run.poison(pattern):  # held for the whole run: steps-and-check.md
                r.after = _kept(
                    run.replayed(i, None, fed=i == 0, keep=i in keep) for i in range(steps)
                )


def _call_by_call(
    run: _Runner, t: Trajectories, replayer: Replayer | None, keep: set[int], clock: _Clock
) -> None:
    """A step without a reset: the four runs take turns call by call, each from the state
    the last left; a call not compared is carried along by one eager call."""
    steps = t.steps
    if replayer is not None:
        t.c, t.d = Run(), Run()
    with clock("calls"):
        for i in range(steps):
            if i not in keep:  # carried along by one eager call (steps-and-check.md)
                run.eager(i, record=True, keep=False)
                continue
            t.a.after.append(run.eager(i, record=True))
            t.b.after.append(run.eager(i))
            if replayer is None:
                continue
            for r, pattern, key in zip((t.c, t.d), POISONS, "cd"):
                what = f"check's replay of call {i} with {pattern:#04x} in free memory"
                with _called(key, steps, at=i), replayer.window(what):
                    r.after.append(run.replayed(i, pattern))
        sync()


def _replayer(
    graph: torch.cuda.CUDAGraph,
    name: str,
    step: Callable[[], object],
    rep: Repeatability,
    sequential: bool,
) -> Replayer:
    """The replays' guard: its window resets (and feeds call 0) before each replayed run;
    call by call, no window may (there is no start to go back to); its marks tell which
    call an error tripped (capture/replay/progress.py)."""
    return Replayer(
        graph,
        name,
        reset=start_of(step) if sequential else None,
        repeatability=rep,
        marks=Marks() if cuda_in_use() else None,
    )  # fmt: skip


@contextlib.contextmanager
def _called(run: str, steps: int, *, at: int | None = None) -> Iterator[None]:
    """A replayed run's CUDA error said as check's call: which call of which run did not
    finish, beside the eager runs, which ran the same calls from the same start to the
    end (they run first). Replay j of a run from its start is call j - 1; a step without
    a reset replays call `at` alone."""
    try:
        yield
    except ReplayFailed as e:
        if e.tripped is None:
            raise
        call = at if at is not None else e.tripped - 1
        eager = "call" if at is not None else f"all {steps} calls"
        head = (
            f"call {call} of replayed run {run.upper()} did not finish (a CUDA error"
            + (f", the device assertion `{e.assertion}`" if e.assertion else "")
            + f"), where the eager runs A and B ran {eager} from the same start: the "
            f"graph's work there is not the eager code's (a host value its capture froze, "
            f"such as a sliding window's slot, is the usual cause). "
        )
        said = ReplayFailed(
            head + str(e), context_lost=e.context_lost, tripped=e.tripped, assertion=e.assertion
        )
        if said.context_lost:
            KEPT.append(said)  # its frames, and what they hold, never freed (guard.py)
        raise said from e


def _kept(prints: Iterator[Fingerprint | None]) -> list[Fingerprint]:
    """The fingerprints a run kept. Should a call raise (a device-side assertion), those
    gathered so far are kept for good: their host copies are pinned memory with queued
    copies, and freeing one after a lost context records an event in a C++ destructor,
    which aborts the process (seen on an H100: Gemma 3 past its window)."""
    out: list[Fingerprint] = []
    try:
        for fp in prints:
            if fp is not None:
                out.append(fp)
    except BaseException:
        KEPT.append(out)
        raise
    return out


class _Clock:
    """Wall time of a block, synced at its end by the block itself, into `into[key]`."""

    def __init__(self, into: dict[str, float]) -> None:
        self.into = into

    @contextlib.contextmanager
    def __call__(self, key: str) -> Iterator[None]:
        t0 = time.perf_counter()
        yield
        self.into[key] = self.into.get(key, 0.0) + time.perf_counter() - t0
