"""What a measurement ran on (device, versions) and when: stamped into every document."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from typing import Any

import torch


def environment(device: torch.device) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": "cpu" if device.type == "cpu" else torch.cuda.get_device_name(device),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
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
