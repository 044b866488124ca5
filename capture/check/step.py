"""`check`: does the captured graph compute what the step computes, call after call?

From the step's start, a trajectory of `steps` calls (STEPS, 4, by default), each fed by
`step.feed(i)`, is run twice eagerly and replayed twice (capture/check/trajectory.py),
and outputs and every watched state tensor are compared after every call
(capture/check/judge.py): bit for bit, except where the two eager runs disagree. The
replays run with free memory filled with two patterns (capture/check/poison.py). On the
CPU: the eager runs and the warm-ups only. Why 4 calls, what else is reported, the cost:
docs/steps-and-check.md, "capture/check/step.py".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from graph_harness.capture.check.evidence import Evidence
from graph_harness.capture.check.findings import (
    CheckFailed,
    CheckResult,
    CheckUnverified,
    Finding,
    status_of,
)
from graph_harness.capture.check.host_copies import host_copies
from graph_harness.capture.check.judge import judge
from graph_harness.capture.check.library_hosts import accepted_of
from graph_harness.capture.check.rules import findings_of
from graph_harness.capture.check.sample import compared_calls, trajectory_length
from graph_harness.capture.check.settings import TO_END, CheckSettings
from graph_harness.capture.check.soak import soak
from graph_harness.capture.check.trajectory import Trajectories, run_trajectories
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.state.steps import (
    Repeatability,
    StateWatch,
    feed_of,
    require_repeatable,
    reset_of,
)
from graph_harness.capture.text import printable

if TYPE_CHECKING:
    import torch

    from graph_harness.capture.export.nodes import NodeExport
    from graph_harness.capture.graph.capture import Captured

STEPS = CheckSettings.steps  # calls in check's trajectory (module docstring says why four)
NO_GPU = (
    "the replay comparison needs a GPU (a CUDA graph to replay): run check on a CUDA "
    "machine; here, only what the warm-ups and two eager runs show"
)
__all__ = [
    "STEPS",
    "CheckFailed",
    "CheckResult",
    "CheckUnverified",
    "Finding",
    "check_captured",
    "check_step",
    "gate",
]


def check_step(
    step: Callable[[], object],
    *,
    warmup: int = StepSettings.warmup,
    steps: int | str = STEPS,
    module: torch.nn.Module | None = None,
    depth: int | None = None,
    device: torch.device | str | None = None,
    name: str = "the step",
    soak: int = 0,
    soak_deadline: float | None = None,
) -> CheckResult:
    """Capture `step` (`warmup` warm-ups; with `module`, by its modules as
    `module_scopes(module, depth)` does) and check its graph over `steps` calls, or to
    the end of its cache (`steps="to-end"`), then soak it `soak` replays (check_captured)."""
    settings = CheckSettings(steps=steps, soak=soak, soak_deadline=soak_deadline)
    trajectory_length(step, settings.steps)  # a step with no length refused before capture
    watch = StateWatch(step)
    kept = capture_and_keep(
        step, warmup=warmup, device=device, watch=watch, module=module, depth=depth
    )
    export, captured = kept.export, kept.captured
    return check_captured(
        step, export, captured, watch.repeatability, name=name, steps=steps, soak=soak,
        soak_deadline=soak_deadline,
    )  # fmt: skip


def check_steps(steps: int | str) -> int | str:
    return CheckSettings(steps=steps).steps  # checked where the default lives


def check_captured(
    step: Callable[[], object],
    export: NodeExport,
    captured: Captured | None,
    rep: Repeatability,
    *,
    name: str = "the step",
    steps: int | str = STEPS,
    soak: int = 0,
    soak_deadline: float | None = None,
) -> CheckResult:
    """Check a graph already captured from `step` (capture_and_keep with a StateWatch,
    whose `repeatability` is `rep`) over `steps` calls (TO_END: the step's max_steps,
    compared at a sample: capture/check/sample.py), then soak it `soak` replays
    (capture/check/soak.py); `captured` None (the CPU): the two eager runs and the
    warm-ups' findings. StepStateError before anything runs if the step cannot be
    replayed (no reset, and it does not repeat) or gives no length for TO_END. Syncs."""
    settings = CheckSettings(steps=steps, soak=soak, soak_deadline=soak_deadline)
    calls = trajectory_length(step, settings.steps)
    name = printable(name)  # shown and recorded (check.json) as text: capture/text.py
    require_repeatable(rep, name)
    accept = accepted_of(step)  # a malformed step.accept_host refused before anything runs
    copies = host_copies(captured.graph, export) if captured is not None else []
    graph = captured.graph if captured is not None else None
    output = captured.output if captured is not None else None
    t = run_trajectories(
        step, calls, graph, output, name, rep, _compared(step, calls, settings),
        sync_each=bool(copies),
    )  # fmt: skip
    j = judge(t, export, copies, accept)
    findings = findings_of(
        Evidence(
            step=step, export=export, captured=captured, rep=rep, accept=accept,
            copies=copies, t=t, calls=calls, judgement=j,
        )
    )  # fmt: skip
    soaked = None
    if settings.soak:
        soaked, more = _soak(step, graph, output, t, rep, name, findings, settings)
        findings += more
    return CheckResult(
        name,
        rep.warmups,
        rep,
        findings,
        compared=j.compared,
        why_not=NO_GPU if captured is None else None,
        outputs=j.outputs,
        state=j.state,
        steps=j.steps,
        to_end=settings.steps == TO_END,
        compared_calls=j.compared_calls,
        seconds=j.seconds,
        soak=soaked,
        fed=feed_of(step) is not None,
        nondeterministic=j.nondeterministic,
        poisoned=t.poisoned,
        poisoned_outputs=j.poisoned_outputs,
    )


def _compared(step: Callable[[], object], calls: int, settings: CheckSettings) -> list[int]:
    """The calls compared: every one, except to the end of a step with a reset, which is
    compared at a sample (capture/check/sample.py). A step without a reset is compared at
    every call: its four runs take turns call by call, each starting from the state the
    last left, so a wrong write between two compared calls would be shared by all four
    and never seen."""
    if settings.steps == TO_END and reset_of(step) is not None:
        return compared_calls(calls)
    return list(range(calls))


def _soak(
    step: Callable[[], object],
    graph: torch.cuda.CUDAGraph | None,
    output: object,
    t: Trajectories,
    rep: Repeatability,
    name: str,
    findings: list[Finding],
    settings: CheckSettings,
) -> tuple[dict | None, list[Finding]]:
    """The soak after the check (capture/check/soak.py), where there is a graph and the
    check (`findings`) did not already fail: its document, and its findings, which join
    the check's."""
    if graph is None:
        why = "the soak replays a graph: it needs a GPU (nothing was soaked)"
        return None, [Finding(kind="soak", severity="info", message=why)]
    if status_of(findings) == "failed":
        why = "the soak did not run: the check had already failed"
        return None, [Finding(kind="soak", severity="info", message=why)]
    s = soak(
        step, graph, output, t, t.outputs, rep, settings.soak, name=name,
        deadline=settings.soak_deadline,
    )  # fmt: skip
    return s.to_dict(), list(s.findings)


def gate(results: dict[str, CheckResult]) -> None:
    """`--check` on count, profile and report: CheckFailed if any check failed,
    CheckUnverified (exit 3) if one could not verify its graph; the error's `results` are
    `results`."""
    for status, error in (("failed", CheckFailed), ("unverified", CheckUnverified)):
        bad = [r for r in results.values() if r.status == status]
        if bad:
            e = error(f"{bad[0].headline()}; nothing was written")
            e.results = results  # every check, for whoever shows them
            raise e
