"""While the user's code runs, its stdout is stderr: graph-harness's stdout carries
results alone (a table, or the one JSON document of --json), whatever the user's module,
factory or step prints, through Python (`print`, sys.stdout) or through descriptor 1 (a C
library's printf, os.write(1, ...))."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from graph_harness.capture.descriptors import hold, release

if TYPE_CHECKING:
    from typing import TextIO

_depth = 0  # nested calls (a step called inside the factory) redirect once
_lock = threading.Lock()


_libc: list = []


def _libc_flush() -> None:
    """Flush C's stdio buffers (a C library's printf waits there for a newline or exit)."""
    with contextlib.suppress(OSError, AttributeError):
        if not _libc:
            _libc.append(ctypes.CDLL(None))
        _libc[0].fflush(None)


def _flush(stream: TextIO | None) -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):
        if stream is not None:
            stream.flush()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send stdout (sys.stdout and descriptor 1) to stderr for the block."""
    global _depth
    with _lock:
        _depth += 1
        outer = _depth == 1
    if not outer:
        try:
            yield
        finally:
            with _lock:
                _depth -= 1
        return
    saved_stream = sys.stdout
    _flush(saved_stream)
    _libc_flush()
    saved_fd = None
    try:
        saved_fd = os.dup(1)
        hold(saved_fd, "the stdout saved around its call")
        os.dup2(2, 1)
    except OSError:  # no stderr to send it to (2>&-): leave descriptor 1 as it is
        if saved_fd is not None and release(saved_fd):
            os.close(saved_fd)
        saved_fd = None
    sys.stdout = sys.stderr
    try:
        yield
    finally:
        _flush(sys.stdout)
        _libc_flush()
        sys.stdout = saved_stream
        # A target that closed it (os.closerange) is said by its guard (reports/cli/target.py);
        # descriptor 1 then stays on stderr.
        if saved_fd is not None and release(saved_fd):
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
        with _lock:
            _depth -= 1
