"""Round parameters: one frozen dataclass, the single source of defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass

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
