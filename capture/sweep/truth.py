"""The graph memory a sweep's ladder truly took: its shared pool after the last size, and its
executables, read from two phases because the driver reuses pages (docs/sweep.md, "Estimators
and start-up"). Plain arithmetic on the sweep's shared-pool rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SharedRow:
    """One size captured into the ladder's shared pool (capture order, largest first):
    the pool reserved after it, what it added (None for a pool read only once, Inductor's)
    and what is in use; its executable's bytes, the same size's executable made first in
    its own pool (`own_exec_bytes`), and the free memory its capture took (`free_drop`:
    vLLM's sample); None where not read."""

    batch: int
    total_reserved: int
    adds: int | None
    total_allocated: int
    exec_bytes: int | None = None
    own_exec_bytes: int | None = None
    free_drop: int | None = None


def true_execs(shared: Sequence[SharedRow]) -> list[int | None]:
    """The executables' memory after each of the shared pool's captures: free memory lost
    to them. The driver hands an executable the pages a destroyed one left, with no drop:
    the shared pool's own readings miss what reused the own-pool executables' pages, and
    those (`own_exec_bytes`: the same sizes' executables made first, all kept) miss what
    reused pages from before. Each sum is at most the truth: the larger is taken (None
    once a shared reading is missing)."""
    out: list[int | None] = []
    mine: int | None = 0
    own: int | None = 0
    for r in shared:
        mine = None if mine is None or r.exec_bytes is None else mine + r.exec_bytes
        own = None if own is None or r.own_exec_bytes is None else own + r.own_exec_bytes
        out.append(None if mine is None else max(mine, own or 0))
    return out


def true_total(shared: Sequence[SharedRow]) -> int | None:
    """The shared pool after its last capture plus every executable's memory (true_execs);
    None where the rows do not hold both."""
    execs = true_execs(shared)
    if not execs or execs[-1] is None:
        return None
    return shared[-1].total_reserved + execs[-1]
