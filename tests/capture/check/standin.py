"""check on the CPU with a stand-in graph: its replay() does what a graph captured from
the step would, and the fixture no_gpu_parts stands in for the two GPU-only parts (the
free-memory poisoning, an object that says which pattern is in free memory; and the graph
reader's memcpy nodes, none). `_check` runs check_captured on a step with such a graph."""

import contextlib

import pytest

from graph_harness.capture import check_captured
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.capture import Captured
from graph_harness.capture.state.steps import StateWatch


class _Graph:
    def __init__(self, replay):
        self.replay = replay


@pytest.fixture
def no_gpu_parts(monkeypatch):
    """Free memory 'filled' (FREE[0] says with what) and no memcpy nodes to read."""
    import graph_harness.capture.check.step as C
    import graph_harness.capture.check.trajectory as TR

    free = []

    @contextlib.contextmanager
    def poisoned(pattern):
        free.append(pattern)
        yield type("Poisoned", (), {"to_dict": lambda self: {"pattern": pattern}})()

    monkeypatch.setattr(TR, "poisoned", poisoned)
    monkeypatch.setattr(C, "host_copies", lambda graph, export: [])
    return free


def _check(step, replay, output, steps=4, **kw):
    watch = StateWatch(step)
    kept = capture_and_keep(step, device="cpu", watch=watch)
    export = kept.export
    captured = Captured(_Graph(replay), [], output)
    return check_captured(
        step, export, captured, watch.repeatability, name="toy", steps=steps, **kw
    )


def _fails(result):
    return [f for f in result.findings if f.severity == "fail"]
