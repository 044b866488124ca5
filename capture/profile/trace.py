"""The in-round profile as a timeline: a Trace Event Format document (the JSON that
ui.perfetto.dev and chrome://tracing open) of the first sampled replays of every profiled
graph, as CUPTI recorded them (capture/profile/nodes.py keeps each activity's start,
duration and gap). Pure computation; capture/profile/document.py writes it as trace.json.

Per graph (a round variant or a step), one process named for it, holding:
- a `replays` track: each traced replay a slice, from the end of the one before it to
  the end of its last activity (its period), its totals and the graph's workload as args;
- a track per step of the round (every stage's `pack` on `pack`) or per scope of a step
  cut at the depth the tables show (the innermost where they show every level), in the
  order the graph first runs them (`thread_sort_index`, and tids in that order);
- each node a complete ("X") slice named by its short kernel name (its type for copies
  and memsets), args: the full kernel, node type and index, scope path, and its start,
  duration and gap exactly as CUPTI stamped them;
- the gap before a node a slice of its own, `gap`, on the node's track just before it
  (none where the gap is not positive). A slice rather than only an arg: selecting a
  stretch in Perfetto then sums gaps and kernels apart (the dispatch share of any
  stretch), and idle stretches show without clicking each node. One name gives them
  one colour in Perfetto (it colours by name); chrome://tracing takes `cname`;
- each dependency between nodes on different tracks a flow arrow, "s" in the node it
  leaves and "f" (with "bp": "e") in the node it reaches. Edges within a track are left
  out (order shows them there), which keeps arrows fewer than slices however big the
  graph; the metadata says how many were drawn and left out.

Times are microseconds; 0 is the start of each graph's first traced replay. Each graph's
replays come from its own profiler session: the processes share an origin, not a moment.

Perfetto's JSON importer (tests/capture/profile/perfetto_import.py models its rules,
from its source; test_trace_import.py replays them) reads each ts and dur apart as
nanoseconds, std::llround(us * 1000) now and truncated before, and needs a track's
slices nested or disjoint, or it moves one to an overflow track with an import error.
CUPTI's times sit on no nanosecond grid (the H200's on a 1/1024 us one), and gaps and
kernels meet edge to edge: each edge is therefore laid out in whole nanoseconds, the
nearest to CUPTI's time, neighbours sharing the very same edge, and written as
`_us(ns)`, which both conversions read back as that integer. A gap or replay slice is
trimmed by the nanosecond where rounding alone would overlap it with its neighbour (a
gap that rounds to nothing has no slice), and a node slice that overlaps another of its
track (parallel branches, a PDL launch) goes on a second lane, `label (2)`; every exact
value stays in the args. A flow event binds the slice open on its track when the
importer reads it (the last one begun), so each sits inside its node's nanoseconds: a
nanosecond after its start or before its end.

What the importer reads and what it skips: the document's metadata (what the graphs are,
how they were cut, counts per graph) is in `metadata`, which it keeps as the trace's
metadata, not in `otherData`, which it skips (otherData keeps only the schema, as every
graph-harness document names its kind: capture/export/kinds.py). Names in any script are
written as UTF-8, never as the surrogate-pair escapes its parser refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from graph_harness.capture.attribution.node import Node
from graph_harness.capture.attribution.rollup import tree_label, tree_parts
from graph_harness.capture.export.documents import plain
from graph_harness.capture.profile.nodes import VariantProfile
from graph_harness.capture.profile.trace_lanes import REPLAYS, Lanes

TRACE_SCHEMA = "graph-harness/trace"
TRACE_SCHEMA_VERSION = 1
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
    document's metadata."""
    if replays < 1:
        raise ValueError(f"replays must be >= 1, got {replays}")
    kernels = {n["kernel"] for p in profiles.values() for n in p.export.nodes if n["kernel"]}
    shown = (names or (lambda ks: {k: k for k in ks}))(kernels)
    b = _Builder(first_tid=len(profiles) + 1)
    graphs = {
        name: b.graph(pid, name, p, replays, depth, shown)
        for pid, (name, p) in enumerate(profiles.items(), start=1)
    }
    kind = {"schema": TRACE_SCHEMA, "schema_version": TRACE_SCHEMA_VERSION}
    meta = {
        **kind,
        "time": "microseconds, each edge at the nearest nanosecond to CUPTI's stamp (the "
        "exact times in each slice's args); 0 is the start of each graph's first traced "
        "replay (each graph's replays come from its own profiler session)",
        "replays": f"the first {replays} sampled replays of each graph's first window",
        "tracks": _tracks_said(profiles, depth),
        "gaps": "a 'gap' slice before each node with a positive gap, on its track",
        "flows": "dependencies between nodes on different tracks only; edges within a "
        "track are not drawn (the order there shows them)",
        "graphs": graphs,
        **(other or {}),
    }
    events = b.meta + [e for _, e in sorted(b.timed, key=lambda t: t[0])]
    return {"otherData": kind, "metadata": meta, "traceEvents": events}


def _tracks_said(profiles: Mapping[str, VariantProfile], depth: int | None) -> str:
    if all(_is_round(p) for p in profiles.values()):
        return "one per step of the round"
    return "one per scope" + (" (the innermost)" if depth is None else f" at depth {depth}")


def trace_text(doc: dict[str, Any]) -> str:
    """The document as JSON text, one event per line (no NaN or infinity: ValueError).
    Text is written as itself, to be encoded as UTF-8: Perfetto's JSON parser refuses the
    \\uD83D\\uDE00 surrogate pair json.dumps writes for an emoji by default."""
    events = ",\n".join(_json(e) for e in doc["traceEvents"])
    head = "".join(f'"{k}": {_json(doc[k], indent=1)},\n' for k in ("otherData", "metadata"))
    return f'{{{head}"traceEvents": [\n{events}\n]}}\n'


