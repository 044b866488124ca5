"""Profiled windows matched and costed: every sampled replay's activities matched to the
graph's nodes (by order, and by CUPTI's node id where the trace carries it), each matched
node's duration and gap (Sample), each replay's totals and launch (ReplayCost),
and how the matching went. Pure computation; the definitions of duration, gap and period
are capture/profile/nodes.py's, which makes one graph's profile of these rows."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from graph_harness.capture.profile.activities import Activity, Launch
from graph_harness.capture.profile.exposure import launch_exposure
from graph_harness.capture.profile.match_plan import MatchPlan
from graph_harness.capture.profile.matching import (
    Match,
    agreement,
    ids_consistent,
    match_by_id,
    match_by_order,
)
from graph_harness.capture.rows import columns, frame


@dataclass(frozen=True)
class Sample:
    """One matched node in one sampled replay: its duration and gap, and its start in its
    window's frame (0 is when the window's first sampled replay began); us."""

    build: int
    window: int
    replay: int
    node: int
    dur_us: float
    gap_us: float
    start_us: float


@dataclass(frozen=True, kw_only=True)
class ReplayCost:
    """One sampled replay: its totals (us), how its matching went, and its launch."""

    build: int
    window: int
    replay: int
    period_us: float  # from the previous replay's last activity's end to its own
    exec_us: float
    gap_us: float
    cost_us: float
    activities: int
    unmatched_activities: int
    unmatched_nodes: int
    out_of_order: int
    start_us: float  # when the previous replay ran out of work, in the window's frame
    # The launch (capture/profile/exposure.py): the GPU idle before its first activity, how
    # late its host call returned after the replay before it ran out of work (negative:
    # that much early; exposure.py judges what that shows), the part of the idle spent
    # waiting on the host, and the host call's length under the profiler; NaN where the
    # trace names no launch.
    lead_gap_us: float
    launch_late_us: float
    exposed_us: float
    launch_us: float


SAMPLE_COLUMNS = columns(Sample)
REPLAY_COLUMNS = columns(ReplayCost)


# --- one replay: durations and gaps ------------------------------------------------------


def replay_costs(
    plan: MatchPlan, acts: Sequence[Activity], match: Match, prev_end: float
) -> list[tuple[int, float, float]]:
    """(node, duration, gap) of each matched node of one replay; `prev_end` is when the
    previous replay's last activity ended. A node whose dependencies went unmatched is
    measured from the latest activity of the replay that ended before it started."""
    start, end = {}, {}
    for a, n in zip(acts, match.node):
        if n is not None:
            start[n], end[n] = a.start_us, a.end_us
    ends = sorted(a.end_us for a in acts)
    out = []
    for n in plan.nodes:
        if n not in start:
            continue
        deps = plan.deps[n]
        done = [end[d] for d in deps if d in end]
        if done:
            ready = max(done)
        elif not deps:
            ready = prev_end
        else:
            k = bisect.bisect_right(ends, start[n])
            ready = ends[k - 1] if k else prev_end
        out.append((n, end[n] - start[n], start[n] - ready))
    return out


# --- every window ---------------------------------------------------------------------


@dataclass
class Window:
    """One profiled window: `replays[0]` is the lead-in (not sampled), the rest samples.
    `local_ids`: node index -> its tools id in the graph replayed, where the driver gives
    them (capture/graph/reader.py tools_ids)."""

    build: int
    window: int
    replays: list[list[Activity]]
    local_ids: dict[int, int] | None = None
    outside: list[int] | None = None  # a step's calls: activities outside its graphs, per call
    launches: list[Launch | None] | None = None  # the host call that launched each replay


@dataclass(frozen=True, kw_only=True)
class Matched:
    """Every replay of each window (its lead-in first) matched by order, and by CUPTI's
    node id where every window carries the nodes' local ids (`use_ids`); the id match is
    the one used (`id_route`) if it is complete in every replay."""

    use_ids: bool
    orders: list[list[Match]]  # per window, per replay
    ids: list[list[Match]]  # the same by id; each empty where ids are not used
    id_route: bool

    @property
    def chosen(self) -> list[list[Match]]:
        return self.ids if self.id_route else self.orders


def match_windows(plan: MatchPlan, windows: Sequence[Window]) -> Matched:
    """Every replay of `windows` matched to the plan's nodes, by order and where it can
    be by id."""
    use_ids = bool(windows) and all(w.local_ids for w in windows) and not plan.nested
    orders = [[match_by_order(plan, acts) for acts in w.replays] for w in windows]
    ids = [
        [match_by_id(plan, acts, w.local_ids) for acts in w.replays] if use_ids else []
        for w in windows
    ]
    id_route = use_ids and all(m.complete for i in ids for m in i)
    return Matched(use_ids=use_ids, orders=orders, ids=ids, id_route=id_route)


def cost_windows(
    plan: MatchPlan, windows: Sequence[Window], matched: Matched
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every sampled replay of `windows` costed by its chosen match: the samples
    (Sample) and the replays (ReplayCost)."""
    samples, rows = [], []
    for w, chosen in zip(windows, matched.chosen):
        mine, replays = _window_rows(plan, w, chosen)
        samples += mine
        rows += replays
    return frame(samples, Sample), frame(rows, ReplayCost)


