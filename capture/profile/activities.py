"""What the GPU ran, as CUPTI saw it: a graph replayed under torch.profiler, its device
activities (kernels, copies, memsets) read from the exported Chrome trace and split into
replays. Only `record_replays` needs a GPU; reading a trace and splitting it are plain
functions of the trace, tested on the CPU with synthetic ones. The trace's fields read,
and the driver's copy kernel: docs/profile.md, "What a trace holds"."""

from __future__ import annotations

import bisect
import json
import math
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.replay.guard import Replayer, as_replayer, sync

if TYPE_CHECKING:
    import torch

# Chrome-trace category -> the graph node type whose work it is.
CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


class ProfileError(HarnessError, RuntimeError):
    """What CUPTI recorded cannot be read as the replays asked for."""


@dataclass(frozen=True)
class Activity:
    kind: str  # "kernel" | "memcpy" | "memset": CUPTI's category
    name: str  # as CUPTI names it (kernels demangled)
    start_us: float
    end_us: float
    stream: int | None = None
    correlation: int | None = None  # the cudaGraphLaunch's: one per replay
    graph_node_id: int | None = None  # CUPTI's graphNodeId, where the trace carries it
    graph_id: int | None = None

    @property
    def dur_us(self) -> float:
        return self.end_us - self.start_us


def _int(v: object) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None


def activities_from_trace(trace: dict) -> list[Activity]:
    """The device activities of a Chrome trace (torch.profiler's export), in start order."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ProfileError("not a Chrome trace: no traceEvents list")
    out = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X" or ev.get("cat") not in CATEGORIES:
            continue
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        start = float(ev["ts"])
        out.append(
            Activity(
                kind=CATEGORIES[ev["cat"]],
                name=str(ev.get("name", "")),
                start_us=start,
                end_us=start + float(ev.get("dur", 0.0)),
                stream=_int(args.get("stream")),
                correlation=_int(args.get("correlation")),
                graph_node_id=_int(args.get("graph node id")),
                graph_id=_int(args.get("graph id")),
            )
        )
    out.sort(key=lambda a: (a.start_us, a.end_us))
    return out


def split_replays(acts: list[Activity], replays: int) -> list[list[Activity]]:
    """`acts` (one window of `replays` back-to-back replays of one graph) as one list per
    replay, each in start order.

    By correlation id where every activity has one and there are exactly `replays` of
    them (each replay is one cudaGraphLaunch); else by time: replays of one graph on one
    stream never overlap, so the time-ordered activities fall into `replays` equal runs.
    ProfileError when neither reading fits."""
    if replays < 1:
        raise ValueError(f"replays must be >= 1, got {replays}")
    acts = sorted(acts, key=lambda a: (a.start_us, a.end_us))
    if acts and all(a.correlation is not None for a in acts):
        groups: dict[int, list[Activity]] = defaultdict(list)
        for a in acts:
            groups[a.correlation].append(a)
        if len(groups) == replays:
            return sorted(groups.values(), key=lambda g: g[0].start_us)
    if not acts or len(acts) % replays:
        raise ProfileError(
            f"CUPTI recorded {len(acts)} device activities for {replays} replays, which "
            "do not split into equal replays (and their correlation ids name "
            f"{len({a.correlation for a in acts})} launches)"
        )
    n = len(acts) // replays
    return [acts[i * n : (i + 1) * n] for i in range(replays)]


@dataclass(frozen=True)
class Launch:
    """One graph launch as CUPTI's runtime (or driver) API record has it: the host call's
    span, on the clock of the device activities (Kineto puts both on one)."""

    correlation: int
    start_us: float
    end_us: float


def launch_calls(trace: dict) -> list[Launch]:
    """The graph launches a Chrome trace's runtime calls made (`cudaGraphLaunch`, the
    driver's `cuGraphLaunch`), in the order they were called."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise ProfileError("not a Chrome trace: no traceEvents list")
    calls = []
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        if ev.get("cat") not in ("cuda_runtime", "cuda_driver"):
            continue
        name = str(ev.get("name", ""))
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        corr = _int(args.get("correlation"))
        if corr is not None and name.lstrip("_").startswith(("cudaGraphLaunch", "cuGraphLaunch")):
            start = float(ev.get("ts", 0.0))
            calls.append(Launch(corr, start, start + float(ev.get("dur", 0.0))))
    return sorted(calls, key=lambda c: c.start_us)


def graph_launches(trace: dict) -> list[int]:
    """The correlation ids of the graph launches a Chrome trace's runtime calls made, in
    the order they were called."""
    return [c.correlation for c in launch_calls(trace)]


