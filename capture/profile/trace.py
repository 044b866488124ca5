"""The in-round profile as a timeline: a Trace Event Format document (the JSON that
ui.perfetto.dev and chrome://tracing open) of the first sampled replays of every profiled
graph, as CUPTI recorded them (capture/profile/nodes.py keeps each activity's start,
duration and gap). Pure computation; capture/profile/document.py writes it as trace.json.
One process per graph, a track per step or scope, each node a slice, the gap before it a
`gap` slice, cross-track dependencies as flow arrows; times in microseconds, every edge on
the nanosecond grid Perfetto's importer reads back exactly (capture/profile/trace_grid.py).
The layout and the importer's rules it meets: docs/profile.md, "The timeline's document"."""

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
