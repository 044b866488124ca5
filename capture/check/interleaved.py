"""Sizes interleaved in one pool: every size's graph, captured largest first into one shared
pool, replayed in a seeded random serving order (`serving_order`), each replay compared
with its own size's eager call right after it. A graph right alone can be wrong beside
the others (a buffer freed after its capture and written by another size's replays).

Free memory is held filled with one pattern while the sizes take turns (on a GPU). Every
size is left at its start; host values are not judged (its own check does). The eager
reference, each replayed call and the cost: docs/sweep.md, "capture/check/interleaved.py".
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from graph_harness.capture.check.findings import Finding
from graph_harness.capture.check.interleaved_verdict import (
    InterleavedResult,
    judge_call,
    mismatch,
    suspects,
    unjudged,
    within,
)
from graph_harness.capture.check.poison import poisoned
from graph_harness.capture.check.size_runs import SizeGraph, SizeRuns, size_runs
from graph_harness.capture.check.trajectory import POISONS
from graph_harness.capture.replay.guard import cuda_in_use, sync
from graph_harness.capture.state.fingerprint import fingerprint
from graph_harness.capture.state.rng import set_rng_state
from graph_harness.capture.state.steps import feed_of

FREE_POISON = POISONS[0]  # check's first filling of free memory


def serving_order(sizes: Sequence[int], steps: int, seed: int) -> list[tuple[int, int]]:
    """(batch, call) for every size's `steps` calls: each size's calls in their own order,
    the sizes interleaved by a shuffle seeded with `seed`. The same sizes, in any order
    given, and the same seed give the same order."""
    deck = [b for b in sorted(sizes, reverse=True) for _ in range(steps)]
    random.Random(seed).shuffle(deck)
    dealt: dict[int, int] = {}
    out = []
    for b in deck:
        out.append((b, dealt.get(b, 0)))
        dealt[b] = dealt.get(b, 0) + 1
    return out


def check_interleaved(
    sizes: Sequence[SizeGraph],
    *,
    steps: int,
    seed: int,
    name: str = "the step",
    warmup: int = 0,
) -> InterleavedResult:
    """The interleaved check (module docstring) of `sizes`, given in capture order (largest
    first), each size's graph captured into one pool on one stream. Ends with every size at
    its start. Syncs."""
    captured = [g.batch for g in sizes]
    runs = {g.batch: size_runs(g, name) for g in sizes}
    for s in runs.values():
        s.reference(steps)
    order = serving_order(captured, steps, seed)
    said: set[tuple[int, str]] = set()  # (batch, tensor) told once: unjudged or within
    with contextlib.ExitStack() as held:
        if cuda_in_use():  # a stand-in graph on the CPU has no allocator to fill
            held.enter_context(poisoned(FREE_POISON))  # module docstring
        tally = _turns(order, runs, captured, said)
    for s in runs.values():  # every size as it was found: at its start
        if s.start is not None:
            s.start()
    sync()
    return InterleavedResult(
        name,
        captured,
        steps,
        seed,
        warmup,
        fed=any(feed_of(g.step) is not None for g in sizes),
        order=order,
        findings=tally.findings,
        by_size={b: runs[b].status for b in captured},
        replays=tally.replays,
        compared=tally.compared,
        tensors=tally.tensors,
    )


@dataclass
class _Tally:
    """What the turns found and how many replays and comparisons they made."""

    findings: list[Finding] = field(default_factory=list)
    replays: int = 0
    compared: int = 0
    tensors: int = 0


def _turns(
    order: list[tuple[int, int]],
    runs: dict[int, SizeRuns],
    captured: list[int],
    said: set[tuple[int, str]],
) -> _Tally:
    """The replays in the serving order, each compared with its size's eager call."""
    result = _Tally()
    total = len(order)
    for k, (b, i) in enumerate(order):
        s = runs[b]
        s.to_call(i)
        set_rng_state(s.rngs[i])
        with s.replayer.window(f"the interleaved check's replay {k + 1} of {total} (call {i})"):
            s.replayer.replay()
        result.replays += 1
        if s.status == "failed":  # its first mismatch named; later replays keep the order
            continue
        got = fingerprint(s.g.step, s.g.output, clone_to="cpu")
        judged = judge_call(s.after[i], s.spreads[i], got)
        result.compared += 1
        result.tensors += judged.compared
        if judged.bad:
            others, how = suspects(order, k, captured)
            result.findings.append(mismatch(b, i, k, total, judged.bad, others, how))
            s.status = "failed"
            continue
        for c in judged.unjudged:
            s.status = "unverified"
            if (b, c.name) not in said:
                said.add((b, c.name))
                result.findings.append(unjudged(b, i, c))
        for c, own in judged.within:
            if (b, c.name) not in said:
                said.add((b, c.name))
                result.findings.append(within(b, i, c, own))
    return result
