"""What a measurement ran on (device, versions) and when: stamped into every document."""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a device is read: `now` is wanted without torch
    import ctypes

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

    driver = _driver()
    if driver is None:
        return False
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return False
    return count.value > 0


# Device files a GPU that torch could use shows on Linux: NVIDIA's (/dev/nvidia0 ...,
# /dev/nvidiactl), WSL's (/dev/dxg) and ROCm's (/dev/kfd: a ROCm torch answers
# torch.cuda.is_available() too).
_GPU_DEVICE_FILES = ("nvidia*", "dxg", "kfd")


def cuda_surely_absent(environ: Mapping[str, str] | None = None, dev: str = "/dev") -> bool:
    """True only where torch.cuda.is_available() is surely False, known without importing
    torch or starting the driver: on Linux, where CUDA_VISIBLE_DEVICES hides every device
    (empty, or a first entry of -1: the driver stops at an invalid entry), or where no GPU
    device file is there and the driver's library cannot be loaded. False whenever in
    doubt: the caller then asks torch (a false refusal is worse than a slow one)."""
    if not sys.platform.startswith("linux"):
        return False
    environ = os.environ if environ is None else environ
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and (visible == "" or visible.split(",")[0].strip() == "-1"):
        return True
    if any(glob.glob(os.path.join(dev, pattern)) for pattern in _GPU_DEVICE_FILES):
        return False
    return _driver() is None


def _driver() -> ctypes.CDLL | None:
    """The CUDA driver's library, loaded (dlopen only: nothing is started), or None."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None
