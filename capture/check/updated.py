"""One executable for every size, switched by update: every size's graph (captured largest
first into one shared pool), ONE executable instantiated from the first size visited, and
cudaGraphExecUpdate to each next size's graph in a walk making every transition (a to b)
at least once (`transition_order`), as an engine sharing one executable does. Each visit
is compared with the size's own executable launched from the same state, and with its
eager call; a launch that never finishes raises ReplayFailed (the CUDA context lost).

Every size is left at its start. Syncs. The walk, the three walks alike, the watchdog and
the cost: docs/sweep.md, "capture/check/updated.py".
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from graph_harness.capture.check.poison import poisoned
from graph_harness.capture.check.size_runs import SizeGraph, SizeRuns, size_runs
from graph_harness.capture.check.soak import DEADLINE_FACTOR, DEADLINE_FLOOR_S, POLL_S, event
from graph_harness.capture.check.trajectory import POISONS
from graph_harness.capture.check.updated_judge import judge_walk
from graph_harness.capture.check.updated_verdict import Transition, UpdatedResult, costs_of
from graph_harness.capture.graph.attributes import GraphLaunches
from graph_harness.capture.replay.guard import (
    KEPT,
    Replayer,
    ReplayFailed,
    context_lost,
    cuda_in_use,
    sync,
)
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint
from graph_harness.capture.state.rng import set_rng_state
from graph_harness.capture.state.steps import feed_of

FREE_POISON = POISONS[0]  # check's first filling of free memory
RECAPTURES = 3  # re-captures per size for its cost: a median of three host timings


@dataclass(frozen=True)
class Driver:
    """How executables are made, updated and launched, and a graph's kernel launches read:
    CUDA's (`cuda_driver`), or a stand-in's (the CPU tests). `shared(graph)`: one
    executable of `graph` (update, reinstantiate, replay, close, origin); `own(graph)`:
    the graph's own executable (anything with `replay()`); `recapture(size)`: (capture,
    instantiate) us of the size again, or None."""

    shared: Callable[[object], object]
    own: Callable[[object], object]
    launches: Callable[[object], GraphLaunches]
    recapture: Callable[[SizeGraph], tuple[float, float] | None]
    attributes: tuple[str, ...] = ()  # the launch attributes `launches` reads


def cuda_driver(stream: object) -> Driver:
    """Executables through cuda-bindings; re-captures on `stream` (the sizes' capture
    stream: a shared pool reuses a freed block on its own stream only)."""
    from graph_harness.capture.graph.attributes import attribute_names, graph_launches
    from graph_harness.capture.graph.lifecycle import recapture_us, runtime
    from graph_harness.capture.graph.shared_exec import OwnExecutable, SharedExecutable

    def recapture(g: SizeGraph) -> tuple[float, float]:
        return recapture_us(g.step, stream, g.graph.pool(), RECAPTURES)

    return Driver(
        shared=SharedExecutable,
        own=OwnExecutable,
        launches=lambda graph: graph_launches(graph.raw_cuda_graph()),
        recapture=recapture,
        attributes=tuple(attribute_names(runtime())),
    )


def transition_order(sizes: Sequence[int], seed: int) -> list[int]:
    """The sizes to visit: every ordered pair (a, b), a != b, once as consecutive visits
    (an Eulerian circuit of the complete directed graph, by Hierholzer's walk), the start
    and each size's next turns shuffled by `random.Random(seed)`. n sizes: n(n-1) + 1
    visits; the same sizes, in any order given, and seed give the same walk."""
    rng = random.Random(seed)
    ordered = sorted(sizes, reverse=True)
    ahead = {a: [b for b in ordered if b != a] for a in ordered}
    for a in ordered:
        rng.shuffle(ahead[a])
    stack, path = [rng.choice(ordered)], []
    while stack:
        if ahead[stack[-1]]:
            stack.append(ahead[stack[-1]].pop())
        else:
            path.append(stack.pop())
    return path[::-1]


def visits(path: list[int], steps: int) -> list[tuple[int, int]]:
    """(batch, call) for each visit of `path`: a size's calls in order, from call 0 again
    after `steps` of them."""
    dealt: dict[int, int] = {}
    out = []
    for b in path:
        out.append((b, dealt.get(b, 0) % steps))
        dealt[b] = dealt.get(b, 0) + 1
    return out


def check_updated_graphs(
    sizes: Sequence[SizeGraph],
    *,
    steps: int,
    seed: int,
    name: str = "the step",
    warmup: int = 0,
    driver: Driver,
    alone: bool = False,
) -> UpdatedResult:
    """The check (module docstring) of `sizes`, given in capture order, at least two.
    `alone`: each size's own check compared its replays with its eager step already
    (where a size draws random numbers, the walk cannot: capture/check/
    updated_verdict.py). Ends with every size at its start. Syncs."""
    if len(sizes) < 2:
        raise ValueError("an executable is switched between sizes: give at least two sizes")
    captured = [g.batch for g in sizes]
    runs = {g.batch: size_runs(g, name) for g in sizes}
    for s in runs.values():
        s.reference(steps)
    order = visits(transition_order(captured, seed), steps)
    launches = {b: driver.launches(runs[b].g.graph) for b in captured}
    own = {b: Replayer(driver.own(s.g.graph), f"{name} batch {b} (its own executable)")
           for b, s in runs.items()}  # fmt: skip
    first, slowest = _walk(order, runs, lambda k, b: own[b], "own executables' walk")
    second, _ = _walk(order, runs, lambda k, b: own[b], "own executables' second walk")
    deadline = max(DEADLINE_FLOOR_S, DEADLINE_FACTOR * slowest)
    shared = _Shared(driver, runs, launches, name, deadline)
    with shared.held():
        got, _ = _walk(order, runs, shared.to, "shared executable's walk", shared.wait)
    judged = judge_walk(order, runs, (first, second, got), shared.transitions, launches, alone)
    recaptured = {b: driver.recapture(runs[b].g) for b in captured}
    _all_at_start(runs)
    return UpdatedResult(
        name, captured, steps, seed, warmup,
        fed=any(feed_of(g.step) is not None for g in sizes),
        order=order,
        findings=judged.findings,
        by_size={b: judged.by_size.get(b, "passed") for b in captured},
        transitions=shared.transitions,
        costs=costs_of(shared.transitions, {b: launches[b].nodes for b in captured}, recaptured),
        attributes=list(driver.attributes),
        function_changes=judged.function_changes,
        compared=judged.compared,
        tensors=judged.tensors,
    )  # fmt: skip


def _all_at_start(runs: dict[int, SizeRuns]) -> None:
    for s in runs.values():
        if s.start is not None:
            s.start()
    sync()


@contextlib.contextmanager
def _free_poisoned() -> Iterator[None]:
    with contextlib.ExitStack() as held:
        if cuda_in_use():  # a stand-in graph on the CPU has no allocator to fill
            held.enter_context(poisoned(FREE_POISON))
        yield


def _walk(
    order: list[tuple[int, int]],
    runs: dict[int, SizeRuns],
    launcher: Callable[[int, int], Replayer],
    what: str,
    wait: Callable[[str], None] | None = None,
) -> tuple[list[Fingerprint], float]:
    """Every visit of `order`, from every size's start: the size brought to its call,
    the generators set as for its eager call, one launch on `launcher(k, batch)` (awaited
    by `wait`, where given), the fingerprint. The fingerprints, and the slowest launch
    (s, to its end)."""
    _all_at_start(runs)
    out, slowest = [], 0.0
    with _free_poisoned():
        for k, (b, i) in enumerate(order):
            s = runs[b]
            r = launcher(k, b)
            s.to_call(i)
            set_rng_state(s.rngs[i])
            label = f"the {what}, visit {k + 1} of {len(order)} (batch {b}, call {i})"
            t0 = time.perf_counter()
            with r.window(label):
                r.replay()
                if wait is not None:
                    wait(label)
            slowest = max(slowest, time.perf_counter() - t0)
            out.append(fingerprint(s.g.step, s.g.output, clone_to="cpu"))
    return out, slowest


class _Shared:
    """The one executable through the walk: made at the first visit, switched at each
    next (refused: made anew), every switch recorded."""

    def __init__(
        self,
        driver: Driver,
        runs: dict[int, SizeRuns],
        launches: dict[int, GraphLaunches],
        name: str,
        deadline: float,
    ) -> None:
        self.driver, self.runs, self.launches, self.deadline = driver, runs, launches, deadline
        self.exe: object | None = None
        self.at: int | None = None
        self.replayer: Replayer | None = None
        self.name = name
        self.transitions: list[Transition] = []

    def to(self, k: int, batch: int) -> Replayer:
        """The executable at `batch`'s graph for visit k, and the Replayer that launches it."""
        graph = self.runs[batch].g.graph
        if self.exe is None:
            self.exe = self.driver.shared(graph)
            self.replayer = Replayer(self.exe, f"{self.name}: the shared executable")
            self.transitions.append(Transition(k, None, batch, "instantiated"))
        elif batch != self.at:
            up = self.exe.update(graph)
            node = self.launches[batch].named(up.error_node)
            self.transitions.append(
                Transition(k, self.at, batch, up.result, node, up.host_ns / 1e3)
            )
            if not up.succeeded:  # as an engine does: the size's graph instantiated anew
                self.exe.reinstantiate(graph)
        self.at = batch
        return self.replayer

    def wait(self, label: str) -> None:
        """The launch just queued, finished within the deadline; else ReplayFailed."""
        ev, t0 = event(), time.perf_counter()
        while not ev.query():
            if time.perf_counter() - t0 > self.deadline:
                raise ReplayFailed(self._hang(label), context_lost=True)
            time.sleep(POLL_S)

    def _hang(self, label: str) -> str:
        t = self.transitions[-1]
        how = (
            f"updated from batch {t.before}"
            if t.result == "success"
            else f"instantiated from batch {t.after}'s graph"
        )
        return (
            f"{label}, {how}, did not finish within {self.deadline:.3g} s (100 x the slowest "
            "launch of an own executable, at least 1 s): the updated executable hangs "
            "(sgl-project/sglang #37657: a launch attribute the update kept). The CUDA "
            "context is lost; nothing was written"
        )

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The executable destroyed after the walk; kept, never destroyed, where the walk
        lost the CUDA context (a destroy would touch it again: capture/replay/guard.py)."""
        lost = False
        try:
            yield
        except BaseException as e:
            lost = context_lost(e)
            raise
        finally:
            if lost:
                KEPT.append(self.exe)
            elif self.exe is not None:
                self.exe.close()
