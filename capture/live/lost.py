"""A CUDA error after which the process's GPU context is lost (a device-side assertion,
an illegal address), and how a recorded process ends on one: in one line, exit 1, after
the recording is written, before CUDA's teardown can abort with a core dump."""

from __future__ import annotations

import contextlib
import os
import sys

_FATAL = ("device-side assert", "illegal memory access", "unspecified launch failure")


class GraphAssertion(RuntimeError):
    """A replay tripped a device-side assertion: the process's GPU context is lost."""


def fatal(e: BaseException) -> bool:
    """Whether `e` is a CUDA error after which the process's GPU context is lost."""
    return any(s in str(e) for s in _FATAL)


def first_line(e: BaseException) -> str:
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return lines[0] if lines else type(e).__name__


def end_process(message: str, e: BaseException) -> None:
    """After a device-side assertion: the recording written, then, in a recorded program's
    process, the process ended in one line (exit 1); in-process (record_graphs), a
    GraphAssertion."""
    from graph_harness.capture.record.boot import booted
    from graph_harness.capture.record.process import stop_all

    stop_all()
    if booted():
        for stream in (sys.stdout, sys.stderr):  # what the program printed is kept
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stderr.write(f"graph-harness record --check: {message}\n")
        sys.stderr.flush()
        os._exit(1)
    raise GraphAssertion(message) from e
