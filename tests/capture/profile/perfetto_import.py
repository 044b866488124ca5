"""trace.json as Perfetto's JSON importer reads it: the importer's rules replayed in
Python, as its source states them, under the importer's rounding and its older
truncation alike (test_trace_import.py holds every kind of timeline graph-harness writes
to them).

The rules, from google/perfetto at PERFETTO_COMMIT (paths under src/trace_processor/,
lines at that commit):

1. The document (importers/json/json_trace_tokenizer.cc, HandleDictionaryKey, 951-1045):
   "traceEvents" is read; "metadata" becomes the trace's metadata, `json_metadata.<key>`
   (ParseMetadataDictionary, 1089-1126: a scalar as itself, an object as its JSON text;
   since perfetto #6653); "displayTimeUnit" is only counted (stats::json_display_time_unit,
   1004-1011: it never scales a time); every other key is skipped unread, `otherData`
   among them (1030-1043).
2. Numbers (util/json_parser.h, ParseNumber 438-535, StringToDouble 372-432): digits
   alone are an int64; with a '.' or an exponent, a double built as the integer part plus
   the fraction's digits as an int64 over 10^digits (int64 and uint64: they wrap past 19
   digits), then scaled by pow(10, exponent): not always the double nearest the text.
3. Times (json_trace_tokenizer.cc, CoerceToTs 221-288, for ts, dur, tts and tdur, each
   field apart): an int64 of microseconds times 1000; a whole double the same; any other
   double std::llround(us * 1000.0), rounded half away from zero. Before perfetto #1641
   (commit 125877bda1; importers/json/json_utils.cc at its parent, CoerceToTs 32-92, and
   json_trace_parser_impl.cc 230-236): ts from its text, the decimal point moved three
   places and the rest cut off, and dur read by jsoncpp as the nearest double and cast,
   int64(us * 1000.0): truncation both. RULES holds the two conversions.
4. Order (sorter/trace_sorter.h, SlowOperatorLess 190-215, Push 369-375): events in
   order of ts; once an X event is read, equal times go E first, then X longest first,
   then the rest in file order; an event at a negative ts is dropped.
5. Slices (importers/json/json_trace_parser.cc, 'X' 228-269; importers/common/
   slice_tracker.cc, MaybeCloseStack 354-477): a stack per thread (pid, tid). A slice
   first pops each open slice that has ended (end < ts, or end == ts unless both are
   instants); one that starts inside an open slice and ends after it is improperly nested:
   an import error (slice_spill_overlapping_complete_event) and it goes to an overflow
   track, not its thread's (perfetto #4280; dropped or misnested before). dur < 0 drops it.
6. Flows (json_trace_parser.cc 's' 383-396, 'f' 411-425, MaybeAddFlow 560-580;
   importers/common/flow_tracker.cc): a v1 flow is keyed by (id, cat, name)
   (GetFlowIdForV1Event 127); 's', and 'f' with "bp": "e", bind the topmost open slice of
   their thread's track (SliceTracker::GetTopmostSliceOnTrack, slice_tracker.cc 342-352:
   the last slice pushed there and not yet popped: the stack is not closed at the flow's
   own ts); an 'f' without bp binds the next slice to begin on that track
   (ClosePendingEventsOnTrack 140); an 'f' read before its 's' is lost
   (flow_end_without_start, 110), one with no open slice binds nothing
   (flow_no_enclosing_slice). v2 (bind_id with flow_out or flow_in on a slice): that slice.
7. Metadata events (json_trace_parser.cc 'M', 482-557): only process_name and thread_name
   (their args' "name") and process_sort_index and thread_sort_index (args' "sort_index")
   are read; any other name (process_labels) and any other args key is ignored.
8. Event fields read (json_trace_tokenizer.cc, ParseTraceEventContents 673-825): ph ts dur
   pid tid id bind_id cat name flow_in flow_out s bp tts tdur args id2; others are ignored
   (cname, chrome://tracing's colour, is allowed here as a display hint: Perfetto colours
   by name).
9. Strings (util/json_parser.h, UnescapeString 76-175): a \\uD800-\\uDFFF escape (half of
   the surrogate pair json.dumps writes for an emoji by default) is an error (143-149): in
   an event's own field the whole file fails to import (json_trace_tokenizer.cc 662-666,
   "Failure parsing JSON"), in its args the rest of its args are dropped (util/json_args.cc
   121), in the metadata the rest of it. A skipped top-level value passes \\u through
   (AppendUnescapedCharacter 92-96), but a raw control character there, or in the
   metadata, which it skips over first (ReadOneJsonString 125, iscntrl: DEL too), fails
   the file.

`imported` replays rules 1-9 on a file's text and `defects` lists what a user would meet:
a file that fails, slices that overlap a neighbour, flow ends that bind another slice
than the one they are drawn in (or none), information kept where the importer does not
read it, times dropped; `check_clean` holds a file's text to none under both conversions.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PERFETTO_COMMIT = "ec5d16b14b743ba6063d720956d6d6af6610fd72"  # google/perfetto, 2026-08-22
TRUNCATION_UNTIL = "125877bda15f7234a09b1ad5120b44ea6efded08"  # perfetto #1641: rounding

TOP_LEVEL_READ = {"traceEvents", "systemTraceEvents", "metadata", "displayTimeUnit"}
EVENT_FIELDS_READ = {"ph", "ts", "dur", "pid", "tid", "id", "bind_id", "cat", "name"}
EVENT_FIELDS_READ |= {"flow_in", "flow_out", "s", "bp", "tts", "tdur", "args", "id2"}
DISPLAY_HINTS = {"cname"}  # chrome://tracing's colour; not information
METADATA_READ = {"process_name": "name", "thread_name": "name"}
METADATA_READ |= {"process_sort_index": "sort_index", "thread_sort_index": "sort_index"}
PHASES_MODELLED = {"M", "X", "s", "t", "f"}  # what graph-harness writes, and flows' step
INT64 = 2**63
GAP = "gap"  # graph-harness's gap slices (capture/profile/trace.py)


# --- reading the text: numbers and strings as the importer sees them ------------------


class Num(str):
    """A JSON number, kept as its text: the importer reads the text its own way."""


class Text(str):
    """A JSON string, and what of its raw text the importer refuses: a surrogate escape
    (`surrogate`: the escape, or '') where it unescapes, a raw control character
    (`control`) where its tokenizer skips a value."""

    surrogate = ""
    control = False


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)


def _scan_string(s: str, end: int, strict: bool = True) -> tuple[str, int]:
    value, stop = json.decoder.scanstring(s, end, strict)
    out, raw = Text(value), s[end : stop - 1]
    out.control = "\x7f" in raw  # JSON itself forbids the others raw
    for m in _ESCAPE.finditer(raw):
        if m[1][0] == "u" and 0xD800 <= int(m[1][1:], 16) <= 0xDFFF:
            out.surrogate = f"\\{m[1]}"
            break
    return out, stop


def load(text: str) -> Any:
    """The document with every number as its text (Num) and, where the text holds
    anything the importer's unescaping refuses, each string marked (Text.refused)."""
    decoder = json.JSONDecoder(parse_float=Num, parse_int=Num)
    if "\x7f" in text or re.search(r"\\u[dD][89a-fA-F]", text):
        decoder.parse_string = _scan_string  # the slow, pure-Python scanner sees them
        decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder.decode(text)


