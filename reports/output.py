"""Output folders a user owns: built aside, marked as ours, swapped in; nothing of theirs lost.

A run builds its folder under a hidden sibling `.NAME.<random>.gh-partial` that carries a
manifest (`.graph-harness-manifest.json`: what wrote it, when, which files) from its first
instant, so anything graph-harness leaves behind is recognisably its own.

What `--out PATH` accepts, checked before any work is done:
- a new path; or an existing empty folder, which is simply used;
- a folder an earlier graph-harness run wrote (its manifest lists every file in it):
  refused without `--force`, replaced with it;
- a symbolic link to a folder is written through (the link stays), by the rules above.
Always refused: a plain file, a broken link, a device or FIFO; a folder holding anything
graph-harness did not write (even with `--force`); the current folder, any folder above
it, the home folder and `/`.

Commit, with SIGINT/SIGTERM/SIGHUP held off until it is done:
- new path: rename with RENAME_NOREPLACE, so a folder that appeared meanwhile (another
  run, say) is never replaced: this run fails and keeps its result beside, visibly named;
- replace: RENAME_EXCHANGE swaps the new folder in and the old one out in one step (the
  path never lacks a complete output); the old one, now under the hidden name, is checked
  again and only the files its manifest lists are removed, the folder last.

A killed run (SIGKILL) leaves its hidden folder; the next run at the same path reports it
and removes it when its manifest says graph-harness made it and no live run holds it (a
run holds an flock on its folder for its whole life; the kernel drops it at death).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import re
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.files import default_mode
from graph_harness.reports.manifest import (
    MANIFEST,
    Manifest,
    foreign_entries,
    read_manifest,
    remove_own,
    remove_partial,
    write_manifest,
)
from graph_harness.reports.renames import exchange, rename_noreplace

PARTIAL = ".gh-partial"
_HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class OutputRefused(ValueError):
    """`--out` names a path graph-harness must not write to (a usage error)."""


class OutputConflict(RuntimeError):
    """The output path changed under the run; its result was kept elsewhere."""


# --- checks before the work -------------------------------------------------------------------


def _protected(real: Path) -> str | None:
    cwd = Path(os.path.realpath(os.getcwd()))
    if real == Path(real.anchor):
        return "the root folder"
    if real == Path(os.path.realpath(Path.home())):
        return "your home folder"
    if real == cwd:
        return "the current folder"
    if real in cwd.parents:
        return "a folder above the current one"
    return None


@dataclass(frozen=True)
class Plan:
    shown: str  # the path as the user wrote it, for messages
    real: Path  # where the folder goes (a link's target, written through)
    existing: str  # "none" | "empty" | "ours"


def plan_output(out: Path, force: bool) -> Plan:
    """Decide, before any work, whether `out` may take the output; OutputRefused if not."""
    shown = str(out)
    if out.is_symlink():
        if not out.exists():
            raise OutputRefused(
                f"--out {shown} is a symbolic link to {os.readlink(out)}, which does not "
                "exist; give a folder path"
            )
        real = Path(os.path.realpath(out))
    else:
        real = Path(os.path.abspath(out))
    why = _protected(Path(os.path.realpath(real)))
    if why:
        raise OutputRefused(
            f"--out {shown} is {why}; graph-harness writes its output into a folder of its "
            "own and never replaces that one: give a new path, e.g. --out gh-out"
        )
    try:
        st = os.stat(real)
    except FileNotFoundError:
        _check_parent(real.parent, shown)
        return Plan(shown, real, "none")
    except OSError as e:  # a file where a folder of the path should be, no permission, ...
        raise OutputRefused(f"--out {shown}: {e.strerror.lower()}; give another path") from e
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
        raise OutputRefused(
            f"--out {shown} is {kind}; graph-harness writes a folder there and never "
            "replaces a file: give a new path"
        )
    try:
        entries = os.listdir(real)
    except OSError as e:
        raise OutputRefused(f"--out {shown}: {e.strerror.lower()}; give another path") from e
    if not entries:
        _check_parent(real.parent, shown)
        return Plan(shown, real, "empty")
    foreign = foreign_entries(real)
    if foreign is None:
        raise OutputRefused(
            f"--out {shown} is a folder graph-harness did not write (it has no {MANIFEST}); "
            "graph-harness never replaces such a folder, --force or not: give a new path or "
            "an empty folder"
        )
    if foreign:
        raise OutputRefused(
            f"--out {shown} was written by graph-harness but now also holds "
            f"{', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which it did not "
            "write; move those out or give a new path"
        )
    if not force:
        m = read_manifest(real)
        raise OutputRefused(
            f"--out {shown} holds an earlier output ({m.command!r}, {m.created}); pass "
            "--force to replace it, or give a new path"
        )
    return Plan(shown, real, "ours")


def _check_parent(parent: Path, shown: str) -> None:
    """The folder that will hold the output must be one we can build in (or make)."""
    p = parent
    while not p.exists():
        p = p.parent
    if not p.is_dir():
        raise OutputRefused(f"--out {shown}: {p} is not a folder; give another path")
    if not os.access(p, os.W_OK | os.X_OK):
        raise OutputRefused(
            f"--out {shown}: no permission to write in {p}; give a path in a folder you own"
        )


def _lock(folder: Path) -> int | None:
    """Hold an exclusive lock on `folder` for as long as the returned descriptor is open;
    None when another process holds it. The kernel drops the lock when its holder dies,
    SIGKILL included: a partial folder nobody locks belongs to no live run."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _is_partial_of(name: str, real: Path) -> bool:
    # mkdtemp's random part has no dot, so `.o.x.abc.gh-partial` (of --out o.x) is not o's.
    return (
        re.fullmatch(rf"\.{re.escape(real.name)}\.[A-Za-z0-9_]+{re.escape(PARTIAL)}", name)
        is not None
    )


