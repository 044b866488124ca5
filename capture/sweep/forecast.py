"""The graph memory of whole ladders predicted from a few captured sizes (`sweep
--predict-from`, issue 58): per size and in total, with an interval, against the truth
where the sweep measured it, beside vLLM's own method (vllm_method.py), and the KV cache
left under a budget. Pool: predict.py on the sampled sizes' traces; executables: a line
through the sampled sizes' own, each resolved below the page (capture/graph/exec_size.py),
summed in the driver's whole pages; the interval is the spread over the fits the
samples allow, not a statistical one (docs/sweep.md, "Graph memory predicted").
Plain arithmetic on traces and the sweep's rows; tested on the CPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

from graph_harness.capture.graph.pages import pages

from .alloc_trace import Trace
from .allocator_model import own_pool_reserved
from .padding import vllm_ladder
from .predict import NotPredictable, PathChange, Prediction, predict_shared_pool
from .truth import SharedRow, true_execs
from .vllm_method import vllm_for_ladder

if TYPE_CHECKING:
    from .document import SweepResult

MOST_SAMPLES = 3  # issue 58: "from at most three captured sizes"
NOT_MEASURED = "error not measured on this model"
VLLM_DEFAULT = vllm_ladder(512)  # [1, 2, 4] + multiples of 8 to 512: 67 sizes
NO_GPU = "predicting graph memory reads each sampled size's capture: it needs a CUDA GPU"


@dataclass(frozen=True, kw_only=True)
class ForecastRow:
    """One size of a ladder, in capture order: the shared pool after it and its
    executable, predicted (with the interval) and true (None where not measured); the
    totals are the pool plus every executable so far."""

    batch: int
    pool: int
    pool_lo: int
    pool_hi: int
    exec_bytes: int | None
    exec_lo: int | None
    exec_hi: int | None
    total: int
    total_lo: int
    total_hi: int
    true_pool: int | None = None
    true_exec: int | None = None
    true_total: int | None = None

    @property
    def error(self) -> float | None:
        return None if not self.true_total else self.total / self.true_total - 1


@dataclass(frozen=True, kw_only=True)
class LadderForecast:
    """A ladder's graph memory predicted (rows in capture order), vLLM's estimate of it
    (or why there is none), and the requests flagged as not affine in batch."""

    name: str
    rows: list[ForecastRow]
    flagged: tuple[int, ...] = ()
    vllm: int | None = None
    vllm_why: str | None = None
    execs_known: bool = True
    own_path: tuple[int, ...] = ()  # sampled sizes whose step took a path of its own
    path_changes: tuple[PathChange, ...] = ()  # neighbouring samples on two paths

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(r.batch for r in self.rows)

    @property
    def last(self) -> ForecastRow:
        return self.rows[-1]

    @property
    def true_total(self) -> int | None:
        return self.last.true_total

    @property
    def error(self) -> float | None:
        return self.last.error

    @property
    def vllm_error(self) -> float | None:
        t = self.true_total
        return None if self.vllm is None or not t else self.vllm / t - 1

    @property
    def within(self) -> bool | None:
        t = self.true_total
        return None if t is None else self.last.total_lo <= t <= self.last.total_hi


@dataclass(frozen=True, kw_only=True)
class Forecast:
    """`sweep --predict-from`: the sampled sizes, each ladder predicted, the pool model's
    miss on each sample's own pool (real / modelled - 1), the weights and the budget
    (bytes); `why_not` where nothing could be predicted."""

    sampled: tuple[int, ...]
    ladders: list[LadderForecast] = field(default_factory=list)
    model_miss: dict[int, float] = field(default_factory=dict)
    weights: int | None = None
    budget: int | None = None
    why_not: str | None = None

    def measured_error(self) -> float | None:
        """The error measured on this model: the first ladder whose truth was measured."""
        return next((lf.error for lf in self.ladders if lf.error is not None), None)

    def error_note(self, lf: LadderForecast) -> str:
        """What a prediction is shown with: its error, else the error measured on this
        model's other ladder, else that none was measured."""
        if lf.error is not None:
            return f"{100 * lf.error:+.1f}%"
        other = self.measured_error()
        if other is None:
            return NOT_MEASURED
        return f"not measured for this ladder; {100 * other:+.1f}% on this model's swept sizes"

    def kv_left(self, lf: LadderForecast) -> tuple[int, int, int] | None:
        """The KV cache's memory under the budget: budget - weights - graphs, with the
        interval's ends (from the graphs' high and low ends); None without both."""
        if self.budget is None or self.weights is None:
            return None
        left = self.budget - self.weights
        return left - lf.last.total, left - lf.last.total_hi, left - lf.last.total_lo

    def rows_table(self) -> list[dict[str, Any]]:
        """One record per ladder and size, capture order (sweep-memory-forecast.csv)."""
        return [
            {"ladder": lf.name, **asdict(r), "error": r.error}
            for lf in self.ladders
            for r in lf.rows
        ]

    def totals_table(self) -> list[dict[str, Any]]:
        """One record per ladder: its total predicted, interval, truth, errors, vLLM's."""
        out = []
        for lf in self.ladders:
            kv = self.kv_left(lf)
            out.append(dict(
                ladder=lf.name, sizes=len(lf.rows), bytes=lf.last.total, lo=lf.last.total_lo,
                hi=lf.last.total_hi, true_bytes=lf.true_total, error=lf.error,
                within=lf.within, vllm_bytes=lf.vllm, vllm_error=lf.vllm_error,
                vllm_why=lf.vllm_why, execs_known=lf.execs_known, flagged=len(lf.flagged),
                kv_left=None if kv is None else kv[0], kv_lo=None if kv is None else kv[1],
                kv_hi=None if kv is None else kv[2], error_note=self.error_note(lf),
            ))  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampled": list(self.sampled),
            "why_not": self.why_not,
            "weights": self.weights,
            "budget": self.budget,
            "model_miss": {str(b): m for b, m in self.model_miss.items()},
            "ladders": [
                {
                    "name": lf.name,
                    "sizes": list(lf.sizes),
                    "flagged": list(lf.flagged),
                    "own_path": list(lf.own_path),
                    "path_changes": [asdict(c) for c in lf.path_changes],
                }
                for lf in self.ladders
            ],
            "totals": self.totals_table(),
            "rows": self.rows_table(),
        }