def _wrap(v: int, bits: int = 64, signed: bool = True) -> int:
    v %= 2**bits
    return v - 2**bits if signed and v >= 2 ** (bits - 1) else v


def string_to_double(text: str) -> float:
    """util/json_parser.h StringToDouble, step by step (not Python's float())."""
    i, neg = (1, True) if text[:1] == "-" else (0, False)
    int_part = 0
    while i < len(text) and text[i].isdigit():
        int_part = _wrap(int_part * 10 + int(text[i]))
        i += 1
    fraction = 0.0
    if i < len(text) and text[i] == ".":
        i += 1
        fract_int, divisor = 0, 1
        while i < len(text) and text[i].isdigit():
            fract_int = _wrap(int(text[i]) + fract_int * 10)
            divisor = _wrap(divisor * 10, signed=False)
            i += 1
        if divisor:
            fraction = float(fract_int) / float(divisor)
        else:  # wrapped to 0: a double divided by 0.0
            fraction = math.inf if fract_int else math.nan
    exponent, exp_neg = 0, False
    if i < len(text) and text[i] in "eE":
        i += 1
        if i < len(text) and text[i] in "+-":
            exp_neg = text[i] == "-"
            i += 1
        while i < len(text) and text[i].isdigit():
            exponent = exponent * 10 + int(text[i])
            i += 1
    out = float(int_part) + fraction
    try:
        if exp_neg:
            out /= math.pow(10, exponent)
        elif exponent > 0:
            out *= math.pow(10, exponent)
    except OverflowError:
        out = math.inf
    if math.isinf(out) or math.isnan(out):
        raise ValueError(f"Double overflow/underflow parsing '{text}'")
    return -out if neg else out


