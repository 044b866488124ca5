"""Ladders predicted from a few sizes (capture/sweep/forecast.py) and vLLM's own method
(capture/sweep/vllm_method.py): the arithmetic on synthetic traces whose truth is the pool
model run on the true trace of every size, the interval, the KV cache left, what a
prediction is shown with, the document, tables and plot, and `sweep --predict-from`'s
refusals before anything is imported. CPU only."""

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from graph_harness.capture.sweep.alloc_trace import Alloc, Free, Trace
from graph_harness.capture.sweep.allocator_model import own_pool_reserved, shared_pool_reserved
from graph_harness.capture.sweep.forecast import (
    NOT_MEASURED,
    Forecast,
    check_samples,
    forecast,
    predict_ladder,
)
from graph_harness.capture.sweep.truth import SharedRow
from graph_harness.capture.sweep.vllm_method import vllm_estimate, vllm_for_ladder
from tests.capture.sweep.fake_sweep import _fake_sweep

REPO = Path(__file__).resolve().parents[3]
KIB, MIB = 1 << 10, 1 << 20
LADDER = [1, 2, 4, 8, 16, 32, 64]


def _step(batch: int, workspace=lambda b: 4 * MIB, reserved: float | None = None) -> Trace:
    """A decode step's requests: a workspace (kept), three layers of activations affine in
    batch (64 KiB and 256 KiB per row: small at batch 1, large segments at 64), logits
    kept. `reserved`: the pool it says it took, as a factor of the model's figure."""
    events, n, h = [Alloc(workspace(batch))], 1, None
    for _ in range(3):
        events += [Alloc(64 * KIB * batch + 256), Alloc(256 * KIB * batch)]
        if h is not None:
            events.append(Free(h))
        events.append(Free(n + 1))
        h, n = n, n + 2
    events += [Alloc(128 * KIB * batch + 512), Free(h)]
    t = Trace(events=tuple(events), live=frozenset({0, n}))
    return t if reserved is None else replace(t, reserved=round(own_pool_reserved(t) * reserved))


def _truth(ladder, step=_step, exec_bytes=2 * MIB) -> list[dict]:
    """The shared-pool rows a sweep of `ladder` would read: the pool model on the true
    traces, largest first, each executable `exec_bytes`; vLLM's free-memory samples."""
    order = sorted(ladder, reverse=True)
    after = shared_pool_reserved([step(b) for b in order])
    rows = [SharedRow(batch=b, total_reserved=a, adds=a - p, total_allocated=0,
                      exec_bytes=exec_bytes)
            for b, a, p in zip(order, after, [0, *after])]  # fmt: skip
    # vLLM's samples, the first with the warm-ups' cached blocks
    rows[0] = replace(rows[0], free_drop=after[0] + exec_bytes + 3 * MIB)
    if len(rows) > 1:
        rows[1] = replace(rows[1], free_drop=after[1] - after[0] + exec_bytes)
    return rows


# --- vLLM's method --------------------------------------------------------------------


def test_vllm_adds_the_second_capture_to_the_first_for_every_further_size():
    # first + max(second, 1 MiB) * (n - 1): gpu_model_runner.py profile_cudagraph_memory
    assert vllm_estimate(100 * MIB, 10 * MIB, 5) == 140 * MIB
    assert vllm_estimate(100 * MIB, 0, 5) == 104 * MIB  # at least 1 MiB "driver overhead"
    assert vllm_estimate(100 * MIB, None, 1) == 100 * MIB  # one size: the first alone
    with pytest.raises(ValueError, match="needs one at least"):
        vllm_estimate(1, 1, 0)


def test_vllm_needs_the_ladders_two_largest_captured_first():
    def drop(batch, free_drop):
        return SharedRow(batch=batch, total_reserved=0, adds=None, total_allocated=0,
                         free_drop=free_drop)  # fmt: skip

    rows = [drop(8, 50 * MIB), drop(4, 3 * MIB)]
    assert vllm_for_ladder([1, 2, 4, 8], rows) == (50 * MIB + 3 * 3 * MIB, None)
    est, why = vllm_for_ladder([1, 2, 4, 8, 16], rows)
    assert est is None and "largest sizes [16, 8]" in why and "began with [8, 4]" in why
    est, why = vllm_for_ladder([4, 8], [rows[0], replace(rows[1], free_drop=None)])
    assert est is None and why


# --- the prediction against its truth -------------------------------------------------


