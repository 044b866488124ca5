"""How long a check runs: `CheckSettings`, the one source of its defaults (no torch here,
so the command line's parser can read it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CheckSettings:
    """`steps`: the calls in check's trajectory (capture/check/step.py says why four). The
    step runs 2 x steps times eagerly and its graph 2 x steps times (`check --steps`,
    `--check-steps` on count, profile and report, `check_step(steps=)`)."""

    steps: int = field(
        default=4,
        metadata={
            "help": "calls in the trajectory compared, from the step's start: the step runs "
            "2 x N times eagerly and its graph replays 2 x N times",
            "min": 1,
        },
    )

    def __post_init__(self) -> None:
        v = self.steps
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"steps must be a whole number >= 1 (calls to check), got {v!r}")
