"""capture/commands.py: the commands that are not one stage's call, as library calls (the
CLI's count, check and report call these; tests/reports/cli test them through it)."""

import pytest
import torch

from graph_harness import capture


def _step():
    x = torch.randn(4, 64)
    w = torch.randn(64, 64)
    out = torch.empty(4, 64)

    def step():
        torch.matmul(x, w, out=out)
        out.relu_()
        return out

    return step


@pytest.mark.smoke
def test_count_step_counts_what_capture_and_count_counts():
    step = _step()
    got = capture.count_step(step, name="toy")
    other = capture.capture_and_count(step, name="toy")  # the count by another entry
    assert got.export.total == other.total > 0
    assert [n["kernel"] for n in got.export.nodes] == [n["kernel"] for n in other.nodes]
    assert got.check is None and got.launch is None  # no check asked; no GPU here
    assert got.got.step is step


@pytest.mark.smoke
def test_count_step_checks_when_asked_and_says_so_in_its_result():
    got = capture.count_step(_step(), name="toy", check=3)
    assert got.check is not None and got.check.steps == 3
    assert got.check.passed, got.check.findings  # a step without state repeats exactly


def test_count_variants_counts_each_variant_once():
    params = capture.RoundParams(stages=1, rows=2, k=8, world=2, rank=0, shard=16)
    said = []
    got = capture.count_variants(params, ["shipped", "fused"], progress=said.append)
    assert list(got) == ["shipped", "fused"] and said == ["capturing shipped", "capturing fused"]
    for v, c in got.items():
        assert c.export.total == capture.count_round(params, v).export.total > 0
        assert c.launch is None  # no GPU here


def test_count_step_tells_its_notes_before_a_check_that_raises():
    import pytest

    from graph_harness.capture.state.steps import StepStateError

    pos = torch.zeros(1)

    def advancing():  # no reset, and every call moves its state on: no check can replay it
        pos.add_(1)
        return pos * 2

    told = []
    with pytest.raises(StepStateError):
        capture.count_step(advancing, name="adv", check=2, note=told.append)
    # told before the check refused the step, which the old order lost
    assert [line.split(":")[0] for line in told] == [
        "profile, check and report (on a GPU) will refuse it"
    ], told


def test_count_step_refuses_a_soak_without_a_check():
    import pytest

    with pytest.raises(ValueError, match="give check="):
        capture.count_step(_step(), soak=10)


def test_count_variants_counts_a_variant_named_twice_once():
    params = capture.RoundParams(stages=1, rows=2, k=8, world=2, rank=0, shard=16)
    said = []
    got = capture.count_variants(params, ["fused", "shipped", "fused"], progress=said.append)
    assert list(got) == ["fused", "shipped"] and len(said) == 2
