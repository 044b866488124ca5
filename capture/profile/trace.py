"""The in-round profile as a timeline: a Trace Event Format document (the JSON that
ui.perfetto.dev and chrome://tracing open) of the first sampled replays of every profiled
graph, as CUPTI recorded them (capture/profile/nodes.py keeps each activity's start,
duration and gap). Pure computation; capture/profile/document.py writes it as trace.json.

Per graph (a round variant or a step), one process named for it, holding:
- a `replays` track: each traced replay a slice, from the end of the one before it to
  the end of its last activity (its period), its totals as args;
- a track per step of the round (every stage's `pack` on `pack`) or per scope of a step
  cut at the depth the tables show (the innermost where they show every level), in the
  order the graph first runs them (`thread_sort_index`, and tids in that order);
- each node a complete ("X") slice named by its short kernel name (its type for copies
  and memsets), args: the full kernel, node type and index, scope path, duration, gap;
- the gap before a node a slice of its own, `gap`, on the node's track just before it
  (none where the gap is not positive). A slice rather than only an arg: selecting a
  stretch in Perfetto then sums gaps and kernels apart (the dispatch share of any
  stretch), and idle stretches show without clicking each node. One name gives them
  one colour in Perfetto (it colours by name); chrome://tracing takes `cname`;
- each dependency between nodes on different tracks a flow arrow: "s" and "f" (with
  "bp": "e") at the middles of the two nodes, strictly inside their slices, so the
  importer binds them there whatever order it reads equal timestamps in. Edges within
  a track are left out (order shows them there), which keeps arrows fewer than slices
  however big the graph; otherData says how many were drawn and left out.

Times are microseconds as CUPTI stamped them (never rounded): 0 is the start of each
graph's first traced replay. Each graph's replays come from its own profiler session:
the processes share an origin, not a moment.

Perfetto reads a time as int(us * 1000) ns and needs a track's slices nested or
disjoint. A gap slice ends where its node starts and a replay where the next begins, so
truncation alone could overlap them by a nanosecond: every track is laid out in that
arithmetic, a gap or replay slice trimmed by the nanosecond where it must be (its exact
value stays in its args), and a node slice that overlaps another of its track (parallel
branches, a PDL launch) put on a second lane, `label (2)`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.attribution.rollup import tree_label, tree_parts
from graph_harness.capture.profile.nodes import VariantProfile

TRACE_SCHEMA = "graph-harness/trace"
TRACE_SCHEMA_VERSION = 1
REPLAYS = "replays"  # the track of replay slices, first in each process
GAP = "gap"
GAP_COLOUR = "bad"  # a colour name chrome://tracing reserves; Perfetto colours by name
FLOW = "dependency"  # the flows' category and name: Perfetto pairs s and f by (id, cat, name)

Names = Callable[[Iterable[str]], dict[str, str]]


def profile_trace(
    profiles: Mapping[str, VariantProfile],
    *,
    replays: int,
    depth: int | None = None,
    names: Names | None = None,
    other: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The timeline of the first `replays` sampled replays of each graph's first window.
    `depth`: where a step's scopes are cut (None: the innermost); `names`: full kernel
    names -> the names to show (reports passes its short names); `other`: more of the
    document's metadata (otherData)."""
    if replays < 1:
        raise ValueError(f"replays must be >= 1, got {replays}")
    kernels = {n["kernel"] for p in profiles.values() for n in p.export.nodes if n["kernel"]}
    shown = (names or (lambda ks: {k: k for k in ks}))(kernels)
    b = _Builder(first_tid=len(profiles) + 1)
    graphs = {
        name: b.graph(pid, name, p, replays, depth, shown)
        for pid, (name, p) in enumerate(profiles.items(), start=1)
    }
    meta = {
        "schema": TRACE_SCHEMA,
        "schema_version": TRACE_SCHEMA_VERSION,
        "time": "microseconds as CUPTI stamped them; 0 is the start of each graph's first "
        "traced replay (each graph's replays come from its own profiler session)",
        "replays": f"the first {replays} sampled replays of each graph's first window",
        "tracks": _tracks_said(profiles, depth),
        "gaps": "a 'gap' slice before each node with a positive gap, on its track",
        "flows": "dependencies between nodes on different tracks only; edges within a "
        "track are not drawn (the order there shows them)",
        "graphs": graphs,
        **(other or {}),
    }
    return {"otherData": meta, "traceEvents": b.meta + sorted(b.timed, key=lambda e: e["ts"])}