def check_samples(sizes: Sequence[int], sampled: Sequence[int]) -> tuple[int, ...]:
    """--predict-from's sizes: two or three, each once, each among the sizes swept;
    ValueError saying what was expected otherwise."""
    out = list(sampled)
    if not 2 <= len(out) <= MOST_SAMPLES:
        raise ValueError(
            f"give two or three sizes to predict from (a line needs two; the prediction is "
            f"from at most {MOST_SAMPLES}), got {len(out)}"
        )
    twice = sorted({b for b in out if out.count(b) > 1})
    if twice:
        raise ValueError(f"{twice[0]} is given twice: give each size once")
    missing = [b for b in out if b not in sizes]
    if missing:
        raise ValueError(
            f"{missing[0]} is not among --sizes: the prediction reads the allocator's "
            "requests of sizes the sweep captures; add it to --sizes"
        )
    return tuple(sorted(out))


def _model_miss(traces: Mapping[int, Trace]) -> dict[int, float]:
    """Each sample's own pool as captured over the pool model's figure for its trace,
    less 1 (0 where the model replays the allocator exactly)."""
    out = {}
    for b, t in sorted(traces.items()):
        modelled = own_pool_reserved(t)
        if t.reserved is not None and modelled:
            out[b] = t.reserved / modelled - 1
    return out


