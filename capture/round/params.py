"""The built-in round's parameters (`RoundParams`, a frozen dataclass: the one source of
their defaults) and its variants. Plain data, no torch: the command line's parser reads it.
(How a step is warmed up: capture/graph/settings.py; replays timed:
capture/replay/settings.py; profiled: capture/profile/settings.py.)"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from graph_harness.capture.export.workload import ROUND_STEPS
from graph_harness.capture.settings import MAX_COUNT, SettingsError

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

# One line per variant: what it runs. The one source of these words: `--help`, the variant
# list of docs/builtin-round.md (tests/test_readme.py compares) and anything else that
# lists the variants.
VARIANT_HELP: dict[str, str] = {
    "shipped": "the shipped code: an eager-op pack; compaction allocates, then copies",
    "shipped-compiled": "the shipped pack through torch.compile; compaction as shipped",
    "direct-compaction": "the shipped pack; compaction writes the retained buffers directly",
    "fused-pack": "the fused Triton pack, one kernel per call; compaction as shipped",
    "fused": "both changes: the fused pack and the direct-write compaction",
}

# The steps of one stage, in order; every node of a round belongs to one (stage, step).
# Defined with the export's words (capture/export/workload.py), which analyses read.
STEPS = ROUND_STEPS
# The steps each part of a variant (pack, compaction) issues; the others are the same in
# every variant.
PART_STEPS = (("pack",), ("compaction", "copy"))


INT32_WIDTH = 2**31 - 1  # a shard's scores are indexed in int32
SEED_MAX = 2**64 - 1  # torch's manual_seed takes no more


def _param(default: int, help: str, lo: int = 1, hi: int = MAX_COUNT) -> int:  # a Field
    """A round parameter: its default, what it means (`help`, read by --help), and the
    whole numbers it may take, `lo` to `hi` (past MAX_COUNT is a typo, not a round)."""
    return field(default=default, metadata={"help": help, "lo": lo, "hi": hi})


@dataclass(frozen=True)
class RoundParams:
    """One decode round: `stages` distributed top-k stages of rank `rank` in `world`.
    Each field's `help` metadata says what it means (the command line's help reads it).

    Each stage picks the top `k` of `rows` rows of `shard` indexer scores, packs them,
    gathers `world` such slots, takes the global top `k`, and keeps its local records.
    The defaults are the seed's setting."""

    stages: int = _param(24, "stages per round, each: topk, pack, gather, select, compaction")
    rows: int = _param(8, "rows of indexer scores per stage, each picking its own top k")
    k: int = _param(
        2048, "scores each row keeps: this rank's top k, then the global top k", hi=INT32_WIDTH
    )
    world: int = _param(8, "ranks the scores are sharded over; a row gathers world * k scores")
    rank: int = _param(
        0, "this process's rank in [0, world): whose shard and slot it computes", lo=0
    )
    shard: int = _param(
        8192, "indexer scores per row on one rank: the local top-k's width, >= k", hi=INT32_WIDTH
    )
    seed: int = _param(
        0, "seed of the scores: the same bits for every variant, device, process", 0, SEED_MAX
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            v, lo, hi = getattr(self, f.name), f.metadata["lo"], f.metadata["hi"]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise SettingsError(f"{f.name} must be an int from {lo} to {hi:,}, got {v!r}")
        if self.rank >= self.world:
            raise SettingsError(f"rank must be in [0, world={self.world}), got {self.rank}")
        if self.k > self.shard:
            raise SettingsError(f"k={self.k} must be <= shard={self.shard}: top-k of a shard")

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def param_help() -> dict[str, str]:
    """What each round parameter means, by name (the fields' `help` metadata)."""
    return {f.name: f.metadata["help"] for f in fields(RoundParams)}


def steps_changed(a: str, b: str) -> set[str]:
    """The steps whose nodes differ between variants `a` and `b`: those of every part
    (pack, compaction) the two run differently."""
    return {
        step
        for i, steps in enumerate(PART_STEPS)
        if VARIANTS[a][i] != VARIANTS[b][i]
        for step in steps
    }


def check_variant(variant: str) -> tuple[str, str]:
    try:
        return VARIANTS[variant]
    except KeyError:
        raise SettingsError(
            f"unknown variant {variant!r}; choose one of: {', '.join(VARIANTS)}"
        ) from None
