"""Profiling on a GPU: replay captured graphs under CUPTI and cost every node
(capture/profile/nodes.py does the arithmetic): any captured graphs, or captured steps
with their resets (the built-in round's variants, over fresh builds, are profiled in
capture/round/profile.py).

Everything here syncs the device and needs CUDA.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import pandas as pd
import torch

from graph_harness.capture.environment import environment, now
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.graph.reader import read_graph, tools_ids
from graph_harness.capture.profile.activities import (
    Launch,
    ProfileError,
    profiled,
    record_replays,
)
from graph_harness.capture.profile.calibration import EXCESS_COLUMNS, Excess, measure_excess
from graph_harness.capture.profile.document import HostLaunch, ProfileResult
from graph_harness.capture.profile.fit import with_bases
from graph_harness.capture.profile.nodes import Window, profile_windows
from graph_harness.capture.profile.settings import ProfileSettings
from graph_harness.capture.record.steps import StepCalls
from graph_harness.capture.replay.guard import Replayer, as_replayer
from graph_harness.capture.replay.host import time_launches_us
from graph_harness.capture.replay.timing import time_replays_us
from graph_harness.capture.rows import frame
from graph_harness.capture.state.steps import require_repeatable
from graph_harness.capture.stats import RoundTrial
from graph_harness.capture.text import plural

Progress = Callable[[str], None] | None  # called with each phase's name as it starts


def local_ids(graph: torch.cuda.CUDAGraph | StepCalls, export: NodeExport) -> dict[int, int] | None:
    """Node index -> the node's tools id (graph id << 32 | local id), read from the kept
    graph that `export` was read from (same order); None where the driver lacks it, and
    for a step's calls (several graphs: matched by order only)."""
    if is_calls(graph):
        return None
    raw = read_graph(graph.raw_cuda_graph())
    if [r.kind for r in raw] != [n["type"] for n in export.nodes]:
        raise ProfileError("the graph's nodes are not the export's: read another graph")
    ids = tools_ids([r.handle for r in raw])
    if ids is None:
        return None
    return {i: t for i, (r, t) in enumerate(zip(raw, ids)) if r.parent is None}


def interleaved(names: Sequence[str], windows: int) -> list[tuple[int, str]]:
    """(window, name) in the order they are profiled: every name once per window, the order
    reversed every other window (A B C, C B A, ...), as time_replays_us interleaves its
    trials. With one graph's windows back to back and then the next's, whatever drifts
    between them (the GPU's clock, its temperature) would land in the predicted saving:
    0.5% of a 5 ms round is 25 us, more than the tolerance on a 48-node saving."""
    names = list(names)
    return [(w, n) for w in range(windows) for n in (names if w % 2 == 0 else names[::-1])]


def profile_window(
    graph: torch.cuda.CUDAGraph | Replayer,
    settings: ProfileSettings,
    build: int,
    window: int,
    ids: dict[int, int] | None,
    builds: int = 1,
) -> Window:
    """One profiled window of `graph`: `settings.replays` sampled replays behind a lead-in
    replay (the first window of a graph warms it up first)."""
    warmup = settings.warmup if window == 0 else 1
    what = f"profiled window {window + 1} of {settings.windows}"
    what += f" (build {build + 1} of {builds})" if builds > 1 else ""
    launched: list[Launch | None] = []  # each replay's launch call: is it hidden?
    if not is_calls(graph):
        acts = record_replays(
            graph, settings.replays + 1, warmup=warmup, what=what, launched=launched
        )
        return Window(build, window, acts, ids, launches=launched)
    outside: list[int] = []  # a step's calls: what ran outside its graphs, per call
    acts = record_replays(
        graph, settings.replays + 1, warmup=warmup, what=what, outside=outside, launched=launched
    )
    return Window(build, window, acts, ids, outside, launched)


def is_calls(graph: object) -> bool:
    """Whether `graph` (or the Replayer's graph) is a step's calls: a step that captures
    its own graphs, each replay a call of it (capture/record/steps.py StepCalls), which
    says how many graphs a call launches (what record_replays splits its work by)."""
    return getattr(getattr(graph, "graph", graph), "graph_launches", None) is not None


def profile_graphs(
    graphs: dict[str, tuple[torch.cuda.CUDAGraph | Replayer, NodeExport]],
    settings: ProfileSettings,
    build: int = 0,
    builds: int = 1,
    progress: Progress = None,
) -> dict[str, list[Window]]:
    """`settings.windows` profiled windows of each graph (name -> the graph and the export
    read from it), one build (of `builds`), the graphs' windows interleaved (see
    `interleaved`); one graph's are simply back to back. A graph may come as a Replayer
    (capture/replay/guard.py): a step's, with its reset."""
    runs = {n: as_replayer(g, n) for n, (g, _) in graphs.items()}
    ids = {n: local_ids(runs[n].graph, e) for n, (_, e) in graphs.items()}
    out: dict[str, list[Window]] = {n: [] for n in graphs}
    of_build = f" (build {build + 1} of {builds})" if builds > 1 else ""
    last = None
    for w, n in interleaved(list(graphs), settings.windows):
        if progress and w != last:
            progress(
                f"profiling {plural(len(graphs), 'graph')}, "
                f"window {w + 1} of {settings.windows}{of_build}"
            )
            last = w
        out[n].append(profile_window(runs[n], settings, build, w, ids[n], builds))
    return out


