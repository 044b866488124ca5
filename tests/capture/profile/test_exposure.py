"""Whether a launch is hidden behind the replay before it (capture/profile/exposure.py),
and the launch calls read from a trace (capture/profile/activities.py): on the CPU, from
synthetic replays and traces. The GPU's side is in test_profile.py's GPU tests."""

import math

import pytest

from graph_harness.capture.profile.activities import (
    Activity,
    Launch,
    launch_calls,
    launch_of,
    record_replays,
)
from graph_harness.capture.profile.exposure import exposure_verdict, launch_exposure


def _acts(start, end, corr):
    return [Activity("kernel", "k", start, start + 1, correlation=corr),
            Activity("kernel", "k", start + 1, end, correlation=corr)]  # fmt: skip


def test_a_launch_late_or_early_is_measured_against_the_replay_before_it():
    acts = _acts(110.0, 120.0, 7)
    # returned 5 us before the previous replay ended at 100: hidden, nothing exposed
    assert launch_exposure(acts, 100.0, Launch(7, 90.0, 95.0)) == (10.0, -5.0, 0.0, 5.0)
    # returned 4 us after it: 4 of the 10 us idle were spent waiting on the host
    assert launch_exposure(acts, 100.0, Launch(7, 96.0, 104.0)) == (10.0, 4.0, 4.0, 8.0)
    # returned after the replay began (the driver handed it over before its call ended):
    # exposed by no more than the idle itself
    assert launch_exposure(acts, 100.0, Launch(7, 96.0, 115.0))[2] == 10.0
    lead, late, exposed, call = launch_exposure(acts, 100.0, None)
    assert lead == 10.0 and all(math.isnan(x) for x in (late, exposed, call))


def test_the_verdict_never_calls_a_launch_hidden_or_exposed_inside_the_profilers_cost():
    # early by 5 us, more than the 2 us the profiler added to each replay: hidden
    v, why = exposure_verdict([-5.0, -6.0, -5.5], [2.0, 2.0, 2.0], [3.0] * 3)
    assert v == "hidden" and "5.5 us" in why
    # early by 1 us only, the profiler's excess 2 us: without it the GPU might run dry
    v, why = exposure_verdict([-1.0, -1.0, -1.0], [2.0, 2.0, 2.0], [3.0] * 3)
    assert v == "cannot tell" and "within what the profiler adds" in why
    # no calibration: no replay can be shown hidden, however early
    v, why = exposure_verdict([-50.0] * 3, [math.nan] * 3, [3.0] * 3)
    assert v == "cannot tell" and "not measured" in why
    # late by 20 us, more than its whole 12 us call under the profiler: exposed
    v, why = exposure_verdict([20.0, 21.0, 19.0], [2.0] * 3, [12.0] * 3, host_launch_us=4.0)
    assert v == "exposed" and "20.0 us" in why and "4.0 us" in why
    # late by 6 us, but the profiler adds 8 us to the launch call: cannot tell
    assert exposure_verdict([6.0] * 3, [2.0] * 3, [12.0] * 3, 4.0)[0] == "cannot tell"
    # late by less than its whole profiled call: the call alone might be the profiler's
    assert exposure_verdict([10.0] * 3, [2.0] * 3, [12.0] * 3)[0] == "cannot tell"
    # an excess fitted below zero is no margin: the launch must be early on its own
    assert exposure_verdict([-1.0] * 3, [-5.0] * 3, [3.0] * 3)[0] == "hidden"
    assert exposure_verdict([1.0] * 3, [-5.0] * 3, [3.0] * 3)[0] == "cannot tell"
    # a step's calls (its own graphs among eager work): only a first launch is read
    v, why = exposure_verdict([-50.0] * 3, [1.0] * 3, [3.0] * 3, calls=True)
    assert v == "cannot tell" and "first launch" in why
    assert exposure_verdict([math.nan] * 2, [1.0] * 2, [1.0] * 2)[0] == "unknown"


def _trace(launches, acts):
    ev = [dict(ph="X", cat="cuda_runtime", name="cudaGraphLaunch", ts=s, dur=e - s,
               args={"correlation": c}) for c, s, e in launches]  # fmt: skip
    ev.append(dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=1.0, dur=1.0,
                   args={"correlation": 99}))  # fmt: skip
    ev += [dict(ph="X", cat="kernel", name="k", ts=a.start_us, dur=a.dur_us,
                args={"correlation": a.correlation}) for a in acts]  # fmt: skip
    return {"traceEvents": ev}


def test_launch_calls_are_read_in_call_order_and_matched_to_replays_by_correlation():
    trace = _trace([(12, 30.0, 33.0), (11, 10.0, 14.0)], [])
    assert launch_calls(trace) == [Launch(11, 10.0, 14.0), Launch(12, 30.0, 33.0)]
    replays = [_acts(20.0, 25.0, 12), _acts(15.0, 18.0, 11)]
    assert launch_of(replays, launch_calls(trace)) == [Launch(12, 30.0, 33.0),
                                                       Launch(11, 10.0, 14.0)]  # fmt: skip
    # activities without ids: by order where the counts agree, else unknown
    bare = [[Activity("kernel", "k", 1.0, 2.0)], [Activity("kernel", "k", 3.0, 4.0)]]
    assert launch_of(bare, launch_calls(trace)) == launch_calls(trace)
    assert launch_of(bare, launch_calls(trace)[:1]) == [None, None]


def test_record_replays_hands_back_each_replays_launch(monkeypatch):
    import graph_harness.capture.profile.activities as A

    acts = [*_acts(20.0, 25.0, 2), *_acts(26.0, 30.0, 3)]
    trace = _trace([(2, 10.0, 12.0), (3, 13.0, 27.0)], acts)
    monkeypatch.setattr(A, "cupti_trace", lambda run: (run(), trace)[1])

    class Graph:
        def replay(self):
            pass

    launched = []
    reps = record_replays(Graph(), 2, warmup=0, launched=launched)
    assert [r[0].correlation for r in reps] == [2, 3]
    assert launched == [Launch(2, 10.0, 12.0), Launch(3, 13.0, 27.0)]
    # the second launch returned at 27, 2 us after the first replay's work ended at 25
    assert launch_exposure(reps[1], 25.0, launched[1])[1] == pytest.approx(2.0)
