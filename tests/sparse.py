"""Large buffers whose pages stay untouched: views past 2**31 elements on a small machine.

An anonymous private mapping costs address space, not memory: a page is allocated only
when written, and reading an untouched page maps the shared zero page. Huge pages are
refused for the mapping, else one write would fault in 2 MB. Triton's interpreter passes
CPU tensors through without copying their storage, so a kernel over a sparse view touches
only the pages its elements sit on.
"""

from __future__ import annotations

import mmap

import pytest
import torch

GiB = 1 << 30


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (0 where there is none to read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def sparse_cpu_bytes(nbytes: int, *, touch_budget: int = 2 * GiB) -> torch.Tensor:
    """A uint8 CPU tensor of `nbytes` over an anonymous mapping; skips the test (with the
    reason) where the mapping is refused or less than `touch_budget` of memory is
    available for the pages the test will write. The tensor keeps the mapping alive."""
    if available_bytes() < touch_budget:
        pytest.skip(f"needs {touch_budget / GiB:.0f} GiB of available memory (MemAvailable)")
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    try:
        mm = mmap.mmap(-1, nbytes, flags=flags)
    except (OSError, OverflowError, ValueError) as e:
        pytest.skip(f"cannot map {nbytes / GiB:.1f} GiB of address space: {e}")
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mm.madvise(mmap.MADV_NOHUGEPAGE)
    return torch.frombuffer(mm, dtype=torch.uint8)


def require_cuda_free(nbytes: int, *, margin: int = 2 * GiB) -> None:
    """Skip the test where the GPU has less than `nbytes + margin` free."""
    free, _ = torch.cuda.mem_get_info()
    if free < nbytes + margin:
        pytest.skip(
            f"needs {(nbytes + margin) / GiB:.1f} GiB free on the GPU, has {free / GiB:.1f}"
        )


def sparse_cuda_bytes(nbytes: int) -> torch.Tensor:
    """A uint8 CUDA tensor of `nbytes`, left unwritten (cudaMalloc commits device memory,
    so unlike the CPU mapping it must fit: the test is skipped where it does not)."""
    require_cuda_free(nbytes)
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")
