"""Where `--out PATH` goes and whether it may, decided before any work (reports/output/folder.py
builds and commits the folder). The rules: reports/output/folder.py's docstring."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.errors import UsageError
from graph_harness.capture.paths import descriptor_of, kind_of, os_reason
from graph_harness.reports.output.manifest import MANIFEST, foreign_entries, read_manifest


class OutputRefused(UsageError, ValueError):
    """`--out` names a path graph-harness must not write to (a usage error)."""


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
    force: bool = False


def _where(out: Path) -> Path:
    """Where `out` is, as the OS resolves it: links and `..` in the order they come (so
    `link/../x` is beside the link's target, not beside the link), the last part kept
    unless it is itself a link (written through) or `.`/`..`."""
    if out.name in ("", ".", "..") or os.fspath(out).endswith(("/.", "/..")):
        return Path(os.path.realpath(out))
    real = Path(os.path.realpath(out.parent)) / out.name
    return Path(os.path.realpath(real)) if real.is_symlink() else real


def _not_a_folder(shown: str, what: str) -> OutputRefused:
    return OutputRefused(
        f"--out {shown} is {what}, not a folder: --out takes a folder (a new path, an empty "
        "folder, or an earlier graph-harness output) and writes its files in it; give a "
        "folder path, e.g. --out gh-out"
    )


def _refuse_streams(out: Path, shown: str) -> None:
    """Refuse a device, FIFO or socket at `out`, and anything but a folder that `out`
    reaches through a descriptor's link in /proc (`/dev/stdout`, `/dev/fd/N`): a stream,
    whatever it is open on. Done first: a pipe behind /dev/stdout has no name
    (`pipe:[N]`), so `_where` would take it for a new path in /proc/PID/fd."""
    fd = descriptor_of(out)  # None: no descriptor; -1: another process's
    try:
        st = os.stat(out)
    except FileNotFoundError:
        if fd is not None:
            raise _not_a_folder(shown, "a file descriptor that is not open") from None
        return
    except OSError:
        return  # plan_output says what is wrong with the path
    mode = st.st_mode
    if stat.S_ISDIR(mode) or (fd is None and stat.S_ISREG(mode)):
        return  # a regular file by name: plan_output refuses it as one
    if fd is None:
        raise _not_a_folder(shown, kind_of(mode))
    # Not what the descriptor holds: while a command runs, descriptor 1 may be stderr.
    raise _not_a_folder(shown, f"a stream (descriptor {fd})" if fd >= 0 else "a stream")


def plan_output(out: Path, force: bool) -> Plan:
    """Decide, before any work, whether `out` may take the output; OutputRefused if not."""
    shown = str(out)
    real, st = _target(out, shown)
    why = _protected(real)
    if why:
        raise OutputRefused(
            f"--out {shown} is {why}; graph-harness writes its output into a folder of its "
            "own and never replaces that one: give a new path, e.g. --out gh-out"
        )
    if st is None:
        _check_parent(real.parent, shown)
        return Plan(shown, real, "none", force)
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "not a folder"
        raise OutputRefused(
            f"--out {shown} is {kind}; graph-harness writes a folder there and never "
            "replaces a file: give a new path"
        )
    return _plan_folder(real, shown, force)


def _target(out: Path, shown: str) -> tuple[Path, os.stat_result | None]:
    """Where `out` leads (links resolved) and what is there (None: nothing yet); a
    dangling link, a stream or a path the OS refuses: OutputRefused."""
    try:
        if out.is_symlink() and not out.exists():
            raise OutputRefused(
                f"--out {shown} is a symbolic link to {os.readlink(out)}, which does not "
                "exist; give a folder path"
            )
        _refuse_streams(out, shown)
        real = _where(out)
        return real, os.stat(real)
    except FileNotFoundError:
        return real, None
    except OSError as e:  # a file where a folder of the path should be, no permission, ...
        raise OutputRefused(f"--out {shown}: {os_reason(e)}; give another path") from e


def _plan_folder(real: Path, shown: str, force: bool) -> Plan:
    """An existing folder at the path: written into if empty, replaced if an earlier
    output of ours and `force`; anything else refused (OutputRefused)."""
    entries, foreign, m = _read_folder(real, shown)
    _check_parent(real.parent, shown)
    if not entries:
        if not os.access(real, os.W_OK | os.X_OK):  # the run writes into it (folder.py)
            raise OutputRefused(
                f"--out {shown} is an empty folder you may not write in; make it writable "
                f"(chmod u+w {shown}) or give a new path"
            )
        return Plan(shown, real, "empty", force)
    if foreign is None:
        raise OutputRefused(
            f"--out {shown} is a folder graph-harness did not write (it has no {MANIFEST}); "
            "graph-harness never replaces such a folder, --force or "
            "not: give a new path or an empty folder"
        )
    if foreign:
        raise OutputRefused(
            f"--out {shown} was written by graph-harness but now also holds "
            f"{', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which it did not "
            "write; move those out or give a new path"
        )
    if not force:
        raise OutputRefused(
            f"--out {shown} holds an earlier output ({m.command!r}, {m.created}); pass "
            "--force to replace it, or give a new path"
        )
    if not os.access(real, os.W_OK | os.X_OK):
        raise OutputRefused(
            f"--out {shown} holds an earlier output that you may not remove (no permission "
            f"to write in it); make it writable (chmod u+w {shown}) or give a new path"
        )
    return Plan(shown, real, "ours", force)


def _read_folder(real: Path, shown: str) -> tuple[list[str], list[str] | None, object]:
    """The folder at `real`, read through one descriptor: its entries, what its manifest
    does not list (None: no manifest of ours) and the manifest. Read by path, a run
    replacing the folder between two reads would pair one folder's manifest with
    another's files; read through a descriptor of a folder swapped out meanwhile (a run
    replacing it empties the old one), it would be the one going away: read again, until
    the folder read is the one at the path."""
    for _ in range(1000):
        try:
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as e:
            raise OutputRefused(f"--out {shown}: {os_reason(e)}; give another path") from e
        try:
            entries = os.listdir(fd)
            m = read_manifest(real, dir_fd=fd) if entries else None
            foreign = foreign_entries(real, dir_fd=fd) if entries else []
            there = os.fstat(fd)
            try:  # while the descriptor holds the folder: its inode cannot be reused
                here = os.stat(real, follow_symlinks=True)
            except OSError:
                continue  # swapped right now: look again
        except OSError as e:
            raise OutputRefused(f"--out {shown}: {os_reason(e)}; give another path") from e
        finally:
            os.close(fd)
        same = (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)
        # one manifest read both times (an empty folder has none, and nothing foreign)
        if same and (not entries or (m is None) == (foreign is None)):
            return entries, foreign, m
    raise OutputRefused(
        f"--out {shown} kept changing while graph-harness read it (other runs replacing it "
        "all the while); give another path, or try again"
    )


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
