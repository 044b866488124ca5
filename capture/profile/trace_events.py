"""The timeline's events, graph by graph (capture/profile/trace.py's document, whose
docstring says what each is and why): a process per graph, a thread per track and lane
in model order, its replay, node and gap slices laid on the nanosecond grid
(capture/profile/trace_grid.py), and a flow per dependency across tracks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import pandas as pd

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.attribution.rollup import tree_label, tree_parts
from graph_harness.capture.export.documents import plain
from graph_harness.capture.profile.nodes import VariantProfile
from graph_harness.capture.profile.trace_grid import flow_points, to_ns, to_us
from graph_harness.capture.profile.trace_lanes import REPLAYS, Lanes

GAP = "gap"
GAP_COLOUR = "bad"  # a colour name chrome://tracing reserves; Perfetto colours by name
FLOW = "dependency"  # the flows' category and name: Perfetto pairs s and f by (id, cat, name)


def _is_round(p: VariantProfile) -> bool:
    return p.export.is_round


def track_of(node: Node, round_: bool, depth: int | None) -> str:
    """A node's track: its step in the round; else its scope cut at `depth`, as the
    tables label it (capture/attribution/rollup.py)."""
    if round_:
        return node["step"]
    return tree_label(tree_parts(node["scope_path"])[: None if depth is None else depth])


class _Traced(NamedTuple):
    """What a graph's timeline shows: its first window's first sampled replays."""

    build: Any
    window: Any
    traced: list  # the replays drawn
    rows: pd.DataFrame  # their node samples, in replay and start order
    reps: pd.DataFrame  # their replay rows


def _first_replays(p: VariantProfile, replays: int) -> _Traced:
    """The first `replays` sampled replays of the profile's first window (its lowest
    build, then window)."""
    s = p.samples
    build = s.build.min()
    window = s[s.build == build].window.min()
    mine = s[(s.build == build) & (s.window == window)]
    traced = sorted(mine.replay.unique())[:replays]
    rows = mine[mine.replay.isin(traced)].sort_values(["replay", "start_us"])
    r = p.replays
    reps = r[(r.build == build) & (r.window == window) & r.replay.isin(traced)]
    return _Traced(build, window, traced, rows, reps)


class Events:
    """Events of every graph: metadata first, then slices and flows; tids and flow ids
    unique in the document (tids after every pid, so none is read as a process's own)."""

    def __init__(self, first_tid: int) -> None:
        self.meta: list[dict] = []
        self.timed: list[tuple[int, dict]] = []  # (ns, event): slices and flows
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
        """One graph's process and its events; what was drawn, for the metadata."""
        if "start_us" not in p.samples or "start_us" not in p.replays:
            raise ValueError(
                f"{name}: this profile keeps no start times (it was made before "
                "graph-harness kept them): profile it again to draw its timeline"
            )
        round_ = _is_round(p)
        self._process(pid, name)
        if not len(p.samples):
            return {"pid": pid, "replays": [], "slices": 0}
        t = _first_replays(p, replays)
        nodes = {n["index"]: n for n in p.export.nodes}
        track = {n: track_of(nodes[n], round_, depth) for n in p.plan.nodes}
        lanes = Lanes()
        replay_fits = [
            lanes.replay(to_ns(x.start_us), to_ns(x.start_us + x.period_us))
            for x in t.reps.itertuples()
        ]
        spans = [(to_ns(x.start_us), to_ns(x.start_us + x.dur_us)) for x in t.rows.itertuples()]
        placed = [
            lanes.node(track[x.node], a, b, to_ns(x.start_us - x.gap_us) if x.gap_us > 0 else None)
            for x, (a, b) in zip(t.rows.itertuples(), spans)
        ]
        tids, shown_tracks = self._threads(
            pid, lanes, _track_rank(track, p.plan.nodes, p.export.step_order)
        )
        self._replay_slices(pid, tids[REPLAYS, 0], p, t, replay_fits)
        laid = [
            (tids[track[x.node], lane], gap_fit, span)
            for x, (lane, gap_fit), span in zip(t.rows.itertuples(), placed, spans)
        ]
        where = self._node_slices(pid, p, t, laid, shown)
        drawn, within, unbound = self._flows(pid, p, track, where)
        return {
            "pid": pid,
            "workload": p.export.workload,
            "build": plain(t.build),
            "window": plain(t.window),
            "replays": [plain(v) for v in t.traced],
            "nodes": len(p.plan.nodes),
            "slices": len(t.rows),
            "tracks": shown_tracks,
            "flows": drawn,
            "flows_within_tracks": within,
            "flows_too_short_to_bind": unbound,
            "trimmed_slices": lanes.trimmed,
        }

    def _replay_slices(
        self,
        pid: int,
        tid: int,
        p: VariantProfile,
        t: _Traced,
        fits: list[tuple[int, int] | None],
    ) -> None:
        """A slice per traced replay on the replays track (none where it did not fit)."""
        for x, fit in zip(t.reps.itertuples(), fits):
            if fit is None:
                continue
            args = dict(build=t.build, window=t.window, replay=x.replay, start_us=x.start_us)
            args |= dict(period_us=x.period_us, exec_us=x.exec_us, gap_us=x.gap_us)
            args["dispatch_share"] = x.gap_us / x.period_us if x.period_us else None
            args["workload"] = p.export.workload
            self._slice(pid, tid, "replay", f"replay {x.replay}", fit, args)

    def _node_slices(
        self,
        pid: int,
        p: VariantProfile,
        t: _Traced,
        laid: list[tuple[int, tuple[int, int] | None, tuple[int, int]]],
        shown: dict[str, str],
    ) -> dict[tuple[int, int], tuple[int, int, int]]:
        """Each traced node's slice, and its gap's before it, where `laid` puts them (tid,
        gap, node span per row); where each went, by (replay, node), for the flows."""
        nodes = {n["index"]: n for n in p.export.nodes}
        where: dict[tuple[int, int], tuple[int, int, int]] = {}
        excess = p.node_excess  # CUPTI's own cost per node, where the run measured it
        for x, (tid, gap_fit, span) in zip(t.rows.itertuples(), laid):
            rec = nodes[x.node]
            net = {"gap_net_us": x.gap_us - excess[x.node]} if p.calibrated else {}
            if gap_fit is not None:
                args = {"before node": x.node, "gap_us": x.gap_us, **net, "replay": x.replay}
                self._slice(pid, tid, GAP, GAP, gap_fit, args, cname=GAP_COLOUR)
            label = shown.get(rec["kernel"], rec["kernel"]) if rec["kernel"] else rec["type"]
            args = dict(kernel=rec["kernel"], type=rec["type"], node=x.node)
            args |= dict(scope=rec["scope"], scope_path=list(rec["scope_path"]))
            args |= {"stage": rec["stage"]} if rec.get("stage") is not None else {}
            args |= dict(dur_us=x.dur_us, gap_us=x.gap_us, **net, start_us=x.start_us)
            args |= dict(replay=x.replay, build=t.build, window=t.window)
            self._slice(pid, tid, rec["type"], label, span, args)
            where[int(x.replay), int(x.node)] = (tid, *span)
        return where

    def _process(self, pid: int, name: str) -> None:
        """Its name and place: the two process metadata events the importer reads (it
        ignores process_labels; the workload is in the replays' args and the metadata)."""
        self.meta += [
            dict(ph="M", name="process_name", pid=pid, args={"name": name}),
            dict(ph="M", name="process_sort_index", pid=pid, args={"sort_index": pid}),
        ]

    def _threads(
        self, pid: int, lanes: Lanes, rank: Callable[[str], tuple[int, ...]]
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
        span: tuple[int, int],
        args: dict[str, object],
        cname: str | None = None,
    ) -> None:
        """A complete slice over [a, b) ns."""
        a, b = span
        ev = dict(ph="X", cat=cat, name=name, pid=pid, tid=tid, ts=to_us(a), dur=to_us(b - a))
        ev |= {"cname": cname} if cname else {}
        ev["args"] = {k: plain(v) for k, v in args.items()}
        self.timed.append((a, ev))

    def _flows(
        self,
        pid: int,
        p: VariantProfile,
        track: dict[int, str],
        where: dict[tuple[int, int], tuple[int, int, int]],
    ) -> tuple[int, int, int]:
        """An arrow per dependency across tracks in every traced replay. The importer
        pairs s and f in the order it reads them: an arrow whose end would come before
        its start (a node reached before the one it leaves has begun) is not drawn."""
        drawn = within = unbound = 0
        for (replay, n), (tid, a, b) in where.items():
            for d in sorted(p.plan.deps[n]):
                if (replay, d) not in where:
                    continue
                if track[d] == track[n]:
                    within += 1
                    continue
                src_tid, src_a, src_b = where[replay, d]
                leave, reach = flow_points(src_a, src_b)[0], flow_points(a, b)[1]
                if leave >= reach:
                    unbound += 1
                    continue
                flow = dict(cat=FLOW, name=FLOW, id=self.next_flow, pid=pid)
                self.timed.append((leave, dict(ph="s", tid=src_tid, ts=to_us(leave), **flow)))
                self.timed.append((reach, dict(ph="f", bp="e", tid=tid, ts=to_us(reach), **flow)))
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
