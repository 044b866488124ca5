"""What killed runs left beside an output path: their hidden folders, found by name, each
locked while it is looked at, and emptied of only what its manifest lists.

A run holds an flock on its hidden folder for its whole life (`make_partial`); the kernel
drops it when the run dies, SIGKILL included, so a hidden folder nobody locks belongs to
no live run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from graph_harness.capture.paths import os_reason
from graph_harness.reports.output.manifest import read_manifest, remove_listed

PARTIAL = ".gh-partial"
STEM = 100  # characters of the output's name in its hidden folders' names (NAME_MAX: 255)


def stem(name: str) -> str:
    """The part of an output's name its hidden siblings carry: short enough that the
    hidden name fits where the output's own name does."""
    return name[:STEM]


def lock_folder(folder: Path) -> int | None:
    """Hold an exclusive lock on `folder` for as long as the returned descriptor is open;
    None when another process holds it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def make_partial(real: Path) -> tuple[Path, int]:
    """A new hidden folder beside `real`, and its lock, held until the descriptor closes.
    Another run's cleanup may take the bare folder for a killed run's in the instant
    before it is locked (an empty one is removed): then make another."""
    for _ in range(100):
        tmp = Path(tempfile.mkdtemp(dir=real.parent, prefix=f".{stem(real.name)}.", suffix=PARTIAL))
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue
        except OSError:  # no descriptor left, say: the bare folder just made is ours to remove
            with contextlib.suppress(OSError):
                os.rmdir(tmp)
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # a cleanup holds it for a moment at most
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.rmdir(tmp)  # only while empty: never a folder another run fills
            raise
        if _still_at(tmp, fd):
            return tmp, fd
        os.close(fd)
    raise FileExistsError(f"could not make a folder beside {real}")  # pragma: no cover


def _still_at(path: Path, fd: int) -> bool:
    try:
        here = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino) and there.st_nlink > 0


FRESH_S = 10.0  # a bare hidden folder younger than this may be a live run's, not yet locked


def _just_made(fd: int) -> bool:
    """Whether the folder open at `fd` is bare (nothing in it) and made in the last FRESH_S
    seconds: a run that is about to lock it, not one killed the instant after making it
    (that one is removed by a later run)."""
    if time.time() - os.fstat(fd).st_mtime >= FRESH_S:
        return False
    with os.scandir(fd) as it:
        return next(it, None) is None


def is_partial_of(name: str, real: Path) -> bool:
    # mkdtemp's random part has no dot, so `.o.x.abc.gh-partial` (of --out o.x) is not o's.
    pattern = rf"\.{re.escape(stem(real.name))}\.[A-Za-z0-9_]+{re.escape(PARTIAL)}"
    return re.fullmatch(pattern, name) is not None


def clean_leftovers(real: Path, say: Callable[[str], None] | None, shown: str) -> None:
    """Look at each hidden folder beside `real` that no live run holds, holding its lock
    meanwhile: remove the files its manifest lists (a finished output swapped aside, or a
    run killed while building, which listed each file before making it), then the folder
    if that empties it. An empty one goes too (a run killed the instant after making it),
    and one holding only a first manifest never finished (a full disk, a kill before its
    rename: reports/output/manifest.py); a bare one made in the last FRESH_S seconds is
    left for a later run (a live run may be about to lock it). A folder that is no
    longer at its hidden name once locked is another run's committed output, and left.
    Anything else is left as it is, and each is reported with its path; nothing here
    raises."""
    try:
        entries = [e for e in os.scandir(real.parent) if is_partial_of(e.name, real)]
    except OSError:
        return
    for e in entries:
        path = Path(e.path)
        with contextlib.suppress(OSError):
            if not e.is_dir(follow_symlinks=False):
                continue
        try:
            fd = lock_folder(path)
        except OSError:
            continue  # another run cleaned it first, or it is not ours to open
        if fd is None:
            continue  # a run going on now
        if not _still_at(path, fd) or _just_made(fd):
            # Opened under its hidden name, locked only after its run committed it and let
            # go: it is that run's output now (at --out, or kept beside), not a leftover.
            # Or bare and new: a live run's, in the instant before it locks it.
            os.close(fd)
            continue
        try:
            m = read_manifest(path, dir_fd=fd)
            try:
                left = remove_listed(path, fd)
                what = "removed it" if not left else _left(left, m is not None, path)
            except OSError as err:
                what = f"could not remove it ({os_reason(err)}); remove it yourself: {path}"
        finally:
            os.close(fd)
        if say:
            started = f" (started {m.created} by pid {m.pid})" if m else ""
            say(
                f"found the leftover of an interrupted run beside {shown}: "
                f"{path.name}{started}; {what}"
            )


def _left(left: list[str], manifest: bool, path: Path) -> str:
    if not manifest:
        return (
            "left it as it is: not recognisably ours (it has no manifest of graph-harness's); "
            f"it is at {path}, for you to look at and remove"
        )
    more = " ..." if len(left) > 3 else ""
    return (
        f"left it: it holds {', '.join(left[:3])}{more}, which graph-harness did not write; "
        f"it is at {path}: move those out and the next run removes the rest"
    )
