"""The driver's pages: device memory outside the caching allocator (an executable's) is
mapped 2 MiB at a time, so free memory moves by whole pages. Plain arithmetic."""

from __future__ import annotations

PAGE = 2 << 20  # the driver's mapping granularity for device memory (bytes)


def pages(n: float, up: bool = True) -> int:
    """`n` bytes in whole pages, rounded up (or down), as bytes."""
    return (-(-int(n) // PAGE) if up else int(n) // PAGE) * PAGE
