"""The default random number generators' states: read, set back, and which a call drew
from."""

from __future__ import annotations

import torch


def rng_state() -> dict[str, torch.Tensor]:
    """The default generators' states: the CPU's, and the current CUDA device's once CUDA
    is in use (reading it does not start CUDA)."""
    out = {"cpu": torch.random.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        i = torch.cuda.current_device()
        out[f"cuda:{i}"] = torch.cuda.get_rng_state(i)
    return out


def set_rng_state(saved: dict[str, torch.Tensor]) -> None:
    for where, s in saved.items():
        if where == "cpu":
            torch.random.set_rng_state(s)
        else:
            torch.cuda.set_rng_state(s, where)


def rng_moved(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> list[str]:
    """Which default generators a call drew from, in words."""
    out = []
    for where, a in before.items():
        b = after.get(where)
        if b is None or torch.equal(a, b):
            continue
        if where == "cpu":
            out.append("the CPU default generator")
        else:  # a CUDA state is its seed then its Philox offset, 8 bytes each
            step = int.from_bytes(bytes(b[8:16].tolist()), "little", signed=True)
            step -= int.from_bytes(bytes(a[8:16].tolist()), "little", signed=True)
            out.append(f"the CUDA default generator ({where}: Philox offset +{step})")
    return out
