"""check's verdict as a test's: what the `graph_check` fixture (graph_harness/pytest_plugin.py)
passes, fails or skips. A graph test that cannot fail is worse than none, so it never
passes vacuously: a step with no node is an error, a trajectory that compared nothing
fails, "not verified" fails unless accepted, and without CUDA the test is skipped unless
the CPU part already found a defect. The cases in full: docs/steps-and-check.md,
"capture/check/fixture.py".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from graph_harness.capture.check.findings import CheckResult, Severity


class GraphCheckFailed(AssertionError):
    """The graph does not compute what its step computes, or the check proved nothing."""


@dataclass(frozen=True)
class FixtureOutcome:
    """What a test does with a check: `outcome` "pass", "fail" or "skip", and why."""

    outcome: Literal["pass", "fail", "skip"]
    message: str


def fixture_outcome(result: CheckResult, *, accept_unverified: bool = False) -> FixtureOutcome:
    """The test's outcome for `result` (see the module's notes)."""
    if result.status == "failed":
        return FixtureOutcome("fail", _lines(result, "fail"))
    if not result.compared:  # the CPU: no graph to replay
        if result.status == "unverified":  # a host value that moves: a graph would freeze it
            return FixtureOutcome("fail", _lines(result, "unverified"))
        return FixtureOutcome(
            "skip",
            "graph_check needs a CUDA device to replay the step's graph; here its warm-ups "
            "and two eager runs passed",
        )
    written = [c for c in result.repeatability.in_a_call if not c.host]
    if result.outputs == 0 and not written:
        # the tensors compared (if any) are ones no call changes: a replay that computed
        # nothing would match them as well as a right one
        return FixtureOutcome(
            "fail",
            f"graph_check compared nothing {result.name} writes: the step returned no "
            "tensor and a call changes no state tensor the check watches; return the "
            "step's output (the tensors it writes) so that a replay has something to be "
            "wrong about",
        )
    if result.status == "unverified" and not accept_unverified:
        return FixtureOutcome(
            "fail",
            _lines(result, "unverified")
            + "\n(graph_check(..., accept_unverified=True) accepts a graph check could not "
            "verify, where the test means to)",
        )
    return FixtureOutcome("pass", result.verdict())


def _lines(result: CheckResult, severity: Severity) -> str:
    """The verdict, then each finding of `severity`: where (call, tensor, node) and what."""
    out = [result.verdict()]
    for f in result.findings:
        if f.severity != severity:
            continue
        where = ", ".join(
            x
            for x in (
                None if f.step is None else f"call {f.step}",
                None if f.tensor is None else f"tensor {f.tensor}",
                None if f.node is None else f"node {f.node}",
                None if f.scope is None else f"in {f.scope}",
                None if f.kernel is None else f"kernel {f.kernel}",
            )
            if x
        )
        out.append(f"- [{f.kind}] {where + ': ' if where else ''}{f.message}")
    return "\n".join(out)
