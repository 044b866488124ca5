"""What `check` found (capture/check/step.py): findings, each naming the step, the tensor,
and the node, module or scope where there is one, and the result they make up; plain
data, rendered by reports.

A check ends in one of three verdicts, each with its exit code on the command line:
**passed** (0), **FAILED** (1), **not verified** (3): doubt is never a pass. What each
means: docs/steps-and-check.md, "capture/check/findings.py".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from graph_harness.capture.check.sample import FIRST
from graph_harness.capture.errors import HarnessError
from graph_harness.capture.state.steps import Repeatability

Severity = Literal["fail", "unverified", "warn", "info"]  # in the order tables show them
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
Status = Literal["passed", "failed", "unverified"]  # a check's verdict (module docstring)


class CheckFailed(HarnessError, RuntimeError):
    """`count --check` or `profile --check` found the graph computes something else."""


class CheckUnverified(HarnessError, RuntimeError):
    """`--check` could not verify the graph (nothing failed): exit 3, nothing written."""

    exit_code = 3


@dataclass(frozen=True, kw_only=True)
class Finding:
    kind: str  # repeatability, state, host-state, rng, host-copy, mismatch, freed-memory, ...
    severity: Severity
    message: str
    node: int | None = None
    kernel: str | None = None
    scope: str | None = None
    tensor: str | None = None
    step: int | None = None  # the trajectory's call (0: the first after the reset)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


EXIT_CODES = {"passed": 0, "failed": 1, "unverified": 3}  # a verdict's, on the command line


def status_of(findings: list[Finding]) -> Status:
    """ "failed" if any finding fails, else "unverified" if any could not be verified, else
    "passed" (module docstring): the one rule every check's result follows."""
    if any(f.severity == "fail" for f in findings):
        return "failed"
    if any(f.severity == "unverified" for f in findings):
        return "unverified"
    return "passed"


@dataclass(frozen=True)
class CheckResult:
    """One check's result, built once (capture/check/step.py check_captured) from the
    warm-ups, the trajectories' judgement (judge.py) and the soak."""

    name: str
    warmup: int
    repeatability: Repeatability
    findings: list[Finding] = field(default_factory=list)
    compared: bool = False  # the replay comparison ran (a GPU)
    why_not: str | None = None
    outputs: int = 0  # output tensors compared
    state: int = 0  # state tensors compared
    steps: int = 1  # calls in the trajectory (each run)
    to_end: bool = False  # `steps` is the step's own length (step.max_steps)
    compared_calls: list[int] = field(default_factory=list)  # the calls compared (sample.py)
    seconds: dict[str, float] = field(default_factory=dict)  # each run's wall time
    soak: dict | None = None  # the soak after the check (capture/check/soak.py)
    fed: bool = False  # step.feed wrote each call's inputs
    nondeterministic: int = 0  # tensors two eager runs from one state disagree on
    poisoned: list[dict] = field(default_factory=list)
    # the graph's outputs filled before every call (capture/check/outputs.py): pattern,
    # filled, left
    poisoned_outputs: dict | None = None

    @property
    def status(self) -> Status:
        """ "failed", "unverified" or "passed" (module docstring)."""
        return status_of(self.findings)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def verdict(self) -> str:
        status = self.status
        if status == "failed":
            bad = [f for f in self.findings if f.severity == "fail"]
            first = bad[0].message
            return f"check FAILED for {self.name}: {len(bad)} finding(s) fail; first: {first}"
        if status == "unverified":
            why = [f.message for f in self.findings if f.severity == "unverified"]
            return f"check could NOT verify {self.name}: {why[0]}"
        taken = [f for f in self.findings if f.kind == "host-accepted"]
        flag = " WITH ACCEPTED HOST VALUES" if taken else ""
        accepted = (
            f"; host value {taken[0].tensor} moves and was accepted by the step "
            "(step.accept_host), not verified by this check"
            if taken
            else ""
        )
        if not self.compared:
            return (
                f"check passed{flag} for {self.name} as far as the CPU goes; {self.why_not}"
                f"{accepted}"
            )
        inputs = ", fed a new input at each" if self.fed else ""
        nd = (
            f"; {self.nondeterministic} tensor(s) that two eager runs from one state disagree "
            "on were judged by that measured spread"
            if self.nondeterministic
            else ""
        )
        soak = ""
        if self.soak:
            soak = (
                f"; then {self.soak['replays']} more replays agreed at "
                f"{self.soak['compared']} compared calls, none past its deadline"
            )
        return (
            f"check passed{flag} for {self.name}: "
            f"over {self.steps} step(s) from its start"
            f"{self._extent()}{inputs}, its graph's replays agree with the eager calls on "
            f"{self.outputs} output and {self.state} state tensors after {self._after()}"
            f"{nd}{soak}{accepted}"
        )

    def headline(self) -> str:
        """The verdict in one short line, for where the findings are already shown (a
        table, an error after it): the status, the first finding's cause as far as the
        evidence settles it, and how many findings there are; details stay in the findings."""
        status = self.status
        if status == "passed":
            return self.verdict()
        severity = "fail" if status == "failed" else "unverified"
        bad = [f for f in self.findings if f.severity == severity]
        first = bad[0]
        lead = "check FAILED for" if status == "failed" else "check could NOT verify"
        more = f" ({len(bad)} findings; each is listed with what to do)" if len(bad) > 1 else ""
        return f"{lead} {self.name}: {_cause(first)}{more}"

    def _extent(self) -> str:
        return " (to the end of its cache, by its step.max_steps)" if self.to_end else ""

    def _after(self) -> str:
        n = len(self.compared_calls)
        if not n or n == self.steps:
            return "every step"
        return f"each of {n} compared steps (every step to {FIRST}, then a geometric sample)"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "passed": self.passed,
            "status": self.status,
            "verdict": self.verdict(),
            "warmup": self.warmup,
            "steps": self.steps,
            "to_end": self.to_end,
            "compared_calls": self.compared_calls,
            "seconds": self.seconds,
            "soak": self.soak,
            "fed": self.fed,
            "compared": self.compared,
            "why_not": self.why_not,
            "outputs": self.outputs,
            "state": self.state,
            "nondeterministic": self.nondeterministic,
            "repeatability": self.repeatability.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "poisoned": self.poisoned,
            "poisoned_outputs": self.poisoned_outputs,
        }


