"""A request distribution priced against a sweep: the padding section of the sweep's
document, each ladder costed by capture/sweep/padding.py's arithmetic (the chosen sizes,
every size swept, vLLM's default ladder), or with no replay times (the CPU) its padded
rows alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph_harness.capture.sweep.padding import (
    Distribution,
    LadderCost,
    choose,
    fewest_padded,
    ladder_cost,
    vllm_ladder,
)

if TYPE_CHECKING:
    from graph_harness.capture.sweep.document import SweepResult


@dataclass(frozen=True, kw_only=True)
class Padding:
    """A request distribution against the sweep: each ladder's cost, and the chosen one."""

    requests: str  # where the distribution came from: a file, or a built-in's spec
    distribution: Distribution
    chosen: tuple[int, ...]
    how: str  # what the choice was held to ("at most 4 sizes", "within 2 GiB", "none")
    ladders: list[LadderCost]


def padding_of(
    result: SweepResult,
    requests: Distribution,
    source: str,
    *,
    most: int | None = None,
    budget: int | None = None,
) -> Padding:
    """`result`'s padding section for `requests` (from `source`): the ladder of measured
    sizes chosen (capture/sweep/padding.py `choose`), every size measured, and vLLM's
    default ladder, each costed. A sweep with no replay times (the CPU): their padded
    rows alone, the ladder chosen the one with the fewest (`_by_rows`)."""
    times = result.times()
    if not times:
        if budget is not None:
            raise ValueError(
                "a memory budget weighs each size's own pool, and this sweep measured "
                f"none ({result.why_not}): leave out the budget, or sweep on a GPU"
            )
        return _by_rows(result, requests, source, most)
    memory = {r.batch: r.reserved for r in result.rows if r.reserved is not None}
    if budget is not None and len(memory) < len(result.rows):
        raise ValueError(
            "a memory budget weighs each size's own pool, and these sizes have none (a "
            "step compiled with mode='reduce-overhead' records every size into "
            "Inductor's one pool): leave out the budget, or sweep the step compiled in "
            "the default mode"
        )
    chosen = choose(requests, times, most=most, memory=memory, budget=budget)
    how = [f"at most {most} sizes"] * (most is not None)
    how += [f"own pools within {budget} bytes"] * (budget is not None)
    largest = max(requests)
    every = [s for s in sorted(times) if s <= min(s2 for s2 in times if s2 >= largest)]
    # vLLM's sizes up to the largest swept: a size above it has no time to price, so
    # the largest swept stands in for vLLM's next size, and the row says so
    vllm = [s for s in vllm_ladder(largest) if s <= max(times)]
    cut = vllm[-1] < largest
    if cut:
        vllm.append(max(times))
    ladders = [
        ladder_cost("chosen", chosen, requests, times, memory),
        ladder_cost("every size swept", every, requests, times, memory),
        ladder_cost(
            f"vLLM default (cut at {max(times)})" if cut else "vLLM default",
            vllm,
            requests,
            times,
            memory,
        ),
    ]
    return Padding(
        requests=source,
        distribution=requests,
        chosen=chosen,
        how=", ".join(how) or "no limit",
        ladders=ladders,
    )


def _by_rows(result: SweepResult, requests: Distribution, source: str, most: int | None) -> Padding:
    """Padding with no replay times: what needs none (each ladder's padded rows, the
    ladder of swept sizes with the fewest, vLLM's default whole, since pricing no size
    above the sweep's needs no cut); the times None."""
    sizes = sorted(r.batch for r in result.rows)
    largest = max(requests)
    chosen = fewest_padded(requests, sizes, most=most)
    every = [s for s in sizes if s <= min(s2 for s2 in sizes if s2 >= largest)]
    limit = f"at most {most} sizes" if most is not None else "no limit"
    return Padding(
        requests=source,
        distribution=requests,
        chosen=chosen,
        how=f"{limit}, by padded rows: time per step needs a GPU",
        ladders=[
            ladder_cost("fewest padded rows", chosen, requests, None),
            ladder_cost("every size swept", every, requests, None),
            ladder_cost("vLLM default", vllm_ladder(largest), requests, None),
        ],
    )
