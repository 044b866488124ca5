"""Renames that cannot lose a folder: RENAME_NOREPLACE and RENAME_EXCHANGE (Linux's
renameat2), with the closest portable fallback where a system or file system lacks them."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2  # linux/fs.h
_AT_FDCWD = -100


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to ask
        return None


def _renameat2(
    src: Path | str, dst: Path | str, flags: int, src_fd: int = _AT_FDCWD, dst_fd: int = _AT_FDCWD
) -> bool:
    """True when done; False when this system or file system has no renameat2."""
    libc = _libc()
    fn = getattr(libc, "renameat2", None) if libc is not None else None
    if fn is None:
        return False
    if fn(src_fd, os.fsencode(src), dst_fd, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename `src` to `dst`; FileExistsError if anything is at `dst`, never replacing it."""
    if _renameat2(src, dst, _RENAME_NOREPLACE):
        return
    # No atomic form here: check, then rename (a folder appearing in between, non-empty,
    # still makes the rename fail; an empty one would be replaced).
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, "exists", str(dst))
    os.rename(src, dst)


def move_noreplace(name: str, src_fd: int, dst_fd: int) -> None:
    """Move the entry `name` from the folder open at `src_fd` to the one open at `dst_fd`
    (whatever either is called now); FileExistsError if `name` is taken there."""
    if _renameat2(name, name, _RENAME_NOREPLACE, src_fd, dst_fd):
        return
    try:  # as rename_noreplace: check, then rename
        os.lstat(name, dir_fd=dst_fd)
    except FileNotFoundError:
        os.rename(name, name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
        return
    raise FileExistsError(errno.EEXIST, "exists", name)


def exchange(a: Path, b: Path) -> None:
    """Swap two folders in one step where the system can (Linux); elsewhere `b` is moved
    aside and `a` renamed in, leaving a moment without `b`."""
    if _renameat2(a, b, _RENAME_EXCHANGE):
        return
    aside = a.with_name(a.name + ".old")
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)
