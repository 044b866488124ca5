"""A ladder's shared graph pool, predicted from two or three captured sizes (issue 58).

The captured sizes' traces are aligned event by event (else no prediction, and why), each
request's size fitted exactly through the captured points (a third point off the line:
flagged, predicted as the largest size seen), every ladder size's trace written and
replayed, largest first, into one modelled pool (allocator_model.py). Traces, not pool
figures, are extrapolated: the pool is a staircase. The smallest sample may take a path
of its own (Inductor specialises batch 1): used at its own size only (`own_path`); any
other sample off the others' path is refused (docs/sweep.md, "How the prediction is made").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

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


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """The shared pool predicted for `ladder` (captured largest first): its reserved bytes
    after each size, in that order; `flagged`, the requests not affine in batch (by
    number), predicted at their largest captured size."""

    ladder: tuple[int, ...]
    reserved_after: tuple[int, ...]
    flagged: tuple[int, ...]
    own_path: tuple[int, ...] = ()  # samples on a path of their own: their trace, there only

    @property
    def reserved(self) -> int:
        return self.reserved_after[-1]


def predict_shared_pool(traces: Mapping[int, Trace], ladder: Sequence[int]) -> Prediction:
    """The pool `ladder`'s graphs will share, from the traces of a few captured sizes
    (batch -> Trace); NotPredictable with the reason where they do not align, but for
    the smallest sample on a path of its own beside the others' (module docstring)."""
    groups = paths(traces)
    smallest = min(traces)
    own = {smallest: traces[smallest]} if groups[0] == (smallest,) and len(groups) == 2 else {}
    line = groups[-1] if own else tuple(sorted(traces))
    if len(groups) > 1 and (len(line) < 2 or not own):  # no line the others share
        _refuse_paths(traces, groups)
    fits = fit_sizes({b: traces[b] for b in line})
    template = traces[line[0]]
    order = tuple(sorted(ladder, reverse=True))
    planned = [own[b] if b in own else trace_at(template, fits, b) for b in order]
    flagged = tuple(i for i, f in enumerate(fits) if f.flagged)
    return Prediction(
        ladder=order,
        reserved_after=tuple(shared_pool_reserved(planned)),
        flagged=flagged,
        own_path=tuple(sorted(own)),
    )
