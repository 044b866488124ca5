"""A step with no reset whose warm-ups differ only by its own non-determinism (float sums
with atomics) repeats; one that carries state on does not (issue 57). On the CPU, the
atomics' non-determinism is stood in for by noise in the last bits drawn from the
operating system's entropy: nothing a generator's state could repeat."""

from __future__ import annotations

import itertools
import os

import pytest
import torch

from graph_harness.capture import check_step
from graph_harness.capture.graph.capture import warm_up
from graph_harness.capture.state.steps import StateWatch, StepStateError


def _noise(n: int) -> torch.Tensor:
    """Last-bit noise, as an atomic float sum's order gives it: +-1 ulp-ish at 1.0."""
    raw = torch.frombuffer(bytearray(os.urandom(4 * n)), dtype=torch.int32).float()
    return raw / 2**31 * 2e-7


def atomic_step(drift: float = 0.0):
    """`out.zero_(); out.index_add_(0, idx, src)`, its sums non-deterministic in their last
    bits; with `drift`, it also carries a value on from call to call."""
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 8, (64,), generator=g)
    src = torch.randn(64, 16, generator=g)
    out = torch.empty(8, 16)
    carried = torch.zeros(8, 16)

    def step():
        out.zero_()
        out.index_add_(0, idx, src)
        out.add_(_noise(out.numel()).view_as(out))
        if drift:
            carried.add_(drift)
            out.add_(carried)
        return out

    return step


def _rep(step, warmups=3):
    watch = StateWatch(step)
    warm_up(step, warmups, watch)
    watch.finish(warmups)
    return watch.repeatability


def test_a_stateless_step_with_atomics_repeats_within_its_measured_spread():
    step = atomic_step()
    rep = _rep(step)
    assert rep.repeatable is True and rep.refusal("atomic") is None, rep.summary()
    assert {c.name for c in rep.spread} == {"closure out", "output"}
    assert rep.summary().startswith("repeats within its measured non-determinism")
    # the check runs (no refusal) and finds nothing wrong in the two eager runs
    result = check_step(step, warmup=3, steps=3, device="cpu", name="atomic")
    assert result.status != "failed", [f.message for f in result.findings]
    assert any("measured non-determinism" in f.message for f in result.findings)


def test_a_step_that_carries_state_on_is_still_refused():
    # warm-ups differ by the drift (0.01), two calls from one state by the noise alone
    step = atomic_step(drift=0.01)
    rep = _rep(step)
    assert rep.repeatable is False and not rep.spread
    assert rep.refusal("drift").startswith("drift does not repeat and has no step.reset")
    with pytest.raises(StepStateError, match="does not repeat and has no step.reset"):
        check_step(step, warmup=3, steps=3, device="cpu", name="drift")


def test_the_measurement_leaves_the_state_as_the_warmups_left_it():
    out = torch.zeros(4)
    calls = itertools.count()  # not state the walk reads (a list of calls would be)

    def step():
        next(calls)
        out.copy_(torch.arange(4.0) + _noise(4))
        return out.clone()

    watch = StateWatch(step)
    warm_up(step, 2, watch)
    after = out.clone()
    assert watch.repeatability.repeatable is True and watch.repeatability.spread
    assert next(calls) == 4, "two warm-ups and the two calls that measured the spread"
    assert torch.equal(out, after)


@pytest.mark.gpu
def test_a_real_atomic_step_passes_check_on_the_gpu():
    # index_add_ of floats with repeated indices: CUDA's atomics sum in any order
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    g = torch.Generator(device="cuda").manual_seed(0)
    idx = torch.randint(0, 16, (1 << 16,), device="cuda", generator=g)
    src = torch.randn(1 << 16, 64, device="cuda", generator=g)
    out = torch.empty(16, 64, device="cuda")

    def step():
        out.zero_()
        out.index_add_(0, idx, src)
        return out

    # not vacuous: the sums differ between two calls here (atomics add in any order)
    a, b = step().clone(), step().clone()
    assert not torch.equal(a, b), "index_add_ summed alike twice: nothing to measure"
    result = check_step(step, warmup=3, steps=4, name="atomic")
    assert result.status == "passed", [f.message for f in result.findings]
    rep = result.repeatability
    assert rep.repeatable is True, rep.summary()
