"""How a step is brought to capture: `StepSettings`, the one source of its defaults (a
frozen dataclass; no torch here, so the command line's parser can read it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.settings import check_whole_numbers


@dataclass(frozen=True)
class StepSettings:
    """How a step (the built-in round's, or yours) is brought to capture: the one source
    of these defaults (`--warmup` is made from the field, `capture_and_count(warmup=)`,
    `node_budget(warmup=)` and `check_step(warmup=)` default to it).

    Before it is captured, a step is called `warmup` times eagerly on a side stream, so
    that lazy work (compiles, library handles, allocator growth) stays out of the graph;
    then once more under capture. A step with state thus advances `warmup + 1` times
    unless it has a `step.reset` (docs/steps-and-check.md). Two warm-ups or more also
    tell whether the step repeats: its last two must leave the same outputs and state."""

    warmup: int = field(
        default=3,
        metadata={
            "help": "warm-up calls of your step before it is captured (each after its "
            "step.reset, if it has one); the step then runs once more, captured. Two or "
            "more tell whether it repeats",
            "min": 0,
        },
    )

    def __post_init__(self) -> None:
        check_whole_numbers(self)