def number(text: str) -> int | float:
    """util/json_parser.h ParseNumber: an int64 where the text is digits alone."""
    if not set(text) & set(".eE"):
        v = int(text)
        if -INT64 <= v < INT64:
            return v
    return string_to_double(text)


def llround(x: float) -> int:
    """std::llround: the nearest integer, halves away from zero (exact: a double's
    fractional part is itself a double)."""
    whole = math.floor(abs(x))
    return int(math.copysign(whole + (abs(x) - whole >= 0.5), x))


def round_ns(text: str) -> int:
    """CoerceToTs (json_trace_tokenizer.cc 221-233): how ts and dur read today."""
    v = number(text)
    if isinstance(v, int):
        return v * 1000
    return int(v) * 1000 if v == math.trunc(v) else llround(v * 1000.0)


def truncated_ts_ns(text: str) -> int:
    """json_utils.cc CoerceToTs(std::string) before #1641: ts from its text, the point
    moved three places, the rest cut off."""
    shift, digits = 0, text
    if (e := next((k for k, c in enumerate(text) if c in "eE"), None)) is not None:
        shift, digits = int(text[e + 1 :]), text[:e]
    int_size = len(digits)
    if (point := text.find(".")) >= 0:
        digits, int_size = digits[:point] + digits[point + 1 :], point
    size = max(1, int_size + shift + 3)
    return int(digits[:size].ljust(size, "0"))


def truncated_dur_ns(text: str) -> int:
    """json_utils.cc CoerceToTs(Json::Value) before #1641: jsoncpp's double (the nearest
    to the text), int64(us * 1000.0); an integer times 1000."""
    if not set(text) & set(".eE"):
        return int(text) * 1000
    return int(float(text) * 1000.0)


@dataclass(frozen=True)
class Rule:
    """How the importer turns a time's text into nanoseconds: ts and dur."""

    name: str
    ts: Callable[[str], int]
    dur: Callable[[str], int]


RULES = {
    "llround (since perfetto #1641)": Rule("llround", round_ns, round_ns),
    "truncation (before #1641)": Rule("truncation", truncated_ts_ns, truncated_dur_ns),
}


# --- the import ------------------------------------------------------------------------


@dataclass
class Slice:
    index: int  # the event's place in traceEvents
    key: tuple[int, int]  # (pid, tid)
    ts: int
    dur: int
    spilled: bool = False  # improperly nested: on an overflow track, with an import error


@dataclass
class Imported:
    """What the importer made of a file: its slices, where each flow end bound, its
    import errors and what it never read."""

    fatal: str = ""
    slices: dict[int, Slice] = field(default_factory=dict)
    bound: dict[int, int | None] = field(default_factory=dict)  # flow event -> slice event
    flows: list[tuple[int, int]] = field(default_factory=list)  # (out slice, in slice)
    errors: Counter = field(default_factory=Counter)
    ignored: list[str] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    times: dict[int, tuple[int, int | None]] = field(default_factory=dict)  # event: ts, dur
    metadata: dict[str, Any] = field(default_factory=dict)


