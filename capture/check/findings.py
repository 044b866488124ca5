"""What `check` found (capture/check/step.py): findings, each naming the node and scope where
there is one, and the result they make up; plain data, rendered by reports."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.state.steps import Repeatability


class CheckFailed(HarnessError, RuntimeError):
    """`count --check` or `profile --check` found the graph computes something else."""


@dataclass(frozen=True)
class Finding:
    kind: str  # repeatability, state, host-state, rng, host-copy, mismatch, freed-memory, ...
    severity: str  # "fail" | "warn" | "info"
    message: str
    node: int | None = None
    kernel: str | None = None
    scope: str | None = None
    tensor: str | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class CheckResult:
    name: str
    warmup: int
    repeatability: Repeatability
    findings: list[Finding] = field(default_factory=list)
    compared: bool = False  # the replay comparison ran (a GPU)
    why_not: str | None = None
    outputs: int = 0  # output tensors compared
    state: int = 0  # state tensors compared
    poisoned: list[dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not any(f.severity == "fail" for f in self.findings)

    def verdict(self) -> str:
        if not self.passed:
            bad = [f for f in self.findings if f.severity == "fail"]
            first = bad[0].message
            return f"check FAILED for {self.name}: {len(bad)} finding(s) fail; first: {first}"
        if not self.compared:
            return f"check passed for {self.name} as far as the CPU goes; {self.why_not}"
        return (
            f"check passed for {self.name}: its graph's replays agree with the eager call on "
            f"{self.outputs} output and {self.state} state tensors"
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "passed": self.passed,
            "verdict": self.verdict(),
            "warmup": self.warmup,
            "compared": self.compared,
            "why_not": self.why_not,
            "outputs": self.outputs,
            "state": self.state,
            "repeatability": self.repeatability.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "poisoned": self.poisoned,
        }
