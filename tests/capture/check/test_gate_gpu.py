"""The `graph_check` fixture on real graphs (the H200): a right graph passes, a graph that
froze a host value fails naming the call and the tensor, a step whose trajectory compares
nothing fails, a graph that never writes the output its warm-up already wrote fails; each
through pytest itself (pytester), as a user's test runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugin_args import PLUGIN

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[3]


def test_graph_check_passes_a_right_graph_and_fails_wrong_ones(pytester, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_graphs="""
        import torch
        from tests import targets as T

        def test_right(graph_check):
            result = graph_check(T.stateful())
            assert result.compared and result.outputs == 1

        def test_frozen_host_value(graph_check):
            graph_check(T.frozen_counter())

        def test_compares_nothing(graph_check):
            x = torch.ones(4, device="cuda")

            def step():
                torch.add(x, 1)

            graph_check(step)

        def test_never_writes_its_output(graph_check):
            x, y = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")

            def step():  # eager calls write y; the capture leaves the write out
                z = torch.mul(x, 2.0)
                if not torch.cuda.is_current_stream_capturing():
                    y.copy_(z)
                return y

            graph_check(step)

        def test_a_kernel_in_two_lines(graph_check):
            x, y = torch.randn(1024, device="cuda"), torch.empty(1024, device="cuda")
            graph_check(lambda: torch.mul(x, 2.0, out=y))
        """
    )
    r = pytester.runpytest_inprocess(*PLUGIN)
    r.assert_outcomes(passed=2, failed=3)
    out = r.stdout.str()
    assert "[mismatch] call 1, tensor output" in out and "closure state.t" in out
    assert "compared nothing" in out
    assert "the graph never wrote it" in out
