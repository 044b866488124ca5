"""The one rule a replayed tensor is judged by (capture/check/judge.py classify), used by
check's runs, its soak and the interleaved check alike."""

import torch

from graph_harness.capture.check.judge import classify
from graph_harness.capture.check.messages import SLACK
from graph_harness.capture.state.changes import Change
from graph_harness.capture.state.fingerprint import Seen


def seen(value, hashed=False):
    return Seen("t", (), value, hashed=hashed)


def test_each_verdict_and_the_order_they_are_given_in():
    floats, ints = seen(torch.randn(3)), seen(torch.arange(3))
    off = Change("t", "differs", max_diff=1.0)
    # nothing of the step's own spread there: wrong, whatever its kind
    assert classify(off, None, floats) == "bad" and classify(off, None, ints) == "bad"
    # the step's own runs disagree by more than the replay does: within
    own = Change("t", "differs", max_diff=1.0 / SLACK + 1.0)
    assert classify(off, own, floats) == "within"
    # beyond that: wrong
    assert classify(Change("t", "differs", max_diff=2 * SLACK * own.max_diff), own, floats) == "bad"
    # an exact-only tensor the step does not repeat cannot be told from its graph, even
    # where a spread would cover it (the soak once passed these silently)
    assert classify(off, own, ints) == "unjudged"
    assert classify(off, own, seen(torch.randn(3), hashed=True)) == "unjudged"
