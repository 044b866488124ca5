"""Host values a library keeps (transformers' sliding-window counter named as the cause, with
what a user can do) and host values a step accepts (`step.accept_host`: shown as
accepted, never a plain pass, hiding no tensor that differs), on the CPU: the eager part,
and standin.py's stand-in graph for the replays."""

import pytest
import torch

from graph_harness.capture import check_step
from graph_harness.capture.state.steps import StepStateError
from tests.capture.check.standin import _check, _fails

cache_utils = pytest.importorskip("transformers.cache_utils")


def _window_step():
    """A step whose device work reads a row chosen by transformers' sliding-window
    counter, a Python int on a real StaticSlidingWindowLayer, advanced as the layer's
    update advances it."""
    layer = cache_utils.StaticSlidingWindowLayer(max_cache_len=32, sliding_window=8)
    table = torch.randn(64, 16, generator=torch.Generator().manual_seed(4))
    out = torch.empty(16)

    def step():
        out.copy_(table[layer.cumulative_length_int])
        layer.cumulative_length_int += 1
        return out

    def reset():
        layer.cumulative_length_int = 0

    step.reset = reset
    return step, table, out


def test_a_transformers_window_counter_is_named_as_the_cause_on_the_cpu():
    step, _, _ = _window_step()
    result = check_step(step, device="cpu")
    # tried ahead on the CPU, the counter changes the step's work (host_probe.py)
    assert result.status == "failed"
    text = result.verdict()
    assert "closure layer.cumulative_length_int" in text
    assert "It is not your step's own: transformers' sliding-window cache layer" in text
    assert "What you can do: check no further than the window" in text


def test_a_transformers_window_counter_is_named_where_the_replays_diverge(no_gpu_parts):
    step, table, out = _window_step()
    o = step()
    step.reset()

    def frozen():  # a graph replays the row its capture saw
        out.copy_(table[0])

    result = _check(step, frozen, o)
    assert result.status == "failed"
    host = [f for f in _fails(result) if f.kind == "host-state"]
    assert host and "transformers' sliding-window cache layer" in host[0].message


def _harmless_counter():
    """A step with a Python call counter its device work never reads."""
    x, out = torch.randn(16), torch.empty(16)
    state = {"calls": 0}

    def step():
        torch.mul(x, 2.0, out=out)
        state["calls"] += 1
        return out

    step.reset = lambda: state.update(calls=0)
    return step


def test_an_accepted_host_value_is_shown_as_accepted_never_as_a_plain_pass():
    plain = check_step(_harmless_counter(), device="cpu")
    # without it: the moving value tried ahead, and found harmless (host_probe.py)
    assert plain.status == "passed"
    f = next(f for f in plain.findings if f.kind == "host-state")
    assert f.severity == "info" and "does not depend on it" in f.message
    step = _harmless_counter()
    step.accept_host = {"closure state.calls": "a log counter"}
    result = check_step(step, device="cpu")
    assert result.status == "passed" and result.exit_code == 0
    assert result.verdict().startswith("check passed WITH ACCEPTED HOST VALUES")
    f = next(f for f in result.findings if f.kind == "host-accepted")
    assert f.severity == "warn" and "a log counter" in f.message
    assert "closure state.calls" in f.message


def test_accepting_a_host_value_hides_no_tensor_that_differs(no_gpu_parts):
    step, table, out = _window_step()
    step.accept_host = ["*.cumulative_length_int"]  # a pattern, as check names values
    o = step()
    step.reset()
    result = _check(step, lambda: out.copy_(table[0]), o)
    assert result.status == "failed"
    assert any(f.kind == "mismatch" for f in _fails(result))
    assert any(f.kind == "host-accepted" for f in result.findings)


@pytest.mark.parametrize("bad", [3, "closure state.calls", {"x": 1}, [None]])
def test_an_accept_host_that_is_not_names_is_refused(bad):
    step = _harmless_counter()
    step.accept_host = bad
    with pytest.raises(StepStateError, match="step.accept_host is"):
        check_step(step, device="cpu")
