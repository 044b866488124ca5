"""The command's standard descriptors: closed ones (`>&-`) put on /dev/null before anything
opens a file, and descriptors pointed at /dev/null once what they held cannot be written."""

from __future__ import annotations

import contextlib
import os


def plug_closed_streams() -> set[int]:
    """Descriptors 0-2 that were closed (`>&-`), now each on /dev/null: a file opened
    later must never become stdout by taking the lowest free descriptor."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            closed.add(fd)
    return closed


def plug(*fds: int) -> None:
    """Point each descriptor at /dev/null, so what is still buffered for it goes nowhere
    instead of raising again at exit."""
    null = os.open(os.devnull, os.O_WRONLY)
    for fd in fds:
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)
