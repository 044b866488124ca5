"""Which replay did not finish (capture/live/unfinished.py) on the CPU: the device's count
of each graph's finished replays stood in by a number, the launches in their order; the
graph whose replay it was gets the verdict "assert", named by that replay, whichever
graph's sync met the error. (On the GPU: test_live_gpu.py.)"""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture.live.checked import GraphCheck
from graph_harness.capture.live.forms import Adapted, EagerForm
from graph_harness.capture.live.lost import GraphAssertion
from graph_harness.capture.live.sample import Sample
from graph_harness.capture.live.unfinished import Launches
from graph_harness.capture.record.verdict import GraphVerdict


class _Counted:
    def __init__(self, done: int) -> None:
        self.finished = done

    def mark(self) -> None:
        pass  # the stand-in device stopped: no later replay finishes

    def done(self) -> int:
        return self.finished


def _check(launches: Launches, label: str, done: int) -> GraphCheck:
    form = Adapted(EagerForm(fn=lambda: torch.zeros(1), state={}))
    c = GraphCheck(form, GraphVerdict(source="adapter"), Sample.parse("2,2"), launches, label)
    c.device, c.marks = 0, _Counted(done)
    return c


def test_the_first_launch_past_its_graphs_count_is_the_one():
    launches = Launches()
    a, b = _check(launches, "bs=4", done=3), _check(launches, "bs=2", done=5)
    for check, n in [(a, 2), (b, 5), (a, 3), (b, 6), (a, 4), (b, 7)]:
        launches.order.append((check, n))
    assert launches.first_unfinished() == (b, 6)  # a's 4 came later: the device had stopped
    b.marks.finished = 7
    assert launches.first_unfinished() == (a, 4)
    a.marks.finished = 4
    assert launches.first_unfinished() is None


def test_an_error_met_by_another_graphs_sync_names_the_graph_that_tripped_it():
    launches = Launches()
    a, b = _check(launches, "draft n=1", done=6), _check(launches, "verify n=4", done=9)
    launches.order.extend([(a, 6), (b, 9), (a, 7), (b, 10)])
    error = RuntimeError("CUDA error: device-side assert triggered")
    with pytest.raises(GraphAssertion, match="graph draft n=1: replay 7: the replay tripped it"):
        b._assertion(11, error, where="before")
    assert a.verdict.status == "assert" and a.verdict.assertion.startswith("replay 7: ")
    assert "before replay 11 of graph verify n=4" in a.verdict.assertion
    assert b.verdict.status != "assert"  # the graph whose sync met it did nothing wrong
    assert launches.lost


def test_without_a_count_the_error_is_said_at_or_before():
    launches = Launches()
    b = _check(launches, "verify n=4", done=9)
    launches.order.append((b, 9))  # every remembered replay finished
    with pytest.raises(GraphAssertion, match="at or before 10"):
        b._assertion(11, RuntimeError("CUDA error: device-side assert triggered"), where="before")
    assert b.verdict.status == "assert"
