"""Whether a graph's launch is hidden when it is replayed back to back, as a decode loop
replays it (issue 43, item 2), measured on CUPTI's one clock: the runtime API record of
each `cudaGraphLaunch` and the device activities of the replay it launched. Hidden: the
launch returned early by more than the profiler's excess in every sampled replay;
exposed: late by more than its whole call took, in most; else "cannot tell". The rule and
its reasons: docs/profile.md, "Hidden or exposed launches"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from graph_harness.capture.profile.activities import Activity, Launch

Exposure = Literal["hidden", "exposed", "cannot tell", "unknown"]


def launch_exposure(
    acts: Sequence[Activity], prev_end: float, launch: Launch | None
) -> tuple[float, float, float, float]:
    """(lead gap, launch late, exposed, launch call's length), us, for one replay whose
    predecessor's last activity ended at `prev_end`: the GPU's idle before its first
    activity; how late its launch call returned after `prev_end` (negative: early); the
    idle spent waiting on that call (0 where it returned in time); NaN where unknown."""
    lead = min(a.start_us for a in acts) - prev_end if acts else math.nan
    if launch is None or math.isnan(prev_end):
        return lead, math.nan, math.nan, math.nan
    late = launch.end_us - prev_end
    exposed = min(max(late, 0.0), max(lead, 0.0)) if not math.isnan(lead) else math.nan
    return lead, late, exposed, launch.end_us - launch.start_us


def exposure_verdict(
    late_us: Sequence[float],
    excess_us: Sequence[float],
    launch_us: Sequence[float],
    host_launch_us: float | None = None,
    *,
    calls: bool = False,
) -> tuple[Exposure, str]:
    """The verdict on one graph's launches over its sampled replays (each replay's launch
    late, the profiler's device excess on it at the upper end of its interval, and its
    launch call's length under the profiler), and the line that says why.
    `host_launch_us`: the launch's plain host time, where measured (said, not judged by:
    it is a whole `replay()` call and the profiler's call is the driver's alone). `calls`:
    the replays are calls of a step that launches its own graphs among eager work, whose
    first launch alone is read."""
    late = np.asarray(late_us, dtype=float)
    known = ~np.isnan(late)
    if not known.any():
        return "unknown", "the trace names no launch call for its replays"
    if calls:
        return "cannot tell", (
            "a call of this step launches its graphs among eager work, and only its first "
            "launch is read"
        )
    late = late[known]
    excess = np.asarray(excess_us, dtype=float)[known]
    call = np.asarray(launch_us, dtype=float)[known]
    slack = float(np.median(-late))
    # Hidden: early by more than the profiler's own device cost on that replay, in every
    # replay (the profiler only ever makes a launch later). Where that cost is not
    # measured, no replay can be shown hidden by it.
    margin = late + np.where(np.isnan(excess), np.inf, np.maximum(excess, 0.0))
    if (margin <= 0).all():
        return "hidden", (
            f"every launch returned before the GPU ran out of the replay before it, by "
            f"{slack:.1f} us (median), more than the profiler's own cost on that replay"
        )
    # Exposed: late by more than the whole launch call as profiled, as if the call took
    # no time at all without the profiler.
    if np.median(late - call) > 0:
        plain = "" if host_launch_us is None else f"; its plain host time {host_launch_us:.1f} us"
        return "exposed", (
            f"the launch returned {float(np.median(late)):.1f} us (median) after the GPU ran "
            f"out of work, more than its whole call under the profiler took{plain}"
        )
    if np.isnan(excess).all():
        why = "the profiler's own cost on the device was not measured (no calibration)"
    else:
        why = "the launch's margin is within what the profiler adds to either side"
    return "cannot tell", f"{why}: median slack {slack:.1f} us"
