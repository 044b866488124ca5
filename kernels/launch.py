"""Where a Triton kernel runs: compiled on CUDA tensors, interpreted on CPU tensors.

Each kernel is built twice from one source: a `JITFunction` for CUDA tensors and an
`InterpretedFunction` (Triton's interpreter, the same kernel code run by numpy, bit for
bit) for CPU tensors. Building both explicitly, rather than through `TRITON_INTERPRET`,
means one process can run CUDA kernels and CPU-checked kernels side by side, and an
environment variable never silently changes what runs.

Every launch is announced to the registered listeners (kernel name, device, grid), so
a dispatch counter on a machine without a GPU can count Triton launches as what they
are: one kernel each.

Offset width. A kernel addresses element `i` of a tensor as `ptr + i * stride` with
Triton's integer types: a block index and `tl.arange` are int32, and so is a stride or
size argument below 2**31. When every operand fits in int32 the product is computed in
int32, so a view whose extent passes 2**31 elements (a column stride of 2**16 over
2**15 + 64 columns, say) wraps to a negative offset and reads or writes outside the
tensor. Each launch therefore asks `needs_int64_offsets(...)` of the tensors it
addresses and passes the answer as the kernel's `INT64_OFFSETS` constexpr: True widens
the element offsets to int64 before any multiply. The common case (every tensor's
largest offset below 2**31) keeps its 32-bit math and its compiled kernel; the wide one
is a second specialization of the same source, compiled on first use.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from graph_harness.kernels.pdl import launch_with_pdl, record

try:
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    HAS_TRITON = True
except ImportError:  # pragma: no cover - triton is a Linux dependency
    triton = None
    HAS_TRITON = False

INT32_LIMIT = 2**31  # the first value int32 cannot hold (kernels/checks.py uses it too)

LaunchListener = Callable[[str, torch.device, tuple[int, ...]], None]
# Per thread and task: a dispatch counter in one thread must not hear another's launches.
_listeners: contextvars.ContextVar[tuple[LaunchListener, ...]] = contextvars.ContextVar(
    "graph_harness_launch_listeners", default=()
)


def add_launch_listener(fn: LaunchListener) -> None:
    _listeners.set((*_listeners.get(), fn))


def remove_launch_listener(fn: LaunchListener) -> None:
    listeners = list(_listeners.get())
    listeners.remove(fn)
    _listeners.set(tuple(listeners))


class TritonKernel:
    """One Triton kernel source, launchable on CUDA (compiled) and CPU (interpreted)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.name = fn.__name__
        if HAS_TRITON:
            self.compiled = JITFunction(fn)
            self.interpreted = InterpretedFunction(fn)

    def runs_on(self, device: torch.device) -> bool:
        """Whether this kernel (not a reference stand-in) can run on `device`."""
        return HAS_TRITON and device.type in ("cuda", "cpu")

    def launch(
        self,
        device: torch.device,
        grid: tuple[int, ...],
        *args: object,
        pdl: bool = False,
        **kwargs: object,
    ) -> None:
        """Launch on `device`. `pdl=True` builds the kernel's USE_PDL branch (it waits,
        `gdc_wait`, before reading anything and signals its dependents early) and
        launches it with programmatic dependent launch (Hopper and newer), so it may
        start while its predecessor finishes; under capture only where the predecessor
        is a signalling launch of ours (kernels/pdl.py), elsewhere plainly. The
        interpreter has no launch overlap to offer, so on the CPU `pdl` changes nothing."""
        if not self.runs_on(device):
            raise RuntimeError(
                f"Triton kernel {self.name} cannot run on {device}: "
                + ("install triton" if not HAS_TRITON else "use a CUDA or CPU tensor")
            )
        for listener in _listeners.get():
            listener(self.name, device, grid)
        if device.type == "cuda":
            if pdl and torch.cuda.get_device_capability(device) < (9, 0):
                raise ValueError(
                    f"programmatic dependent launch needs compute capability >= 9.0; "
                    f"{torch.cuda.get_device_name(device)} has "
                    f"{torch.cuda.get_device_capability(device)}: pass pdl=False"
                )
            with torch.cuda.device(device):
                cid = None
                if pdl:
                    stream = torch.cuda.current_stream(device)
                    kwargs["launch_pdl"], cid = launch_with_pdl(stream)
                self.compiled[grid](*args, USE_PDL=pdl, **kwargs)
                if pdl:
                    record(stream, cid)
        else:
            # The interpreter has no warps; launch options are compile-time hints only.
            kwargs.pop("num_warps", None)
            kwargs.pop("num_stages", None)
            # Its own tensor traffic (copies to numpy and back) is not the kernel's work:
            # lift any dispatch mode (an op counter) while it runs.
            with _disable_current_modes():
                self.interpreted[grid](*args, USE_PDL=False, **kwargs)


def max_element_offset(t: torch.Tensor) -> int:
    """The largest element offset, counted from `t.data_ptr()`, that an element of `t`
    sits at: the sum over dims of (size - 1) * |stride|; 0 for an empty tensor.

    Offsets are relative to the data pointer the kernel receives, which already includes
    the storage offset, so a view deep inside a large storage costs nothing here. Torch
    has no negative strides (`abs` only keeps the bound honest if it ever does); a zero
    stride (an expanded dim) adds nothing, however long the dim."""
    if t.numel() == 0:
        return 0
    return sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def needs_int64_offsets(*tensors: torch.Tensor | None) -> bool:
    """Whether a launch addressing these tensors needs 64-bit element offsets: True when
    any tensor's largest element offset reaches 2**31 (int32 holds at most 2**31 - 1).
    `None` entries (absent optional tensors) are skipped. Masked-off lanes past a
    tensor's end may compute wrapped offsets either way; they are never dereferenced."""
    return any(max_element_offset(t) >= INT32_LIMIT for t in tensors if t is not None)


def triton_kernel(fn: Callable[..., Any]) -> TritonKernel:
    """Decorator: build a kernel for both CUDA and the CPU interpreter."""
    return TritonKernel(fn)
