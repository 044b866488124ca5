"""What a measurement ran on (device, versions) and when: stamped into every document."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from datetime import datetime, timezone
from typing import Any

import torch


def triton_version() -> str | None:
    """Triton's version, without importing it where it is not yet imported: its installed
    metadata. Importing triton starts its C++ extension (nanobind), which calls back into
    Python; a Ctrl-C's KeyboardInterrupt raised in such a callback aborts the process
    (exit -6, a core) instead of stopping it, so nothing imports triton just to name it.
    None where it is not installed."""
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