def profile_steps(
    steps: dict[str, tuple[NodeExport, torch.cuda.CUDAGraph | Replayer]],
    settings: ProfileSettings | None = None,
    *,
    timed: bool = True,
    progress: Progress = None,
) -> ProfileResult:
    """Profile captured steps (name -> the export and the kept graph it was read from, or
    a Replayer of it carrying the step's reset and what its warm-ups showed): one build
    each (a step is built by its own factory). `timed`: their graphs are also replayed
    interleaved between CUDA events, for the measured step times and (for two or more)
    the measured saving of each after the first.

    Before any replay, a step that does not repeat and has no reset is refused
    (capture/state/steps.py StepStateError); one with a reset is reset before every run of
    replays, which is at most `settings.replays_per_reset` long, and once at the end.
    Syncs."""
    settings = settings or ProfileSettings()
    names = list(steps)
    runs = {n: as_replayer(g, n) for n, (_, g) in steps.items()}
    for n, r in runs.items():
        require_repeatable(r.repeatability, n)
    with contextlib.ExitStack() as steady:
        for n, r in runs.items():
            if is_calls(r):
                steady.enter_context(r.graph.steady(f"the profile of {n}"))
        trials = _timed_steps(runs, settings, progress) if timed else None
        host_after = profiled()  # a profiler session before the host launches are timed
        host = host_launches(runs, settings, progress) if timed else None
        graphs = {n: (runs[n], export) for n, (export, _) in steps.items()}
        windows = profile_graphs(graphs, settings, progress=progress)
        for r in runs.values():
            r.finish()
    excess = calibrate([export for export, _ in steps.values()], settings, progress)
    profiles = {n: profile_windows(n, export, windows[n]) for n, (export, _) in steps.items()}
    # A step's calls are not fitted to their own timing: CUPTI also slows the eager
    # launches between their graphs, which the fit would lay on the graphs' nodes.
    fitted = trials
    calls = [n for n in names if is_calls(runs[n])]
    if trials is not None and calls:
        fitted = trials[~trials.variant.isin(calls)]
    profiles = with_bases(profiles, fitted, excess)
    return ProfileResult(
        profiles=profiles,
        excess=excess,
        round_trials=trials,
        host_trials=host,
        pairs=[(names[0], n) for n in names[1:]],
        params=None,
        env=environment(torch.device("cuda")),
        created=now(),
        options={
            "timed": timed,
            **settings_options(settings),
            "builds": 1,
            "host_launch_after_profiler": host_after,
        },
    )


def _timed_steps(
    runs: dict[str, Replayer], settings: ProfileSettings, progress: Progress
) -> pd.DataFrame:
    """Each step's replays (a step's calls) timed, trials interleaved: one row per trial."""
    if progress:
        progress(f"timing {plural(len(runs), 'step')}")
    for r in runs.values():
        with r.window("the first replay (it instantiates the graph)"):
            r.replay()
    times = time_replays_us(
        runs,
        replays=settings.timing().round_replays,
        trials=settings.trials,
        warmup=settings.warmup,
    )
    return frame(
        [RoundTrial(n, 0, t, x) for n, ts in times.items() for t, x in enumerate(ts)], RoundTrial
    )


def host_launches(
    runs: dict[str, torch.cuda.CUDAGraph | Replayer],
    settings: ProfileSettings,
    progress: Progress,
    first_trial: int = 0,
) -> pd.DataFrame | None:
    """Each graph's host launch (capture/replay/host.py: single launches from an idle
    device, timed on the CPU), trials interleaved: one row per trial (HostLaunch:
    variant, trial, us; trials numbered from `first_trial`, so that builds' follow on);
    None where `settings.host_launches` is 0."""
    if settings.host_launches < 1:
        return None
    if progress:
        progress(f"timing the host launches of {plural(len(runs), 'graph')}")
    times = time_launches_us(
        runs, trials=settings.trials, launches=settings.host_launches, warmup=1
    )
    return frame(
        [HostLaunch(n, first_trial + t, x) for n, ts in times.items() for t, x in enumerate(ts)],
        HostLaunch,
    )


def calibrate(
    exports: Iterable[NodeExport], settings: ProfileSettings, progress: Progress = None
) -> Excess | None:
    """CUPTI's own cost per node for the node types the graphs hold
    (capture/profile/calibration.py), over `settings.calibration_rounds` rounds; None
    where none were asked for. A calibration CUPTI cannot read gives an empty one with
    its reason (`note`), not a lost profile."""
    if settings.calibration_rounds < 1:
        return None
    types = {n["type"] for e in exports for n in e.nodes}
    try:
        return measure_excess(sorted(types), settings.calibration_rounds, progress=progress)
    except ProfileError as e:
        return Excess({}, pd.DataFrame(columns=EXCESS_COLUMNS), note=str(e))


def settings_options(s: ProfileSettings) -> dict[str, int]:
    keys = ("trials", "builds", "windows", "replays", "warmup", "trace_replays")
    keys += ("calibration_rounds", "host_launches")
    return {k: getattr(s, k) for k in keys}
