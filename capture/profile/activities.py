"""What the GPU ran, as CUPTI saw it: a graph replayed under torch.profiler, its device
activities (kernels, copies, memsets) read from the exported Chrome trace and split into
replays.

Only `record_replays` needs a GPU; reading a trace and splitting it are plain functions
of the trace, tested on the CPU with synthetic ones.

What a trace holds for each device activity (Kineto's JSON, `"ph": "X"`): `cat` (kernel,
gpu_memcpy, gpu_memset), `name` (a kernel's demangled C++ name; a copy "Memcpy DtoD
(Device -> Device)"), `ts` and `dur` in microseconds, and `args` with `stream` and
`correlation`. A graph's kernels all carry the correlation id of the cudaGraphLaunch that
ran them. Newer Kineto adds CUPTI's `graph id` and `graph node id` (the node of the
instantiated graph; some versions pack the graph id into its upper 32 bits); read when
present, they let capture/profile/matching.py check its matching by another route.

The driver may run a graph's device-to-device memcpy node as a copy kernel of its own
(CUPTI files it under "kernel" as `memcpy32_post` on the H200, driver 580), or as a
"Memcpy DtoD" activity: both are the node's activity (capture/profile/matching.py).
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
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


def record_replays(
    graph: torch.cuda.CUDAGraph | Replayer,
    replays: int,
    *,
    warmup: int = 5,
    what: str = "a profiled window",
) -> list[list[Activity]]:
    """Replay `graph` (a torch.cuda.CUDAGraph, or a capture/replay/guard.py Replayer of
    one) `warmup` times, then `replays` times back to back under torch.profiler (CUDA
    activities only: CUPTI), and return what ran, one list per replay. Each run is a
    window: a step with a reset is reset before it, a CUDA error in it is one line.
    Syncs the device."""
    r = as_replayer(graph, "the graph")
    with r.window(f"the warm-up before {what}"):
        r.replay(warmup)  # the first instantiates: outside the profile
    with r.window(what):
        trace = cupti_trace(lambda: r.replay(replays))
    return split_replays(activities_from_trace(trace), replays)


def cupti_trace(run: Callable[[], object]) -> dict:
    """Call `run` under torch.profiler (CUDA activities only: CUPTI), wait for the device,
    and return the Chrome trace it recorded."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        sync()
    with tempfile.TemporaryDirectory(prefix="graph-harness-trace-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return json.loads(path.read_text())
