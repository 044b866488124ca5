"""Sizes interleaved in one pool: every size's graph, captured largest first into one shared
pool (as engines capture their ladders), replayed in a seeded random serving order, each
replay compared with its own size's eager call right after it.

A graph that is right alone can be wrong beside the others: a buffer or workspace of one
size freed or re-allocated after its capture (a smaller size built later handed its
memory) is written by another size's capture or replays, and nothing shows until the
sizes take turns, as they do in a server. Check's trajectories (capture/check/step.py)
replay one size alone; this replays them in turns.

- **The eager reference**, per size, in capture order, as capture/check/size_runs.py
  makes it: from its start, `steps` calls, twice; then the size back at its start. Its
  replay of call i runs after its replay of call i-1.
- **The serving order**: each size's calls, `steps` of them, in their own order (call i
  before call i+1), the sizes interleaved by `random.Random(seed)` (`serving_order`).
- **Each replayed call**: the graph's outputs filled with check's pattern
  (capture/check/outputs.py, before the feed: an output the graph never writes cannot
  match), `feed(i)`, the generators set to the eager call's state, the replay (in a
  window of capture/replay/guard.py: a CUDA error is one line), the fingerprint, and the
  comparison with the eager call i of its size. A size with a reset is reset (and fed
  call 0) before its first replayed call only, its watched tensors put back to the eager
  run's start where the reset leaves them otherwise (as check's trajectory does). A size
  that differs once is not compared again (its later replays still run, so the others
  see the order they were dealt), and the finding names the other sizes that ran since
  its previous call.

While the sizes take turns, the allocator's free memory is filled with one pattern and
held (capture/check/poison.py; on a GPU): a size whose graph still reads a buffer freed
after its capture (a workspace re-allocated when a later size was built) then reads the
pattern, not whatever happens to lie there, and differs at once. Every size is left at
its start. Host values are not judged (its own check does). Cost: per size 2 x `steps`
eager calls and `steps` replays, each followed by a fingerprint.
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
