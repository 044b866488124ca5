"""How replays are timed: `ReplaySettings`, the one source of its defaults. Plain data, no
torch: the command line's parser reads it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class ReplaySettings:
    """How replays are timed: the one source of these defaults (the CLI's flags are made
    from these fields). Each field's metadata carries its help text."""

    trials: int = field(
        default=30, metadata={"help": "timed trials per chain and per round (>= 2)", "min": 2}
    )
    builds: int = field(
        default=3,
        metadata={
            "help": "times each round is built afresh for timing (its buffers land elsewhere "
            "each time; savings pool the builds)",
            "min": 1,
        },
    )
    lengths: tuple[int, ...] = field(
        default=(1, 16, 64, 256, 1024),
        metadata={"help": "chain lengths in nodes, for the per-node fits", "min": 1},
    )
    # A chain replay lasts 1-700 us: 20 back-to-back replays per trial keep the two events'
    # own cost under 1% of the shortest timed span. A round lasts ~5 ms: 10 are plenty.
    chain_replays: int = field(default=20, metadata={"min": 1})
    round_replays: int = field(default=10, metadata={"min": 1})
    warmup: int = field(default=5, metadata={"min": 0})

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            values = v if isinstance(v, tuple) else (v,)
            if f.name == "lengths" and len(set(values)) < 2:
                raise ValueError(f"lengths needs at least two distinct lengths, got {v!r}")
            what = "whole numbers" if isinstance(v, tuple) else "a whole number"
            for x in values:
                if isinstance(x, bool) or not isinstance(x, int) or x < f.metadata["min"]:
                    raise ValueError(f"{f.name} must be {what} >= {f.metadata['min']}, got {v!r}")