def _tracks_said(profiles: Mapping[str, VariantProfile], depth: int | None) -> str:
    if all(_is_round(p) for p in profiles.values()):
        return "one per step of the round"
    return "one per scope" + (" (the innermost)" if depth is None else f" at depth {depth}")


def trace_text(doc: dict[str, Any]) -> str:
    """The document as JSON text, one event per line (no NaN or infinity: ValueError)."""
    events = ",\n".join(json.dumps(e, allow_nan=False) for e in doc["traceEvents"])
    other = json.dumps(doc["otherData"], allow_nan=False, indent=1)
    return f'{{"otherData": {other},\n"traceEvents": [\n{events}\n]}}\n'


def _is_round(p: VariantProfile) -> bool:
    return p.export.is_round


def track_of(node: Node, round_: bool, depth: int | None) -> str:
    """A node's track: its step in the round; else its scope cut at `depth`, as the
    tables label it (capture/attribution/rollup.py)."""
    if round_:
        return node["step"]
    return tree_label(tree_parts(node["scope_path"])[: None if depth is None else depth])


# --- Perfetto's arithmetic ------------------------------------------------------------


def _ns(us: float) -> int:
    """A time as Perfetto's JSON importer reads it: us * 1000, truncated to an int."""
    return int(us * 1000.0)


def _first_at(k: int) -> float:
    """The smallest float that reads as k ns or later."""
    x = k / 1000.0
    while _ns(x) < k:
        x = math.nextafter(x, math.inf)
    while _ns(math.nextafter(x, -math.inf)) >= k:
        x = math.nextafter(x, -math.inf)
    return x


def _last_within(k: int) -> float:
    """The largest float that reads as k ns or less."""
    x = (k + 1) / 1000.0
    while _ns(x) > k:
        x = math.nextafter(x, -math.inf)
    return x


def _fit(ts: float, dur: float, lo: int, hi: int | None) -> tuple[float, float] | None:
    """(ts, dur) moved to start no earlier than `lo` ns and end no later than `hi` ns as
    Perfetto reads them (a nanosecond or so where truncation alone overlaps); None where
    less than 1 ns is left."""
    if _ns(ts) < lo:
        ts, dur = _first_at(lo), ts + dur - _first_at(lo)
    if hi is not None and _ns(ts) + _ns(dur) > hi:
        dur = _last_within(hi - _ns(ts)) if hi >= _ns(ts) else -1.0
    return (ts, dur) if dur > 0 and _ns(dur) >= 1 else None


def _inside(ts: float, dur: float) -> float | None:
    """A time strictly inside the slice as Perfetto reads it (its middle), for a flow."""
    mid = ts + dur / 2
    return mid if _ns(ts) < _ns(mid) < _ns(ts) + _ns(dur) else None


def _plain(v: object) -> object:
    v = v.item() if hasattr(v, "item") else v
    return None if isinstance(v, float) and not math.isfinite(v) else v


# --- the document ---------------------------------------------------------------------


