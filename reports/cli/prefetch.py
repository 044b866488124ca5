"""Modules a command will import later, imported on a thread while it waits for something
else: `record` waits for the program it runs, whose own start-up (torch's import) takes
longer than pandas' and matplotlib's, which its tables and report need once it has run. On
a machine of several cores they then cost the command's wall time nothing.

The thread only imports, while the command's own thread waits for the program (and reads
what it wrote, with modules already imported); the command waits for the thread before it
renders. A module that fails to import is left to fail where it is needed. A signal is
the main thread's: a KeyboardInterrupt never lands inside an import's C++ callback here
(reports/cli/program.py's note)."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def prefetched(names: list[str]) -> Iterator[None]:
    """Import `names`, in order, on a thread while the block runs. At its end, the thread
    starts no other import (what is left is imported where it is needed, if it is: a short
    program's wait hid nothing), and the one under way is waited for."""
    if not names:
        yield
        return
    done = threading.Event()
    thread = threading.Thread(target=_import_all, args=(names, done), name="graph-harness-prefetch")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _import_all(names: list[str], done: threading.Event) -> None:
    for name in names:
        if done.is_set():
            return
        with contextlib.suppress(Exception):
            importlib.import_module(name)
