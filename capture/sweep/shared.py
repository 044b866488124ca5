"""A sweep's second and third stages: every size captured again, largest first, into one
shared pool, the pool read after each; then, where asked, the interleaved check of their
graphs before they are freed (capture/check/interleaved.py)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.lifecycle import instantiate_and_upload
from graph_harness.capture.graph.memory import pool_memory
from graph_harness.capture.state.steps import Repeatability

if TYPE_CHECKING:
    from graph_harness.capture.check.interleaved_verdict import InterleavedResult

Step = Callable[[], object]


@dataclass(frozen=True)
class Interleave:
    """The interleaved check to run on the shared pool's graphs (capture/check/interleaved.py)."""

    calls: int
    seed: int
    name: str
    warmup: int


def shared_pool(
    steps: list[tuple[int, Step, Repeatability | None]],
    name: str,
    warmup: int,
    say: Callable[[str], None],
    stream: torch.cuda.Stream,
    interleave: Interleave | None = None,
) -> tuple[list[dict[str, int]], InterleavedResult | None, int]:
    """The same steps captured again, largest first, into one pool, each made executable
    (instantiated and uploaded): the pool and the executable after each; with
    `interleave`, the interleaved check of their graphs before they are freed; and the
    free device memory that freeing them all gave back (bytes)."""
    from graph_harness.capture.check.interleaved import SizeGraph, check_interleaved

    pool = torch.cuda.graph_pool_handle()
    keep, graphs, rows, before = [], [], [], 0
    for b, step, rep in steps:
        say(f"batch {b}: capturing again (shared pool)")
        counted = capture_and_keep(
            step, warmup=warmup, name=f"{name} batch {b}", graph_pool=pool, stream=stream
        )
        keep.append((step, counted))  # alive to the end: the pool's blocks are theirs
        graphs.append(SizeGraph(batch=b, step=step, graph=counted.captured.graph,
                                output=counted.captured.output, repeatability=rep))  # fmt: skip
        exe = instantiate_and_upload(counted.captured.graph, stream)
        mem = pool_memory(pool)
        rows.append(
            dict(batch=b, total_reserved=mem.reserved, adds=mem.reserved - before,
                 total_allocated=mem.allocated, exec_bytes=exe.exec_bytes)
        )  # fmt: skip
        before = mem.reserved
    turns = None
    if interleave is not None:  # before the graphs go: it replays them
        i = interleave
        say(f"interleaved check: {len(graphs)} sizes x {i.calls} calls, order seed {i.seed}")
        turns = check_interleaved(graphs, steps=i.calls, seed=i.seed, name=i.name, warmup=i.warmup)
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
    return rows, turns, returned
