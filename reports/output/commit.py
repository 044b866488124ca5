"""The commit: a run's finished hidden folder put at the output path, by whatever is there
(nothing, an empty folder, an earlier output of ours), never over anything else; where
the path changed meanwhile, the result kept beside it (OutputConflict). Called by
staged_output (reports/output/folder.py) with signals held off; the rules it keeps:
docs/output.md, "How an output folder is written"."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import time
from pathlib import Path

from graph_harness.capture.errors import HarnessError
from graph_harness.capture.paths import os_reason
from graph_harness.reports.output.leftovers import stem
from graph_harness.reports.output.manifest import (
    MANIFEST,
    MANIFEST_NEW,
    foreign_entries,
    read_manifest,
    remove_listed,
    write_manifest,
)
from graph_harness.reports.output.plan import Plan
from graph_harness.reports.output.renames import exchange, move_noreplace, rename_noreplace

LOCK_WAIT_S = 30.0  # how long a replace waits for another run's commit at the same path


class OutputConflict(HarnessError, RuntimeError):
    """The output path changed under the run; its result was kept elsewhere."""


BUSY = (-1, "busy")


def take_current(plan: Plan) -> tuple[int, str] | None:
    """Lock the folder now at the path, if it is one the commit may replace: (its
    descriptor, "empty" or "ours"), else None. Another run committing there, or the run
    that made it, holds its lock a moment: wait for it, up to LOCK_WAIT_S."""
    if plan.existing == "none" and not plan.force:
        return None
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            # never through a link: a link put at the path meanwhile is not the folder the
            # plan found (plan_output resolved any link there before), and the commit
            # keeps this run's result beside it
            fd = os.open(plan.real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None  # gone, a link, or not a folder now: the commit sees to it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() > deadline:
                return BUSY  # the commit keeps this run's result beside, saying so
            time.sleep(0.002)
            continue
        try:
            here, there = os.stat(plan.real, follow_symlinks=False), os.fstat(fd)
        except FileNotFoundError:
            here = there = None
        if here is None or (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            os.close(fd)  # swapped meanwhile: take the one there now, for a while
            if time.monotonic() > deadline:
                return None  # it keeps changing: the commit keeps the result beside
            time.sleep(0.002)
            continue
        state = _state(plan.real, fd)
        if state is None or (state == "ours" and not plan.force):
            os.close(fd)
            return None  # not ours to replace: the commit keeps the result beside
        return fd, state


def _state(folder: Path, fd: int) -> str | None:
    """What the folder open at `fd` holds: nothing ("empty"), an output of ours and
    nothing else ("ours"), or anything else (None)."""
    with os.scandir(fd) as it:
        if next(it, None) is None:
            return "empty"
    return "ours" if foreign_entries(folder, dir_fd=fd) == [] else None


def commit_folder(tmp: Path, plan: Plan, old: tuple[int, str] | None, lock: int) -> str | None:
    """Put `tmp` at `plan.real`; returns a note when the replaced output could not all be
    removed. Nothing here raises after the new output is in place."""
    real = plan.real
    if old is None:
        try:
            rename_noreplace(tmp, real)
        except FileExistsError:
            why = "appeared" if plan.existing == "none" else "changed"
            _keep(tmp, plan, f"{why} while this run was going (another run?)")
        except OSError as e:
            _keep(tmp, plan, f"could not be made ({os_reason(e)})")
        return None
    fd, state = old
    if old is BUSY:
        _keep(tmp, plan, f"stayed locked by another graph-harness run for {LOCK_WAIT_S:.0f} s")
    if state == "empty":
        return _fill(tmp, lock, plan, fd)
    try:
        exchange(tmp, real)
    except OSError as e:
        _keep(tmp, plan, f"could not be replaced ({os_reason(e)})")
    # What we swapped out, still locked, is checked again where nobody else looks.
    if _state(tmp, fd) != state:
        exchange(tmp, real)
        _keep(tmp, plan, "changed while this run was going")
    try:
        left = remove_listed(tmp, fd)
    except OSError as e:
        return f"the replaced output is kept at {tmp}: it could not be removed ({os_reason(e)})"
    if left:
        return (
            f"the replaced output was kept at {tmp}: it held {', '.join(left[:3])}, which "
            "graph-harness did not write"
        )
    return None


def _fill(tmp: Path, lock: int, plan: Plan, fd: int) -> str | None:
    """Move this run's files from `tmp` (open and locked at `lock`) into the empty folder
    open and locked at `fd`, which stays where and what it is (see the module docstring).
    Returns a note when `tmp` could not be removed after."""
    try:
        here, there = os.stat(plan.real, follow_symlinks=False), os.fstat(fd)
        still = (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
    except OSError:
        still = False
    if not still or _state(plan.real, fd) != "empty":
        _keep(tmp, plan, "changed while this run was going")
    done = read_manifest(tmp, dir_fd=lock)  # complete, written by this run a moment ago
    names = sorted(set(os.listdir(lock)) - {MANIFEST, MANIFEST_NEW})
    moved: list[str] = []
    try:
        write_manifest(plan.real, dataclasses.replace(done, complete=False), dir_fd=fd)
        for name in names:
            move_noreplace(name, lock, fd)
            moved.append(name)
        os.replace(MANIFEST, MANIFEST, src_dir_fd=lock, dst_dir_fd=fd)
    except OSError as e:
        for name in reversed(moved):  # back where they were: this run's, in folders it locks
            with contextlib.suppress(OSError):
                move_noreplace(name, fd, lock)
        for name in (MANIFEST_NEW, MANIFEST):  # what this run wrote there, nothing else
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
        taken = isinstance(e, FileExistsError)
        _keep(
            tmp,
            plan,
            "changed while this run was going"
            if taken
            else f"could not be written into ({os_reason(e)})",
        )
    try:
        left = remove_listed(tmp, lock)  # an empty folder now, with no manifest: it goes
    except OSError as e:
        left = [os_reason(e)]
    return (
        f"this run's emptied hidden folder is left at {tmp} ({', '.join(left)})" if left else None
    )


def _keep(tmp: Path, plan: Plan, why: str) -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(100):
        kept = plan.real.with_name(
            f"{stem(plan.real.name)}.graph-harness-{stamp}{'' if not i else f'-{i}'}"
        )
        try:
            rename_noreplace(tmp, kept)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - a hundred names taken in one second
        kept = tmp
    shown = Path(plan.shown)
    where = kept if shown.is_symlink() else shown.with_name(kept.name)
    raise OutputConflict(
        f"output folder {plan.shown} {why} and was left as it is; this run's result is in {where}"
    )
