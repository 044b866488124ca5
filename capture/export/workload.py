"""What an export says about the work it counts, in the words generic analyses read.

The built-in round (capture/round/) writes its exports with `workload` "decode-round"
and every node in one (stage, step) of its stages; a user's step is named by its target
or callable. Everything below the round that must tell the two apart (the delta, the
roll-ups, the advisor, the tables) reads it here, from the export, never from the round:
the round's steps in the order a stage runs them, and the unit one replay of an export's
graph is. Plain data, no torch or pandas.
"""

from __future__ import annotations

ROUND_WORKLOAD = "decode-round"

# The built-in round's steps, in the order each stage runs them: the values of a round
# export's `step` column (capture/round/decode.py opens a scope of each).
ROUND_STEPS = ("topk", "pack", "gather", "select", "compaction", "copy")


def is_round(workload: str) -> bool:
    """Whether an export's workload is the built-in decode round."""
    return workload == ROUND_WORKLOAD


def unit_of(workload: str) -> str:
    """What one replay of the export's graph is: a "round" of the built-in round, else
    a "step" of the user's."""
    return "round" if is_round(workload) else "step"


def step_order(workload: str) -> tuple[str, ...]:
    """The steps an export's nodes fall into, in order: the round's; none for a step."""
    return ROUND_STEPS if is_round(workload) else ()


def export_name(workload: str, variant: str | None) -> str:
    """An export's name in tables: the round's variant, or the workload without the
    `callable:` a callable's qualified name is marked with."""
    return variant or workload.removeprefix("callable:")
