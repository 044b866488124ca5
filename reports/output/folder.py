"""Output folders a user owns: built aside, marked as ours, swapped in; nothing of theirs lost.

A run builds its folder under a hidden sibling `.NAME.<random>.gh-partial` carrying a
manifest from its first instant, then commits it with signals held off: a new path by
RENAME_NOREPLACE, an empty folder by moving each file in under a manifest, an earlier
output of ours by RENAME_EXCHANGE, the old one's listed files removed after. What `--out`
accepts and refuses, what a failed or killed run leaves and how the next run clears it:
docs/output.md, "How an output folder is written" (the rules this module keeps).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from graph_harness.capture.descriptors import hold, intact, release
from graph_harness.capture.errors import HarnessError
from graph_harness.capture.files import claiming, default_mode
from graph_harness.capture.paths import os_reason
from graph_harness.reports.output.commit import BUSY, OutputConflict, commit_folder, take_current
from graph_harness.reports.output.leftovers import clean_leftovers, make_partial
from graph_harness.reports.output.manifest import Manifest, remove_listed, write_manifest
from graph_harness.reports.output.plan import OutputRefused, plan_output

__all__ = [
    "OutputConflict",
    "OutputRefused",
    "committed_before_stop",
    "plan_output",
    "staged_output",
]

_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# --- the staged folder --------------------------------------------------------------------------


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP off for the block: each is recorded and raised
    again once the block is done. Python runs signal handlers in the main thread
    whatever thread the kernel picks (a mask would not stop that once torch has started
    threads), so the handlers themselves are swapped, on the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread can set handlers; ours are its to keep
        return
    caught: list[int] = []
    old = {s: signal.signal(s, lambda n, f: caught.append(n)) for s in _HELD}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for n in caught[:1]:
            signal.raise_signal(n)  # now, to the handler that was there before


_OUTCOME = "graph_harness_output_outcome"


def committed_before_stop(e: BaseException) -> str | None:
    """What the commit did, when `e` is a signal it held off and raised once it was done:
    the run stopped with its output in place, or kept beside (say so, never "nothing
    partial"). None when the signal came before the commit: nothing of the run is left."""
    return getattr(e, _OUTCOME, None)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@contextlib.contextmanager
def staged_output(
    out: Path | None,
    force: bool,
    *,
    command: str = "",
    say: Callable[[str], None] | None = None,
) -> Iterator[Path | None]:
    """Yield a hidden folder to fill (write its files through capture/files.py, which
    lists each in the manifest first); on success it becomes `out` (see the module
    docstring). `out=None` yields None and writes nothing. `say` gets notes for the user
    (leftovers found, an old output that could not all be removed, what a failed run could
    not remove of its own folder)."""
    if out is None:
        yield None
        return
    plan = plan_output(Path(out), force)
    clean_leftovers(plan.real, say, plan.shown)
    made: list[Path] = []
    tmp = lock = old = None
    committed = False
    claimed: set[str] = set()
    try:
        with _signals_deferred():  # no instant at which a signal leaves a bare folder
            _make_parents(plan.real.parent, made)
            tmp, lock = make_partial(plan.real)  # locked until this run ends: a live run's
            born = os.fstat(lock)
            hold(lock, "its output folder's lock")
            os.chmod(tmp, default_mode(folder=True))
            manifest = Manifest(command, _now(), socket.gethostname(), os.getpid(), False, ())
            write_manifest(tmp, manifest)

        def record(name: str) -> None:
            if name not in claimed:
                claimed.add(name)
                write_manifest(tmp, dataclasses.replace(manifest, files=tuple(sorted(claimed))))

        with claiming(tmp, record):
            yield tmp
        if not intact(lock):
            raise HarnessError(
                f"the lock on this run's output folder was closed while it ran (by the "
                f"step's code: os.closerange?), so {plan.shown} was not written"
            )
        old = take_current(plan)  # waits (interruptibly) for a commit going on at the path
        outcome = ""  # what the commit did, for a signal it held off (raised once it is done)
        try:
            with _signals_deferred():
                files = tuple(sorted(n for n in claimed if (tmp / n).is_file()))
                write_manifest(tmp, dataclasses.replace(manifest, complete=True, files=files))
                committed = True  # from here on tmp is either `out`, kept beside it, or the old one
                try:
                    left = commit_folder(tmp, plan, old, lock)
                except OutputConflict as e:
                    outcome = str(e)
                    raise
                outcome = "; ".join(filter(None, [f"{plan.shown} holds its output", left]))
        except BaseException as e:
            if outcome and not isinstance(e, OutputConflict):  # the signal, raised now
                setattr(e, _OUTCOME, outcome)
            raise
        if left and say:
            say(left)
    except OSError as e:
        _as_shown(e, tmp, plan.shown)
        raise
    finally:
        if old is not None and old is not BUSY:
            os.close(old[0])
        if lock is not None and not release(lock):
            lock = _reopen(tmp, born)  # closed by a target: its number is not ours now
        if not committed and tmp is not None and lock is not None:
            _remove_unfinished(tmp, lock, say)
        if lock is not None:
            os.close(lock)
        for p in reversed(made):
            with contextlib.suppress(OSError):
                p.rmdir()  # only if still empty: a folder we made for nothing


def _remove_unfinished(tmp: Path, lock: int, say: Callable[[str], None] | None) -> None:
    """A run's own folder that was never committed, removed through the lock's descriptor:
    whatever its name now, this run's own folder. Its manifest lists every file made (a
    claim that failed made none); without one, a first manifest never finished is all
    there is, and goes too."""
    why = None
    try:
        if left := remove_listed(tmp, lock):
            why = f"it holds {', '.join(left[:3])}, which graph-harness did not write"
    except OSError as e:
        why = f"it could not be removed ({os_reason(e)})"
    if why and say:
        with contextlib.suppress(OSError):  # the run's own error still goes up
            say(f"this run's unfinished folder is left at {tmp}: {why}")


def _as_shown(e: OSError, tmp: Path | None, shown: str) -> None:
    """A file of the hidden folder named in `e` (a full disk: capture/files.py names the
    file) as the user named the output: the hidden folder is gone when they read it."""
    name = e.filename
    if tmp is not None and isinstance(name, str) and name.startswith(f"{tmp}{os.sep}"):
        e.filename = os.path.join(shown, name[len(str(tmp)) + 1 :])


def _reopen(tmp: Path, born: os.stat_result) -> int | None:
    """This run's folder opened and locked again by its path, if it is still the one
    made (`born`) and no one else holds it; else None, and it is left."""
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    try:
        if (st.st_dev, st.st_ino) != (born.st_dev, born.st_ino):
            raise OSError("another folder")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _make_parents(parent: Path, made: list[Path]) -> None:
    """Make the folders missing above the output, each added to `made` as it is made, so
    that one failing midway (a full disk) leaves the caller the list of what to remove."""
    for p in [*reversed(parent.parents), parent]:
        if not p.exists():
            p.mkdir()
            made.append(p)
