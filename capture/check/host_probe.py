"""Does the step's device work depend on a host value its calls change? Tried, not guessed.

Each host value that moves along check's calls is tried from the step's start: one call
with the value as its capture saw it (twice: the step's own spread), then with the values
later calls see (nearest first, up to `step.max_steps`). A tried call that differs beyond
that spread FAILs, naming the value and the first call where it matters (by halving);
none: the values tried are said; a value that cannot be tried: not verified. Costs at
most about 17 calls. The step is left at its start, the value as found. Which values are
tried: docs/steps-and-check.md, "capture/check/host_probe.py".
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.judge import classify, host_moves, starts
from graph_harness.capture.check.library_hosts import accepted
from graph_harness.capture.check.messages import HOST_FIX, values
from graph_harness.capture.state.changes import Change, compare, disagreement
from graph_harness.capture.state.fingerprint import Fingerprint, fingerprint
from graph_harness.capture.state.host_paths import NotSettable, setter
from graph_harness.capture.state.steps import length_of, start_of

if TYPE_CHECKING:
    from graph_harness.capture.check.evidence import Evidence

TIMES = (10, 100, 1000)  # trajectories' lengths tried past the check's own


def probed(e: Evidence, findings: list[Finding]) -> list[Finding]:
    """Check's revision (capture/check/rules.py): host values the calls change, not
    already failed by the replays and not accepted, tried at later values (probe), its
    verdict in place of the warm-ups' warning or the CPU's "not verified"."""
    failed = {f.tensor for f in findings if f.kind == "host-state" and f.severity == "fail"}
    moved = {
        n: v
        for n, v in host_moves(e.t).items()
        if n not in failed and not (e.accept and accepted(n, e.accept))
    }
    if not moved:
        return findings
    missed = {c.name for c in starts(e.t)[0]}  # host values the reset does not return
    tried = [
        replace(f, message=f.message + f"; the reset does not return {f.tensor} to its start")
        if f.tensor in missed and f.severity == "fail"
        else f
        for f in probe(e.step, moved, e.calls)
    ]
    named = {f.tensor for f in tried}
    kept = [f for f in findings if not (f.kind == "host-state" and f.tensor in named)]
    return kept + tried


def probe(step: Callable[[], object], moved: dict[str, list], calls: int) -> list[Finding]:
    """One finding per host value in `moved` (name -> its values along eager run A, the
    start first): see the module's notes. Syncs; runs the step."""
    start = start_of(step)
    out = []
    for name, vs in moved.items():
        why = _untriable(step, start, vs)
        if why is None:
            try:
                out.append(_tried(step, start, name, vs, calls))
                continue
            except NotSettable as e:
                why = f"it cannot be set from the step ({e})"
        out.append(_not_tried(name, vs, why))
    return out


def _untriable(step: Callable[[], object], start: object, vs: list) -> str | None:
    if start is None:
        return "the step has no reset to start each try from"
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in vs):
        return "it is not an int"
    steps = {b - a for a, b in itertools.pairwise(vs)}
    if len(steps) != 1 or steps == {0}:
        return f"it does not move by a constant step along the calls ({values(vs)})"
    return None


def _tried(
    step: Callable[[], object], start: Callable[[], None], name: str, vs: list, calls: int
) -> Finding:
    put = setter(step, name)
    v0, d = vs[0], vs[1] - vs[0]
    try:
        ref, spread = _reference(step, start, put, v0)
        at = _calls_to_try(step, calls)
        tried, last_same = [], 0  # call 0 sees the captured value itself
        for k in at:
            changes = _bad(ref, spread, _call_at(step, start, put, v0 + k * d))
            tried.append(v0 + k * d)
            if changes:
                first = _first(step, start, put, ref, spread, v0, d, last_same, k)
                return _depends(name, vs, v0, d, first, changes)
            last_same = k
    finally:
        start()
        put(v0)
        start()
    return Finding(
        kind="host-state",
        severity="info",
        message=f"host value {name} changes along the calls ({values(vs)}), and the step's "
        f"device work does not depend on it: from its start, a call with it at "
        f"{', '.join(map(str, tried))} (calls {', '.join(map(str, at))}) computes what a call "
        f"with {v0} does, which its graph froze",
        tensor=name,
    )


def _calls_to_try(step: Callable[[], object], calls: int) -> list[int]:
    last = length_of(step)
    at = {calls - 1} | {calls * t for t in TIMES} | ({last - 1} if last is not None else set())
    return sorted(k for k in at if k >= 1 and (last is None or k < last))


def _reference(
    step: Callable[[], object], start: Callable[[], None], put: Callable, v0: int
) -> tuple[Fingerprint, dict[str, Change]]:
    a, b = _call_at(step, start, put, v0), _call_at(step, start, put, v0)
    return a, disagreement(a, b)


def _call_at(
    step: Callable[[], object], start: Callable[[], None], put: Callable, v: int
) -> Fingerprint:
    start()
    put(v)
    out = step()
    fp = fingerprint(step, out, clone_to="cpu")
    del out
    return fp


def _bad(ref: Fingerprint, spread: dict[str, Change], fp: Fingerprint) -> list[Change]:
    """The tensors a call at another value leaves other than the reference, beyond the
    step's own spread (check's rule: judge.classify)."""
    out = []
    for c in compare(ref, fp):
        seen = ref.seen.get(c.name) or fp.seen.get(c.name)
        if not c.host and classify(c, spread.get(c.name), seen) == "bad":
            out.append(c)
    return out


def _first(
    step: Callable[[], object],
    start: Callable[[], None],
    put: Callable,
    ref: Fingerprint,
    spread: dict[str, Change],
    v0: int,
    d: int,
    same: int,
    differs: int,
) -> int:
    """The first call in (same, differs] whose value changes the step's work (halving)."""
    while differs - same > 1:
        mid = (same + differs) // 2
        if _bad(ref, spread, _call_at(step, start, put, v0 + mid * d)):
            differs = mid
        else:
            same = mid
    return differs


def _depends(name: str, vs: list, v0: int, d: int, k: int, changes: list[Change]) -> Finding:
    c = changes[0]
    more = f" and {len(changes) - 1} more" if len(changes) > 1 else ""
    return Finding(
        kind="host-state",
        severity="fail",
        message=f"host value {name} changes along the calls ({values(vs)}) and the step's "
        f"device work depends on it from call {k} on: from its start, a call with it at "
        f"{v0 + k * d} (what call {k} sees) leaves {c.name}{more} other than a call with "
        f"{v0} ({c.detail}), and a graph replays what its capture saw of it ({v0}); {HOST_FIX}",
        tensor=name,
        step=k,
    )


def _not_tried(name: str, vs: list, why: str) -> Finding:
    return Finding(
        kind="host-state",
        severity="unverified",
        message=f"host value {name} changes along the calls ({values(vs)}): whether the "
        f"step's device work depends on it could not be tried ({why}), and a graph replays "
        f"what its capture saw of it; {HOST_FIX}",
        tensor=name,
    )
