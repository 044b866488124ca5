"""`check --steps to-end` and `--soak`: the calls a long trajectory compares, the step's own
length, and the soak's laps, comparisons and watchdog, on the CPU with a stand-in graph
(standin.py's: its replay() does what a graph captured from the step would). The
gpu-marked tests in test_to_end_gpu.py run real graphs."""

import math

import pytest
import torch

from graph_harness.capture.check import soak as S
from graph_harness.capture.check.sample import FIRST, RATIO, compared_calls, trajectory_length
from graph_harness.capture.check.settings import TO_END, CheckSettings
from graph_harness.capture.state.steps import StepStateError
from tests import targets as T
from tests.capture.check.standin import _check, _fails

SLOTS = 40  # a cache long enough that a sample skips calls


_CALLS = []


def _tick():
    _CALLS.append(1)


def _long(slots=SLOTS, **kw):
    step = T.stateful(slots=slots, device="cpu", **kw)
    step.max_steps = slots
    return step


# --- the sample --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, FIRST, FIRST + 1, 40, 1000, 4096, 100_003])
def test_the_sample_compares_every_early_call_then_geometrically_and_the_last(n):
    at = compared_calls(n)
    assert at == sorted(set(at)) and at[0] == 0 and at[-1] == n - 1
    assert at[: min(n, FIRST)] == list(range(min(n, FIRST)))
    for a, b in zip(at[FIRST:], at[FIRST + 1 :]):  # past FIRST, no gap wider than RATIO allows
        assert b <= math.ceil(a * RATIO) + 1 or b == n - 1
    if n > FIRST:  # and logarithmically many, counted another way: the powers of RATIO
        assert len(at) <= FIRST + math.ceil(math.log(n / FIRST, RATIO)) + 2


def test_the_length_is_the_steps_own_account():
    step = _long()
    assert trajectory_length(step, 5) == 5
    assert trajectory_length(step, TO_END) == SLOTS
    step.max_steps = lambda: 17  # or a function returning it
    assert trajectory_length(step, TO_END) == 17


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "12"])
def test_a_length_that_is_not_a_whole_number_is_refused(bad):
    step = _long()
    step.max_steps = bad
    with pytest.raises(StepStateError, match="step.max_steps is .* not a whole number >= 1"):
        trajectory_length(step, TO_END)


@pytest.mark.parametrize("huge", [100_001, 3 * 10**7, 10**13])
def test_a_length_past_the_bound_of_every_count_is_refused_before_any_call(huge):
    # every entry point's bound (100,000 calls): a check keeps a fingerprint per call, so
    # a step claiming 10**13 would grow memory until the process dies (attack pass)
    step = _long()
    step.max_steps = huge
    with pytest.raises(StepStateError, match=f"max_steps calls, {huge:,}, more than the 100,000"):
        trajectory_length(step, TO_END)


def test_a_length_past_the_bound_leaves_a_numbered_check_alone():
    # a 128k-token cache's step is checked for --steps N, and the host probe tries a
    # moving host value up to its last call; only to-end is bounded by the length
    from graph_harness.capture.check.host_probe import _calls_to_try

    step = _long()
    step.max_steps = 131_072
    assert trajectory_length(step, 7) == 7
    assert _calls_to_try(step, 10)[-1] == 131_071


def test_a_step_with_no_length_cannot_run_to_the_end_and_is_told_what_to_set():
    step = T.stateful(device="cpu")
    with pytest.raises(StepStateError, match="set step.max_steps .* or give a number"):
        trajectory_length(step, TO_END)


@pytest.mark.parametrize(
    "kw",
    [{"steps": "to-the-end"}, {"steps": 0}, {"soak": -1}, {"soak": 1.5}, {"soak_deadline": 0}],
)
def test_settings_say_what_was_expected(kw):
    with pytest.raises(ValueError, match="must be"):
        CheckSettings(**kw)


# --- to the end --------------------------------------------------------------------------


