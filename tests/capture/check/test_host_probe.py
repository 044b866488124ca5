"""A host value that moves along check's calls is tried, not passed with a warning
(issue 57, item 3): the step called from its start with the value a later call sees.
Runs on the CPU: the probe is eager (a graph replays the captured value whatever it is)."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture import check_step
from graph_harness.capture.state.host_paths import NotSettable, setter


def counter_step(threshold: int | None, *, max_steps: int | None = 100, step_by: int = 1):
    """A step that counts its calls on the host; past `threshold` its device work changes
    (None: it never does, the counter only logs)."""
    x = torch.arange(8.0)
    out = torch.empty(8)
    state = {"calls": 0}

    def step():
        late = threshold is not None and state["calls"] >= threshold
        out.copy_(x * (3.0 if late else 2.0))
        state["calls"] += step_by
        return out

    step.reset = lambda: state.update(calls=0)
    if max_steps is not None:
        step.max_steps = max_steps
    return step, state


def _host_findings(result):
    return [f for f in result.findings if f.kind == "host-state"]


def test_a_counter_that_matters_only_past_call_40_fails_check_of_4_calls():
    step, state = counter_step(40)
    result = check_step(step, warmup=2, steps=4, device="cpu", name="late")
    assert result.status == "failed", [f.message for f in result.findings]
    (f,) = _host_findings(result)
    assert f.severity == "fail" and f.tensor == "closure state.calls" and f.step == 40, f.message
    assert "from call 40 on" in f.message and "at 40 (what call 40 sees)" in f.message
    assert state["calls"] == 0, "left at its start"


def test_the_first_call_that_matters_is_found_between_tries():
    step, _ = counter_step(57)  # tried at 40 (agrees) then 99 (differs): halved to 57
    result = check_step(step, warmup=2, steps=4, device="cpu", name="late")
    (f,) = _host_findings(result)
    assert f.severity == "fail" and f.step == 57, f.message


def test_a_counter_that_does_not_matter_is_passed_with_the_values_tried():
    step, _ = counter_step(None)
    result = check_step(step, warmup=2, steps=4, device="cpu", name="logs")
    (f,) = _host_findings(result)
    assert f.severity == "info", f.message
    assert "does not depend on it" in f.message and "40, 99" in f.message
    assert result.status != "failed"


def test_a_value_that_cannot_be_tried_is_not_verified():
    # a value that doubles does not move by a constant step
    x, out, box = torch.arange(4.0), torch.empty(4), {"scale": 1}

    def doubling():
        out.copy_(x * (2.0 if box["scale"] < 1000 else 3.0))
        box["scale"] *= 2
        return out

    doubling.reset = lambda: box.update(scale=1)
    result = check_step(doubling, warmup=2, steps=4, device="cpu", name="doubling")
    (f,) = _host_findings(result)
    assert f.severity == "unverified" and "constant step" in f.message, f.message
    assert result.status == "unverified"


def test_host_paths_find_and_set_values_by_their_fingerprint_names():
    class Box:
        def __init__(self):
            self.pos = 3
            self.items = [1, {"t": 2}]

    box, n = Box(), 5

    def step():
        return box.pos + n

    setter(step, "closure box.pos")(9)
    setter(step, "closure box.items.1.t")(7)
    setter(step, "closure n")(6)
    assert (box.pos, box.items[1]["t"], step()) == (9, 7, 15)
    with pytest.raises(NotSettable):
        setter(step, "closure missing")
    tup = (1, 2)

    def step2():
        return tup

    with pytest.raises(NotSettable, match="tuple"):
        setter(step2, "closure tup.0")
