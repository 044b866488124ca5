"""A Triton kernel named `scale_rows` (tests/capture/sweep/updated_steps.py `one_name`):
each row times 2. scale_rows_b.py defines another kernel of the same name, times 3: two
modules, two functions, one name."""

import triton
import triton.language as tl


@triton.jit
def scale_rows(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    offs = row * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2.0)
