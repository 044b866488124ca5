"""A sweep's second and third stages: every size captured again, largest first, into one
shared pool, the pool read after each; then, where asked, the checks of their graphs
before they are freed: SHARED_CHECKS, by `--check` mode (interleaved: capture/check/
interleaved.py; updated: capture/check/updated.py). A mode's name is its result's field
in SweepResult, its column in the sizes table and its section of sweep.json."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.check.interleaved_verdict import InterleavedResult
from graph_harness.capture.check.updated_verdict import UpdatedResult
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.lifecycle import instantiate_and_upload
from graph_harness.capture.graph.memory import pool_memory
from graph_harness.capture.state.steps import Repeatability
from graph_harness.capture.sweep.settings import SharedMode
from graph_harness.capture.sweep.truth import SharedRow

if TYPE_CHECKING:
    from graph_harness.capture.check.size_runs import SizeGraph

Step = Callable[[], object]


@dataclass(frozen=True)
class Turns:
    """A check of the shared pool's graphs (`mode`: a key of SHARED_CHECKS) over `calls`
    calls per size, its order or walk dealt with `seed`."""

    mode: SharedMode
    calls: int
    seed: int
    name: str
    warmup: int


@dataclass(frozen=True)
class SharedCheck:
    """One `--check` mode that runs on the shared pool's graphs: what it runs (the graphs
    in capture order, its Turns, the capture stream), what it is, and why it cannot run
    without a GPU (its result's `skipped(name, sizes, calls, seed, warmup, why)` says so)."""

    run: Callable[[list[SizeGraph], Turns, torch.cuda.Stream], object]
    result: type[InterleavedResult | UpdatedResult]
    what: str  # in a progress line
    no_gpu: str

    def skipped(self, t: Turns, sizes: list[int]) -> InterleavedResult | UpdatedResult:
        return self.result.skipped(t.name, sizes, t.calls, t.seed, t.warmup, self.no_gpu)


def _interleaved(graphs: list[SizeGraph], t: Turns, stream: torch.cuda.Stream) -> object:
    from graph_harness.capture.check.interleaved import check_interleaved

    return check_interleaved(graphs, steps=t.calls, seed=t.seed, name=t.name, warmup=t.warmup)


def _updated(graphs: list[SizeGraph], t: Turns, stream: torch.cuda.Stream) -> object:
    from graph_harness.capture.check.updated import check_updated_graphs, cuda_driver

    # each size's own check ran first (the sweep checks every size alone before this)
    driver = cuda_driver(stream)
    return check_updated_graphs(graphs, steps=t.calls, seed=t.seed, name=t.name,
                                warmup=t.warmup, driver=driver, alone=True)  # fmt: skip


SHARED_CHECKS = {
    "interleaved": SharedCheck(
        _interleaved,
        InterleavedResult,
        "every size replayed in turns",
        "the interleaved check replays every size's CUDA graph from one shared pool: it "
        "needs a CUDA GPU; here, each size's eager check alone",
    ),
    "updated": SharedCheck(
        _updated,
        UpdatedResult,
        "one executable switched between the sizes by update",
        "the updated-executable check instantiates, updates and launches CUDA graphs: it "
        "needs a CUDA GPU; here, each size's eager check alone",
    ),
}


def shared_pool(
    steps: list[tuple[int, Step, Repeatability | None]],
    name: str,
    warmup: int,
    say: Callable[[str], None],
    stream: torch.cuda.Stream,
    turns: Sequence[Turns] = (),
) -> tuple[list[dict[str, int]], dict[str, object], int]:
    """The same steps captured again, largest first, into one pool, each made executable
    (instantiated and uploaded): the pool and the executable after each, and the free
    device memory its warm-ups, capture and executable took (`free_drop`: what vLLM's
    estimate samples, capture/sweep/vllm_method.py); each of `turns`'
    checks of their graphs before they are freed (by mode); and the free device memory
    that freeing them all gave back (bytes)."""
    from graph_harness.capture.check.size_runs import SizeGraph

    pool = torch.cuda.graph_pool_handle()
    keep, graphs, rows, before = [], [], [], 0
    for b, step, rep in steps:
        say(f"batch {b}: capturing again (shared pool)")
        torch.cuda.synchronize()
        free = torch.cuda.mem_get_info()[0]  # vLLM's sample: the free memory its capture takes
        counted = capture_and_keep(
            step, warmup=warmup, name=f"{name} batch {b}", graph_pool=pool, stream=stream
        )
        keep.append((step, counted))  # alive to the end: the pool's blocks are theirs
        graphs.append(SizeGraph(batch=b, step=step, graph=counted.captured.graph,
                                output=counted.captured.output, repeatability=rep))  # fmt: skip
        exe = instantiate_and_upload(counted.captured.graph, stream)
        mem = pool_memory(pool)
        torch.cuda.synchronize()
        rows.append(
            SharedRow(batch=b, total_reserved=mem.reserved, adds=mem.reserved - before,
                      total_allocated=mem.allocated, exec_bytes=exe.exec_bytes,
                      free_drop=free - torch.cuda.mem_get_info()[0])
        )  # fmt: skip
        before = mem.reserved
    checked = {}
    for t in turns:  # before the graphs go: each replays them
        c = SHARED_CHECKS[t.mode]
        say(f"{t.mode} check ({c.what}): {len(graphs)} sizes x {t.calls} calls, seed {t.seed}")
        checked[t.mode] = c.run(graphs, t, stream)
    # Destroying the graphs and emptying the cache gives back the pool and every
    # executable: read, so the sweep can say whether it all came back. The cache is
    # emptied first, so that blocks cached by the warm-ups and the check's eager calls are
    # not counted as the graphs'.
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    free = torch.cuda.mem_get_info()[0]
    del keep, graphs
    counted = None  # the last size's graph, held by this name too
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    returned = torch.cuda.mem_get_info()[0] - free
    return rows, checked, returned
