"""One executable's device memory, resolved below the driver's 2 MiB page.

The driver gives executables memory in 2 MiB pages, several to a page: one instantiate
reads as 0 or a page, and a page a destroyed executable freed goes to the next with no
drop in free memory. So copies of one kept graph are instantiated (torch's flag, auto-free
on launch) and uploaded one at a time, free memory read after each: the first copy that
takes a page is where the pages held before ran out; the bytes taken between that jump and
the last, over the copies made between them, are one executable's, to within one
executable over that many copies (the page's fill at either jump). docs/sweep.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from graph_harness.capture.graph.lifecycle import ok, runtime

AUTO_FREE_ON_LAUNCH = 1  # cudaGraphInstantiateFlagAutoFreeOnLaunch: torch's instantiate
SPAN = 32  # copies between the first and the last jump: the bytes to 1/SPAN of their own


@dataclass(frozen=True)
class ExecSize:
    """Bytes of one executable (None where fewer than two pages were taken within the
    limits), to within `spread`, over `copies` copies; `most`, at most that many bytes
    (from the copies after the first page taken; None where none was: the pages held
    before are not known)."""

    bytes: int | None
    spread: int | None
    copies: int
    most: int | None


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
            if len(jumps) > 1 and jumps[-1][0] - jumps[0][0] >= SPAN:
                break
    finally:
        for ex in made:
            rt.cudaGraphExecDestroy(ex)
    after = len(made) - 1 - jumps[0][0] if jumps else 0  # copies after the first page taken
    most = -(-(taken - jumps[0][1]) // after) if after > 0 else None
    if len(jumps) < 2:
        return ExecSize(None, None, len(made), most)
    (c0, b0), (c1, b1) = jumps[0], jumps[-1]
    each = round((b1 - b0) / (c1 - c0))
    return ExecSize(each, -(-each // (c1 - c0)), len(made), most)
