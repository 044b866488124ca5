"""Step factories for the updated-executable check's GPU tests (test_updated_gpu.py), each
called as `factory(batch)`.

- `right(batch)`: a decode-like step (a cache row written per call at a position advanced
  in place, a reset, a feed) of elementwise work only: the same kernels at every size, no
  library that picks another kernel, or another launch, by size (a GEMM library may, and
  then an update is refused, or a launch attribute differs: said, not failed). Every
  update succeeds and computes what a fresh executable computes: the check passes.

- `reallocated(batch)`: a step that reads a plan (a [D] scale, 0.5 everywhere) from a
  module-level workspace that the factory allocates anew for every size it builds, the
  previous one dropped once the new one exists, as an engine whose per-size metadata
  buffer is re-allocated between captures does. The eager step reads the workspace of
  the day; each graph reads the one that was current at its capture, by the address
  captured in its kernel's parameters. An update takes those parameters from the new
  graph, so an executable updated to batch B reads what a fresh executable of batch B
  reads: the workspace that was B's, freed since (each but the last size built). That
  is state outside the graph's parameters (its contents), which no update can carry: the
  executables agree with each other and differ from the eager step (freed memory holds
  check's pattern while the walk runs). The check must fail it, naming the size, the
  update that brought the executable there and the tensor, and must not blame the update.
- `one_name(batch)`: a step whose one kernel is `scale_rows` from scale_rows_a.py (times
  2) for batch <= 2 and from scale_rows_b.py (times 3) above: two modules, one kernel name,
  two functions. An update between the two changes the node's function (allowed within
  one context since CUDA 11.2); a check keyed on kernel names takes them for one kernel.
"""

from __future__ import annotations

import torch

D = 32  # features per row
INPUTS = 16  # call i's inputs for i < INPUTS
_PLAN: dict[str, torch.Tensor] = {}


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def reallocated(batch: int = 1):
    """The step of `batch` rows reading the plan of the day (module docstring)."""
    dev = _device()
    g = torch.Generator().manual_seed(2000 + batch)
    w = (torch.randn(D, D, generator=g) / D**0.5).to(dev)  # [D, D]
    inputs = torch.randn(INPUTS, batch, D, generator=g).to(dev)  # [I, B, D] call i's rows
    x = inputs[0].clone()  # [B, D] the static input, fed in place
    # the new workspace after every tensor of this size, before the old one goes: it is
    # never handed the old one's block, and nothing of this size lands in that block
    fresh = torch.full((D,), 0.5, device=dev)  # [D] the plan: one scale per feature
    _PLAN["plan"] = fresh  # the previous size's plan freed here (its last reference)

    @torch.no_grad()
    def step():
        return torch.tanh(x @ w) * _PLAN["plan"]  # [B, D]; a graph keeps its capture's plan

    def feed(i: int):
        x.copy_(inputs[i])

    step.feed = feed
    return step


def right(batch: int = 1):
    """The right step of `batch` rows (module docstring)."""
    dev = _device()
    g = torch.Generator().manual_seed(1000 + batch)
    # [B, D] one weight per feature, repeated per row, not broadcast: a broadcast [D]
    # makes `x * w` contiguous (one vectorized kernel) at batch 1 only, and another kernel
    # at 2 and 4 (seen on an H100), so the functions would change between sizes
    w = torch.randn(D, generator=g).repeat(batch, 1).to(dev)
    inputs = torch.randn(INPUTS, batch, D, generator=g).to(dev)  # [I, B, D] call i's rows
    x = inputs[0].clone()  # [B, D]
    cache = torch.zeros(batch, INPUTS, D, device=dev)  # [B, S, D] a row per call
    pos = torch.zeros(1, dtype=torch.long, device=dev)  # [1] advanced in place

    @torch.no_grad()
    def step():
        cache.index_copy_(1, pos, torch.tanh(x * w).unsqueeze(1))  # cache[:, pos] = h
        pos.add_(1)
        return cache.sum(1)  # [B, D]

    def reset():
        cache.zero_()
        pos.zero_()

    def feed(i: int):
        x.copy_(inputs[i])

    step.reset, step.feed = reset, feed
    return step


def forget_plan() -> None:
    _PLAN.clear()


def one_name(batch: int = 1):
    """The step of `batch` rows through `scale_rows` of module A (batch <= 2) or B."""
    if batch <= 2:
        from tests.capture.sweep.scale_rows_a import scale_rows
    else:
        from tests.capture.sweep.scale_rows_b import scale_rows
    dev = _device()
    g = torch.Generator().manual_seed(3000 + batch)
    inputs = torch.randn(INPUTS, batch, D, generator=g).to(dev)  # [I, B, D]
    x = inputs[0].clone()  # [B, D]
    out = torch.empty(batch, D, device=dev)  # [B, D] the kernel's output, static

    def step():
        scale_rows[(batch,)](x, out, D)
        return out

    def feed(i: int):
        x.copy_(inputs[i])

    step.feed = feed
    return step
