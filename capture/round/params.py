"""The built-in round's parameters (`RoundParams`, a frozen dataclass: the one source of
their defaults) and its variants. Plain data, no torch: the command line's parser reads it.
(How a step is warmed up: capture/graph/settings.py; replays timed:
capture/replay/settings.py; profiled: capture/profile/settings.py.)"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from graph_harness.capture.export.workload import ROUND_STEPS
from graph_harness.capture.settings import SettingsError

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


def _param(default: int, help: str) -> int:  # a Field, typed as its value (as field() is)
    """A round parameter: its default and what it means (`help`, read by --help)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class RoundParams:
    """One decode round: `stages` distributed top-k stages of rank `rank` in `world`.
    Each field's `help` metadata says what it means (the command line's help reads it).

    Each stage picks the top `k` of `rows` rows of `shard` indexer scores, packs them,
    gathers `world` such slots, takes the global top `k`, and keeps its local records.
    The defaults are the seed's setting."""

    stages: int = _param(24, "stages per round, each: topk, pack, gather, select, compaction")
    rows: int = _param(8, "rows of indexer scores per stage, each picking its own top k")
    k: int = _param(2048, "scores each row keeps: this rank's top k, then the global top k")
    world: int = _param(8, "ranks the scores are sharded over; a row gathers world * k scores")
    rank: int = _param(0, "this process's rank in [0, world): whose shard and slot it computes")
    shard: int = _param(8192, "indexer scores per row on one rank: the local top-k's width, >= k")
    seed: int = _param(0, "seed of the scores: the same bits for every variant, device, process")

    def __post_init__(self) -> None:
        for name in ("stages", "rows", "k", "world", "shard"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SettingsError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int):
            raise SettingsError(f"rank must be an int, got {self.rank!r}")
        if not 0 <= self.rank < self.world:
            raise SettingsError(f"rank must be in [0, world={self.world}), got {self.rank}")
        if self.k > self.shard:
            raise SettingsError(f"k={self.k} must be <= shard={self.shard}: top-k of a shard")
        if self.shard >= 2**31:
            raise SettingsError(f"shard must be < 2**31 (an int32 width), got {self.shard}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise SettingsError(f"seed must be an int, got {self.seed!r}")

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
