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
`to_us(ns)` (capture/profile/trace_grid.py), which both conversions read back as that
integer. A gap or replay slice is trimmed by the nanosecond where rounding alone would
overlap it with its neighbour (a gap that rounds to nothing has no slice), and a node
slice that overlaps another of its track (parallel branches, a PDL launch) goes on a
second lane, `label (2)`; every exact value stays in the args. A flow event binds the
slice open on its track when the importer reads it (the last one begun), so each sits
inside its node's nanoseconds: a nanosecond after its start or before its end.

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

from graph_harness.capture.profile.nodes import VariantProfile
from graph_harness.capture.profile.trace_events import Events
from graph_harness.capture.profile.trace_events import track_of as track_of  # re-exported

TRACE_SCHEMA = "graph-harness/trace"
TRACE_SCHEMA_VERSION = 1
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
    b = Events(first_tid=len(profiles) + 1)
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
    if all(p.export.is_round for p in profiles.values()):
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
