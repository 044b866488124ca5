"""The decode round on several processes: a real all-gather in step 3, on torch.distributed.

One process per rank, started by `torchrun` (NCCL on GPUs, one GPU per rank; gloo on the
CPU). Each rank packs its pairs into its own slot of the gather buffer, and the in-place
all-gather fills the other slots; on CUDA it is captured into the round's graph, its nodes
in the `gather` step. Rank r's result is bit-identical to the single-process round for
rank r: `emulate_rank` (docs/distributed.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from graph_harness.capture.errors import UsageError
from graph_harness.capture.export.nodes import NodeExport
from graph_harness.capture.round.count import CountedRound, count_round
from graph_harness.capture.round.params import RoundParams


class DistributedError(UsageError, RuntimeError):
    """The process group, world size, devices or backend do not fit the round."""


@dataclass
class DistributedSetup:
    rank: int
    world: int
    backend: str
    device: torch.device
    group: dist.ProcessGroup


def init_from_env(backend: str | None = None) -> DistributedSetup:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, ...)."""
    missing = [
        k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ
    ]
    if missing and not dist.is_initialized():
        raise DistributedError(
            f"no process group: {', '.join(missing)} unset. Start one process per rank with "
            "`torchrun --nproc-per-node N -m graph_harness count --distributed` (or "
            "`torchrun --nproc-per-node N $(which graph-harness) count --distributed`)"
        )
    cuda = torch.cuda.is_available()
    backend = backend or ("nccl" if cuda else "gloo")
    if backend == "nccl" and not cuda:
        raise DistributedError("backend nccl needs CUDA devices; use gloo on the CPU")
    local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    if backend == "nccl":
        if local >= torch.cuda.device_count():
            raise DistributedError(
                f"local rank {local} has no GPU: this host has {torch.cuda.device_count()}; "
                "start at most one process per GPU (--nproc-per-node)"
            )
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        kw = {"device_id": device} if backend == "nccl" else {}
        dist.init_process_group(backend, **kw)
    return DistributedSetup(
        dist.get_rank(), dist.get_world_size(), backend, device, dist.group.WORLD
    )


def count_distributed(
    params: RoundParams,
    variant: str,
    setup: DistributedSetup,
    *,
    graph_pool: tuple[int, int] | None = None,
    pdl: bool = False,
) -> CountedRound:
    """This rank's round with a real all-gather: captured (NCCL) or counted (gloo).
    `pdl=True` launches the harness's Triton kernels with programmatic dependent launch."""
    params = dataclasses.replace(params, rank=setup.rank, world=setup.world)
    return count_round(
        params, variant, setup.device, graph_pool=graph_pool, group=setup.group, pdl=pdl
    )


def count_all_ranks(
    params: RoundParams, variants: Sequence[str], setup: DistributedSetup, *, pdl: bool = False
) -> list[list[NodeExport]] | None:
    """Every rank counts its rounds; rank 0 gets every rank's exports (`[rank][variant]`),
    the others None. A collective: every rank must call it."""
    mine = [count_distributed(params, v, setup, pdl=pdl).export for v in variants]
    lead = setup.rank == 0
    gathered = [None] * setup.world if lead else None
    dist.gather_object([e.to_dict() for e in mine], gathered, dst=0)
    if not lead:
        return None
    return [[NodeExport.from_dict(d) for d in docs] for docs in gathered]


@contextlib.contextmanager
def process_group(setup: DistributedSetup) -> Iterator[DistributedSetup]:
    """Hold the group for the block; on success every rank meets at a barrier (so no rank
    tears the group down under another), and the group is destroyed in any case."""
    try:
        yield setup
        dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def emulate_rank(
    params: RoundParams, variant: str, rank: int, device: torch.device | str
) -> dict[str, torch.Tensor]:
    """The single-process round for `rank` (other slots static), run once eagerly."""
    from graph_harness.capture.round.decode import DecodeRound

    p = dataclasses.replace(params, rank=rank)
    rnd = DecodeRound(p, variant, device)
    rnd.run()
    return {k: v.clone() for k, v in rnd.outputs().items()}


def release_graphs(graphs: Iterable[torch.cuda.CUDAGraph]) -> None:
    """Free captured graphs before `destroy_process_group`: on the H200 pair (torch 2.11,
    NCCL) tearing the group down while graphs holding its all-gather kernels were alive
    hung both ranks in destroy_process_group."""
    for g in graphs:
        g.reset()
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@dataclass
class Merged:
    totals: dict[int, int]  # rank -> nodes
    same_structure: bool
    first_difference: str | None


def merge(exports: Sequence[NodeExport]) -> Merged:
    """Per-rank totals, and whether every rank captured the same node structure
    (NodeExport.structure: types, kernel names, scopes and dependencies, in order)."""
    ref = exports[0].structure()
    first = None
    for e in exports[1:]:
        s = e.structure()
        if s != ref:
            i = next((i for i, (a, b) in enumerate(zip(ref, s)) if a != b), min(len(ref), len(s)))
            first = (
                f"rank {e.rank} differs from rank {exports[0].rank} at node {i}: "
                f"{s[i] if i < len(s) else 'end'} vs {ref[i] if i < len(ref) else 'end'}"
            )
            break
    return Merged({e.rank: e.total for e in exports}, first is None, first)
