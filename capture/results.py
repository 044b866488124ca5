"""The results stream: where graph-harness's stdout went, once descriptor 1 is not it.

While a command runs (reports/cli/program.py `main`), descriptor 1 and `sys.stdout` are
pointed at stderr, and the results (a table, the one JSON document of --json, `--csv -`,
`--csv /dev/stdout`) go to a copy of the original descriptor 1. So whatever else writes
to stdout meanwhile, from any thread (a thread a user's factory started, a C library's
printf, a print in a user's `__getattr__` that graph-harness looked up), lands on stderr
and never inside the results: `count --json | jq` holds one document. The per-call
redirection of reports/cli/user_stdout.py stays, for API users who run no command.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from graph_harness.capture.descriptors import hold, release

_state: dict = {"stream": None, "fd": None}


def results_stream() -> TextIO:
    """The stream results go to: the aside copy of stdout while a command runs, else
    `sys.stdout`."""
    return _state["stream"] if _state["stream"] is not None else sys.stdout


def results_descriptor(fd: int) -> int:
    """Descriptor 1 means the results while they are aside (`/dev/stdout`)."""
    return _state["fd"] if fd == 1 and _state["fd"] is not None else fd


@contextlib.contextmanager
def results_aside(*, for_good: bool = False) -> Iterator[object]:
    """For the block: descriptor 1 and sys.stdout are stderr, and the results stream is
    a copy of the stdout there was (yielded). A stdout that is no descriptor (a test's
    capture object) is used as it is, and only sys.stdout is moved. `for_good` (the
    command's own process, which ends next): descriptor 1 and sys.stdout stay on stderr
    after the block, so a thread still printing while the interpreter exits prints there
    too; the results' copy is closed."""
    out = sys.stdout
    try:
        is_one = out is not None and out.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        is_one = False
    saved_fd = wrapper = None
    if is_one:
        with contextlib.suppress(OSError, ValueError):
            out.flush()
        try:
            saved_fd = os.dup(1)
            hold(saved_fd, "the results' copy of stdout")
            os.dup2(2, 1)
        except OSError:  # no stderr to send it to: stdout stays where it is
            if saved_fd is not None and release(saved_fd):
                os.close(saved_fd)
            saved_fd = None
    if saved_fd is not None:
        wrapper = io.TextIOWrapper(
            io.FileIO(saved_fd, "w", closefd=False),
            encoding=out.encoding,
            errors=out.errors,
            line_buffering=out.line_buffering,
            write_through=True,
        )
        _state.update(stream=wrapper, fd=saved_fd)
    else:
        _state.update(stream=out, fd=None)
    moved = sys.stdout
    sys.stdout = sys.stderr
    try:
        yield _state["stream"]
    finally:
        if not for_good:
            sys.stdout = moved
        _state.update(stream=None, fd=None)
        # Closed by a target meanwhile (its guard said so: reports/cli/target.py), its
        # number may hold a file of the target's now: neither flushed into nor closed.
        if saved_fd is not None and release(saved_fd):
            try:
                wrapper.flush()
            except OSError:  # the reader went away: what is left goes nowhere
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, saved_fd)
                os.close(null)
            with contextlib.suppress(OSError, ValueError):
                wrapper.close()
            if not for_good:
                with contextlib.suppress(OSError):
                    os.dup2(saved_fd, 1)
            os.close(saved_fd)
