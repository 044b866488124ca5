"""One executable's device memory, resolved below the driver's 2 MiB page.

The driver gives executables memory in 2 MiB pages, several to a page: one instantiate
reads as 0 or a page, and a page a destroyed executable freed goes to the next with no
drop in free memory. So copies of one kept graph are instantiated (torch's flag, auto-free
on launch) and uploaded one at a time, free memory read after each, past the copy where
the pages held before ran out; the bytes taken between two jumps of the later half, over
the copies made between them, are one executable's, to within one executable and a page
over that many copies (the fill at either jump). docs/sweep.md, "What it measures, per size".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graph_harness.capture.graph.lifecycle import ok, runtime
from graph_harness.capture.graph.pages import PAGE

AUTO_FREE_ON_LAUNCH = 1  # cudaGraphInstantiateFlagAutoFreeOnLaunch: torch's instantiate
# Copies between two jumps in the later half of those made since the first page taken: the
# figure to 1/SPAN of a page and an executable. The earlier half lets a second run of pages
# (an upload's, if it has its own) use up the pages held before it, as the first run did.
SPAN = 32


@dataclass(frozen=True)
class ExecSize:
    """Bytes of one executable (None where the pages taken within the limits were too few
    to tell), to within `spread`, from `copies` copies."""

    bytes: int | None
    spread: int | None
    copies: int


def _free(stream: torch.cuda.Stream) -> int:
    stream.synchronize()
    return int(ok(runtime().cudaMemGetInfo(), "cudaMemGetInfo")[0])


def exec_size(
    graph: torch.cuda.CUDAGraph,
    stream: torch.cuda.Stream,
    *,
    most_copies: int = 1024,
    most_bytes: int = 256 << 20,
    flags: int = AUTO_FREE_ON_LAUNCH,
    upload: bool = True,
) -> ExecSize:
    """Copies of `graph`'s kept graph (keep_graph=True) instantiated and uploaded on
    `stream` until SPAN copies lie between the first and the last page taken, or
    `most_copies` were made, or they took `most_bytes`; all destroyed before returning
    (their pages stay with the driver, as any destroyed executable's). `flags`, `upload`:
    cudaGraphInstantiateWithFlags's flags, and whether each copy is uploaded (torch's
    instantiate, then sweep's upload, by default). Needs CUDA; syncs."""
    rt, raw = runtime(), graph.raw_cuda_graph()
    start = _free(stream)
    made: list = []
    jumps: list[tuple[int, int]] = []  # (copies made before it, bytes taken before it)
    taken = 0
    try:
        while len(made) < most_copies and taken < most_bytes:
            (ex,) = ok(rt.cudaGraphInstantiateWithFlags(raw, flags), "instantiate")
            made.append(ex)
            if upload:
                ok(rt.cudaGraphUpload(ex, stream.cuda_stream), "cudaGraphUpload")
            now = start - _free(stream)
            if now > taken:
                jumps.append((len(made) - 1, taken))
            taken = max(taken, now)
            if _later(jumps)[-1][0] - _later(jumps)[0][0] >= SPAN:
                break
    finally:
        for ex in made:
            rt.cudaGraphExecDestroy(ex)
    return _from_jumps(jumps, len(made))


def _later(jumps: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The jumps from halfway between the first and the last on ([(0, 0)] for none)."""
    if not jumps:
        return [(0, 0)]
    middle = (jumps[0][0] + jumps[-1][0]) / 2
    return [j for j in jumps if j[0] >= middle]


def _from_jumps(jumps: list[tuple[int, int]], copies: int) -> ExecSize:
    """The bytes between the later half's first jump and its last, over the copies between
    them: within the fill of the page at either (an executable), and a page more where
    the driver fills more than one run of pages (seen on the H100: one graph's figures
    two pages apart over 32 copies, as if instantiate and upload each took their own).
    Assumed, not tested on a GPU: pages held before are shared between such runs as the
    copies' own are (as earlier copies leave them); held in one run only, and more than
    the earlier half uses up, the figure is that of the other runs alone."""
    (c0, b0), (c1, b1) = _later(jumps)[0], _later(jumps)[-1]
    if c1 == c0:  # within the limits, too few pages taken to tell
        return ExecSize(None, None, copies)
    each = round((b1 - b0) / (c1 - c0))
    return ExecSize(each, -(-(each + PAGE) // (c1 - c0)), copies)