class _Builder:
    """Events of every graph: metadata first, then slices and flows; tids and flow ids
    unique in the document (tids after every pid, so none is read as a process's own)."""

    def __init__(self, first_tid: int) -> None:
        self.meta: list[dict] = []
        self.timed: list[dict] = []
        self.next_tid = first_tid
        self.next_flow = 1

    def graph(
        self,
        pid: int,
        name: str,
        p: VariantProfile,
        replays: int,
        depth: int | None,
        shown: dict[str, str],
    ) -> dict[str, Any]:
        if "start_us" not in p.samples or "start_us" not in p.replays:
            raise ValueError(
                f"{name}: this profile keeps no start times (it was made before "
                "graph-harness kept them): profile it again to draw its timeline"
            )
        round_ = _is_round(p)
        self._process(pid, name, "the built-in round" if round_ else p.export.workload)
        s = p.samples
        if not len(s):
            return {"pid": pid, "replays": [], "slices": 0}
        build = s.build.min()
        window = s[s.build == build].window.min()
        mine = s[(s.build == build) & (s.window == window)]
        traced = sorted(mine.replay.unique())[:replays]
        rows = mine[mine.replay.isin(traced)].sort_values(["replay", "start_us"])
        r = p.replays
        reps = r[(r.build == build) & (r.window == window) & r.replay.isin(traced)]
        nodes = {n["index"]: n for n in p.export.nodes}
        track = {n: track_of(nodes[n], round_, depth) for n in p.plan.nodes}
        lanes = _Lanes()
        replay_fits = [lanes.replay(x.start_us, x.period_us) for x in reps.itertuples()]
        placed = [
            lanes.node(track[x.node], x.start_us, x.dur_us, x.gap_us) for x in rows.itertuples()
        ]
        tids, shown_tracks = self._threads(
            pid, lanes, _track_rank(track, p.plan.nodes, p.export.step_order)
        )
        for x, fit in zip(reps.itertuples(), replay_fits):
            if fit is None:
                continue
            args = dict(build=build, window=window, replay=x.replay, start_us=x.start_us)
            args |= dict(period_us=x.period_us, exec_us=x.exec_us, gap_us=x.gap_us)
            args["dispatch_share"] = x.gap_us / x.period_us if x.period_us else None
            self._slice(pid, tids[REPLAYS, 0], "replay", f"replay {x.replay}", fit, args)
        where: dict[tuple[int, int], tuple[int, float, float]] = {}
        for x, (lane, gap_fit) in zip(rows.itertuples(), placed):
            tid, rec = tids[track[x.node], lane], nodes[x.node]
            if gap_fit is not None:
                args = {"before node": x.node, "gap_us": x.gap_us, "replay": x.replay}
                self._slice(pid, tid, GAP, GAP, gap_fit, args, cname=GAP_COLOUR)
            label = shown.get(rec["kernel"], rec["kernel"]) if rec["kernel"] else rec["type"]
            args = dict(kernel=rec["kernel"], type=rec["type"], node=x.node)
            args |= dict(scope=rec["scope"], scope_path=list(rec["scope_path"]))
            args |= {"stage": rec["stage"]} if rec.get("stage") is not None else {}
            args |= dict(dur_us=x.dur_us, gap_us=x.gap_us, start_us=x.start_us)
            args |= dict(replay=x.replay, build=build, window=window)
            self._slice(pid, tid, rec["type"], label, (x.start_us, x.dur_us), args)
            where[int(x.replay), int(x.node)] = (tid, float(x.start_us), float(x.dur_us))
        drawn, within, unbound = self._flows(pid, p, track, where)
        return {
            "pid": pid,
            "workload": p.export.workload,
            "build": _plain(build),
            "window": _plain(window),
            "replays": [_plain(v) for v in traced],
            "nodes": len(p.plan.nodes),
            "slices": len(rows),
            "tracks": shown_tracks,
            "flows": drawn,
            "flows_within_tracks": within,
            "flows_too_short_to_bind": unbound,
            "trimmed_slices": lanes.trimmed,
        }

    def _process(self, pid: int, name: str, what: str) -> None:
        self.meta += [
            dict(ph="M", name="process_name", pid=pid, args={"name": name}),
            dict(ph="M", name="process_labels", pid=pid, args={"labels": what}),
            dict(ph="M", name="process_sort_index", pid=pid, args={"sort_index": pid}),
        ]

    def _threads(
        self, pid: int, lanes: _Lanes, rank: Callable[[str], tuple[int, ...]]
    ) -> tuple[dict[tuple[str, int], int], list[str]]:
        """A tid per (track, lane): the replays first, then tracks in rank order, each
        track's second lane after its first."""
        keys = sorted(lanes.ends, key=lambda k: (k[0] != REPLAYS, rank(k[0]), k[1]))
        tids, names = {}, []
        for i, (label, lane) in enumerate(keys):
            tid = tids[label, lane] = self.next_tid
            self.next_tid += 1
            names.append(label if lane == 0 else f"{label} ({lane + 1})")
            self.meta += [
                dict(ph="M", name="thread_name", pid=pid, tid=tid, args={"name": names[-1]}),
                dict(ph="M", name="thread_sort_index", pid=pid, tid=tid, args={"sort_index": i}),
            ]
        return tids, names

    def _slice(
        self,
        pid: int,
        tid: int,
        cat: str,
        name: str,
        fit: tuple[float, float],
        args: dict[str, object],
        cname: str | None = None,
    ) -> None:
        ev = dict(ph="X", cat=cat, name=name, pid=pid, tid=tid)
        ev |= dict(ts=float(fit[0]), dur=float(fit[1]))
        ev |= {"cname": cname} if cname else {}
        ev["args"] = {k: _plain(v) for k, v in args.items()}
        self.timed.append(ev)

    def _flows(
        self,
        pid: int,
        p: VariantProfile,
        track: dict[int, str],
        where: dict[tuple[int, int], tuple[int, float, float]],
    ) -> tuple[int, int, int]:
        """An arrow per dependency across tracks in every traced replay."""
        drawn = within = unbound = 0
        for (replay, n), (tid, ts, dur) in where.items():
            for d in sorted(p.plan.deps[n]):
                if (replay, d) not in where:
                    continue
                if track[d] == track[n]:
                    within += 1
                    continue
                src_tid, src_ts, src_dur = where[replay, d]
                a, b = _inside(src_ts, src_dur), _inside(ts, dur)
                if a is None or b is None or _ns(a) >= _ns(b):  # an end before its start
                    unbound += 1
                    continue
                flow = dict(cat=FLOW, name=FLOW, id=self.next_flow, pid=pid)
                self.timed.append(dict(ph="s", tid=src_tid, ts=a, **flow))
                self.timed.append(dict(ph="f", bp="e", tid=tid, ts=b, **flow))
                self.next_flow += 1
                drawn += 1
        return drawn, within, unbound