def launch_of(replays: list[list[Activity]], launches: list[Launch]) -> list[Launch | None]:
    """The host call that launched each replay (None where the trace does not say): by
    the correlation id its activities carry, else by order where there are as many
    launches as replays."""
    by_id = {c.correlation: c for c in launches}
    out = [by_id.get(r[0].correlation) if r and r[0].correlation is not None else None
           for r in replays]  # fmt: skip
    if None in out and len(launches) == len(replays):
        return list(launches)
    return out


@dataclass(frozen=True)
class Calls:
    """One window of calls of a step that launches several graphs (or eager work between
    them): each call's graph activities, and how many activities ran outside its graphs
    (eager kernels and copies: Inductor's copies of inputs into its graphs, code between
    partitions), per call."""

    replays: list[list[Activity]]
    outside: list[int]
    launches: list[Launch] = field(default_factory=list)  # each call's first launch


def split_calls(trace: dict, calls: int, launches: int) -> Calls:
    """A window of `calls` back-to-back calls, each launching `launches` graphs: the device
    activities of each call's graph launches (by the launches' correlation ids, which
    every activity of a graph carries), in start order; the rest counted as outside the
    graphs (Calls.outside: what ran between the end of one call's graph work and the
    next's). ProfileError where the trace does not name `calls * launches` launches."""
    if calls < 1 or launches < 1:
        raise ValueError(f"calls and launches must be >= 1, got {calls} and {launches}")
    made = launch_calls(trace)
    order = [c.correlation for c in made]
    if len(order) != calls * launches:
        raise ProfileError(
            f"the trace names {len(order)} graph launches (cudaGraphLaunch calls) for "
            f"{calls} calls of a step that launches {launches} graphs per call: its graph "
            "activities cannot be told from its eager ones"
            + (" (this profiler recorded no runtime calls)" if not order else "")
        )
    launch = {c: i for i, c in enumerate(order)}  # correlation -> its launch
    acts = activities_from_trace(trace)
    out: list[list[Activity]] = [[] for _ in range(calls)]
    for a in acts:
        i = launch.get(a.correlation) if a.correlation is not None else None
        if i is not None:
            out[i // launches].append(a)
    # What ran outside the graphs, per call: from where the call before's graph work
    # ended to where this call's ends (the last activity of its graphs to start), so
    # each call gets one whole cycle (what follows its graphs goes to the next call, what
    # precedes them is its own); the lead-in call gets what came before it too, and what
    # ran after the last call's graphs is counted against none.
    ends = [max((a.start_us for a in call), default=-math.inf) for call in out]
    outside = [0] * calls
    for a in acts:
        if a.correlation is None or a.correlation not in launch:
            k = bisect.bisect_right(ends, a.start_us)
            if k < calls:
                outside[k] += 1
    return Calls(out, outside, [made[k * launches] for k in range(calls)])


def record_replays(
    graph: torch.cuda.CUDAGraph | Replayer,
    replays: int,
    *,
    warmup: int = 5,
    what: str = "a profiled window",
    outside: list[int] | None = None,
    launched: list[Launch | None] | None = None,
) -> list[list[Activity]]:
    """Replay `graph` (a torch.cuda.CUDAGraph, or a capture/replay/guard.py Replayer of
    one) `warmup` times, then `replays` times back to back under torch.profiler (CUDA
    activities only: CUPTI), and return what ran, one list per replay. Each run is a
    window: a step with a reset is reset before it, a CUDA error in it is one line.
    A step's calls (capture/record/steps.py StepCalls: `graph_launches` per replay) are
    split by their graph launches (split_calls), the activities outside their graphs
    counted per call into `outside`, where given. `launched`, where given, gets the host
    call that launched each replay (a call's first; launch_of). Syncs the device."""
    r = as_replayer(graph, "the graph")
    with r.window(f"the warm-up before {what}"):
        r.replay(warmup)  # the first instantiates: outside the profile
    with r.window(what):
        trace = cupti_trace(lambda: r.replay(replays))
    launches = getattr(r.graph, "graph_launches", None)  # a step's calls
    if launches is not None:
        calls = split_calls(trace, replays, launches)
        if outside is not None:
            outside += calls.outside
        if launched is not None:
            launched += calls.launches
        return calls.replays
    split = split_replays(activities_from_trace(trace), replays)
    if launched is not None:
        launched += launch_of(split, launch_calls(trace))
    return split


_profiled = False  # whether cupti_trace has run in this process


def profiled() -> bool:
    """Whether a profiler session of graph-harness's (cupti_trace) has run in this process:
    host launch times taken after one may read high (CUPTI stays loaded; BENCHMARKS.md,
    issue 43, session 18)."""
    return _profiled


def cupti_trace(run: Callable[[], object]) -> dict:
    """Call `run` under torch.profiler (CUDA activities only: CUPTI), wait for the device,
    and return the Chrome trace it recorded."""
    from torch.profiler import ProfilerActivity, profile

    global _profiled
    _profiled = True

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        sync()
    with tempfile.TemporaryDirectory(prefix="graph-harness-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())
