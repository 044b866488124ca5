"""An exact digest of a tensor too large to clone, computed on its own device.

The tensor's bytes are read as 32-bit words, in pieces of CHUNK_WORDS words (4 MiB); each
piece gives two sums h = sum_i a_i * x_i mod 2^64 (int64, wrapping), the a_i drawn once
from a fixed seed in [0, 2^62). A change is missed with probability at most 2^-66 per
piece compared. A digest is [pieces, 2] (a swap of two pieces is seen); memory stays at
one piece's temporaries. The bound's proof: docs/steps-and-check.md,
"capture/state/digest.py".
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

CHUNK_WORDS = 1 << 20  # 32-bit words hashed per piece (4 MiB of data)
HASH_SEED = 0x6A5

_WEIGHTS: dict[torch.device, torch.Tensor] = {}


def _weights(device: torch.device) -> torch.Tensor:
    """[2, CHUNK_WORDS] int64 weights, uniform in [0, 2^62), drawn once per device from a
    generator of our own (the user's RNG is not touched)."""
    w = _WEIGHTS.get(device)
    if w is None:
        g = torch.Generator().manual_seed(HASH_SEED)
        w = torch.randint(0, 2**62, (2, CHUNK_WORDS), generator=g, dtype=torch.int64)
        w = _WEIGHTS[device] = w.to(device)
    return w


def pieces(t: torch.Tensor, limit: int) -> Iterator[torch.Tensor]:
    """`t`'s elements as contiguous 1-D pieces of at most `limit` elements, in a fixed
    order (memory order where the strides allow), copying at most one piece at a time."""
    if t.dim() == 0:
        yield t.reshape(1)
        return
    if t.is_contiguous():
        flat = t.reshape(-1)
        for i in range(0, flat.numel(), limit):
            yield flat[i : i + limit]
        return
    order = sorted(range(t.dim()), key=lambda d: (-t.stride(d), -d))
    p = t.permute(order)
    if p.is_contiguous():  # a transpose: its memory in memory order, no copy
        yield from pieces(p, limit)
        return
    row = max(1, p[0].numel())
    rows = max(1, limit // row)
    for i in range(0, p.shape[0], rows):
        block = p[i : i + rows]
        if block.numel() <= limit:
            yield block.contiguous().reshape(-1)
        else:  # one row is larger than a piece: split it in turn
            yield from pieces(block[0], limit)


def _words(piece: torch.Tensor) -> torch.Tensor:
    """A piece's bytes as 32-bit words (int64), at most CHUNK_WORDS of them."""
    u8 = piece.view(torch.uint8)
    try:
        return u8.view(torch.int32).to(torch.int64)
    except RuntimeError:  # a byte count or an offset not a multiple of 4: copy, zero-padded
        padded = torch.zeros((u8.numel() + 3) // 4 * 4, dtype=torch.uint8, device=u8.device)
        padded[: u8.numel()] = u8
        return padded.view(torch.int32).to(torch.int64)


def digest(t: torch.Tensor) -> torch.Tensor:
    """[pieces, 2] int64: two weighted sums of each piece's 32-bit words (module docstring).
    Two digests compare equal only for tensors of one shape and dtype (the caller's check)."""
    t = t.detach()
    w = _weights(t.device)
    out = []
    for piece in pieces(t, max(1, CHUNK_WORDS * 4 // t.element_size())):
        words = _words(piece)
        out.append((words * w[:, : words.numel()]).sum(dim=1))
    return torch.stack(out)
