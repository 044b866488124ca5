"""What a measurement ran on (device, versions) and when: stamped into every document."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a device is read: `now` is wanted without torch
    import torch


def triton_version() -> str | None:
    """Triton's version, without importing it where it is not yet imported: its installed
    metadata. Importing triton starts its C++ extension (nanobind), which calls back into
    Python; a Ctrl-C's KeyboardInterrupt raised in such a callback aborts the process
    (exit -6, a core) instead of stopping it, so nothing imports triton just to name it.
    None where it is not installed."""
    import importlib.metadata

    mod = sys.modules.get("triton")
    if mod is not None:
        return getattr(mod, "__version__", None)
    for dist in ("triton", "pytorch-triton"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def environment(device: torch.device) -> dict[str, Any]:
    import platform

    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device),
    }
    env["triton"] = triton_version()
    if device.type == "cuda":
        env["cuda_runtime"] = torch.version.cuda
        try:
            from cuda.bindings import driver

            _, v = driver.cuDriverGetVersion()
            env["driver_cuda_version"] = f"{v // 1000}.{v % 1000 // 10}"
            import cuda.bindings

            env["cuda_bindings"] = cuda.bindings.__version__
        except Exception:  # the reader reports the real error when it runs
            pass
    return env


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def cuda_device_seen() -> bool:
    """Whether the CUDA driver shows this process a device (CUDA_VISIBLE_DEVICES
    applied): what `torch.cuda.is_available()` asks, asked of libcuda itself, without
    importing torch (`graph-harness record`'s own process imports none). Starts the driver
    in this process; False where there is none."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return False
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    return count.value > 0
