"""Which calls of a long trajectory check compares: every call at first, then a geometric
sample, and the last. Also how long the trajectory is (`trajectory_length`): a number of
calls, or `to-end`, the step's own account of when its static cache is full.

Only `--steps to-end` of a step with a reset is sampled (capture/check/step.py says why
a step without one is not). Why a sample and not every call: a comparison fingerprints
the step's whole state (its KV cache among it) and copies it off the device; a replay
alone is one launch. To the end of a cache of a few thousand positions, comparing every
call would cost thousands of fingerprints; a sample keeps the cost growing with the
replays. What a sample can miss, and why it rarely matters: every call still runs, eager
and replayed, so a graph that goes wrong past a window, at a split-count boundary or as
the cache fills writes a wrong cache row, which every later comparison reads (the cache
is compared whole). A graph wrong in one call's output alone, with no state left behind,
shows only if that call is compared.

- FIRST: calls 0 to FIRST are compared (check's default trajectory, 4 calls, and a few
  more: the start of a trajectory is where frozen host values and stale metadata show);
- then calls at FIRST x RATIO^k, rounded up, and the last call: about 1.7 log2(n / FIRST)
  more (23 of 2,048 calls, 28 of 16,384).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from graph_harness.capture.check.settings import TO_END

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
    return n
