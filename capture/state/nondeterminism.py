"""A step with no reset whose last two warm-ups differ: non-determinism, or state it
carries on? Measured, never inferred: two more calls, each from the state the warm-ups
left (the tensors that differed copied aside and put back before each, the generators
set alike), show what the step's own kernels change from one state. If they differ in the
same tensors, and the warm-ups differ from each other by no more than SLACK times as much,
the step repeats within that non-determinism (a float sum with atomics); anything else
(a host value, an integer or a hashed tensor, a tensor that grew, a warm-up difference
past the spread) stays a step that does not repeat. The state is left as the warm-ups
left it. Runs the step twice; syncs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.state.changes import Change, compare
from graph_harness.capture.state.fingerprint import fingerprint, reachable

if TYPE_CHECKING:
    from graph_harness.capture.state.steps import Repeatability

SLACK = 4.0  # as check's judge: a difference up to this many times the measured spread


def _judgeable(c: Change) -> bool:
    """A difference non-determinism can explain: a floating-point tensor held whole."""
    return not c.host and not c.replaced and c.max_diff is not None


def within_spread(
    step: Callable[[], object], rep: Repeatability, rng: dict[str, torch.Tensor]
) -> Repeatability:
    """`rep` (repeatable False, no reset) judged again by the step's measured spread."""
    from graph_harness.capture.state.rng import set_rng_state

    if not rep.changed or not all(_judgeable(c) for c in rep.changed):
        return rep
    names = {c.name for c in rep.changed}
    held = {n: t for n, t, _ in reachable(step, with_output=False)[0] if n in names}
    saved = {n: t.detach().clone() for n, t in held.items() if isinstance(t, torch.Tensor)}
    runs = []
    try:
        for _ in range(2):
            set_rng_state(rng)
            out = step()
            runs.append(fingerprint(step, out))
            _put_back(held, saved)
    finally:
        _put_back(held, saved)
    spread = {c.name: c for c in compare(runs[0], runs[1]) if _judgeable(c)}
    for c in rep.changed:
        s = spread.get(c.name)
        if s is None or c.max_diff > SLACK * s.max_diff:
            return rep
    return replace(rep, repeatable=True, spread=tuple(spread[c.name] for c in rep.changed))


def _put_back(held: dict[str, object], saved: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for n, t in saved.items():
            held[n].copy_(t)