@pytest.mark.parametrize("sampled", [(1, 64), (1, 8, 64), (2, 4, 16)])
def test_affine_requests_predict_every_size_exactly_with_executables(sampled):
    # Affine traces: each predicted trace is the true one, so the pool after every size
    # is the truth; the executables (2 MiB each, sampled) are a flat line.
    lf = predict_ladder("swept", LADDER, {b: _step(b) for b in sampled},
                        {b: 2 * MIB for b in sampled}, _truth(LADDER))  # fmt: skip
    assert [r.batch for r in lf.rows] == sorted(LADDER, reverse=True)
    for i, r in enumerate(lf.rows):
        assert r.pool == r.true_pool and r.exec_bytes == 2 * MIB
        assert r.total == r.true_total == r.true_pool + 2 * MIB * (i + 1)
        assert r.total_lo <= r.total <= r.total_hi and r.error == 0
    assert lf.error == 0 and lf.within and lf.flagged == ()
    assert lf.last.total_lo == lf.last.total == lf.last.total_hi  # the samples agree
    # vLLM's method on the same sweep, and it is not the truth
    assert lf.vllm == _truth(LADDER)[0].free_drop + (len(LADDER) - 1) * max(
        _truth(LADDER)[1].free_drop, MIB
    )
    assert lf.vllm_error is not None and lf.vllm_error != 0


def _jumping(b):
    return MIB if b < 8 else 6 * MIB  # a workspace whose algorithm changes at batch 8


def test_samples_that_disagree_widen_the_interval_around_the_truth():
    # The workspace jumps between the samples: the three-point fit flags it (held at its
    # largest), each pair's line differs, and the interval spans them.
    sampled = {b: _step(b, _jumping) for b in (1, 4, 16)}
    truth = _truth(LADDER, lambda b: _step(b, _jumping))
    lf = predict_ladder("swept", LADDER, sampled, {b: 0 for b in sampled}, truth)
    assert lf.flagged == (0,)
    assert lf.last.total_lo < lf.last.total_hi
    assert lf.within, (lf.last.total_lo, lf.true_total, lf.last.total_hi)


def test_the_pool_models_miss_on_the_samples_scales_the_interval():
    # The samples' own pools came out 10% above the model's figure: the high end is 10%
    # above the point, the low end stays at it.
    sampled = {b: _step(b, reserved=1.1) for b in (1, 64)}
    fc = forecast(sampled, {1: 0, 64: 0}, {"swept": LADDER}, None)
    (lf,) = fc.ladders
    assert fc.model_miss == {1: pytest.approx(0.1, abs=1e-3), 64: pytest.approx(0.1, abs=1e-3)}
    assert lf.last.total_lo == lf.last.total
    assert lf.last.total_hi == pytest.approx(1.1 * lf.last.total, rel=2e-3)


def test_executables_not_measured_leave_the_pool_alone_and_say_so():
    lf = predict_ladder("swept", LADDER, {b: _step(b) for b in (1, 64)}, {1: None, 64: None})
    assert not lf.execs_known and lf.last.total == lf.last.pool and lf.last.exec_bytes is None


def test_executables_follow_the_line_through_the_samples():
    lf = predict_ladder("s", [1, 2, 3], {b: _step(b) for b in (1, 3)}, {1: 0, 3: 4 * MIB})
    assert [r.exec_bytes for r in lf.rows] == [4 * MIB, 2 * MIB, 0]  # capture order 3, 2, 1
    assert lf.last.total == lf.last.pool + 6 * MIB


