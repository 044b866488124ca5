"""Which calls of a long trajectory check compares: every call at first (calls 0 to FIRST),
then calls at FIRST x RATIO^k rounded up, and the last (23 of 2,048 calls). Also how long
the trajectory is (`trajectory_length`): a number of calls, or `to-end`, the step's own
account of when its static cache is full.

Only `--steps to-end` of a step with a reset is sampled. Every call still runs, eager and
replayed; only the comparisons (fingerprints copied off the device) are sampled. Why a
sample, and what it can miss: docs/steps-and-check.md, "capture/check/sample.py".
"""

from __future__ import annotations

import math
from collections.abc import Callable

from graph_harness.capture.check.settings import TO_END
from graph_harness.capture.settings import MAX_COUNT

FIRST = 8  # every call compared up to here
RATIO = 1.5  # then one compared call per factor of 1.5


def compared_calls(n: int) -> list[int]:
    """The calls (0-based, ascending) compared out of a trajectory of `n`."""
    if n <= FIRST:
        return list(range(n))
    out = list(range(FIRST))
    at = float(FIRST)
    while True:
        i = math.ceil(at)
        if i >= n - 1:
            break
        if i > out[-1]:
            out.append(i)
        at *= RATIO
    out.append(n - 1)
    return out


def trajectory_length(step: Callable[[], object], steps: int | str) -> int:
    """Calls in the trajectory: `steps`, or with TO_END the step's `step.max_steps`;
    StepStateError saying what to set where the step gives no length."""
    from graph_harness.capture.state.steps import StepStateError, length_of

    if steps != TO_END:
        return steps
    n = length_of(step)
    if n is None:
        raise StepStateError(
            "--steps to-end runs the step until its static cache is full, by the step's own "
            "account, and this step gives none: set step.max_steps to the number of calls "
            "from its start (after step.reset and feed(0)) until its cache is full, as the "
            "examples do (docs/steps-and-check.md), or give a number of calls (--steps N)"
        )
    if n > MAX_COUNT:  # the bound every count has: a check keeps each call's fingerprint
        raise StepStateError(
            f"--steps to-end runs step.max_steps calls, {n:,}, more than the {MAX_COUNT:,} a "
            "check runs: give a number of calls (--steps N, or steps=N)"
        )
    return n
