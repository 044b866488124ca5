"""How long a check runs: `CheckSettings`, the one source of its defaults (no torch here,
so the command line's parser can read it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.settings import MAX_COUNT, SettingsError

TO_END = "to-end"  # `--steps to-end`: the step's own length (capture/check/sample.py)


@dataclass(frozen=True)
class CheckSettings:
    """`steps`: the calls in check's trajectory (capture/check/step.py says why four), or
    TO_END: until the step's static cache is full, by its own account (`step.max_steps`).
    The step runs 2 x steps times eagerly and its graph 2 x steps times (`check --steps`,
    `--check-steps` on count, profile and report, `check_step(steps=)`).

    `soak`: replays of the soak that follows the check (0: none; capture/check/soak.py);
    `soak_deadline`: seconds a soak's replay may take before it is called a hang (None:
    derived from the replays' measured time)."""

    steps: int | str = field(
        default=4,
        metadata={
            "help": "calls in the trajectory compared, from the step's start: the step runs "
            "2 x N times eagerly and its graph replays 2 x N times; 'to-end': until its "
            "static cache is full, by the step's own step.max_steps (a step with a reset "
            "compared at calls 0-8, then a geometric sample and the last)",
            "min": 1,
        },
    )
    soak: int = field(
        default=0,
        metadata={
            "help": "after the check, N more replays along the same trajectory (reset at "
            "its end and run again), compared with the eager calls at a sample of them, "
            "under a watchdog that reports a replay that does not finish as a hang",
            "min": 0,
        },
    )
    soak_deadline: float | None = field(
        default=None,
        metadata={
            "help": "seconds one soak replay may take before it is reported as a hang "
            "(default: 100 x the replays' measured time, at least 1 s)",
        },
    )

    def __post_init__(self) -> None:
        # the command line's bound in every entry point (check_step, graph_check): each
        # call keeps its eager outputs, so a typo's 10**12 would grow memory without end
        v = self.steps
        if v != TO_END and (
            isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_COUNT
        ):
            raise SettingsError(
                f"steps must be a whole number from 1 to {MAX_COUNT:,} (calls to check) or "
                f"{TO_END!r}, got {v!r}"
            )
        s = self.soak
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_COUNT:
            raise SettingsError(
                f"soak must be a whole number from 0 to {MAX_COUNT:,} (replays), got {s!r}"
            )
        d = self.soak_deadline
        if d is not None and (
            isinstance(d, bool) or not isinstance(d, int | float) or not 0 < d < float("inf")
        ):
            raise SettingsError(f"soak_deadline must be a number of seconds > 0, got {d!r}")