def clean_leftovers(real: Path, say: Callable[[str], None] | None, shown: str) -> None:
    """Remove the hidden partial folders beside `real` that no live run holds (their lock
    is gone) and that carry our manifest, holding each one's lock while removing it:
    - complete (an old output swapped aside, or a finished build): only the files its
      manifest lists, so anything else in it stops the removal;
    - incomplete (a run killed while building): the plain files in it, which only that
      run wrote (a hidden folder of ours nobody else writes into).
    A folder without our manifest is only reported."""
    try:
        entries = [e for e in os.scandir(real.parent) if _is_partial_of(e.name, real)]
    except FileNotFoundError:
        return
    for e in entries:
        path = Path(e.path)
        if not e.is_dir(follow_symlinks=False):
            continue
        try:
            fd = _lock(path)
        except FileNotFoundError:
            continue  # another run cleaned it first
        if fd is None:
            continue  # a run going on now
        try:
            m = read_manifest(path)
            done = m is not None and (remove_own(path) if m.complete else remove_partial(path))
        finally:
            os.close(fd)
        if say:
            started = f" (started {m.created} by pid {m.pid})" if m else ""
            what = "removed it" if done else "left it as it is: not recognisably ours"
            say(
                f"found the leftover of an interrupted run beside {shown}: "
                f"{path.name}{started}; {what}"
            )


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
    """Yield a hidden folder to fill; on success it becomes `out` (see the module
    docstring). `out=None` yields None and writes nothing. `say` gets notes for the user
    (leftovers found and removed)."""
    if out is None:
        yield None
        return
    plan = plan_output(Path(out), force)
    clean_leftovers(plan.real, say, plan.shown)
    made = _make_parents(plan.real.parent)
    tmp = Path(tempfile.mkdtemp(dir=plan.real.parent, prefix=f".{plan.real.name}.", suffix=PARTIAL))
    lock = _lock(tmp)  # held until this run ends: marks the folder as a live run's
    committed = False
    try:
        os.chmod(tmp, default_mode(folder=True))
        manifest = Manifest(command, _now(), socket.gethostname(), os.getpid(), False, ())
        write_manifest(tmp, manifest)
        yield tmp
        with _signals_deferred():
            files = tuple(sorted(e.name for e in os.scandir(tmp) if e.name != MANIFEST))
            write_manifest(tmp, dataclasses.replace(manifest, complete=True, files=files))
            committed = True  # from here on tmp is either `out`, kept beside it, or the old one
            old_left = _commit(tmp, plan)
        if old_left and say:
            say(
                f"the replaced output was kept at {old_left}: it held files graph-harness "
                "did not write"
            )
    finally:
        if not committed and tmp.exists():
            remove_partial(tmp)
        if lock is not None:
            os.close(lock)
        for p in reversed(made):
            with contextlib.suppress(OSError):
                p.rmdir()  # only if still empty: a folder we made for nothing


def _make_parents(parent: Path) -> list[Path]:
    made = []
    for p in [*reversed(parent.parents), parent]:
        if not p.exists():
            p.mkdir()
            made.append(p)
    return made


def _commit(tmp: Path, plan: Plan) -> Path | None:
    """Put `tmp` at `plan.real`; returns where a replaced output was left, if anywhere."""
    real = plan.real
    if plan.existing == "empty":
        with contextlib.suppress(OSError):  # the output takes the empty folder's permissions
            os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))
        try:
            real.rmdir()  # fails if anything landed in it meanwhile
        except FileNotFoundError:
            pass
        except OSError as e:
            why = (
                "filled up while this run was going"
                if e.errno == errno.ENOTEMPTY
                else (f"could not be replaced ({e.strerror.lower()})")
            )
            _keep(tmp, plan, why)
    if plan.existing in ("none", "empty"):
        try:
            rename_noreplace(tmp, real)
        except FileExistsError:
            _keep(tmp, plan, "appeared while this run was going (another run?)")
        return None
    # Replace: check again now, swap, check the old one again where nobody else looks.
    if foreign_entries(real) != []:
        _keep(tmp, plan, "changed while this run was going")
    exchange(tmp, real)
    if foreign_entries(tmp) != []:  # what we swapped out was not what we checked
        exchange(tmp, real)
        _keep(tmp, plan, "changed while this run was going")
    return None if remove_own(tmp) else tmp  # stops at anything it did not write


def _keep(tmp: Path, plan: Plan, why: str) -> None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for i in range(100):
        kept = plan.real.with_name(
            f"{plan.real.name}.graph-harness-{stamp}{'' if not i else f'-{i}'}"
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
