"""Where each slice of a profile's timeline goes (capture/profile/trace.py): Perfetto's
JSON importer needs a track's slices nested or disjoint, so a node slice that overlaps
another of its track (parallel branches, a PDL launch) goes on the track's first free
lane, and a gap or replay slice is trimmed by the nanosecond where rounding alone would
overlap it with its neighbour; the count of trimmed slices goes into the trace.
"""

from __future__ import annotations

REPLAYS = "replays"  # the track of replay slices, first in each process

_NONE = -(2**62)  # the end of an empty lane


class Lanes:
    """Where each slice of a process goes: per (track, lane), the end (ns) of the last
    slice laid there."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], int] = {}
        self.trimmed = 0  # gap and replay slices drawn a nanosecond or so off their edges

    def replay(self, a: int, b: int) -> tuple[int, int] | None:
        """A replay slice [a, b) ns: after the one before it on the replays track."""
        lo = max(a, self.ends.get((REPLAYS, 0), _NONE))
        if b - lo < 1:
            return None
        self.ends[REPLAYS, 0] = b
        self.trimmed += lo != a
        return lo, b

    def node(
        self, label: str, a: int, b: int, gap_at: int | None
    ) -> tuple[int, tuple[int, int] | None]:
        """A node slice [a, b) ns (never moved) and its gap slice from `gap_at` (None: no
        positive gap): on the first lane of its track free at the gap's start (but for a
        nanosecond of rounding) and at the node's, the gap slice fitted in between.
        Returns (lane, the gap slice or None)."""
        free_at = a if gap_at is None else min(gap_at + 1, a)
        lane = 0
        while self.ends.get((label, lane), _NONE) > free_at:
            lane += 1
        gap = None
        if gap_at is not None:
            lo = max(gap_at, self.ends.get((label, lane), _NONE))
            gap = (lo, a) if a - lo >= 1 else None
            self.trimmed += gap is not None and lo != gap_at
        self.ends[label, lane] = b
        return lane, gap
