"""`check_updated(make, sizes)`: the updated-executable check (capture/check/updated.py) of a
step factory, as one library call, without the rest of a sweep.

Sizes are built and captured one after another, largest first, each right after it is
built, into one shared pool on one capture stream, each made executable (what the shared
one is compared with); one executable is then switched between them by update. A stale
workspace a later build left is filled with check's pattern and differs (the sweep hides
it). No size is checked alone first; on the CPU it does not run (UpdatedResult.skipped).
Syncs. docs/sweep.md, "One executable updated between sizes".
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

import torch

from graph_harness.capture.check.settings import CheckSettings
from graph_harness.capture.check.size_runs import SizeGraph
from graph_harness.capture.check.updated import check_updated_graphs, cuda_driver
from graph_harness.capture.check.updated_verdict import UpdatedResult
from graph_harness.capture.count import capture_and_keep
from graph_harness.capture.graph.lifecycle import instantiate_and_upload
from graph_harness.capture.graph.settings import StepSettings
from graph_harness.capture.state.steps import StateWatch, require_repeatable
from graph_harness.capture.sweep.settings import check_sizes

Step = Callable[[], object]
NO_GPU = (
    "the updated-executable check instantiates, updates and launches CUDA graphs: it needs "
    "a CUDA GPU"
)


def check_updated(
    make: Callable[[int], Step],
    sizes: Sequence[int],
    *,
    steps: int = CheckSettings.steps,
    seed: int = 0,
    warmup: int = StepSettings.warmup,
    name: str = "the step",
) -> UpdatedResult:
    """The updated-executable check of `make(batch)` at `sizes` (at least two; module
    docstring): `steps` calls per size before a size starts again from its reset, the walk
    dealt with `seed`. `make` is called once per size. Returns the result; it raises
    nothing for what it finds (`result.status`, `result.findings`). Syncs."""
    order = sorted(check_sizes(sizes), reverse=True)
    if len(order) < 2:
        raise ValueError("an executable is switched between sizes: give at least two sizes")
    if not torch.cuda.is_available():
        return UpdatedResult.skipped(name, order, steps, seed, warmup, NO_GPU)
    stream = torch.cuda.Stream()
    pool = torch.cuda.graph_pool_handle()
    graphs = [_built_and_captured(make, b, name, warmup, pool, stream) for b in order]
    try:
        return check_updated_graphs(graphs, steps=steps, seed=seed, name=name, warmup=warmup,
                                    driver=cuda_driver(stream))  # fmt: skip
    finally:
        del graphs  # the pool's graphs, then their memory back
        gc.collect()
        torch.cuda.empty_cache()


def _built_and_captured(
    make: Callable[[int], Step],
    batch: int,
    name: str,
    warmup: int,
    pool: tuple[int, int],
    stream: torch.cuda.Stream,
) -> SizeGraph:
    """`make(batch)` captured into `pool` on `stream`, made executable; a step that would
    be replayed past its end (no reset, and it does not repeat) refused (StepStateError)."""
    step = make(batch)
    watch = StateWatch(step)
    label = f"{name} batch {batch}"
    counted = capture_and_keep(step, warmup=warmup, name=label, watch=watch,
                               graph_pool=pool, stream=stream)  # fmt: skip
    require_repeatable(watch.repeatability, label)
    instantiate_and_upload(counted.captured.graph, stream)
    return SizeGraph(batch=batch, step=step, graph=counted.captured.graph,
                     output=counted.captured.output, repeatability=watch.repeatability)  # fmt: skip
