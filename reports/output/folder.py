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
import functools
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
from graph_harness.reports.output.plan import OutputRefused, Plan, plan_output

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
    run = _Staged()
    try:
        manifest = _start(run, plan, command)
        with claiming(run.tmp, functools.partial(_claim, run, manifest)):
            yield run.tmp
        if not intact(run.lock):
            raise HarnessError(
                f"the lock on this run's output folder was closed while it ran (by the "
                f"step's code: os.closerange?), so {plan.shown} was not written"
            )
        run.old = take_current(plan)  # waits (interruptibly) for a commit going on at the path
        left = _commit_held(run, plan, manifest)
        if left and say:
            say(left)
    except OSError as e:
        _as_shown(e, run.tmp, plan.shown)
        raise
    finally:
        _end(run, say)


@dataclasses.dataclass
class _Staged:
    """What a run has made and holds so far, for its end whatever happens: the parent
    folders it made, its hidden folder, the lock on it (and what it was, to reopen it),
    the output at the path it locked, whether its commit began, the names it claimed."""

    made: list[Path] = dataclasses.field(default_factory=list)
    tmp: Path | None = None
    lock: int | None = None  # locked until this run ends: a live run's
    born: os.stat_result | None = None
    old: tuple[int, str] | None = None
    committed: bool = False  # from then on tmp is either `out`, kept beside it, or the old one
    claimed: set[str] = dataclasses.field(default_factory=set)


def _start(run: _Staged, plan: Plan, command: str) -> Manifest:
    """The hidden folder made, locked and given its first manifest, with signals held
    off: no instant at which a signal leaves a bare folder."""
    with _signals_deferred():
        _make_parents(plan.real.parent, run.made)
        run.tmp, run.lock = make_partial(plan.real)
        run.born = os.fstat(run.lock)
        hold(run.lock, "its output folder's lock")
        os.chmod(run.tmp, default_mode(folder=True))
        manifest = Manifest(command, _now(), socket.gethostname(), os.getpid(), False, ())
        write_manifest(run.tmp, manifest)
    return manifest


def _claim(run: _Staged, manifest: Manifest, name: str) -> None:
    """A file's name listed in the manifest before the file is made."""
    if name not in run.claimed:
        run.claimed.add(name)
        write_manifest(run.tmp, dataclasses.replace(manifest, files=tuple(sorted(run.claimed))))


def _commit_held(run: _Staged, plan: Plan, manifest: Manifest) -> str | None:
    """The manifest completed and the folder committed with signals held off; a signal
    held off meanwhile carries what the commit did (committed_before_stop). Returns a
    note when the replaced output could not all be removed."""
    tmp = run.tmp
    outcome = ""  # what the commit did, for a signal it held off (raised once it is done)
    try:
        with _signals_deferred():
            files = tuple(sorted(n for n in run.claimed if (tmp / n).is_file()))
            write_manifest(tmp, dataclasses.replace(manifest, complete=True, files=files))
            run.committed = True
            try:
                left = commit_folder(tmp, plan, run.old, run.lock)
            except OutputConflict as e:
                outcome = str(e)
                raise
            outcome = "; ".join(filter(None, [f"{plan.shown} holds its output", left]))
    except BaseException as e:
        if outcome and not isinstance(e, OutputConflict):  # the signal, raised now
            setattr(e, _OUTCOME, outcome)
        raise
    return left


def _end(run: _Staged, say: Callable[[str], None] | None) -> None:
    """Whatever happened: the old output's lock let go, an uncommitted folder removed,
    this run's lock let go, and the parent folders it made removed if still empty."""
    if run.old is not None and run.old is not BUSY:
        os.close(run.old[0])
    lock = run.lock
    if lock is not None and not release(lock):
        lock = _reopen(run.tmp, run.born)  # closed by a target: its number is not ours now
    if not run.committed and run.tmp is not None and lock is not None:
        _remove_unfinished(run.tmp, lock, say)
    if lock is not None:
        os.close(lock)
    for p in reversed(run.made):
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