def _refused_in(value: Any, what: str = "surrogate") -> str:
    """The first string in `value` (keys included) the importer refuses for `what`
    ("surrogate" or "control"), described; '' if none."""
    if isinstance(value, Text) and getattr(value, what):
        return f"a surrogate escape {value.surrogate}" if what == "surrogate" else "a raw DEL"
    if isinstance(value, dict):
        items = [*value, *value.values()]
        return next((r for v in items if (r := _refused_in(v, what))), "")
    if isinstance(value, list):
        return next((r for v in value if (r := _refused_in(v, what))), "")
    return ""


def _plain(value: Any) -> Any:
    """A loaded value with its numbers as Python reads them (for comparing values)."""
    if isinstance(value, Num):
        return json.loads(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, str) else value


def imported(text: str, rule: Rule) -> Imported:
    """Rules 1-9 of the module docstring, on a file's text."""
    out = Imported()
    doc = load(text)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    for key, value in doc.items():
        skipped = key == "metadata" or key not in TOP_LEVEL_READ  # SkipOneJsonValue
        if skipped and (r := _refused_in(value, "control")):  # ReadOneJsonString: iscntrl
            out.fatal = f"{key}: {r} in a value the tokenizer skips: Failure parsing JSON"
            return out
        if key not in TOP_LEVEL_READ:
            out.ignored += _ignored_top_level(key, value, doc.get("metadata"))
    if isinstance(doc.get("metadata"), dict):
        if r := _refused_in(doc["metadata"]):  # ParseMetadataDictionary stops there
            out.errors["metadata cut short: " + r] += 1
        out.metadata = {k: _plain(v) for k, v in doc["metadata"].items()}
    events = doc.get("traceEvents", [])
    out.events = events
    queue = []
    for i, e in enumerate(events):
        own = {k: v for k, v in e.items() if k != "args"}
        if r := _refused_in(own):
            out.fatal = f"event {i}: {r} in its own fields: Failure parsing JSON"
            return out
        read = EVENT_FIELDS_READ | DISPLAY_HINTS
        out.ignored += [f"event {i}: field {k!r} ignored" for k in e if k not in read]
        ph = str(e.get("ph", ""))[:1]
        if ph not in PHASES_MODELLED:
            out.errors[f"phase {ph!r}: not modelled here"] += 1
            continue
        if ph == "M":
            out.ignored += _ignored_metadata_event(i, e)
            continue
        if "ts" not in e:
            out.errors["json_tokenizer_failure: no ts"] += 1
            continue
        try:
            ts = rule.ts(e["ts"])
            dur = rule.dur(e["dur"]) if "dur" in e else None
        except ValueError as err:
            out.fatal = f"event {i}: {err}"
            return out
        if ts < 0:
            out.errors["trace_sorter_negative_timestamp_dropped"] += 1
            continue
        out.times[i] = (ts, dur)
        if "args" in e and (r := _refused_in(e["args"])):
            out.errors[f"args cut short: {r}"] += 1
        key = _thread(e)
        # trace_sorter.h SlowOperatorLess: E first, then X longest first, then the rest
        kind = INT64 - 1 - dur if ph == "X" and dur is not None else INT64 - 1
        queue.append((ts, kind, i, ph, key, dur))
    queue.sort(key=lambda q: q[:3])
    _parse(queue, events, out)
    return out


def _ignored_top_level(key: str, value: Any, metadata: Any) -> list[str]:
    """A skipped top-level value is information lost unless the metadata says the same."""
    meta = metadata if isinstance(metadata, dict) else {}
    if not isinstance(value, dict):
        return [f"top level {key!r}: skipped unread"]
    return [
        f"{key}.{k}: skipped unread (not in metadata)"
        for k, v in value.items()
        if k not in meta or _plain(meta[k]) != _plain(v)
    ]


def _ignored_metadata_event(i: int, e: dict) -> list[str]:
    name, args = str(e.get("name", "")), e.get("args") or {}
    if name not in METADATA_READ:
        return [f"event {i}: metadata {name!r} ignored"]
    return [f"event {i}: {name} args {k!r} ignored" for k in args if k != METADATA_READ[name]]


