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
import fcntl
import os
import signal
import socket
import stat
import tempfile
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
        return Plan(shown, real, "none")
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
        raise OutputRefused(
            f"--out {shown} is {kind}; graph-harness writes a folder there and never "
            "replaces a file: give a new path"
        )
    entries = os.listdir(real)
    if not entries:
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


def leftovers(real: Path) -> list[tuple[Path, Manifest | None]]:
    """Hidden partial folders beside `real` that no live run holds (its lock is gone)."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for e in os.scandir(real.parent):
            if not (e.name.startswith(f".{real.name}.") and e.name.endswith(PARTIAL)):
                continue
            if not e.is_dir(follow_symlinks=False):
                continue
            fd = _lock(Path(e.path))
            if fd is None:
                continue  # a run going on now
            os.close(fd)
            found.append((Path(e.path), read_manifest(Path(e.path))))
    return found


# --- the staged folder --------------------------------------------------------------------------


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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
    for path, m in leftovers(plan.real):
        # A hidden partial folder whose manifest says we made it holds only what a run of
        # ours wrote: remove it. One without a manifest is only reported.
        done = m is not None and remove_partial(path)
        if say:
            started = f" (started {m.created} by pid {m.pid})" if m else ""
            what = "removed it" if done else "left it as it is: not recognisably ours"
            say(
                f"found the leftover of an interrupted run beside {plan.shown}: "
                f"{path.name}{started}; {what}"
            )
    made = _make_parents(plan.real.parent)
    tmp = Path(tempfile.mkdtemp(dir=plan.real.parent, prefix=f".{plan.real.name}.", suffix=PARTIAL))
    lock = _lock(tmp)  # held until this run ends: marks the folder as a live run's
    committed = False
    try:
        os.chmod(tmp, default_mode(folder=True))
        manifest = Manifest(command, _now(), socket.gethostname(), os.getpid(), False, ())
        write_manifest(tmp, manifest)
        yield tmp
        with _signals_held():
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
        try:
            real.rmdir()  # fails if anything landed in it meanwhile
        except FileNotFoundError:
            pass
        except OSError:
            _keep(tmp, plan, "filled up while this run was going")
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
