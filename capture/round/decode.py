"""The built-in decode round: `stages` distributed top-k stages, buffers from one pool.

Per stage (rank `rank` of `world`, all shapes static, all buffers carved and frozen):
    1 topk        local top-k of this rank's indexer scores  [rows, shard] -> [rows, k]
    2 pack        (score, global id) pairs into this rank's slot of the gather buffer
    3 gather      one GPU: the other ranks' slots are static inputs filled once
    4 select      global top-k over the world * k gathered scores; winners' ids (int32)
    5 compaction  this rank's selected records into the retained physical/counts buffers
                  (the `copy` step holds the two copies of the allocating path)
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.errors import CompileError
from graph_harness.capture.graph.dispatch import counted_compiled_call
from graph_harness.capture.round.params import RoundParams, check_variant
from graph_harness.capture.scopes.recorder import scope
from graph_harness.kernels import (
    pack_scores_ids,
    pack_scores_ids_shipped,
    selected_local_records,
)
from graph_harness.pools import GraphBufferPool

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup


@functools.cache
def compiled_shipped_pack() -> Callable[..., torch.Tensor]:
    """The eight-op pack through torch.compile (Inductor), compiled once per process.
    dynamic=False: a serving stack compiles for its fixed shapes (and Inductor in torch
    2.11 miscompiles the id's bitcast when the width is symbolic). Compiled in this process,
    never through Inductor's pool of compile workers, which starve the next rebuilds of CPU;
    the patch is per call (about 16 us) because a recompile can come on any call. Why and
    what it cost: docs/builtin-round.md, "The compiled shipped pack"."""
    compiled = torch.compile(pack_scores_ids_shipped, fullgraph=True, dynamic=False)
    from torch._inductor import config

    @functools.wraps(pack_scores_ids_shipped)
    def in_process(*args: object, **kwargs: object) -> torch.Tensor:
        with config.patch(compile_threads=1):
            try:
                return compiled(*args, **kwargs)
            except _compile_failures() as e:
                raise _not_compiled(e) from e

    return in_process


def _compile_failures() -> tuple[type[BaseException], ...]:
    """The errors torch.compile raises when Inductor (or Dynamo handing it the graph)
    fails to compile: InductorError (torch >= 2.7) and BackendCompilerFailed, each where
    this torch has it."""
    failures: list[type[BaseException]] = []
    for module, name in (
        ("torch._inductor.exc", "InductorError"),
        ("torch._dynamo.exc", "BackendCompilerFailed"),
    ):
        try:
            failures.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue
    return tuple(failures)


def _not_compiled(e: BaseException) -> CompileError:
    """One line for an Inductor failure on the shipped pack: which, where, what to do."""
    # Inductor's message spans lines (where in the generated code, then why): the first
    # and the last say what failed.
    lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [""]
    first = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    first = first if len(first) <= 300 else first[:297] + "..."
    return CompileError(
        f"the shipped pack could not be compiled by Inductor on torch {torch.__version__} "
        f"({type(e).__name__}: {first}); leave out the shipped-compiled variant (--variant "
        "shipped --variant fused ...), or use a torch whose Inductor compiles it (this "
        "harness compiles it with dynamic=False and a 0-d tensor rank: a Python-int rank "
        "or dynamic=True fail on torch 2.11)"
    )


def stage_inputs(params: RoundParams, stage: int, rank: int) -> torch.Tensor:
    """Rank `rank`'s indexer scores for `stage`: [rows, shard] float32 on the CPU, from
    the seed alone, so every variant, device and process sees the same bits.

    Coarse values give many ties; some -inf positions, and a first row with fewer than
    k finite scores, so -inf winners (dead entries) appear."""
    g = torch.Generator().manual_seed(params.seed * 1_000_003 + stage * 1009 + rank)
    rows, shard = params.rows, params.shard
    scores = torch.randint(0, 256, (rows, shard), generator=g).float() / 16
    scores[torch.rand(rows, shard, generator=g) < 0.02] = float("-inf")
    finite = max(params.k // 2, 1)
    scores[0, torch.randperm(shard, generator=g)[: shard - finite]] = float("-inf")
    return scores


def local_topk(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k values and positions; -inf winners become dead entries (index -1)."""
    values, index = torch.topk(scores, k, dim=1)
    index.masked_fill_(values == float("-inf"), -1)
    return values, index


def all_gather_step(gather: torch.Tensor, rank: int, group: ProcessGroup) -> None:
    """Fill `gather` [world, rows, k, 2] from every rank's slot, in place: the input is
    this rank's slot of the output (NCCL's in-place all-gather; no staging copy)."""
    import torch.distributed as dist

    # torch >= 2.12 names it all_gather_single; older releases all_gather_into_tensor.
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    all_gather(gather.view(-1), gather[rank].view(-1), group=group)


class DecodeRound:
    """Buffers and steps of one round for one variant. `run()` issues every stage's work
    on the current stream (eagerly, or under capture)."""

    def __init__(
        self,
        params: RoundParams,
        variant: str,
        device: torch.device | str,
        *,
        pool: GraphBufferPool | None = None,
        pdl: bool = False,
        group: ProcessGroup | None = None,
    ) -> None:
        """`group`: a torch.distributed process group of `params.world` processes, this
        one being `params.rank`; step 3 then all-gathers the slots (round/distributed.py).
        Without it the other ranks' slots are static inputs (the single-process round)."""
        self.params = params
        self.variant = variant
        self.pdl = bool(pdl)  # launch the Triton kernels with programmatic dependent launch
        self.group = group
        if group is not None:
            import torch.distributed as dist

            size, me = dist.get_world_size(group), dist.get_rank(group)
            if (size, me) != (params.world, params.rank):
                raise ValueError(
                    f"process group has world {size}, rank {me}; the round says world "
                    f"{params.world}, rank {params.rank}: they must agree"
                )
        self.pack_kind, self.compaction_kind = check_variant(variant)
        self.device = torch.device(device)
        p = params
        self.pool = pool or GraphBufferPool(self.device, chunk_bytes=32 << 20, poison=True)
        self.rank = self.pool.carve("rank", (), torch.int32)  # [] this rank, read by kernels
        self.rank.fill_(p.rank)
        self.scores, self.gather, self.physical, self.counts = [], [], [], []
        for s in range(p.stages):
            # [rows, shard] this rank's indexer scores (static input)
            self.scores.append(
                self.pool.carve(f"stage{s}.scores", (p.rows, p.shard), torch.float32)
            )
            # [world, rows, k, 2] the cursor buffer: (score, id) pairs of every rank
            self.gather.append(
                self.pool.carve(f"stage{s}.gather", (p.world, p.rows, p.k, 2), torch.float32)
            )
            # [rows, k] retained local slots, [rows] retained counts
            self.physical.append(self.pool.carve(f"stage{s}.physical", (p.rows, p.k), torch.int32))
            self.counts.append(self.pool.carve(f"stage{s}.counts", (p.rows,), torch.int32))
        self.pool.freeze()
        self._fill_inputs()
        if self.pack_kind == "compiled":
            compiled = compiled_shipped_pack()
            self._pack = lambda *a: counted_compiled_call("pack_scores_ids_shipped", compiled, *a)
        else:
            self._pack = pack_scores_ids_shipped
            if self.pack_kind == "fused":
                self._pack = lambda *a: pack_scores_ids(*a, pdl=self.pdl)

    def _fill_inputs(self) -> None:
        """Static inputs: this rank's scores, and the other ranks' packed slots (packed
        by the shipped path once, outside any capture)."""
        p = self.params
        for s in range(p.stages):
            self.scores[s].copy_(stage_inputs(p, s, p.rank))
            if self.group is not None:
                continue  # the all-gather fills the other slots (poisoned until then)
            for r in range(p.world):
                if r == p.rank:
                    continue
                values, index = local_topk(stage_inputs(p, s, r).to(self.device), p.k)
                pack_scores_ids_shipped(index, values, r, p.shard, self.gather[s][r])

    def outputs(self) -> dict[str, torch.Tensor]:
        """The buffers a round writes: this rank's gather slots and the retained buffers."""
        out = {}
        for s in range(self.params.stages):
            out[f"stage{s}.slot"] = self.gather[s][self.params.rank]
            out[f"stage{s}.physical"] = self.physical[s]
            out[f"stage{s}.counts"] = self.counts[s]
        return out

    def run(self) -> None:
        for s in range(self.params.stages):
            self.run_stage(s)

    def run_stage(self, s: int) -> None:
        p = self.params
        gather = self.gather[s]
        with scope("topk", s):
            values, index = local_topk(self.scores[s], p.k)
        with scope("pack", s):
            self._pack(index, values, self.rank, p.shard, gather[p.rank])
        with scope("gather", s):
            if self.group is not None:
                all_gather_step(gather, p.rank, self.group)
            # else one process: the other ranks' slots are static inputs, ours is in place
        with scope("select", s):
            pairs = gather.permute(1, 0, 2, 3).reshape(p.rows, p.world * p.k, 2)
            _, winners = torch.topk(pairs[..., 0], p.k, dim=1)
            ids = torch.gather(pairs[..., 1].view(torch.int32), 1, winners)  # [rows, k] int32
        if self.compaction_kind == "direct":
            with scope("compaction", s):
                selected_local_records(
                    ids,
                    self.rank,
                    p.shard,
                    out=self.physical[s],
                    count_out=self.counts[s],
                    pdl=self.pdl,
                )
        else:
            with scope("compaction", s):
                physical, counts = selected_local_records(ids, self.rank, p.shard, pdl=self.pdl)
            with scope("copy", s):
                self.physical[s].copy_(physical)
                self.counts[s].copy_(counts)