def _track_rank(
    track: dict[int, str], order: Iterable[int], step_order: tuple[str, ...]
) -> Callable[[str], tuple[int, ...]]:
    """Tracks in model order: the round's steps in the order its export names them
    (`step_order`), a step's scopes as the graph first runs them (node order)."""
    first: dict[str, int] = {}
    for n in order:
        first.setdefault(track[n], len(first))
    steps = {s: i for i, s in enumerate(step_order)}
    if step_order:
        return lambda label: (steps.get(label, len(steps)), first.get(label, 0))
    return lambda label: (first.get(label, len(first)),)


_NONE = -(2**62)  # the end of an empty lane


class _Lanes:
    """Where each slice of a process goes: per (track, lane), the end (ns, as Perfetto
    reads it) of the last slice laid there."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], int] = {}
        self.trimmed = 0  # gap and replay slices drawn a nanosecond or so off their values

    def replay(self, ts: float, dur: float) -> tuple[float, float] | None:
        """A replay slice: after the one before it on the replays track."""
        fit = _fit(ts, dur, self.ends.get((REPLAYS, 0), _NONE), None)
        if fit is not None:
            self.ends[REPLAYS, 0] = _ns(fit[0]) + _ns(fit[1])
            self.trimmed += fit != (ts, dur)
        return fit

    def node(
        self, label: str, ts: float, dur: float, gap: float
    ) -> tuple[int, tuple[float, float] | None]:
        """A node slice (never moved) and its gap slice: on the first lane of its track
        free at the gap's start (but for truncation's nanosecond) and at the node's, the
        gap slice fitted in between. Returns (lane, the gap slice or None)."""
        start = _ns(ts)
        free_at = min(_ns(ts - gap) + 1, start) if gap > 0 else start
        lane = 0
        while self.ends.get((label, lane), _NONE) > free_at:
            lane += 1
        fit = _fit(ts - gap, gap, self.ends.get((label, lane), _NONE), start) if gap > 0 else None
        self.trimmed += fit is not None and fit != (ts - gap, gap)
        self.ends[label, lane] = start + _ns(dur)
        return lane, fit
