"""A replay's CUDA error in check's runs, on the CPU (capture/replay/progress.py, the
trajectory's `_called`): a stand-in graph that raises what torch raises after a
device-side assertion at its replay of call 6, the device's count of finished replays
stood in by a counter, is reported as the call of the replayed run that did not finish,
beside the eager runs that reached the end, with the assertion's condition read from
stderr. (On the GPU: test_device_assert_gpu.py.)"""

from __future__ import annotations

import os

import pytest

import graph_harness.capture.check.trajectory as TR
from graph_harness.capture.check.step import TO_END
from graph_harness.capture.replay.guard import ReplayFailed
from tests import targets as T
from tests.capture.check.standin import _check

PRINTED = (
    b'IndexKernel.cu:92: block: [0,0,0] Assertion `idx < dim && "index out of bounds"` failed.\n'
)


class _Counted:
    """Stands in for Marks: the replays that finished, counted as the device would."""

    def __init__(self) -> None:
        self.finished = 0

    def mark(self) -> None:
        self.finished += 1

    def done(self) -> int:
        return self.finished


def test_the_call_that_did_not_finish_is_named_with_the_assertion(no_gpu_parts, monkeypatch):
    step = T.window_overrun(window=6, steps=12)
    out = step()
    step.reset()
    monkeypatch.setattr(TR, "cuda_in_use", lambda: True)  # marks are made where CUDA runs
    monkeypatch.setattr(TR, "Marks", _Counted)
    calls = {"n": 0}

    def replay():  # the graph: the unwrapped index, which on the device trips at call 6
        if calls["n"] == 6:
            os.write(2, PRINTED * 3)  # one line per failing thread, as the device prints
            raise RuntimeError("CUDA error: device-side assert triggered")
        calls["n"] += 1
        step()

    own = step.reset

    def reset():  # the replays count from the step's start, as the graph's position does
        calls["n"] = 0
        own()

    step.reset = reset
    with pytest.raises(ReplayFailed) as got:
        _check(step, replay, out, steps=TO_END)
    e = got.value
    assert e.tripped == 7 and e.assertion == 'idx < dim && "index out of bounds"', e
    msg = str(e)
    assert msg.startswith("call 6 of replayed run C did not finish"), msg
    assert "the eager runs A and B ran all 12 calls from the same start" in msg, msg
    assert "replay 7 of this window" in msg and "is the first that did not finish" in msg


def test_without_marks_the_error_says_at_or_before(no_gpu_parts):
    step = T.window_overrun(window=6, steps=12)
    out = step()
    step.reset()

    def replay():
        raise RuntimeError("CUDA error: device-side assert triggered")

    with pytest.raises(ReplayFailed) as got:
        _check(step, replay, out, steps=TO_END)
    assert got.value.tripped is None and "at or before replay" in str(got.value)


def test_the_fingerprints_of_a_run_that_raised_are_never_freed():
    # Freeing a pinned host copy after a lost context aborts the process (a C++
    # destructor records an event: seen on an H100, Gemma 3 past its window); the
    # fingerprints a run gathered before its call raised are kept, not dropped.
    import gc
    import weakref

    from graph_harness.capture.replay.guard import KEPT

    class _Print:  # stands in for a Fingerprint holding pinned copies
        pass

    made: list[weakref.ref] = []

    def prints():
        for _ in range(2):
            p = _Print()
            made.append(weakref.ref(p))
            yield p
        yield None
        raise RuntimeError("CUDA error: device-side assert triggered")

    before = len(KEPT)
    with pytest.raises(RuntimeError, match="device-side assert"):
        TR._kept(prints())
    gc.collect()
    assert len(made) == 2 and all(r() is not None for r in made)
    assert [id(p) for p in KEPT[before]] == [id(r()) for r in made]
    del KEPT[before:]
