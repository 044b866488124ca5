"""Inputs for the pack kernels' tests: scores with everything a select copies (ties, NaN
payloads, infinities) and indices with dead (negative) entries."""

import torch

# Odd NaN payloads, both signs, a signalling one: both paths must copy their bits.
NAN_BITS = [0x7FC00000, 0x7FC00001, 0xFFC00000 - 2**32, 0x7F800001, 0x7FFFFFFF]


def make_scores(rows, k, device):
    # Ties (coarse rounding), NaN with odd payloads, -inf, +inf: everything a select copies.
    s = (torch.randn(rows, k) * 4).round() / 4
    bits = s.view(torch.int32)
    pick = torch.rand(rows, k)
    nan = torch.tensor(NAN_BITS, dtype=torch.int32)[torch.randint(len(NAN_BITS), (rows, k))]
    bits[:] = torch.where(pick < 0.03, nan, bits)
    s[(pick >= 0.03) & (pick < 0.06)] = float("-inf")
    s[(pick >= 0.06) & (pick < 0.07)] = float("inf")
    return s.to(device)


def make_indices(rows, k, width, dtype, device, dead=0.2):
    idx = torch.randint(0, width, (rows, k), dtype=torch.int64)
    kill = torch.rand(rows, k) < dead
    idx[kill] = -torch.randint(1, 2**40, (int(kill.sum()),))  # any negative is dead
    return idx.to(dtype).to(device)
