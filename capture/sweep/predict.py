"""A ladder's shared graph pool, predicted from two or three captured sizes (issue 58).

The captured sizes' traces are aligned event by event, each request's size fitted through
the captured points (a third point off the line: flagged, held at its largest), every
ladder size's trace written and replayed, largest first, into one modelled pool
(allocator_model.py): traces, not pool figures, are extrapolated. The smallest sample may
take a path of its own (Inductor specialises batch 1: `own_path`); samples on more paths
are matched request by request and predicted between neighbours (`piecewise`), or
refused with the reason (docs/sweep.md, "How the prediction is made").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise

from .alloc_trace import Alloc, Event, Free, Trace
from .allocator_model import shared_pool_reserved


class NotPredictable(ValueError):
    """The captured sizes' traces cannot be aligned; the message says where they differ."""


@dataclass(frozen=True)
class SizeFit:
    """One request's size as `base + slope * batch`, exact through the captured points;
    `flagged` where they are not on one line (then `worst`, the largest seen, is used)."""

    base: Fraction
    slope: Fraction
    flagged: bool
    worst: int

    def at(self, batch: int) -> int:
        """Bytes at `batch`: the line, rounded up to a byte, never below 0."""
        if self.flagged:
            return self.worst
        return max(0, -(-(self.base + self.slope * batch) // 1))


def _describe(event: Event) -> str:
    return f"alloc of {event.size} B" if isinstance(event, Alloc) else f"free of #{event.alloc}"


def _check_shapes(traces: Mapping[int, Trace]) -> None:
    """Raise NotPredictable where two traces differ in anything but their sizes."""
    (b0, t0), *rest = sorted(traces.items())
    for b, t in rest:
        if len(t.events) != len(t0.events):
            raise NotPredictable(
                f"batch {b0} makes {len(t0.events)} allocator events, batch {b} "
                f"{len(t.events)}: the step takes another path at one of them"
            )
        for i, (e0, e) in enumerate(zip(t0.events, t.events, strict=True)):
            if type(e0) is not type(e) or (isinstance(e, Free) and e != e0):
                raise NotPredictable(
                    f"event {i}: batch {b0} has {_describe(e0)}, batch {b} {_describe(e)}"
                )
        if t.live != t0.live:
            raise NotPredictable(
                f"batch {b0} keeps allocations {sorted(t0.live)} live, batch {b} {sorted(t.live)}"
            )


def paths(traces: Mapping[int, Trace]) -> list[tuple[int, ...]]:
    """The sampled batches grouped by the path their step took: traces that align."""
    groups: list[list[int]] = []
    for b in sorted(traces):
        for g in groups:
            try:
                _check_shapes({g[0]: traces[g[0]], b: traces[b]})
            except NotPredictable:
                continue
            g.append(b)
            break
        else:
            groups.append([b])
    return [tuple(g) for g in groups]


def _refuse_paths(traces: Mapping[int, Trace], groups: list[tuple[int, ...]]) -> None:
    """NotPredictable: the first difference, and the paths the samples fell on (only the
    smallest may take one of its own, beside a line through two or more)."""
    try:
        _check_shapes(traces)
    except NotPredictable as e:
        on = "; ".join("batch " + ", ".join(str(b) for b in g) for g in groups)
        raise NotPredictable(
            f"{e}; the samples take {len(groups)} paths ({on}): a line needs two samples "
            "on one path, and only the smallest may take a path of its own"
        ) from None


def fit_sizes(traces: Mapping[int, Trace]) -> list[SizeFit]:
    """Each allocation's size as a function of batch, from `traces` (batch -> Trace, two
    batches or more); NotPredictable where they do not align."""
    if len(traces) < 2:
        raise NotPredictable(f"{len(traces)} captured size(s): a line needs two")
    _check_shapes(traces)
    batches = sorted(traces)
    columns = list(zip(*(traces[b].allocs for b in batches), strict=True))
    (lo, hi) = batches[0], batches[-1]
    fits = []
    for sizes in columns:
        slope = Fraction(sizes[-1] - sizes[0], hi - lo)
        base = sizes[0] - slope * lo
        on_line = all(base + slope * b == s for b, s in zip(batches, sizes, strict=True))
        fits.append(SizeFit(base, slope, not on_line, max(sizes)))
    return fits


def trace_at(template: Trace, fits: Sequence[SizeFit], batch: int) -> Trace:
    """`template`'s events and live set, each request's size from `fits` at `batch`."""
    sizes = iter(f.at(batch) for f in fits)
    events = tuple(Alloc(next(sizes)) if isinstance(e, Alloc) else e for e in template.events)
    return Trace(events=events, live=template.live)


MOST_HELD = 0.05  # of either sample's requested bytes unmatched: more gives no prediction


@dataclass(frozen=True)
class PathChange:
    """Neighbouring samples `lo` < `hi` on two paths: `held` requests of the two have no
    partner in the other (`share`: the larger part of either's bytes), each at its size."""

    lo: int
    hi: int
    held: int
    share: float


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """The shared pool predicted for `ladder` (captured largest first): its reserved bytes
    after each size, in that order; `flagged`, the requests not affine in batch (by
    number), predicted at their largest captured size."""

    ladder: tuple[int, ...]
    reserved_after: tuple[int, ...]
    flagged: tuple[int, ...]
    own_path: tuple[int, ...] = ()  # samples on a path of their own: their trace, there only
    path_changes: tuple[PathChange, ...] = ()  # neighbours on two paths (piecewise)

    @property
    def reserved(self) -> int:
        return self.reserved_after[-1]


def predict_shared_pool(
    traces: Mapping[int, Trace], ladder: Sequence[int], *, low: bool = False
) -> Prediction:
    """The pool `ladder`'s graphs will share, from the traces of a few captured sizes
    (batch -> Trace): one line through them, the smallest sample on a path of its own
    beside it, or else piecewise (`low`: its low end; module docstring); NotPredictable
    with the reason where the paths differ too much."""
    if len(traces) < 2:
        raise NotPredictable(f"{len(traces)} captured size(s): a line needs two")
    groups = paths(traces)
    smallest = min(traces)
    own = {smallest: traces[smallest]} if groups[0] == (smallest,) and len(groups) == 2 else {}
    line = groups[-1] if own else tuple(sorted(traces))
    order = tuple(sorted(ladder, reverse=True))
    if len(groups) > 1 and (len(line) < 2 or not own):  # no line the others share
        return piecewise(traces, order, groups, low=low)
    fits = fit_sizes({b: traces[b] for b in line})
    template = traces[line[0]]
    planned = [own[b] if b in own else trace_at(template, fits, b) for b in order]
    flagged = tuple(i for i, f in enumerate(fits) if f.flagged)
    return Prediction(
        ladder=order,
        reserved_after=tuple(shared_pool_reserved(planned)),
        flagged=flagged,
        own_path=tuple(sorted(own)),
    )


def _shape(trace: Trace) -> list[tuple[str, int, int]]:
    """Each event's shape and size: an allocation, whether it stays live, its bytes; a
    free, how many allocations back its target was made, 0."""
    out, count = [], 0
    for e in trace.events:
        if isinstance(e, Alloc):
            out.append(("a", count in trace.live, e.size))
            count += 1
        else:
            out.append(("f", count - e.alloc, 0))
    return out


def _same(hi: tuple, hb: int, lo: tuple, lb: int) -> bool:
    """Could `hi` (at batch `hb`) and `lo` (at `lb` < `hb`) be one request? The same shape,
    and for an allocation a size `a + b * batch` with a, b >= 0 allows: never smaller at
    the larger batch, nor grown more than the batches' ratio."""
    if hi[:2] != lo[:2]:
        return False
    return lo[2] <= hi[2] and hi[2] * lb <= lo[2] * hb


def partners(hi: Trace, hb: int, lo: Trace, lb: int) -> dict[int, int]:
    """`hi`'s allocation numbers -> `lo`'s: the longest run of events in order that could
    be the same requests (`_same`), one matching used both ways."""
    a, b = _shape(hi), _shape(lo)
    head = 0
    while head < min(len(a), len(b)) and _same(a[head], hb, b[head], lb):
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and _same(a[-1 - tail], hb, b[-1 - tail], lb):
        tail += 1
    mid_a, mid_b = a[head : len(a) - tail], b[head : len(b) - tail]
    # the longest common subsequence of what lies between the shared head and tail
    n, m = len(mid_a), len(mid_b)
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = (best[i + 1][j + 1] + 1 if _same(mid_a[i], hb, mid_b[j], lb)
                          else max(best[i + 1][j], best[i][j + 1]))  # fmt: skip
    pairs = [(k, k) for k in range(head)]
    i = j = 0
    while i < n and j < m:
        if _same(mid_a[i], hb, mid_b[j], lb) and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((head + i, head + j))
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    pairs += [(len(a) - 1 - k, len(b) - 1 - k) for k in range(tail)]
    number_a = _numbers(hi)
    number_b = _numbers(lo)
    return {number_a[x]: number_b[y] for x, y in pairs if a[x][0] == "a"}


def _numbers(trace: Trace) -> dict[int, int]:
    """Event index -> allocation number, for the allocations."""
    at = [i for i, e in enumerate(trace.events) if isinstance(e, Alloc)]
    return {i: n for n, i in enumerate(at)}


def _between(template: Trace, tb: int, other: Trace, ob: int, match: Mapping[int, int],
             batch: int) -> Trace:  # fmt: skip
    """`template` (captured at `tb`) at `batch`: each request with a partner at `ob`
    (`match`) on the line through the two, each without one at its own size."""
    sizes = template.allocs
    at = [s if n not in match else
          max(0, -(-(s + Fraction(other.allocs[match[n]] - s, ob - tb) * (batch - tb)) // 1))
          for n, s in enumerate(sizes)]  # fmt: skip
    return trace_at(template, [SizeFit(Fraction(v), Fraction(0), False, v) for v in at], batch)


def _change(traces: Mapping[int, Trace], lo: int, hi: int, match: Mapping[int, int]) -> PathChange:
    """What `lo` and `hi` do not share: either side's requests without a partner in
    `match` (hi's numbers -> lo's), the larger share of its own bytes."""
    top, bottom = traces[hi].allocs, traces[lo].allocs
    held = [s for n, s in enumerate(top) if n not in match]
    taken = set(match.values())
    alone = [s for n, s in enumerate(bottom) if n not in taken]
    share = max(sum(held) / max(1, sum(top)), sum(alone) / max(1, sum(bottom)))
    return PathChange(lo, hi, len(held) + len(alone), share)


def _kept_alone(traces: Mapping[int, Trace], lo: int, hi: int, match: Mapping[int, int]) -> bool:
    """A live (kept) request on one side without a partner on the other: kept once per size
    of the ladder, so where the path changes decides how many times it counts."""
    taken = set(match.values())
    return any(n not in match for n in traces[hi].live) or any(
        n not in taken for n in traces[lo].live
    )


def piecewise_traces(
    traces: Mapping[int, Trace], order: Sequence[int], groups: list[tuple[int, ...]],
    *, low: bool = False,
) -> tuple[list[Trace], tuple[PathChange, ...]]:  # fmt: skip
    """Samples on several paths: each size between two neighbouring samples on the
    larger one's trace (`low`: the smaller one's), each request matched at the other
    (`partners`) on the line through the two, each unmatched at its own size; beyond the
    samples, the nearest one's, on the line through the nearest two; with every pair
    not on one path. NotPredictable where a pair leaves a kept request, or more than
    MOST_HELD of either's bytes, unmatched."""
    pairs = list(pairwise(sorted(traces)))
    match = {(lo, hi): partners(traces[hi], hi, traces[lo], lo) for lo, hi in pairs}
    changes = tuple(_change(traces, lo, hi, match[lo, hi]) for lo, hi in pairs
                    if not any(lo in g and hi in g for g in groups))  # fmt: skip
    for c in changes:
        kept = _kept_alone(traces, c.lo, c.hi, match[c.lo, c.hi])
        if kept or c.share > MOST_HELD:
            why = ("a kept request (an output) has no partner: it is kept once per size"
                   if kept else f"{c.held} requests ({100 * c.share:.1f}% of the bytes) have "
                   f"no partner, more than the {100 * MOST_HELD:.0f}% a piecewise prediction "
                   "allows")  # fmt: skip
            try:
                _refuse_paths(traces, groups)
            except NotPredictable as e:
                raise NotPredictable(f"{e}; between batch {c.lo} and {c.hi} {why}") from None
    planned = []
    for b in order:
        if b in traces:
            planned.append(traces[b])
            continue
        lo, hi = next(((x, y) for x, y in pairs if b < y), pairs[-1])
        m = match[lo, hi]
        if b > hi or (b > lo and not low):  # above the samples, or the larger one's
            planned.append(_between(traces[hi], hi, traces[lo], lo, m, b))
        else:  # below the samples, or the smaller one's: the matching turned round
            back = {v: k for k, v in m.items()}
            planned.append(_between(traces[lo], lo, traces[hi], hi, back, b))
    return planned, changes


def piecewise(
    traces: Mapping[int, Trace], order: Sequence[int], groups: list[tuple[int, ...]],
    *, low: bool = False,
) -> Prediction:  # fmt: skip
    """The pool of `piecewise_traces`, with the pairs not on one path."""
    planned, changes = piecewise_traces(traces, order, groups, low=low)
    return Prediction(ladder=tuple(order), reserved_after=tuple(shared_pool_reserved(planned)),
                      flagged=(), path_changes=changes)  # fmt: skip