def _pool_range(
    traces: Mapping[int, Trace], order: Sequence[int], miss: Mapping[int, float]
) -> tuple[list[int], list[int], list[int], Prediction]:
    """The pool after each size: the point prediction, and the low and high ends over
    every fit the samples allow, scaled by the model's miss (module docstring)."""
    point = predict_shared_pool(traces, order)
    own = {b: traces[b] for b in point.own_path}  # in every fit: each is its size's own
    line = [b for b in sorted(traces) if b not in own]
    fits = [point]
    if point.path_changes:  # piecewise: the same sizes on the smaller neighbours' traces
        fits.append(predict_shared_pool(traces, order, low=True))
    for pair in combinations(line, 2) if len(line) > 2 else ():
        try:
            fits.append(predict_shared_pool({**{b: traces[b] for b in pair}, **own}, order))
        except NotPredictable:  # two samples apart on two paths: no fit of their own
            continue
    lo_k = 1 + min([0.0, *miss.values()])
    hi_k = 1 + max([0.0, *miss.values()])
    cols = list(zip(*(f.reserved_after for f in fits), strict=True))
    lo = [int(min(c) * lo_k) for c in cols]
    hi = [-int(-max(c) * hi_k // 1) for c in cols]
    return list(point.reserved_after), lo, hi, point


Column = list[int | None]


def _exec_line(
    execs: Mapping[int, int | None], order: Sequence[int], spread: Mapping[int, int]
) -> tuple[Column, Column, Column]:
    """Each size's executable: the line through the smallest and largest sample, and the
    ends (with the sampled extremes, each to within its `spread`); None each where a
    sample's was not measured."""
    if not execs or any(v is None for v in execs.values()):
        return [None] * len(order), [None] * len(order), [None] * len(order)
    (b0, e0), (b1, e1) = min(execs.items()), max(execs.items())
    slope = (e1 - e0) / (b1 - b0) if b1 != b0 else 0.0
    line = [max(0, round(e0 + slope * (b - b0))) for b in order]
    wide = max(spread.values(), default=0)
    least, most = min(execs.values()) - wide, max(execs.values()) + wide
    return line, [max(0, min(v, least)) for v in line], [max(v, most) for v in line]


def predict_ladder(
    name: str,
    ladder: Sequence[int],
    traces: Mapping[int, Trace],
    execs: Mapping[int, int | None],
    shared: Sequence[SharedRow] | None = None,
    spread: Mapping[int, int] | None = None,
) -> LadderForecast:
    """`ladder`'s graph memory predicted from the sampled sizes' `traces` and executables
    (`execs`: one executable's bytes, resolved below the page, each to within `spread`),
    in capture order; the executables so far in whole pages (the driver's). Against
    `shared` (the sweep's shared-pool rows) where they are this ladder's, captured
    largest first. NotPredictable where the traces do not align."""
    order = sorted(set(ladder), reverse=True)
    miss = _model_miss(traces)
    pool, pool_lo, pool_hi, point = _pool_range(traces, order, miss)
    ex, ex_lo, ex_hi = _exec_line(execs, order, spread or {})
    truth = list(shared or [])
    measured = [r.batch for r in truth] == order
    true_execs_so_far = true_execs(truth) if measured else [None] * len(order)
    rows, sums = [], [0, 0, 0]
    for i, b in enumerate(order):
        if ex[i] is not None:
            sums = [sums[0] + ex[i], sums[1] + ex_lo[i], sums[2] + ex_hi[i]]
        tp, te = truth[i].total_reserved if measured else None, true_execs_so_far[i]
        before = true_execs_so_far[i - 1] if i else 0
        rows.append(ForecastRow(
            batch=b, pool=pool[i], pool_lo=pool_lo[i], pool_hi=pool_hi[i], exec_bytes=ex[i],
            exec_lo=ex_lo[i], exec_hi=ex_hi[i], total=pool[i] + pages(sums[0]),
            total_lo=pool_lo[i] + pages(sums[1], up=False),
            total_hi=pool_hi[i] + pages(sums[2]),
            true_pool=tp, true_exec=None if te is None or before is None else te - before,
            true_total=None if tp is None or te is None else tp + te,
        ))  # fmt: skip
    vllm, why = vllm_for_ladder(order, truth)
    return LadderForecast(name=name, rows=rows, flagged=point.flagged, vllm=vllm,
                          vllm_why=why, execs_known=ex[0] is not None,
                          own_path=point.own_path,
                          path_changes=point.path_changes)  # fmt: skip


def forecast(
    sampled: Mapping[int, Trace | None],
    execs: Mapping[int, int | None],
    ladders: Mapping[str, Sequence[int]],
    shared: Sequence[SharedRow] | None,
    *,
    weights: int | None = None,
    budget: int | None = None,
    spread: Mapping[int, int] | None = None,
) -> Forecast:
    """Every ladder of `ladders` (name -> sizes) predicted from the `sampled` sizes'
    traces (None: not read) and executables (bytes each, to within `spread`), each against
    `shared` where it is the ladder the sweep captured; or a Forecast that says why not."""
    sizes = tuple(sorted(sampled))
    unread = [b for b, t in sorted(sampled.items()) if t is None]
    base = dict(sampled=sizes, weights=weights, budget=budget)
    if unread:
        return Forecast(**base, why_not=(
            f"batch {unread[0]}'s allocator requests were not read: the prediction needs "
            "the allocator's history of its capture (a torch that tags allocations, and a "
            "graph graph-harness captures, not one the step records itself)"
        ))  # fmt: skip
    traces = {b: t for b, t in sampled.items() if t is not None}
    try:
        out = [predict_ladder(n, ladder, traces, execs, shared, spread)
               for n, ladder in ladders.items()]  # fmt: skip
    except NotPredictable as e:
        return Forecast(**base, why_not=f"the sampled sizes' requests do not align: {e}")
    return Forecast(**base, ladders=out, model_miss=_model_miss(traces))


def ladders_for(sizes: Sequence[int]) -> dict[str, Sequence[int]]:
    """The ladders a sweep of `sizes` is predicted for: those sizes, and vLLM's default
    unless it is the same ladder."""
    ladders: dict[str, Sequence[int]] = {"sizes swept": sizes}
    if sorted(VLLM_DEFAULT) != sorted(sizes):
        ladders[f"vLLM default ({len(VLLM_DEFAULT)} sizes, 1-{max(VLLM_DEFAULT)})"] = VLLM_DEFAULT
    return ladders


def forecast_of(result: SweepResult, sampled: Sequence[int], budget: int | None) -> Forecast:
    """`result`'s sizes swept and vLLM's default ladder predicted from its `sampled` sizes
    (check_samples; ValueError otherwise), against its shared pool; the KV cache left
    under `budget` with its weights."""
    sizes = [r.batch for r in result.rows]
    chosen = check_samples(sizes, sampled)
    if not result.measured:
        return Forecast(sampled=chosen, budget=budget, why_not=NO_GPU)
    execs = {r.batch: r.exec_each for r in result.rows if r.batch in chosen}
    spread = {r.batch: r.exec_each_spread or 0 for r in result.rows if r.batch in chosen}
    ladders = ladders_for(sizes)
    samples = {b: result.traces.get(b) for b in chosen}
    return forecast(samples, execs, ladders, result.shared, weights=result.weights,
                    budget=budget, spread=spread)  # fmt: skip
