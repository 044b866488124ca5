"""What the `graph_check` fixture makes of a check (capture/check/fixture.py,
graph_harness/pytest_plugin.py), on the CPU: check's comparison run with a stand-in graph
(standin.py's), each verdict turned into a pass, a failure or a skip; and the fixture
itself in pytest (pytester). The GPU side, real graphs right and wrong, is
test_gate_gpu.py's."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture import check_step
from graph_harness.capture.check.fixture import fixture_outcome
from tests import targets as T
from tests.capture.check.standin import _check
from tests.plugin_args import PLUGIN  # the plugin alone, as its tests run it


def test_a_right_graph_passes(no_gpu_parts):
    step = T.stateful(device="cpu")
    out = step()
    step.reset()
    g = fixture_outcome(_check(step, step, out))
    assert g.outcome == "pass" and "agree with the eager calls" in g.message


def test_a_frozen_host_value_fails_naming_the_call_and_the_tensor(no_gpu_parts):
    step = T.frozen_counter()
    out = step()
    step.reset()
    row = step.table[0]  # the graph copies the row its capture saw, forever
    g = fixture_outcome(_check(step, lambda: out.copy_(row), out))
    assert g.outcome == "fail"
    assert "[mismatch] call 1, tensor output" in g.message
    assert "[host-state]" in g.message and "closure state.t" in g.message


def test_a_trajectory_that_compares_nothing_fails(no_gpu_parts):
    x = torch.ones(4)

    def step():  # touches nothing the check can see, returns nothing
        torch.add(x, 1)

    g = fixture_outcome(_check(step, step, None))
    assert g.outcome == "fail" and "compared nothing" in g.message, g.message


def test_on_the_cpu_a_clean_step_is_skipped_and_a_moving_host_value_fails():
    clean = fixture_outcome(check_step(T.stateful(device="cpu"), device="cpu"))
    assert clean.outcome == "skip" and "needs a CUDA device" in clean.message
    moving = fixture_outcome(check_step(T.host_position(rewind=False), device="cpu"))
    assert moving.outcome == "fail" and "closure state.p" in moving.message
    # accepting "not verified" is for a graph that was replayed: the CPU replays none
    assert (
        fixture_outcome(
            check_step(T.host_position(rewind=False), device="cpu"), accept_unverified=True
        ).outcome
        == "fail"
    )


@pytest.fixture
def project(pytester):
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_graphs="""
        import torch
        from tests import targets as T

        def test_clean(graph_check):
            graph_check(T.stateful(device="cpu"))

        def test_host_value(graph_check):
            graph_check(T.host_position(rewind=False))

        def test_no_reset(graph_check):
            graph_check(T.stateful_cache_no_reset())

        def test_not_a_step(graph_check):
            graph_check(42)
        """
    )
    return pytester


@pytest.mark.smoke
def test_the_fixture_in_pytest_on_the_cpu(project, monkeypatch):
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[3]))
    r = project.runpytest_inprocess(*PLUGIN, "-rs")
    r.assert_outcomes(passed=0, skipped=1, failed=3)
    out = r.stdout.str()
    # one sentence, saying the CPU part passed, not the same need twice
    assert (
        "graph_check needs a CUDA device to replay the step's graph; here its warm-ups and "
        "two eager runs passed\n" in out
    ), out
    assert "needs a GPU" not in out and "CUDA machine" not in out
    assert "GraphCheckFailed" in out and "closure state.p" in out
    assert "graph_check takes the step (a callable), got int" in out
