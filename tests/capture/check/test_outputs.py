"""The graph's outputs filled before every call (capture/check/outputs.py), on the CPU with
check's stand-in graph (standin.py's): an output the graph never writes fails where it
used to match, a step that reads what it returns still passes, and what is left unfilled
is said. The same on real graphs is test_gate_gpu.py's."""

from __future__ import annotations

import pytest
import torch

from graph_harness.capture.check.fixture import fixture_outcome
from graph_harness.capture.check.outputs import OUTPUT_POISON, OutputPoison, outputs_to_poison
from tests.capture.check.standin import _check


def _doubling():
    x, out = torch.randn(64), torch.empty(64)

    def step():
        torch.mul(x, 2.0, out=out)
        return out

    return step, x, out


def test_an_output_the_graph_never_writes_fails(no_gpu_parts):
    step, x, out = _doubling()
    step()  # the warm-up wrote the buffer: a graph that skips the write would still match
    for graph in (lambda: None, lambda: x * 2.0):  # nothing, or the product left in a temporary
        result = _check(step, graph, out, steps=1)
        g = fixture_outcome(result)
        assert g.outcome == "fail", g.message
        (f,) = [f for f in result.findings if f.severity == "fail" and f.tensor == "output"]
        assert "the graph never wrote it" in f.message and f"{OUTPUT_POISON:#04x}" in f.message
        assert result.poisoned_outputs["filled"] == ["output"]
    right = _check(step, step, out, steps=1)
    assert fixture_outcome(right).outcome == "pass" and torch.equal(out, x * 2.0)


def test_a_step_that_reads_what_it_returns_still_passes(no_gpu_parts):
    x, acc = torch.randn(32), torch.empty(32)
    state = {"n": torch.zeros((), dtype=torch.int64)}

    def step():  # accumulates into its output: reads the pattern in every run alike
        acc.add_(x)
        state["n"].add_(1)
        return acc

    step.reset = lambda: state["n"].zero_()
    step()
    result = _check(step, step, acc)
    assert result.passed, result.findings
    assert result.poisoned_outputs["filled"] == ["output"]


def test_an_integer_output_that_is_state_is_left_and_said(no_gpu_parts):
    pos = torch.zeros(1, dtype=torch.int64)
    logits = torch.empty(8)
    w = torch.randn(16, 8)

    def step():
        torch.index_select(w, 0, pos, out=logits[None])
        pos.add_(1).remainder_(16)
        return logits, pos

    step.reset = lambda: pos.zero_()
    step()
    step.reset()
    result = _check(step, step, (logits, pos))
    assert result.passed, result.findings
    assert result.poisoned_outputs["filled"] == ["output.0"]
    assert "output.1" in result.poisoned_outputs["left"]
    (f,) = [f for f in result.findings if f.kind == "output-unfilled"]
    assert f.tensor == "output.1" and "index" in f.message


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32])
def test_the_fill_writes_the_pattern_in_every_byte_through_strides(dtype):
    base = torch.randint(0, 100, (6, 8)).to(dtype)
    view = base[:, ::2]  # not contiguous: the untouched columns must keep their values
    before = base.clone()
    p = OutputPoison(tensors=[view])
    p.fill()
    raw = base[:, ::2].contiguous().view(torch.uint8)
    assert bool((raw == OUTPUT_POISON).all())
    assert torch.equal(base[:, 1::2], before[:, 1::2])
    assert torch.isfinite(view.float()).all()  # a step that reads it computes on numbers


def test_outputs_are_chosen_by_byte_range_not_by_object():
    out = torch.empty(10)
    flag = torch.zeros(3, dtype=torch.bool)

    def step():
        return out[2:5], out[2:5], flag  # one range twice, and a boolean

    p = outputs_to_poison(step, step())
    assert p.filled == ["output.0"] and set(p.left) == {"output.2"}
