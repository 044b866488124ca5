"""Steps with a fault planted in them, for check on real graphs (CUDA): a path switched on
the host past the first calls (split_on_the_host), and a kernel (late_kernel.py) that
counts its launches where check's walk does not see, going wrong or stalling after many
of them (late_step; launches reads the count back to the host)."""

from __future__ import annotations

import torch


def split_on_the_host(switch: int = 20, n: int = 64):
    """A decode step in miniature: its position is a device tensor fed at each call, its
    row written into a cache at that position, but its reduction is split once a host
    counter passes `switch` (as a split count or a sliding window's path is chosen on the
    host from a Python int). Eager calls switch; a graph replays the path its capture
    saw. The wrong row stays in the cache, which every later comparison reads."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(n, 256, generator=g).cuda()
    cache = torch.zeros(n, 256, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    out = torch.empty(256, device="cuda")
    state = {"t": 0}

    def step():
        row = x.index_select(0, pos) * 2.0  # [1, 256]
        if state["t"] >= switch:  # the "split" path: another kernel, another result
            row = row + 1.0
        cache.index_copy_(0, pos, row)
        torch.sum(cache, dim=0, out=out)
        state["t"] += 1
        return out

    def reset():
        cache.zero_()
        state["t"] = 0

    step.reset, step.max_steps = reset, n
    step.feed = lambda i: pos.fill_(i)
    return step


_HIDDEN: dict[str, torch.Tensor] = {}  # out of check's walk: reached through _launch only


def _launch(x, out, wrong_after: int, stall_after: int, stall: int) -> None:
    from tests.capture.check.late_kernel import late

    late[(1,)](
        _HIDDEN["count"], x, out, _HIDDEN["junk"], wrong_after, stall_after, stall, 256,
        num_warps=1,
    )  # fmt: skip


def late_step(wrong_after: int = 1 << 30, stall_after: int = 1 << 30, stall: int = 0):
    """A step of one kernel that counts its launches (eager and replayed alike, in a
    counter check's walk does not see): from launch `wrong_after` on it adds 1 to its
    output, from launch `stall_after` on it spins `stall` iterations first."""
    _HIDDEN["count"] = torch.zeros(1, dtype=torch.int32, device="cuda")
    _HIDDEN["junk"] = torch.zeros(1, device="cuda")
    x = torch.randn(256, device="cuda")
    out = torch.empty(256, device="cuda")

    def step():
        _launch(x, out, wrong_after, stall_after, stall)
        return out

    return step


def launches() -> int:
    return int(_HIDDEN["count"].item())
