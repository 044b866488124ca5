"""What a path the user gave is, and reading one: the checks every command shares.

- `descriptor_of`: whether a path reaches one of this process's open descriptors through
  /proc (`/dev/stdout`, `/dev/fd/3`), which capture/files.py writes as a stream.
- `check_input`, `read_input`: only a regular file (through links) is read, at most
  MAX_READ bytes; a FIFO, device, socket or folder is refused saying which before it is
  opened (a FIFO would block forever, /dev/zero would never end).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from graph_harness.capture.errors import UsageError

MAX_READ = 1 << 28  # 256 MiB: far above any export or replay document, below a hang


class InputPathError(UsageError, ValueError):
    """A path that cannot be read as a file (missing, a folder, a FIFO, ...)."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, words in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return words
    return "not a regular file"


def no_room(e: BaseException) -> bool:
    """Whether `e` says a disk (or this user's quota of it) is full."""
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def os_reason(e: OSError) -> str:
    if e.errno == errno.ENAMETOOLONG:
        return "the name is longer than its file system allows (give a shorter one)"
    return (e.strerror or str(e)).lower()


# --- descriptors ---------------------------------------------------------------------------

_FD_FOLDER = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")


def descriptor_of(path: str | Path) -> int | None:
    """The descriptor of this process that `path` reaches through /proc (`/dev/stdout` ->
    /proc/self/fd/1 -> 1), else None; -1 for another process's descriptor. Links are
    followed one part at a time, as the OS does, but not the last step into /proc/*/fd/N:
    that is a door to an open file, whose name is not the file to write."""
    text = os.fspath(path)
    parts = text.split("/")
    cur = "/" if text.startswith("/") else os.getcwd()
    links = 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            cur = os.path.dirname(cur)  # `cur` has no links left in it: text is safe here
            continue
        m = _FD_FOLDER.fullmatch(cur)
        if m and part.isdigit():
            return int(part) if int(m.group(1)) == os.getpid() else -1
        nxt = os.path.join(cur, part)
        try:
            target = os.readlink(nxt)
        except OSError:  # not a link (or nothing there): a plain step
            cur = nxt
            continue
        links += 1
        if links > 40:  # a loop: the OS says ELOOP when the path is used
            return None
        if target.startswith("/"):
            cur = "/"
        parts = target.split("/") + parts
    return None


# --- reading -----------------------------------------------------------------------------------


def check_input(path: str | Path, what: str = "file") -> None:
    """Refuse, before any work, what `read_input` could not read: InputPathError saying
    that it does not exist, or what it is instead of a file."""
    name = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        gone = os.path.islink(path)
        raise InputPathError(
            f"{what} {name} is a symbolic link to nothing"
            if gone
            else f"{what} {name} does not exist"
        ) from None
    except OSError as e:
        raise InputPathError(f"{what} {name}: {os_reason(e)}") from None
    if not stat.S_ISREG(st.st_mode):
        inside = documents_in(path) if stat.S_ISDIR(st.st_mode) else ""
        raise InputPathError(
            f"{what} {name} is {kind_of(st.st_mode)}, not a file; give a file{inside}"
        )


def documents_in(folder: str | Path) -> str:
    """ ": one of its JSON documents, a/nodes-x.json, ..." for a folder holding some (an
    output folder of ours holds them), else ""."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".json"))
    except OSError:
        return ""
    names = [n for n in names if not n.startswith(".")]
    if not names:
        return ""
    nodes = [n for n in names if n.startswith("nodes-")] or names  # exports first
    shown = ", ".join(os.path.join(os.fspath(folder), n) for n in nodes[:4])
    return f" in it, such as {shown}" + (" ..." if len(nodes) > 4 else "")


def read_text_input(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of the regular file at `path` (read_input's checks); InputPathError
    (`cannot read WHAT PATH: not UTF-8 text (byte 0xff at offset 3)`) otherwise."""
    data = read_input(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputPathError(
            f"cannot read {what} {os.fspath(path)}: not UTF-8 text (byte "
            f"{data[e.start]:#04x} at offset {e.start})"
        ) from None


def read_input(path: str | Path, what: str = "file") -> bytes:
    """The bytes of the regular file at `path` (through links), at most MAX_READ;
    InputPathError (`cannot read WHAT PATH: why`) otherwise."""
    prefix = f"cannot read {what} {os.fspath(path)}"
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise InputPathError(f"{prefix}: it is {kind_of(st.st_mode)}, not a file")
        with open(path, "rb") as f:
            data = f.read(MAX_READ + 1)
    except FileNotFoundError as e:
        why = "a symbolic link to nothing" if os.path.islink(path) else e.strerror
        raise InputPathError(f"{prefix}: {why}") from None
    except OSError as e:
        raise InputPathError(f"{prefix}: {e.strerror or e}") from None
    if len(data) > MAX_READ:
        raise InputPathError(
            f"{prefix}: larger than {MAX_READ >> 20} MiB, so not a graph-harness document"
        )
    return data
