"""The round's own calls as chain kinds (capture/replay/kinds.py's registry): each pack
and the allocating compaction's two copies, at the round's default shape, so a chain of
them prices a round step's call with its work, not its dispatch alone.

Importing this module registers nothing: `register()` adds them (ROUND_KINDS), called
where they are first needed: what lists or measures the round's kinds
(capture/round/replays.py, the `replay` command) and `step_chain`, through which the
round's calls are priced with them (capture/round/pricing.py, capture/round/advice.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graph_harness.capture.replay.kinds import Call, ChainKind, add_kinds, kind_replaying
from graph_harness.capture.round.params import VARIANTS, RoundParams

if TYPE_CHECKING:
    import torch

    from graph_harness.capture.export.nodes import NodeExport


def _pack_inputs(device: torch.device) -> tuple:
    """A pack call's inputs as the round makes them, at its default shape."""
    import torch

    d = RoundParams()
    idx = torch.randint(0, d.shard, (d.rows, d.k), device=device)
    scores = torch.randn(d.rows, d.k, device=device)
    rank = torch.tensor(3, dtype=torch.int32, device=device)
    out = torch.empty(d.rows, d.k, 2, device=device)
    return idx, scores, rank, d.shard, out


def _pack_shipped(device: torch.device) -> Call:
    from graph_harness.kernels import pack_scores_ids_shipped

    args = _pack_inputs(device)
    return lambda: pack_scores_ids_shipped(*args)


def _pack_compiled(device: torch.device) -> Call:
    from graph_harness.capture.round.decode import compiled_shipped_pack

    compiled, args = compiled_shipped_pack(), _pack_inputs(device)
    return lambda: compiled(*args)


def _pack_fused(device: torch.device) -> Call:
    from graph_harness.kernels import pack_scores_ids

    args = _pack_inputs(device)
    return lambda: pack_scores_ids(*args)


def _compaction_copies(device: torch.device) -> Call:
    import torch

    from graph_harness.kernels import selected_local_records

    d = RoundParams()
    ids = torch.randint(0, 8 * d.shard, (d.rows, d.k), dtype=torch.int32, device=device)
    rank = torch.tensor(3, dtype=torch.int32, device=device)
    physical, counts = selected_local_records(ids, rank, d.shard)
    kept_p, kept_c = torch.empty_like(physical), torch.empty_like(counts)

    def copies() -> None:
        kept_p.copy_(physical)
        kept_c.copy_(counts)

    return copies


def _pack_fused_pdl(device: torch.device) -> Call:
    from graph_harness.kernels import pack_scores_ids

    args = _pack_inputs(device)
    return lambda: pack_scores_ids(*args, pdl=True)


# The round's kinds, in the order they are listed after the generic ones.
ROUND_KINDS = (
    ChainKind(name="pack-shipped", make=_pack_shipped, replays=("pack", "shipped")),
    ChainKind(name="pack-compiled", make=_pack_compiled, replays=("pack", "compiled")),
    ChainKind(name="pack-fused", make=_pack_fused, replays=("pack", "fused")),
    ChainKind(name="compaction-copies", make=_compaction_copies, replays=("copy", "alloc-copy")),
    ChainKind(name="pack-fused-pdl", make=_pack_fused_pdl, pdl=True),
)


def register() -> None:
    """Add the round's kinds (ROUND_KINDS) to the chain-kind registry
    (capture/replay/kinds.py); a second call changes nothing."""
    add_kinds(*ROUND_KINDS)


# --- which chain replays which of the round's calls ------------------------------------------

# The round's parameters that set the shapes of its calls, which the chains above take at
# their defaults.
_SHAPE = ("rows", "k", "shard")


def chains_replay_its_calls(export: NodeExport) -> bool:
    """Whether the chains replay `export`'s own calls with their real shapes: a graph of
    one of the built-in round's variants, at the default shape the chains run at."""
    d = RoundParams()
    return (
        export.is_round
        and export.source == "cuda-graph"
        and export.variant in VARIANTS
        and bool(export.params)
        and all(export.params.get(k) == getattr(d, k) for k in _SHAPE)
    )


def step_chain(variant: str, step: str) -> str | None:
    """The chain kind that replays this round step's own call at the round's default
    shape (the kinds above): the variant's pack, or the allocating compaction's two
    copies; None for the other steps."""
    register()
    pack, compaction = VARIANTS[variant]
    return kind_replaying(step, pack if step == "pack" else compaction)
