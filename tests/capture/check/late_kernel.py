"""A Triton kernel for the soak's GPU tests (test_to_end_gpu.py) that counts its launches in
a device counter and, from a given launch on, writes a wrong result or spins first: a
graph that goes wrong, or stalls, only after many replays. One warp (`num_warps=1` at the
launch), so the counter is read before it is written back."""

import triton
import triton.language as tl

INNER = tl.constexpr(1_000_000)  # spin iterations per unit of `stall`


@triton.jit
def late(count_ptr, x_ptr, out_ptr, junk_ptr, wrong_after, stall_after, stall, N: tl.constexpr):
    c = tl.load(count_ptr)
    offs = tl.arange(0, N)
    y = tl.load(x_ptr + offs) * 2.0
    y = tl.where(c >= wrong_after, y + 1.0, y)
    n = tl.where(c >= stall_after, stall, 0)
    acc = tl.load(junk_ptr)
    for _ in range(n):
        for _ in range(INNER):
            acc = acc * 0.999999 + 1e-6  # a dependent chain: nothing to fold away
    tl.store(junk_ptr, acc)
    tl.store(out_ptr + offs, y)
    tl.store(count_ptr, c + 1)
