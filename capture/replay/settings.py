"""How replays are timed: `ReplaySettings`, the one source of its defaults. Plain data, no
torch: the command line's parser reads it."""

from __future__ import annotations

from dataclasses import dataclass, field

from graph_harness.capture.settings import SettingsError, check_whole_numbers


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
    host_lengths: tuple[int, ...] = field(
        default=(64, 256, 1024, 2048, 4096),
        metadata={
            "help": "graph sizes in nodes for the host launch fits (a chain, a fork-join over "
            "8 streams, one over 16)",
            "min": 1,
        },
    )
    # Single launches per trial for the host side, each from an idle device: their median.
    launches: int = field(default=5, metadata={"min": 1})
    # A chain replay lasts 1-700 us: 20 back-to-back replays per trial keep the two events'
    # own cost under 1% of the shortest timed span. A round lasts ~5 ms: 10 are plenty.
    chain_replays: int = field(default=20, metadata={"min": 1})
    round_replays: int = field(default=10, metadata={"min": 1})
    warmup: int = field(default=5, metadata={"min": 0})

    def __post_init__(self) -> None:
        check_whole_numbers(self)
        for name in ("lengths", "host_lengths"):  # each per-node fit needs two lengths at least
            if len(set(getattr(self, name))) < 2:
                raise SettingsError(
                    f"{name} needs at least two distinct lengths, got {getattr(self, name)!r}"
                )
