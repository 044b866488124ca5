"""Rich tables of a sweep's graph memory predicted from a few sizes (`sweep --predict-from`,
capture/sweep/forecast.py): each ladder's total against the truth and vLLM's method, and
the sizes swept one by one. A prediction is shown with its measured error, or says that
none was measured on this model. Renders; never measures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from graph_harness.capture.sweep.forecast import NOT_MEASURED
from graph_harness.reports.sweep_tables import mib

if TYPE_CHECKING:
    from graph_harness.capture.sweep.document import SweepResult
    from graph_harness.capture.sweep.forecast import Forecast, LadderForecast


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


INTERVAL = (
    "interval: the lowest and highest prediction over the fits the sampled sizes allow "
    "(with three, each pair too), scaled by the pool model's miss on each sample's own "
    "pool, and for executables the line and the sampled extremes; not a statistical one"
)


def forecast_tables(result: SweepResult) -> list[Table]:
    """The totals table and the per-size table of `result.forecast`; none without one
    (or where it predicted nothing: the CLI says why in a note)."""
    fc = result.forecast
    if fc is None or not fc.ladders:
        return []
    return [totals_table(fc), sizes_table(fc, fc.ladders[0])]


def totals_table(fc: Forecast) -> Table:
    sampled = ", ".join(map(str, fc.sampled))
    t = Table(title=f"Graph memory predicted from batch {sampled}: every ladder, whole")
    kv = fc.budget is not None and fc.weights is not None
    cols = ["ladder", "sizes", "predicted MiB", "interval MiB", "true MiB", "error",
            "vLLM's method MiB", "its error"] + (["KV cache left MiB"] if kv else [])  # fmt: skip
    for c in cols:
        t.add_column(c, justify="left" if c == "ladder" else "right")
    for lf in fc.ladders:
        last = lf.last
        cells = [lf.name, str(len(lf.rows)), mib(last.total),
                 f"{mib(last.total_lo)}-{mib(last.total_hi)}", mib(lf.true_total),
                 fc.error_note(lf), mib(lf.vllm), pct(lf.vllm_error)]  # fmt: skip
        if kv:
            left = fc.kv_left(lf)
            cells.append(f"{mib(left[0])} ({mib(left[1])}-{mib(left[2])})")
        t.add_row(*cells)
    t.caption = _caption(fc)
    return t


def _caption(fc: Forecast) -> str:
    parts = [
        "predicted: the shared pool (the sampled sizes' allocator requests, each a line in "
        "batch, replayed largest first through the caching allocator's rules) plus every "
        "executable (a line through the sampled sizes')",
        INTERVAL,
        "true: the shared pool after the last size plus every executable, where the sweep "
        f"captured that ladder (else '{NOT_MEASURED}' or the error on the sizes swept)",
        "vLLM's method: its first two captures' free memory, the first plus the second "
        "(1 MiB at least) times the other sizes (vllm/v1/worker/gpu_model_runner.py "
        "profile_cudagraph_memory), where those two were captured here",
    ]
    if any(not lf.execs_known for lf in fc.ladders):
        parts.append("executables unknown (a sampled size's was not resolved below the page, "
                     "or not measured): the pool alone, short by every executable")  # fmt: skip
    flagged = max((len(lf.flagged) for lf in fc.ladders), default=0)
    if flagged:
        parts.append(f"{flagged} requests not on one line across the samples: held at "
                     "their largest sampled size")  # fmt: skip
    own = sorted({b for lf in fc.ladders for b in lf.own_path})
    if own:
        line = ", ".join(str(b) for b in fc.sampled if b not in own)
        parts.append(f"batch {', '.join(map(str, own))}: the step takes a path of its own "
                     f"there (its allocator requests do not align with {line}'s): its own "
                     f"capture is used at that size, the line through {line} at every other "
                     "(no pair of them fitted); where between them the path changes is not "
                     "known, and the interval does not cover it")  # fmt: skip
    changes = {(c.lo, c.hi): c for lf in fc.ladders for c in lf.path_changes}
    if changes:
        each = ", ".join(f"{lo} and {hi} ({c.held} unmatched, {100 * c.share:.1f}% of "
                         "the bytes)" for (lo, hi), c in sorted(changes.items()))  # fmt: skip
        parts.append(f"the step takes another path between batch {each}: each size between "
                     "two samples is predicted on the larger one's requests, each matched at "
                     "the smaller on the line through the two, each unmatched at its own size "
                     "(the interval also spans the same on the smaller one's); where the path "
                     "changes is not known")  # fmt: skip
    if fc.model_miss:
        miss = ", ".join(f"{b}: {pct(m)}" for b, m in fc.model_miss.items())
        parts.append(f"pool model against each sample's own pool: {miss}")
    if fc.budget is not None:
        parts.append(_kv_line(fc))
    return "; ".join(parts)


def _kv_line(fc: Forecast) -> str:
    if fc.weights is None:
        return (f"KV cache left not computed: the step carries no model (`step.module`), so "
                f"its weights are unknown (budget {mib(fc.budget)} MiB)")  # fmt: skip
    return (f"KV cache left: the budget {mib(fc.budget)} MiB less the weights "
            f"{mib(fc.weights)} MiB (step.module's parameters and buffers) and the predicted "
            "graphs (interval from theirs); activations outside the graphs, the CUDA "
            "context and other processes are not counted")  # fmt: skip


def sizes_table(fc: Forecast, lf: LadderForecast) -> Table:
    """`lf` size by size, in capture order: the pool after it, its executable and the
    total so far, predicted and true, with the error where the truth was measured."""
    t = Table(title=f"Graph memory predicted per size ({lf.name}, MiB), largest first")
    for c in ("batch", "pool after it", "interval", "true pool", "executable", "true exec",
              "total so far", "true total", "error"):  # fmt: skip
        t.add_column(c, justify="right")
    for r in lf.rows:
        t.add_row(
            str(r.batch), mib(r.pool), f"{mib(r.pool_lo)}-{mib(r.pool_hi)}", mib(r.true_pool),
            mib(r.exec_bytes), mib(r.true_exec), mib(r.total), mib(r.true_total),
            pct(r.error) if r.error is not None else "-",
        )  # fmt: skip
    if lf.true_total is None:
        t.caption = NOT_MEASURED
    return t