def test_to_the_end_runs_every_call_and_compares_the_sample(no_gpu_parts):
    step = _long()
    inner = step

    def counted():
        _tick()  # counted where check's walk of the step's state does not look
        return inner()

    counted.reset, counted.max_steps, counted.state = inner.reset, SLOTS, inner.state
    out = counted()
    counted.reset()
    _CALLS.clear()
    result = _check(counted, inner, out, steps=TO_END)
    calls = list(_CALLS)
    assert result.passed and result.to_end and result.steps == SLOTS, result.findings
    assert result.compared_calls == compared_calls(SLOTS) and len(result.compared_calls) < SLOTS
    # warm-ups and the capture, then 2 x N eager calls, as documented
    assert len(calls) == result.warmup + 1 + 2 * SLOTS
    assert "to the end of its cache" in result.verdict()
    assert f"each of {len(compared_calls(SLOTS))} compared steps" in result.verdict()
    assert int(step.state["pos"]) == 0  # left at its start
    assert set(result.seconds) == {"a", "b", "c", "d"}


def _wrong_from(step, first_bad):
    """A graph right until the position reaches `first_bad`, then writing a wrong row."""
    pos, cache = step.state["pos"], step.state["cache"]

    def replay():
        if int(pos) >= first_bad:
            cache[int(pos)] += 1.0  # a wrong row, left in the cache: later calls read it
            pos.add_(1)
            return
        step()

    return replay


def test_a_graph_wrong_only_past_the_first_calls_is_caught_by_running_to_the_end(no_gpu_parts):
    first_bad = 25  # not a compared call: the cache carries it to the next one
    assert first_bad not in compared_calls(SLOTS)
    step = _long()
    out = step()
    step.reset()
    short = _check(step, _wrong_from(step, first_bad), out, steps=4)
    assert short.passed  # four calls from the start never get there
    step.reset()
    result = _check(step, _wrong_from(step, first_bad), out, steps=TO_END)
    assert result.status == "failed"
    steps = {f.step for f in _fails(result)}
    after = min(i for i in compared_calls(SLOTS) if i > first_bad)
    assert min(steps) == after, (steps, after)  # the first compared call after the defect


def test_to_the_end_without_a_reset_compares_every_call(no_gpu_parts):
    # its four runs take turns call by call, each from the state the last left: a wrong
    # write between two compared calls would be shared by all four, so none is skipped
    x = torch.randn(16)
    out = torch.empty(16)

    def step():  # repeats: each call leaves what it found
        _tick()
        torch.mul(x, 2.0, out=out)
        return out

    step.max_steps = 30
    _CALLS.clear()
    result = _check(step, lambda: torch.mul(x, 2, out=out), out, steps=TO_END)
    calls = list(_CALLS)
    assert result.passed and result.compared_calls == list(range(30)), result.findings
    assert len(calls) == result.warmup + 1 + 2 * 30  # two eager calls at every call
    assert len(no_gpu_parts) == 2 * 30  # and two replays


def test_a_number_of_steps_is_compared_at_every_call(no_gpu_parts):
    # only --steps to-end samples: --steps 12 compares all twelve, as it always did
    step = _long()
    out = step()
    step.reset()
    result = _check(step, step, out, steps=12)
    assert result.passed and result.compared_calls == list(range(12)), result.findings


# --- the soak ----------------------------------------------------------------------------


def _counting_graph(step, wrong_after=None):
    """A stand-in graph that counts its replays; from replay `wrong_after` on it writes
    a wrong output, as a graph that goes wrong only after many replays would."""
    n = [0]
    out = []

    def replay():
        n[0] += 1
        r = step()
        if wrong_after is not None and n[0] > wrong_after:
            r.add_(1.0)
        out.append(r)

    return replay, n


