"""The host side of a graph launch: the CPU time of one `replay()`, with no synchronize
inside the timed span, against the graph's node count, fitted as the device side is
(capture/stats.py fit_chain): a slope per node with its 95% interval, and the fixed cost.

Graphs of three shapes, each of N calls of one chain kind (capture/replay/kinds.py):
"chain", "fork-join" (8 streams) and "wide" (16 streams). Each timed launch starts from
an idle device (synchronized outside the timed span), with Python's garbage collector
held off. Why those shapes and an idle device: docs/profile.md, "capture/replay/host.py".
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from graph_harness.capture.graph.capture import capture_graph
from graph_harness.capture.graph.reader import read_graph
from graph_harness.capture.replay.chains import chain_calls
from graph_harness.capture.replay.document import HOST_FIT_COLUMNS, HostTrial
from graph_harness.capture.replay.guard import Replayer, as_replayer, sync
from graph_harness.capture.replay.kinds import get_kind
from graph_harness.capture.replay.settings import ReplaySettings
from graph_harness.capture.rows import frame
from graph_harness.capture.state.steps import Repeatability, start_of
from graph_harness.capture.stats import fit_chain
from graph_harness.capture.text import plural

# Shape -> branches (streams the calls are spread over).
SHAPES = {"chain": 1, "fork-join": 8, "wide": 16}
HOST_KINDS = ("triton-empty", "torch-add")
HOST_LENGTHS = ReplaySettings().host_lengths  # nodes: up to the size of a large decode step


def shaped(call: Callable[[], object], calls: int, branches: int) -> Callable[[], None]:
    """`calls` calls of `call` spread over `branches` streams forked from the current one
    and joined back into it (one branch: serial on the current stream)."""
    streams = [torch.cuda.Stream() for _ in range(branches)] if branches > 1 else []
    if len({s.cuda_stream for s in streams}) != len(streams):
        raise ValueError(f"{branches} branches need {branches} streams; torch gave fewer")

    def run() -> None:
        if not streams:
            for _ in range(calls):
                call()
            return
        main = torch.cuda.current_stream()
        if main.cuda_stream in {s.cuda_stream for s in streams}:
            raise RuntimeError("a branch's stream is the capture's own: fewer branches")
        share = [calls // branches + (k < calls % branches) for k in range(branches)]
        for s, n in zip(streams, share):
            s.wait_stream(main)
            with torch.cuda.stream(s):
                for _ in range(n):
                    call()
        for s in streams:
            main.wait_stream(s)

    return run


def time_launches_us(
    graphs: dict[str, torch.cuda.CUDAGraph | Replayer],
    *,
    trials: int,
    launches: int,
    warmup: int,
) -> dict[str, list[float]]:
    """Per trial, the median CPU time (us) of `launches` single `replay()` calls of each
    graph, each from an idle device; trials interleaved across graphs (A B C, C B A, ...)
    so that drift hits all alike (syncs the device). A graph may come as a Replayer
    (capture/replay/guard.py): a step's, reset before each trial's launches (outside the
    timed spans), a CUDA error in them one line."""
    runs = {n: as_replayer(g, n) for n, g in graphs.items()}
    names = list(runs)
    for name in names:
        with runs[name].window("the host launch warm-up") as r:
            r.replay(max(warmup, 1))  # the first replay instantiates and uploads
    sync()
    out: dict[str, list[float]] = {n: [] for n in names}
    collecting = gc.isenabled()
    gc.disable()
    try:
        for t in range(trials):
            for name in names if t % 2 == 0 else names[::-1]:
                samples = []
                with runs[name].window(f"host launch trial {t + 1} of {trials}") as r:
                    for _ in range(launches):
                        sync()  # each launch from an idle device
                        samples.append(r.replay_host_ns() / 1e3)
                    sync()
                out[name].append(statistics.median(samples))
    finally:
        if collecting:
            gc.enable()
    return out


def measure_host_launch(
    kinds: Sequence[str] = HOST_KINDS,
    shapes: Sequence[str] = tuple(SHAPES),
    lengths: Sequence[int] = HOST_LENGTHS,
    *,
    trials: int = 30,
    launches: int = 5,
    warmup: int = 3,
    device: torch.device | str = "cuda",
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(trial rows, fits): the host launch time of graphs of each kind and shape at about
    `lengths` nodes (syncs; needs CUDA). Trial rows: HostTrial, `us` a trial's
    median launch. Fits: one per kind and shape (HOST_FIT_COLUMNS): `slope` us per node,
    `intercept` the fixed cost of a launch, each with its 95% bootstrap interval."""
    unknown = [s for s in shapes if s not in SHAPES]
    if unknown:
        raise ValueError(f"unknown graph shape(s) {unknown}; choose from {', '.join(SHAPES)}")
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("host launch times are of CUDA graph launches: they need a CUDA device")
    graph_pool = torch.cuda.graph_pool_handle()
    graphs: dict[str, torch.cuda.CUDAGraph] = {}
    meta: dict[str, tuple[str, str, int, int, int]] = {}
    for kind in kinds:
        if progress:
            progress(f"capturing {kind} graphs for host launch times")
        call = get_kind(kind).make(device)
        # the graph is held while it is read: a temporary's raw address dangles once
        # the CUDAGraph behind it is collected (cudaErrorInvalidValue)
        one = capture_graph(call, graph_pool=graph_pool).graph
        per_call = len(read_graph(one.raw_cuda_graph()))
        del one
        for shape in shapes:
            for calls in chain_calls(lengths, max(per_call, 1)):
                g = capture_graph(shaped(call, calls, SHAPES[shape]), graph_pool=graph_pool).graph
                key = f"{kind}|{shape}|{calls}"
                graphs[key] = g
                nodes = read_graph(g.raw_cuda_graph())
                roots = sum(not n.deps and n.parent is None for n in nodes)
                meta[key] = (kind, shape, roots, calls, len(nodes))
    if progress:
        progress(f"timing the launches of {plural(len(graphs), 'graph')}")
    times = time_launches_us(graphs, trials=trials, launches=launches, warmup=warmup)
    rows = [
        HostTrial(kind=k, shape=s, branches=b, calls=c, nodes=n, trial=t, us=us)
        for key, ts in times.items()
        for (k, s, b, c, n) in [meta[key]]
        for t, us in enumerate(ts)
    ]
    trials_df = frame(rows, HostTrial)
    return trials_df, host_fits(trials_df)


