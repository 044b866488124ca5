"""A Triton kernel that does nothing: its graph node costs only dispatch.

The replay chains (capture/replay/chains.py) time chains of it to price one kernel node. Under
programmatic dependent launch it still takes part in the handshake, as a real kernel would.
"""

from __future__ import annotations

from graph_harness.kernels.launch import HAS_TRITON, triton_kernel

if HAS_TRITON:
    import triton.language as tl

    # x_ptr bare (noqa): Triton reads an annotation as the type to compile for.
    @triton_kernel
    def empty_kernel(x_ptr, USE_PDL: tl.constexpr) -> None:  # noqa: ANN001
        if USE_PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