def test_a_soak_replays_as_many_times_as_asked_and_passes_a_right_graph(no_gpu_parts):
    step = T.stateful(device="cpu")
    out = step()
    step.reset()
    replay, n = _counting_graph(step)
    result = _check(step, replay, out, steps=4, soak=50)
    assert result.passed, result.findings
    assert n[0] == 2 * 4 + 50  # the check's two runs, then the soak's replays
    s = result.soak
    assert s["replays"] == 50 and s["done"] == 50 and s["hang"] is None
    laps = -(-50 // 4)
    assert s["laps"] == laps
    # every call of the compared laps (the last lap is cut short: 50 = 12 x 4 + 2)
    assert s["compared"] == sum(min(4, 50 - 4 * lap) for lap in S.compared_laps(laps))
    assert "then 50 more replays agreed" in result.verdict()
    assert int(step.state["pos"]) == 0  # left at its start


def test_a_graph_that_goes_wrong_after_many_replays_fails_the_soak(no_gpu_parts):
    step = T.stateful(device="cpu")
    out = step()
    step.reset()
    replay, n = _counting_graph(step, wrong_after=8 + 30)  # right through the check's runs
    result = _check(step, replay, out, steps=4, soak=200)
    assert result.status == "failed" and result.exit_code == 1
    bad = [f for f in _fails(result) if f.kind == "soak-mismatch"]
    assert bad and "at soak replay" in bad[0].message
    replay_no = int(bad[0].message.split("at soak replay ")[1].split()[0])
    assert replay_no > 30  # where the graph went wrong, or the first compared replay after
    assert n[0] < 2 * 4 + 200  # stopped at the first difference


def test_a_replay_past_its_deadline_is_reported_as_a_hang_and_never_waited_for(
    no_gpu_parts,
    monkeypatch,
):
    class Never:
        def query(self):
            return False

    made = []
    monkeypatch.setattr(S, "event", lambda: made.append(1) or Never())
    monkeypatch.setattr(S, "sync", lambda: pytest.fail("the soak synced behind a hang"))
    step = T.stateful(device="cpu")
    out = step()
    step.reset()
    replay, n = _counting_graph(step)
    result = _check(step, replay, out, steps=4, soak=100, soak_deadline=0.05)
    assert result.status == "failed"
    hang = result.soak["hang"]
    assert hang is not None and hang["replay"] == 1 and hang["waited_s"] >= 0.05
    assert result.soak["done"] == 0
    # lap 0 is compared: its first replay is waited for (under the deadline) before the
    # state is read, so nothing more was queued behind it
    assert n[0] == 2 * 4 + 1
    f = next(f for f in _fails(result) if f.kind == "hang")
    assert "did not finish within 0.05 s" in f.message and "must exit" in f.message


def test_the_deadline_comes_from_the_measured_replays_unless_given():
    from graph_harness.capture.check.trajectory import Run, Trajectories

    t = Trajectories(10, True, Run(), Run(), at=list(range(10)), seconds={"c": 0.5})
    d, why = S.deadline_of(t, None)
    assert d == S.DEADLINE_FACTOR * 0.05 and "ms" in why
    fast = Trajectories(10, True, Run(), Run(), at=list(range(10)), seconds={"c": 1e-4})
    assert S.deadline_of(fast, None)[0] == S.DEADLINE_FLOOR_S
    assert S.deadline_of(t, 3.0) == (3.0, "given (soak_deadline)")


def test_the_soak_needs_a_graph_on_the_cpu_and_says_so():
    from graph_harness.capture import check_step

    step = T.stateful(device="cpu")
    result = check_step(step, device="cpu", soak=10)
    assert result.soak is None
    assert any(f.kind == "soak" and "needs a GPU" in f.message for f in result.findings)


def test_a_soak_starts_each_lap_as_the_checks_runs_started(no_gpu_parts):
    # a reset that misses the cache: the check puts it back before each run (and says
    # so); the soak's laps must start from that same state, or a right graph fails
    step = T.stateful(device="cpu")
    pos = step.state["pos"]
    step.reset = lambda: pos.zero_()  # the cache is left as the last call left it
    out = step()
    step.reset()
    replay, _ = _counting_graph(step)
    result = _check(step, replay, out, steps=4, soak=20)
    assert any(f.kind == "reset" for f in result.findings)  # the check put the cache back
    assert result.status == "passed", result.verdict()
    assert result.soak["compared"] > 4