_ESCAPED = re.compile("[\x7f\ud800-\udfff]")


def _json(value: object, indent: int | None = None) -> str:
    """JSON with its strings as UTF-8 text, but DEL escaped (the importer's tokenizer
    refuses a raw control character in a value it skips) and a lone surrogate, which
    capture/text.py keeps from reaching here, written as its backslash escape's text."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False, indent=indent)
    return _ESCAPED.sub(lambda m: "\\u007f" if m[0] == "\x7f" else "\\" + ascii(m[0])[1:-1], text)


def _is_round(p: VariantProfile) -> bool:
    return p.export.is_round


def track_of(node: Node, round_: bool, depth: int | None) -> str:
    """A node's track: its step in the round; else its scope cut at `depth`, as the
    tables label it (capture/attribution/rollup.py)."""
    if round_:
        return node["step"]
    return tree_label(tree_parts(node["scope_path"])[: None if depth is None else depth])


# --- the nanosecond grid ----------------------------------------------------------------


def _ns(us: float) -> int:
    """A time's edge on the timeline: the nearest whole nanosecond."""
    return round(us * 1000.0)


def _us(ns: int) -> float:
    """`ns` as the file writes it: microseconds to three places and a 2 in the fourth,
    (ns + 0.2) / 1000, which Perfetto's importer reads back as `ns` under both of its
    rules, std::llround(us * 1000) and a truncation, however it parses the digits (its own
    parser is not always the nearest double): 0.2 ns from one integer and 0.8 from the
    next. Never more than 15 digits, so json.dumps writes these very digits."""
    whole, part = divmod(abs(ns), 1000)
    return float(f"{'-' if ns < 0 else ''}{whole}.{part:03d}2")


def _flow_points(a: int, b: int) -> tuple[int, int]:
    """Where a flow leaves and reaches a node slice [a, b) ns: a nanosecond inside each
    edge, strictly within the slice, so it binds there whatever order the importer reads
    equal times in; a slice of under 2 ns is bound at its start, where the importer reads
    the slice before the flow (it orders complete slices first: trace_sorter.h)."""
    return (a + 1, b - 1) if b - a >= 2 else (a, a)


# --- the document ---------------------------------------------------------------------


class _Builder:
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
        if "start_us" not in p.samples or "start_us" not in p.replays:
            raise ValueError(
                f"{name}: this profile keeps no start times (it was made before "
                "graph-harness kept them): profile it again to draw its timeline"
            )
        round_ = _is_round(p)
        self._process(pid, name)
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
        lanes = Lanes()
        replay_fits = [
            lanes.replay(_ns(x.start_us), _ns(x.start_us + x.period_us)) for x in reps.itertuples()
        ]
        spans = [(_ns(x.start_us), _ns(x.start_us + x.dur_us)) for x in rows.itertuples()]
        placed = [
            lanes.node(track[x.node], a, b, _ns(x.start_us - x.gap_us) if x.gap_us > 0 else None)
            for x, (a, b) in zip(rows.itertuples(), spans)
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
            args["workload"] = p.export.workload
            self._slice(pid, tids[REPLAYS, 0], "replay", f"replay {x.replay}", fit, args)
        where: dict[tuple[int, int], tuple[int, int, int]] = {}
        excess = p.node_excess  # CUPTI's own cost per node, where the run measured it
        for x, (lane, gap_fit), span in zip(rows.itertuples(), placed, spans):
            tid, rec = tids[track[x.node], lane], nodes[x.node]
            net = {"gap_net_us": x.gap_us - excess[x.node]} if p.calibrated else {}
            if gap_fit is not None:
                args = {"before node": x.node, "gap_us": x.gap_us, **net, "replay": x.replay}
                self._slice(pid, tid, GAP, GAP, gap_fit, args, cname=GAP_COLOUR)
            label = shown.get(rec["kernel"], rec["kernel"]) if rec["kernel"] else rec["type"]
            args = dict(kernel=rec["kernel"], type=rec["type"], node=x.node)
            args |= dict(scope=rec["scope"], scope_path=list(rec["scope_path"]))
            args |= {"stage": rec["stage"]} if rec.get("stage") is not None else {}
            args |= dict(dur_us=x.dur_us, gap_us=x.gap_us, **net, start_us=x.start_us)
            args |= dict(replay=x.replay, build=build, window=window)
            self._slice(pid, tid, rec["type"], label, span, args)
            where[int(x.replay), int(x.node)] = (tid, *span)
        drawn, within, unbound = self._flows(pid, p, track, where)
        return {
            "pid": pid,
            "workload": p.export.workload,
            "build": plain(build),
            "window": plain(window),
            "replays": [plain(v) for v in traced],
            "nodes": len(p.plan.nodes),
            "slices": len(rows),
            "tracks": shown_tracks,
            "flows": drawn,
            "flows_within_tracks": within,
            "flows_too_short_to_bind": unbound,
            "trimmed_slices": lanes.trimmed,
        }

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
        ev = dict(ph="X", cat=cat, name=name, pid=pid, tid=tid, ts=_us(a), dur=_us(b - a))
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
                leave, reach = _flow_points(src_a, src_b)[0], _flow_points(a, b)[1]
                if leave >= reach:
                    unbound += 1
                    continue
                flow = dict(cat=FLOW, name=FLOW, id=self.next_flow, pid=pid)
                self.timed.append((leave, dict(ph="s", tid=src_tid, ts=_us(leave), **flow)))
                self.timed.append((reach, dict(ph="f", bp="e", tid=tid, ts=_us(reach), **flow)))
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
