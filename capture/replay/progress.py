"""Which replay tripped a device-side assertion, and what the assertion said.

A CUDA error surfaces at the next sync, and after it the CUDA context is lost. So, at no
sync: after each replay the stream adds one to a device counter and copies it into
pinned host memory (**marks**: after the error, the count of replays that ran to their
end), and stderr (the file descriptor) goes to a temporary file for the window and is
written back at its end (**the assertion's text**). How, and what it costs:
docs/steps-and-check.md, "capture/replay/progress.py".
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

ASSERTION = re.compile(r"Assertion `(.+?)` failed")


class Marks:
    """The replays that ran to their end, counted by the device (module notes), on
    `device` (a graph's capture device: where its replays run)."""

    def __init__(self, device: torch.device | int | str | None = None) -> None:
        import torch  # where marks are made, CUDA is in use

        self._cuda = torch.cuda
        self._done = torch.zeros(1, dtype=torch.long, device=device or "cuda")
        self._seen = torch.zeros(1, dtype=torch.long, pin_memory=True)
        self._index = self._done.device.index

    def mark(self) -> None:
        """After a replay: the count of replays done, in stream order (no sync), on the
        replay's device's current stream, as a replay runs there."""
        if self._cuda.current_device() == self._index:
            self._done.add_(1)
            self._seen.copy_(self._done, non_blocking=True)
            return
        with self._cuda.device(self._index):
            self._done.add_(1)
            self._seen.copy_(self._done, non_blocking=True)

    def done(self) -> int:
        """Replays that ran to their end, as far as the host saw (pinned memory: read with
        no CUDA call, so it can be read after the context is lost)."""
        return int(self._seen.numpy()[0])


@contextlib.contextmanager
def held_stderr() -> Iterator[list[str]]:
    """Stderr's file descriptor into a temporary file while open, written back at the end;
    yields a list that then holds the device assertions' conditions it saw (module notes).
    Where the descriptor cannot be moved (no fd 2, an embedding host), nothing is held."""
    found: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield found
        return
    # a named file: should the process die inside the window (an abort in C++), what it
    # held is still on disk, in the temporary folder under this prefix
    with tempfile.NamedTemporaryFile(prefix="graph-harness-held-stderr-") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield found
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text = held.read()
            _write_back(text)
            found += assertions(text.decode(errors="replace"))


def _write_back(data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(2, view)
        except OSError:
            return
        view = view[n:]


def assertions(text: str) -> list[str]:
    """The distinct conditions of the device assertions in `text`, in order: a kernel
    prints one line per failing thread, all alike."""
    out: list[str] = []
    for m in ASSERTION.finditer(text):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out