def test_executables_below_the_page_are_summed_then_rounded_to_pages():
    # 0.7 MiB each, to within 0.05: three take 2.1 MiB, two pages; the interval's ends are
    # the sums' ends, rounded down and up (1.95 -> 0 pages, 2.25 -> 2 pages)
    each = 7 * MIB // 10
    lf = predict_ladder("s", [1, 2, 3], {b: _step(b) for b in (1, 3)}, {1: each, 3: each},
                        spread={1: MIB // 20, 3: MIB // 20})  # fmt: skip
    assert [r.exec_bytes for r in lf.rows] == [each] * 3
    assert [r.total - r.pool for r in lf.rows] == [2 * MIB, 2 * MIB, 4 * MIB]
    assert lf.last.total_lo == lf.last.pool_lo and lf.last.total_hi == lf.last.pool_hi + 4 * MIB


def test_the_kv_cache_is_left_the_budget_less_weights_and_graphs():
    fc = forecast({b: _step(b) for b in (1, 64)}, {1: 0, 64: 0}, {"swept": LADDER}, None,
                  weights=3 << 30, budget=70 << 30)  # fmt: skip
    (lf,) = fc.ladders
    left = (70 << 30) - (3 << 30)
    last = lf.last
    assert fc.kv_left(lf) == (left - last.total, left - last.total_hi, left - last.total_lo)
    assert replace(fc, weights=None).kv_left(lf) is None


def test_a_prediction_is_shown_with_its_measured_error_or_says_none_was():
    sampled, execs = {b: _step(b) for b in (1, 64)}, {1: 2 * MIB, 64: 2 * MIB}
    ladders = {"swept": LADDER, "vLLM default": [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]}
    fc = forecast(sampled, execs, ladders, _truth(LADDER))
    swept, other = fc.ladders
    assert fc.error_note(swept) == "+0.0%"
    assert other.true_total is None and other.vllm is None and "[64, 56]" in other.vllm_why
    assert fc.error_note(other) == "not measured for this ladder; +0.0% on this model's swept sizes"
    blind = forecast(sampled, execs, {"vLLM default": ladders["vLLM default"]}, None)
    assert blind.error_note(blind.ladders[0]) == NOT_MEASURED


def test_no_prediction_says_why():
    fc = forecast({1: _step(1), 64: None}, {}, {"swept": LADDER}, None)
    assert not fc.ladders and "batch 64's allocator requests were not read" in fc.why_not
    odd = Trace(events=(Alloc(1),), live=frozenset({0}))
    fc = forecast({1: _step(1), 64: odd}, {}, {"swept": LADDER}, None)
    assert "do not align" in fc.why_not


def test_the_sampled_sizes_are_two_or_three_of_those_swept():
    assert check_samples([1, 2, 4, 8], [8, 1]) == (1, 8)
    bad_ones = [([1], "two or three"), ([1, 2, 4, 8], "two or three"),
                ([1, 1], "1 is given twice"), ([1, 3], "3 is not among --sizes")]  # fmt: skip
    for bad, says in bad_ones:
        with pytest.raises(ValueError, match=says):
            check_samples([1, 2, 4, 8], bad)


# --- the sweep's document, tables and plot --------------------------------------------


def _predicted_sweep(truth: bool = True, budget: int | None = 1 << 30):
    """A fake GPU sweep of 1, 2, 4, 8 whose own-pool traces are _step's, its shared pool
    the model's truth (or none read), predicted from 1 and 8."""
    base = _fake_sweep()
    rows = [replace(r, exec_bytes=2 * MIB, exec_each=2 * MIB, exec_each_spread=0,
                    reserved=own_pool_reserved(_step(r.batch))) for r in base.rows]  # fmt: skip
    result = replace(base, rows=rows, shared=_truth([1, 2, 4, 8]) if truth else None,
                     traces={r.batch: _step(r.batch) for r in rows}, weights=64 * MIB)  # fmt: skip
    return result.with_forecast([8, 1], budget=budget)


def test_the_document_and_its_files_hold_the_prediction(tmp_path):
    result = _predicted_sweep()
    fc = result.forecast
    assert [lf.name for lf in fc.ladders] == ["sizes swept", "vLLM default (67 sizes, 1-512)"]
    assert len(fc.ladders[1].rows) == 67 and fc.ladders[0].error == 0
    est = result.estimate_table().set_index("estimator")
    assert est.loc["vLLM's method (profile_cudagraph_memory)", "bytes"] == fc.ladders[0].vllm
    (pred,) = [k for k in est.index if k.startswith("predicted from 1, 8")]
    assert est.loc[pred, "error"] == 0
    written = result.write(tmp_path)
    assert "sweep-memory-forecast.csv" in written
    doc = json.loads((tmp_path / "sweep.json").read_text())["memory_forecast"]
    assert doc["sampled"] == [1, 8] and doc["weights"] == 64 * MIB
    assert doc["totals"][0]["error"] == 0 and doc["totals"][1]["true_bytes"] is None
    assert len(doc["rows"]) == 4 + 67


def _text(table) -> str:
    from rich.console import Console

    console = Console(width=240, record=True)
    console.print(table)
    return console.export_text()


def test_the_tables_show_predicted_against_true_or_that_no_error_was_measured():
    from graph_harness.reports.forecast_tables import forecast_tables

    totals, sizes = forecast_tables(_predicted_sweep())
    text = _text(totals)
    assert "+0.0%" in text and "not measured for this ladder; +0.0% on this model's" in text
    assert "KV cache left" in text and "vLLM's method" in text
    assert "+0.0%" in _text(sizes)
    totals, sizes = forecast_tables(_predicted_sweep(truth=False, budget=None))
    assert NOT_MEASURED in _text(totals) and NOT_MEASURED in _text(sizes)
    assert "KV cache left" not in _text(totals)
    assert forecast_tables(replace(_fake_sweep(), forecast=Forecast(sampled=(1, 2)))) == []


def test_the_sweep_plot_draws_the_prediction(tmp_path):
    pytest.importorskip("matplotlib")
    from graph_harness.reports import plots

    assert plots.sweep(_predicted_sweep(), tmp_path / "sweep.png").stat().st_size > 0
    assert plots.sweep(_predicted_sweep(truth=False), tmp_path / "b.png").stat().st_size > 0


# --- the command line -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--predict-from", "1"], "--predict-from: give two or three sizes"),
        (["--predict-from", "1", "2", "4", "8"], "give two or three sizes"),
        (["--predict-from", "1", "3"], "3 is not among --sizes"),
        (["--predict-from", "1", "1"], "1 is given twice"),
        (["--memory-budget", "70GiB"], "--memory-budget chooses sizes for --requests, or"),
        (["--predict-from", "1", "2", "--requests", "uniform:1-2", "--memory-budget", "1GiB"],
         "not both"),
        (["--predict-from", "1", "2", "--memory-budget", "1.5GiB"], "expected bytes"),
    ],
)  # fmt: skip
def test_predict_from_is_refused_before_the_target_is_imported(tmp_path, argv, says):
    (tmp_path / "step.py").write_text("raise SystemExit('imported')\ndef f(batch=1): ...\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "sweep", "--target", "step.py:f", "--sizes",
         "1", "2", "4", "8", *argv],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert "imported" not in r.stderr


