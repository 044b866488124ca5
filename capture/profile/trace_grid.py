"""The timeline's nanosecond grid (capture/profile/trace.py): each edge laid out in whole
nanoseconds, the nearest to CUPTI's time, and written as microseconds that Perfetto's JSON
importer reads back as that very integer under both of its rules (rounding, truncation);
where a flow event sits so that it binds inside its node's slice."""

from __future__ import annotations


def to_ns(us: float) -> int:
    """A time's edge on the timeline: the nearest whole nanosecond."""
    return round(us * 1000.0)


def to_us(ns: int) -> float:
    """`ns` as the file writes it: microseconds to three places and a 2 in the fourth,
    (ns + 0.2) / 1000, which Perfetto's importer reads back as `ns` under both of its
    rules, std::llround(us * 1000) and a truncation, however it parses the digits (its own
    parser is not always the nearest double): 0.2 ns from one integer and 0.8 from the
    next. Never more than 15 digits, so json.dumps writes these very digits."""
    whole, part = divmod(abs(ns), 1000)
    return float(f"{'-' if ns < 0 else ''}{whole}.{part:03d}2")


def flow_points(a: int, b: int) -> tuple[int, int]:
    """Where a flow leaves and reaches a node slice [a, b) ns: a nanosecond inside each
    edge, strictly within the slice, so it binds there whatever order the importer reads
    equal times in; a slice of under 2 ns is bound at its start, where the importer reads
    the slice before the flow (it orders complete slices first: trace_sorter.h)."""
    return (a + 1, b - 1) if b - a >= 2 else (a, a)
