"""Where a Triton kernel runs: compiled on CUDA tensors, interpreted on CPU tensors.

Each kernel is built twice from one source, explicitly (never through TRITON_INTERPRET):
a `JITFunction` for CUDA tensors, an `InterpretedFunction` (Triton's interpreter, bit for
bit) for CPU tensors. Every launch is announced to the registered listeners (kernel name,
device, grid), so a CPU dispatch counter counts it as one kernel. Each launch passes
`needs_int64_offsets(...)` of the tensors it addresses as the kernel's `INT64_OFFSETS`
constexpr, since int32 offsets wrap past 2**31 elements: docs/builtin-round.md, "Where a
kernel runs"."""

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
