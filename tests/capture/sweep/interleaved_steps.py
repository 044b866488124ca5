"""--target factories for the interleaved check's tests (`sweep --check interleaved`): a
decode-like step of `batch` rows with a static KV-like cache, a position advanced in
place, a reset and a feed, built clean, or with a workspace defect planted.

- `clean(batch)`: every size owns its cache. Its graphs, captured largest first into one
  pool, replay in any order: the interleaved check passes.
- `planted(batch)`: the cache is carved from one module-level workspace that the factory
  re-allocates for each size it builds, handing it out again from its start, though the
  larger size built before still holds its graph over that memory: what a re-allocated
  workspace whose freed memory the allocator hands to the next size does, made
  deterministic (a real allocator's reuse depends on what else is free). Each size
  alone is right: its own check (`--check`, each size checked as soon as it is built)
  passes. Taking turns, a smaller size's reset and replays write rows of a larger size's
  cache between two of its calls (and the larger's reset the smaller's), and the next
  call of the size written over differs from its eager call.

Both run on the CPU too (the sweep's CPU path, and the interleaved check's unit tests
with stand-in graphs).
"""

from __future__ import annotations

import torch

D = 32  # features per row
POSITIONS = 32  # cache positions: more than any run of calls from a reset takes here
INPUTS = 16  # call i's inputs for i < INPUTS (a trajectory of at most 16 calls)


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _step(batch: int, cache: torch.Tensor):
    """The step of `batch` rows over `cache` ([batch, POSITIONS, D], static)."""
    dev = cache.device
    g = torch.Generator().manual_seed(1000 + batch)  # weights and inputs differ by size
    w = (torch.randn(D, D, generator=g) / D**0.5).to(dev)  # [D, D]
    inputs = torch.randn(INPUTS, batch, D, generator=g).to(dev)  # [I, B, D] call i's rows
    x = inputs[0].clone()  # [B, D] the static input, fed in place
    pos = torch.zeros(1, dtype=torch.long, device=dev)  # [1] the position, advanced in place

    @torch.no_grad()
    def step():
        h = torch.tanh(x @ w)  # [B, D]
        cache.index_copy_(1, pos, h.unsqueeze(1))  # cache[:, pos] = h
        pos.add_(1)
        return cache.sum(1)  # [B, D]: every row written since the reset

    def reset():  # in place: the graph keeps the addresses it captured
        cache.zero_()
        pos.zero_()

    def feed(i: int):
        x.copy_(inputs[i])

    step.reset, step.feed = reset, feed
    return step


def clean(batch: int = 1):
    """Each size's own cache."""
    cache = torch.zeros(batch, POSITIONS, D, device=_device())  # [B, S, D]
    return _step(batch, cache)


_WORKSPACE: dict[str, torch.Tensor] = {}


def planted(batch: int = 1):
    """The cache carved from the workspace, handed out from its start for every size built
    (module docstring): sizes built after a larger one share its rows."""
    need = batch * POSITIONS * D
    ws = _WORKSPACE.get("buf")
    if ws is None or ws.numel() < need:  # grown for a larger size; else re-carved from 0
        ws = _WORKSPACE["buf"] = torch.zeros(need, device=_device())
    cache = ws[:need].view(batch, POSITIONS, D)  # [B, S, D]: rows 0..B-1 of every size's
    return _step(batch, cache)


def forget_workspace() -> None:
    """A fresh workspace for the next sweep of `planted` in this process."""
    _WORKSPACE.clear()
