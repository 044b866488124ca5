"""A Triton kernel named `scale_rows`, like scale_rows_a.py's but another function: each
row times 3 (tests/capture/sweep/updated_steps.py `one_name`)."""

import triton
import triton.language as tl


@triton.jit
def scale_rows(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    offs = row * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 3.0)
