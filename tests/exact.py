"""Exact comparison through integer views, with a message that explains a mismatch."""

import torch


def int_bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bits as int32 (4-byte dtypes) or its own integer dtype. A view with
    the lazy negation bit is resolved first, as clone() does (negation flips only the sign
    bit, so equal resolved bits mean equal memory)."""
    t = t.resolve_neg()
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype.is_floating_point:
        raise TypeError(f"no exact int view for {t.dtype}")
    return t


def assert_bits_equal(actual: torch.Tensor, expected: torch.Tensor, what: str = "") -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    a = int_bits(actual).cpu()
    e = int_bits(expected).cpu()
    bad = (a != e).nonzero()
    if len(bad):
        first = ", ".join(
            f"{tuple(i.tolist())}: got {a[tuple(i)].item():#x} want {e[tuple(i)].item():#x}"
            for i in bad[:5]
        )
        raise AssertionError(f"{what}: {len(bad)} of {a.numel()} elements differ; first: {first}")


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Random garbage bits (never zeros): an unwritten element shows in any comparison."""
    n = t.numel()
    if n:
        bits = torch.randint(-(2**31), 2**31 - 1, (n,), dtype=torch.int32)
        bits[bits == 0] = 0x5A5A5A5A
        if t.element_size() == 4:
            t.view(torch.int32).copy_(bits.view(t.shape).to(t.device))
        else:
            t.copy_(bits.view(t.shape).to(t.dtype).to(t.device))
    return t