def host_fits(trials_df: pd.DataFrame) -> pd.DataFrame:
    """One fit of launch time against nodes per kind and shape (HOST_FIT_COLUMNS)."""
    out = []
    for (kind, shape), g in trials_df.groupby(["kind", "shape"], sort=False):
        wide = g.pivot_table(index="nodes", columns="trial", values="us")
        f = fit_chain(wide.index.to_numpy(), wide.to_numpy())
        out.append(dict(kind=kind, shape=shape, **f.__dict__))
    return pd.DataFrame(out, columns=HOST_FIT_COLUMNS)


def launch_us(
    graph: torch.cuda.CUDAGraph | Replayer, *, trials: int = 30, launches: int = 5
) -> float:
    """One graph's host launch time (us): the median over trials (syncs)."""
    return statistics.median(
        time_launches_us({"g": graph}, trials=trials, launches=launches, warmup=3)["g"]
    )


def captured_launch_us(
    graph: torch.cuda.CUDAGraph,
    name: str,
    *,
    step: Callable[[], object] | None = None,
    repeatability: Repeatability | None = None,
    trials: int = ReplaySettings.trials,
    launches: int = 5,
) -> tuple[float | None, str | None]:
    """A graph count captured: its host launch time (us, the median over `trials` of the
    median of `launches` single launches from an idle device), or None and why it was not
    measured. A step's graph (`step`, with what its warm-ups showed) is replayed only
    where its warm-ups showed that it repeats, or it has a reset (run before the warm-up
    replay, before each trial and once at the end, leaving it where its capture left it):
    1 + `trials` x `launches` replays."""
    reset = None
    if step is not None:
        rep = repeatability
        if rep is None:
            return None, "not measured: whether the step can take replays was not watched"
        if not rep.reset and rep.repeatable is not True:  # count replays only what is safe
            line = rep.refusal(name) or (
                f"{name} has no step.reset and its warm-ups did not show that it repeats "
                f"({rep.summary()})"
            )
            return None, f"not measured: {line}"
        reset = start_of(step)
    run = Replayer(graph, name, reset=reset, repeatability=repeatability)
    times = time_launches_us({name: run}, trials=trials, launches=launches, warmup=1)[name]
    run.finish()
    return statistics.median(times), None