def _window_rows(
    plan: MatchPlan, w: Window, chosen: list[Match]
) -> tuple[list[Sample], list[ReplayCost]]:
    """One window's sampled replays costed: a row per matched node and one per replay,
    times in its frame (0 is when its first sampled replay began)."""
    samples, rows = [], []
    replays = w.replays
    prev_end = max((a.end_us for a in replays[0]), default=math.nan)
    origin = prev_end  # the window's frame: 0 is when its first sampled replay began
    for r in range(1, len(replays)):
        acts, m = replays[r], chosen[r]
        costs = replay_costs(plan, acts, m, prev_end)
        start = {n: a.start_us for a, n in zip(acts, m.node) if n is not None}
        samples += [Sample(w.build, w.window, r, n, d, g, start[n] - origin) for n, d, g in costs]
        last = max((a.end_us for a in acts), default=prev_end)
        exec_us, gap_us = sum(c[1] for c in costs), sum(c[2] for c in costs)
        call = w.launches[r] if w.launches and r < len(w.launches) else None
        lead, late, exposed, launch = launch_exposure(acts, prev_end, call)
        rows.append(
            ReplayCost(
                build=w.build,
                window=w.window,
                replay=r,
                period_us=last - prev_end,
                exec_us=exec_us,
                gap_us=gap_us,
                cost_us=exec_us + gap_us,
                activities=len(acts),
                unmatched_activities=len(m.unmatched_activities),
                unmatched_nodes=len(m.unmatched_nodes),
                out_of_order=m.out_of_order,
                start_us=prev_end - origin,
                lead_gap_us=lead,
                launch_late_us=late,
                exposed_us=exposed,
                launch_us=launch,
            )
        )
        prev_end = last
    return samples, rows


def matching_summary(
    plan: MatchPlan, windows: Sequence[Window], matched: Matched
) -> dict[str, Any]:
    """How the matching went (a profile's `matching`): the route used and whether it is
    verified, the two routes compared, and what was left unmatched or out of order."""
    sampled_orders = [m for orders in matched.orders for m in orders[1:]]
    sampled = [m for chosen in matched.chosen for m in chosen[1:]]  # the matches costed
    id_route = matched.id_route
    matching: dict[str, Any] = {
        "method": "id" if id_route else "order",
        "verified": id_route or all(m.complete for m in sampled_orders),
        "order_complete": all(m.complete for m in sampled_orders),
        "ids_consistent": _ids_consistent(windows, matched.orders),
        "id_route": "used" if id_route else ("incomplete" if matched.use_ids else "unavailable"),
        "nodes": len(plan.nodes),
        "activities_per_replay": sorted({len(acts) for w in windows for acts in w.replays[1:]}),
        "unmatched_activities": sum(len(m.unmatched_activities) for m in sampled),
        "unmatched_nodes": sum(len(m.unmatched_nodes) for m in sampled),
        "out_of_order": sum(m.out_of_order for m in sampled),
    }
    outside = [x for w in windows if w.outside is not None for x in w.outside[1:]]
    if outside:  # a step's calls: what ran outside its graphs, per sampled call
        matching["outside_graphs_per_call"] = sorted(set(outside))
    if matched.use_ids:
        pairs = [
            (o, i) for orders, ids in zip(matched.orders, matched.ids) for o, i in zip(orders, ids)
        ]
        matching["agreement"] = min(agreement(o, i) for o, i in pairs)
    return matching


def _ids_consistent(windows: Sequence[Window], orders: Sequence[list[Match]]) -> bool | None:
    """ids_consistent within each build (each build replays its own graph, whose node ids
    need not be another build's): None where no trace carried ids."""
    verdicts = []
    for b in sorted({w.build for w in windows}):
        mine = [(w.replays, o) for w, o in zip(windows, orders) if w.build == b]
        verdicts.append(
            ids_consistent(
                [a for replays, _ in mine for a in replays[1:]],
                [m for _, matches in mine for m in matches[1:]],
            )
        )
    known = [v for v in verdicts if v is not None]
    return None if not known else all(known)
