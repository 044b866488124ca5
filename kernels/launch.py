"""Where a Triton kernel runs: compiled on CUDA tensors, interpreted on CPU tensors.

Each kernel is built twice from one source: a `JITFunction` for CUDA tensors and an
`InterpretedFunction` (Triton's interpreter, the same kernel code run by numpy, bit for
bit) for CPU tensors. Building both explicitly, rather than through `TRITON_INTERPRET`,
means one process can run CUDA kernels and CPU-checked kernels side by side, and an
environment variable never silently changes what runs.

Every launch is announced to the registered listeners (kernel name, device, grid), so
a dispatch counter on a machine without a GPU can count Triton launches as what they
are: one kernel each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

try:
    import triton
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    HAS_TRITON = True
except ImportError:  # pragma: no cover - triton is a Linux dependency
    triton = None
    HAS_TRITON = False

LaunchListener = Callable[[str, torch.device, tuple[int, ...]], None]
_listeners: list[LaunchListener] = []


def add_launch_listener(fn: LaunchListener) -> None:
    _listeners.append(fn)


def remove_launch_listener(fn: LaunchListener) -> None:
    _listeners.remove(fn)


class TritonKernel:
    """One Triton kernel source, launchable on CUDA (compiled) and CPU (interpreted)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        if HAS_TRITON:
            self.compiled = JITFunction(fn)
            self.interpreted = InterpretedFunction(fn)

    def runs_on(self, device: torch.device) -> bool:
        """Whether this kernel (not a reference stand-in) can run on `device`."""
        return HAS_TRITON and device.type in ("cuda", "cpu")

    def launch(
        self, device: torch.device, grid: tuple[int, ...], *args, pdl: bool = False, **kwargs
    ) -> None:
        """Launch on `device`. `pdl=True` launches with programmatic dependent launch
        (Hopper and newer): the kernel may start while its predecessor finishes, and
        waits (`gdc_wait`, its USE_PDL branch) before reading anything. The interpreter
        has no launch overlap to offer, so on the CPU `pdl` changes nothing."""
        if not self.runs_on(device):
            raise RuntimeError(
                f"Triton kernel {self.name} cannot run on {device}: "
                + ("install triton" if not HAS_TRITON else "use a CUDA or CPU tensor")
            )
        for listener in list(_listeners):
            listener(self.name, device, grid)
        if device.type == "cuda":
            if pdl and torch.cuda.get_device_capability(device) < (9, 0):
                raise ValueError(
                    f"programmatic dependent launch needs compute capability >= 9.0; "
                    f"{torch.cuda.get_device_name(device)} has "
                    f"{torch.cuda.get_device_capability(device)}: pass pdl=False"
                )
            if pdl:
                kwargs["launch_pdl"] = True
            with torch.cuda.device(device):
                self.compiled[grid](*args, USE_PDL=pdl, **kwargs)
        else:
            # The interpreter has no warps; launch options are compile-time hints only.
            kwargs.pop("num_warps", None)
            kwargs.pop("num_stages", None)
            # Its own tensor traffic (copies to numpy and back) is not the kernel's work:
            # lift any dispatch mode (an op counter) while it runs.
            with _disable_current_modes():
                self.interpreted[grid](*args, USE_PDL=False, **kwargs)


def triton_kernel(fn: Callable[..., Any]) -> TritonKernel:
    """Decorator: build a kernel for both CUDA and the CPU interpreter."""
    return TritonKernel(fn)