def _parse(queue: list, events: list[dict], out: Imported) -> None:
    stacks: dict[tuple[int, int], list[Slice]] = defaultdict(list)
    pending: dict[tuple[int, int], list[int]] = defaultdict(list)  # 'f' without bp
    starts: dict[tuple, int] = {}  # v1 flow id -> the slice its 's' bound
    waiting: dict[int, tuple] = {}  # 'f' event -> its flow id, until the next slice

    def flow_id(e: dict) -> tuple | None:
        if "id" not in e:
            return None
        return (_plain(e["id"]), str(e.get("cat", "")), str(e.get("name", "")))

    def end(fid: tuple, slice_: int) -> None:
        if fid not in starts:
            out.errors["flow_end_without_start"] += 1
            return
        out.flows.append((starts[fid], slice_))

    for ts, _, i, ph, key, dur in queue:
        e = events[i]
        stack = stacks[key]
        if ph == "X":
            if dur is None:
                out.errors["json_parser_failure: X without dur"] += 1
                continue
            if dur < 0:
                out.errors["slice_negative_duration"] += 1
                continue
            s = out.slices[i] = Slice(i, key, ts, dur)
            if not _close_stack(stack, ts, dur):
                s.spilled = True  # json_trace_parser.cc 238-257: an overflow track
                out.errors["slice_spill_overlapping_complete_event"] += 1
            else:
                stack.append(s)
                for f in pending.pop(key, []):  # ClosePendingEventsOnTrack
                    out.bound[f] = i
                    end(waiting.pop(f), i)
            if "bind_id" in e:  # v2: this slice, just pushed (on whichever track)
                fid = ("v2", _plain(e["bind_id"]))
                if e.get("flow_out") is True:
                    starts[fid] = i
                if e.get("flow_in") is True:
                    end(fid, i)
            continue
        fid = flow_id(e)
        if fid is None:
            out.errors["flow_invalid_id"] += 1
            continue
        top = stack[-1].index if stack else None  # GetTopmostSliceOnTrack: no closing
        if ph == "f" and e.get("bp") != "e":
            pending[key].append(i)
            waiting[i] = fid
            out.bound[i] = None
            continue
        out.bound[i] = top
        if top is None:
            out.errors["flow_no_enclosing_slice"] += 1
        elif ph == "s":
            if fid in starts:
                out.errors["flow_duplicate_id"] += 1
            else:
                starts[fid] = top
        elif ph == "f":
            end(fid, top)
        else:  # 't'
            if fid in starts:
                out.flows.append((starts[fid], top))
                starts[fid] = top
            else:
                out.errors["flow_step_without_start"] += 1


def _close_stack(stack: list[Slice], ts: int, dur: int) -> bool:
    """slice_tracker.cc MaybeCloseStack for a complete slice: pops what ended; False
    where the new slice overlaps an open one without nesting in it."""
    for k in range(len(stack) - 1, -1, -1):
        if k >= len(stack):
            continue
        s = stack[k]
        s_end = s.ts + s.dur
        if s_end < ts or (s_end == ts and not (s.dur == 0 and dur == 0)):
            stack.pop()  # StackPop: the top, whichever slice k is
            continue
        if ts < s_end < ts + dur:
            return False
    return True


# --- what a user meets ----------------------------------------------------------------