def _specialised(batch: int) -> Trace:
    """Batch 1 specialised (as Inductor does): every other batch one more request."""
    t = _step(batch)
    if batch == 1:
        return t
    return Trace(events=(*t.events, Alloc(32 * KIB * batch), Free(len(t.allocs))), live=t.live)


def test_a_sample_on_a_path_of_its_own_is_predicted_and_said():
    from graph_harness.reports.forecast_tables import totals_table

    truth = _truth(LADDER, _specialised)
    fc = forecast({b: _specialised(b) for b in (1, 16, 64)}, {1: 0, 16: 0, 64: 0},
                  {"swept": LADDER}, truth)  # fmt: skip
    (lf,) = fc.ladders
    assert fc.why_not is None and lf.own_path == (1,)
    assert [r.pool for r in lf.rows] == [r.total_reserved for r in truth]
    assert fc.to_dict()["ladders"][0]["own_path"] == [1]
    caption = " ".join(_text(totals_table(fc)).split())
    assert "batch 1: the step takes a path of its own there" in caption
    assert "the line through 16, 64 at every other" in caption


def test_samples_on_three_paths_are_predicted_piecewise_and_said():
    from graph_harness.reports.forecast_tables import totals_table
    from tests.capture.sweep.made_traces import moe_like as _moe_like

    truth = _truth(LADDER, _moe_like)
    fc = forecast({b: _moe_like(b) for b in (1, 16, 64)}, {b: 2 * MIB for b in (1, 16, 64)},
                  {"swept": LADDER}, truth)  # fmt: skip
    (lf,) = fc.ladders
    assert fc.why_not is None and [(c.lo, c.hi) for c in lf.path_changes] == [(1, 16), (16, 64)]
    assert lf.last.total_lo <= lf.last.total <= lf.last.total_hi
    assert abs(lf.error) < 0.05
    assert fc.to_dict()["ladders"][0]["path_changes"][0]["held"] == 1
    caption = " ".join(_text(totals_table(fc)).split())
    assert "another path between batch 1 and 16 (1 unmatched" in caption
    assert "where the path changes is not known" in caption


def test_a_refit_from_the_traces_is_the_prediction_made_in_the_sweep(tmp_path):
    # benchmarks/bench_predict.py --refit: the prediction made again from what it kept
    bench_file = REPO / "benchmarks" / "bench_predict.py"
    spec = importlib.util.spec_from_file_location("bench_predict_for_tests", bench_file)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = _predicted_sweep()
    bench.write_traces(result, tmp_path / "traces.json")
    again = bench.refit(tmp_path / "traces.json", [1, 8])
    made = result.forecast.totals_table()[0]
    assert made["error"] is not None  # measured against the truth, so comparable
    kv = {"kv_left", "kv_lo", "kv_hi"}  # a refit is given no budget
    assert {k: v for k, v in again.totals_table()[0].items() if k not in kv} == {
        k: v for k, v in made.items() if k not in kv
    }
