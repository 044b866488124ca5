"""`sweep --predict-from` on real graphs: the pool model against each sampled size's own
pool as the allocator built it, the prediction of the sizes swept against the truth the
sweep captured (issue 58's goal: within 5%), vLLM's method on the sweep's own samples,
and the command line's table and file."""

from __future__ import annotations

import contextlib
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graph_harness.capture.graph.lifecycle import PAGE

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]
SIZES = [1, 2, 4, 8, 16, 24, 32, 48, 64]
SAMPLED = [1, 16, 64]
FAST = dict(trials=2, replays=1, host_launches=0, leak_replays=1)  # memory is tested here
FAST["resolve"] = tuple(SAMPLED)  # the sampled sizes' executables, below the page


@contextlib.contextmanager
def pages_held_before_used_up():
    """Executables of a throwaway two-node graph made (and uploaded, as the sweep's are)
    and kept until free memory has dropped twice: the pages the driver held from
    executables earlier tests destroyed are then in use, and the sweep reads its own as a
    fresh process (an engine's) would, but for the rest of the last page taken (under a
    page: the tolerance below)."""
    from graph_harness.capture.graph.lifecycle import runtime
    from tests.capture.graph.exec_copies import copy_of, kept_chain

    graph, stream = kept_chain(2)
    kept, drops = [], 0
    try:
        torch.cuda.synchronize()
        free = torch.cuda.mem_get_info()[0]
        while drops < 2 and len(kept) < 1 << 16:
            kept.append(copy_of(graph, stream))
            torch.cuda.synchronize()
            now = torch.cuda.mem_get_info()[0]
            drops, free = drops + (now < free), now
        assert drops == 2, "the driver's held pages were not used up"
        yield
    finally:
        for ex in kept:
            runtime().cudaGraphExecDestroy(ex)


@pytest.fixture(scope="module")
def predicted():
    """The tiny llama of examples/ swept over SIZES and predicted from SAMPLED."""
    from examples.llama_decode import make_tiny_step
    from graph_harness.capture.sweep.run import sweep_step
    from graph_harness.capture.sweep.settings import SweepSettings

    with pages_held_before_used_up():
        result = sweep_step(lambda b: make_tiny_step(batch=b), SIZES, SweepSettings(**FAST))
    return result.with_forecast(SAMPLED, budget=8 << 30)


def test_every_size_has_its_allocator_requests_and_the_weights_are_read(predicted):
    assert set(predicted.traces) == set(SIZES)
    assert all(t is not None and t.events for t in predicted.traces.values())
    assert predicted.weights and predicted.weights > 0


def test_the_pool_model_rebuilds_each_sampled_size_s_own_pool(predicted):
    # The allocator's rules replayed on the requests it served give the segments it took
    # (capture/sweep/allocator_model.py): a miss here is a rule the model lacks.
    fc = predicted.forecast
    assert set(fc.model_miss) == set(SAMPLED), fc.why_not
    assert fc.model_miss == {b: 0.0 for b in SAMPLED}, fc.model_miss
    own = {r.batch: r.reserved for r in predicted.rows}
    for b in SAMPLED:
        assert predicted.traces[b].reserved == own[b]


def test_the_prediction_of_the_sizes_swept_against_their_truth(predicted):
    from graph_harness.capture.sweep.truth import true_total

    fc = predicted.forecast
    swept = fc.ladders[0]
    assert swept.name == "sizes swept" and swept.sizes == tuple(sorted(SIZES, reverse=True))
    assert swept.true_total == true_total(predicted.shared)
    assert swept.last.total_lo <= swept.last.total <= swept.last.total_hi
    assert swept.last.total_lo <= swept.true_total <= swept.last.total_hi, swept.last
    # issue 58's goal, 5% (BENCHMARKS.md: four models to 512); this model's whole ladder
    # is a few MiB, read in the driver's 2 MiB pages: one page is more than 5% of it
    miss = abs(swept.last.total - swept.true_total)
    assert miss <= max(0.05 * swept.true_total, PAGE), (swept.last, predicted.shared)
    # the sampled sizes' executables were resolved below the page (the others were not
    # asked for), each more than nothing
    each = {r.batch: r.exec_each for r in predicted.rows if r.exec_each is not None}
    assert set(each) == set(SAMPLED) and all(0 < e < PAGE for e in each.values()), each
    # the other ladder, vLLM's default to 512, predicted with this model's error beside it
    other = fc.ladders[1]
    assert len(other.rows) == 67 and other.true_total is None
    assert fc.error_note(other).startswith("not measured for this ladder;")
    assert fc.kv_left(swept)[0] == (8 << 30) - predicted.weights - swept.last.total


def test_vllm_s_method_is_its_formula_on_the_sweep_s_first_two_captures(predicted):
    from graph_harness.capture.sweep.vllm_method import vllm_estimate

    first, second = predicted.shared[0], predicted.shared[1]
    assert (first.batch, second.batch) == (64, 48)
    want = vllm_estimate(first.free_drop, second.free_drop, len(SIZES))
    assert predicted.forecast.ladders[0].vllm == want


def test_the_command_line_shows_and_writes_the_prediction(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [sys.executable, "-m", "graph_harness", "sweep", "--target",
         "examples/llama_decode.py:make_tiny_step", "--sizes", "1", "4", "16",
         "--predict-from", "1", "16", "--memory-budget", "8GiB", "--trials", "2",
         "--replays", "1", "--leak-replays", "1", "--out", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=600, cwd=REPO, env=env,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Graph memory predicted from batch 1, 16" in r.stdout
    assert "KV cache left" in r.stdout and "vLLM's method" in r.stdout
    with open(tmp_path / "s" / "sweep-memory-forecast.csv") as f:
        rows = list(csv.DictReader(f))
    assert {row["ladder"] for row in rows} == {"sizes swept", "vLLM default (67 sizes, 1-512)"}
    # the sampled sizes' executables were resolved below the page, and only theirs
    with open(tmp_path / "s" / "sweep-sizes.csv") as f:
        each = {int(row["batch"]): row["exec_each"] for row in csv.DictReader(f)}
    assert {b for b, v in each.items() if v} == {1, 16}, each