# What a finding of each kind settles, in the words of a headline (CheckResult.headline).
_SETTLED = {
    "mismatch": "the graph's replay differs from the eager call",
    "host-state": "a host value the step's device work reads moves, and a graph replays "
    "what its capture saw of it",
    "freed-memory": "the graph reads memory freed after its capture",
    "soak-mismatch": "the graph goes wrong after many replays",
    "hang": "a replay did not finish within its deadline",
    "interleaved": "another size's capture or replays wrote memory this size's graph reads",
}
_UNSETTLED = {
    "host-state": "whether the step's device work reads a host value that moves is not "
    "settled without replays",
    "host-read": "the step reads a value back to the host, which breaks a capture on a GPU; "
    "not settled without one",
    "unjudged": "two eager runs from one state already disagree, so the graph cannot be "
    "told from the step there",
}


def _cause(f: Finding) -> str:
    in_soak = f.kind in ("hang", "soak-mismatch")  # its step is a call within a lap
    where = ", ".join(
        x
        for x in (
            None if f.step is None or in_soak else f"from step {f.step}",
            None if f.tensor is None else f.tensor,
        )
        if x
    )
    table = _SETTLED if f.severity == "fail" else _UNSETTLED
    said = table.get(f.kind, f.kind)
    return f"{said}{f' ({where})' if where else ''}"


class SkippableStatus:
    """A check's status from its `findings`, or "skipped" where it has a `why_not` (it
    needs a GPU), with its exit code (skipped: 0): the sizes checks' results share it."""

    findings: list[Finding]
    why_not: str | None

    @property
    def status(self) -> Status | Literal["skipped"]:
        """ "failed", "unverified", "passed", or "skipped" (it needs a GPU)."""
        return "skipped" if self.why_not is not None else status_of(self.findings)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def exit_code(self) -> int:
        return {**EXIT_CODES, "skipped": 0}[self.status]


def once_each(findings: list[Finding]) -> list[Finding]:
    """One finding per kind and value: where the warm-ups' warning and the trajectory's
    verdict name one host value (or one tensor), only the more severe is kept, so a
    report says each thing once."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    best: dict[tuple[str, str], Finding] = {}
    for f in findings:
        if f.tensor is None:
            continue
        key = (f.kind, f.tensor)
        if key not in best or rank[f.severity] < rank[best[key].severity]:
            best[key] = f
    return [f for f in findings if f.tensor is None or best[(f.kind, f.tensor)] is f]