def meant(imp: Imported) -> dict[int, int | None]:
    """Per flow event, the slice it is drawn in, by the times as the importer converted
    them: the innermost X slice of its thread that holds its ts (start <= ts < end, or
    an instant at ts); for an 'f' without bp, the next slice to begin there. Where the
    file's slices overlap, the shortest that holds it."""
    by_key: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
    for i, (ts, dur) in imp.times.items():
        if imp.events[i].get("ph") == "X" and dur is not None and dur >= 0:
            by_key[_thread(imp.events[i])].append((ts, ts + dur, i))
    reach = {}  # per thread: slice starts in order, and the latest end among the first k
    for key, xs in by_key.items():
        xs.sort()
        ends, latest = [], -INT64
        for x in xs:
            latest = max(latest, x[1])
            ends.append(latest)
        reach[key] = ([x[0] for x in xs], ends)
    out = {}
    for i, (t, _) in imp.times.items():
        e = imp.events[i]
        if e.get("ph") not in ("s", "t", "f"):
            continue
        key = _thread(e)
        xs, (starts, ends) = by_key.get(key, []), reach.get(key, ([], []))
        if e.get("ph") == "f" and e.get("bp") != "e":
            k = bisect_left(starts, t)
            out[i] = xs[k][2] if k < len(xs) else None
            continue
        holding = []
        for k in range(bisect_right(starts, t) - 1, -1, -1):
            if ends[k] < t:
                break
            a, b, j = xs[k]
            if a <= t < b or a == t == b:
                holding.append((b - a, j))
        out[i] = min(holding)[1] if holding else None
    return out


def _thread(e: dict) -> tuple[int, int]:
    pid, tid = int(number(e.get("pid", "0"))), int(number(e.get("tid", "0")))
    return pid, tid or pid


@dataclass
class Defects:
    fatal: str
    overlapping: list[Slice]  # the importer's own errors: improperly nested, spilled
    nested: list[Slice]  # over another slice of its track: graph-harness nests none
    misbound: list[tuple[int, int | None, int | None]]  # (flow event, meant, bound)
    ignored: list[str]
    errors: Counter
    slices: int

    def __bool__(self) -> bool:
        return bool(
            self.fatal or self.overlapping or self.nested or self.misbound or self.ignored
        ) or bool(self.errors)

    def __str__(self) -> str:
        lines = [self.fatal] if self.fatal else []
        if self.overlapping:
            lines.append(f"{len(self.overlapping)} of {self.slices} slices overlap a neighbour")
        if self.nested:
            lines.append(f"{len(self.nested)} slices drawn over another of their track")
        if self.misbound:
            lines.append(f"{len(self.misbound)} flow ends bind another slice than theirs")
        lines += self.ignored[:5]
        lines += [f"{k}: {v}" for k, v in self.errors.items()]
        return "; ".join(lines) or "clean"


def defects(text: str, rule: Rule) -> Defects:
    imp = imported(text, rule)
    if imp.fatal:
        return Defects(imp.fatal, [], [], [], imp.ignored, imp.errors, 0)
    want = meant(imp)
    misbound = [(f, want[f], b) for f, b in imp.bound.items() if b is None or want[f] != b]
    misbound += [(f, w, None) for f, w in want.items() if f not in imp.bound]
    errors = Counter({k: v for k, v in imp.errors.items() if "spill" not in k})
    spilled = [s for s in imp.slices.values() if s.spilled]
    nested = _nested([s for s in imp.slices.values() if not s.spilled])
    return Defects("", spilled, nested, misbound, imp.ignored, errors, len(imp.slices))


def _nested(slices: list[Slice]) -> list[Slice]:
    """The slices the importer nested under another of their track (graph-harness lays
    each track's slices side by side: one inside another is an overlap it read as
    nesting)."""
    out, by_key = [], defaultdict(list)
    for s in slices:
        by_key[s.key].append(s)
    for xs in by_key.values():
        end = -INT64
        for s in sorted(xs, key=lambda s: (s.ts, -s.dur)):
            if s.ts < end and s.dur > 0:
                out.append(s)
            end = max(end, s.ts + s.dur)
    return out


def check_clean(text: str) -> None:
    """No defect under either conversion, and every flow joins two node slices."""
    for name, rule in RULES.items():
        found = defects(text, rule)
        assert not found, f"{name}: {found}"
        imp = imported(text, rule)
        cats = [(imp.events[a]["cat"], imp.events[b]["cat"]) for a, b in imp.flows]
        assert all(GAP not in pair and "replay" not in pair for pair in cats), name
        assert len(imp.flows) == sum(e["ph"] == "s" for e in imp.events), name
