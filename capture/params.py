"""Round parameters and replay settings: frozen dataclasses, the single source of defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

# What each variant runs: (pack, compaction).
#   pack: "shipped" eight eager ops | "compiled" the same through torch.compile | "fused"
#   compaction: "alloc-copy" allocate then copy into the retained buffers | "direct"
VARIANTS: dict[str, tuple[str, str]] = {
    "shipped": ("shipped", "alloc-copy"),
    "shipped-compiled": ("compiled", "alloc-copy"),
    "direct-compaction": ("shipped", "direct"),
    "fused-pack": ("fused", "alloc-copy"),
    "fused": ("fused", "direct"),
}

# The steps of one stage, in order; every node of a round belongs to one (stage, step).
STEPS = ("topk", "pack", "gather", "select", "compaction", "copy")
# The steps each part of a variant (pack, compaction) issues; the others are the same in
# every variant.
PART_STEPS = (("pack",), ("compaction", "copy"))


@dataclass(frozen=True)
class RoundParams:
    """One decode round: `stages` distributed top-k stages of rank `rank` in `world`.

    Each stage picks the top `k` of `rows` rows of `shard` indexer scores, packs them,
    gathers `world` such slots, takes the global top `k`, and keeps its local records.
    The defaults are the seed's setting."""

    stages: int = 24
    rows: int = 8
    k: int = 2048
    world: int = 8
    rank: int = 0
    shard: int = 8192
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("stages", "rows", "k", "world", "shard"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int):
            raise ValueError(f"rank must be an int, got {self.rank!r}")
        if not 0 <= self.rank < self.world:
            raise ValueError(f"rank must be in [0, world={self.world}), got {self.rank}")
        if self.k > self.shard:
            raise ValueError(f"k={self.k} must be <= shard={self.shard}: top-k of a shard")
        if self.shard >= 2**31:
            raise ValueError(f"shard must be < 2**31 (an int32 width), got {self.shard}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"seed must be an int, got {self.seed!r}")

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def check_variant(variant: str) -> tuple[str, str]:
    try:
        return VARIANTS[variant]
    except KeyError:
        raise ValueError(
            f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}"
        ) from None


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


@dataclass(frozen=True)
class ProfileSettings:
    """How `profile` replays graphs under CUPTI, and how it times them for the measured
    round time and savings (trials and builds as in ReplaySettings, whose defaults these
    are). Each field's metadata carries its help text; the CLI's flags are made from them.

    One profiled window is a torch.profiler session around `replays + 1` back-to-back
    replays: the first is a lead-in (its end is when the next replay's first node became
    ready), the others are one sample of every node each."""

    trials: int = field(
        default=ReplaySettings.trials,
        metadata={"help": "timed trials per round, for measured times and savings", "min": 2},
    )
    builds: int = field(
        default=ReplaySettings.builds,
        metadata={
            "help": "times each round is built afresh (timed and profiled in each build; "
            "the built-in round only)",
            "min": 1,
        },
    )
    windows: int = field(
        default=3,
        metadata={"help": "profiled windows per build (torch.profiler sessions)", "min": 1},
    )
    replays: int = field(
        default=10,
        metadata={"help": "replays profiled per window, each a sample of every node", "min": 2},
    )
    warmup: int = field(default=ReplaySettings.warmup, metadata={"min": 0})
    # Replays of each graph drawn in trace.json (capture/profile_trace.py): the first of
    # its first window. Three show a replay with a neighbour on each side and keep the
    # file small enough to scroll through.
    trace_replays: int = field(default=3, metadata={"min": 1})

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or v < f.metadata["min"]:
                want = f"a whole number >= {f.metadata['min']}"
                raise ValueError(f"{f.name} must be {want}, got {v!r}")

    def timing(self) -> ReplaySettings:
        """The ReplaySettings that time rounds alongside the profile."""
        return ReplaySettings(trials=self.trials, builds=self.builds, warmup=self.warmup)

    @property
    def replays_per_reset(self) -> int:
        """The most replays in a row a profiled step takes from its reset state (a step
        with `step.reset` is reset before each run of replays): the longest of the first
        replay (1), the warm-up replays (`warmup`), a timed trial (`round_replays`) and a
        profiled window (`replays` + its lead-in). Its buffers must hold that many."""
        return max(1, self.warmup, self.timing().round_replays, self.replays + 1)


@dataclass(frozen=True)
class StepSettings:
    """How a step (the built-in round's, or yours) is brought to capture: the one source
    of these defaults (`--warmup` is made from the field, `capture_and_count(warmup=)`,
    `node_budget(warmup=)` and `check_step(warmup=)` default to it).

    Before it is captured, a step is called `warmup` times eagerly on a side stream, so
    that lazy work (compiles, library handles, allocator growth) stays out of the graph;
    then once more under capture. A step with state thus advances `warmup + 1` times
    unless it has a `step.reset` (README: Steps with state). Two warm-ups or more also
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
        v = self.warmup
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"warmup must be a whole number >= 0, got {v!r}")
