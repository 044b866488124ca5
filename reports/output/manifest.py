"""The manifest that marks an output folder as graph-harness's own, and removing only what
it lists: graph-harness never deletes anything it did not write.

Every file is listed before it is made (capture/files.py claims); the manifest is written
to MANIFEST_NEW and renamed in by the run that holds the folder's lock. A folder holding
only (a beginning of) MANIFEST_NEW is recognisably ours too: docs/output.md, "The
manifest"."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from graph_harness.capture.files import naming

MANIFEST = ".graph-harness-manifest.json"
MANIFEST_NEW = MANIFEST + ".new"
MANIFEST_SCHEMA = "graph-harness/output"
_MANIFEST_MAX = 1 << 22  # bytes: a manifest lists file names, never this many


@dataclass(frozen=True)
class Manifest:
    command: str
    created: str
    host: str
    pid: int
    complete: bool
    files: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "schema": MANIFEST_SCHEMA,
            "schema_version": 1,
            "tool": "graph-harness",
            "command": self.command,
            "created": self.created,
            "host": self.host,
            "pid": self.pid,
            "complete": self.complete,
            "files": list(self.files),
        }


def read_manifest(folder: Path, *, dir_fd: int | None = None) -> Manifest | None:
    """The folder's manifest, or None when it has none graph-harness wrote. With `dir_fd`
    (the folder opened), read through it: whatever is renamed meanwhile."""
    try:
        fd = os.open(
            MANIFEST if dir_fd is not None else folder / MANIFEST,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
            dir_fd=dir_fd,
        )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(os.dup(fd), "rb") as f:
                raw = f.read(_MANIFEST_MAX + 1)
        finally:
            os.close(fd)
        if len(raw) > _MANIFEST_MAX:
            return None
        doc = json.loads(raw.decode("utf-8"))
        if doc.get("schema") != MANIFEST_SCHEMA or doc.get("tool") != "graph-harness":
            return None
        files = doc["files"]
        # Only plain names of entries inside the folder: a listed "../x", "/x" or "a/b"
        # would point removal outside it.
        if not isinstance(files, list) or not all(_plain_name(f) for f in files):
            return None
        return Manifest(
            str(doc["command"]),
            str(doc["created"]),
            str(doc["host"]),
            int(doc["pid"]),
            bool(doc["complete"]),
            tuple(files),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST, MANIFEST_NEW)
        and os.path.basename(name) == name
        and "/" not in name
        and "\0" not in name
        and (os.altsep is None or os.altsep not in name)
    )


def _encode(m: Manifest) -> bytes:
    return (json.dumps(m.to_dict(), indent=1) + "\n").encode("utf-8", "backslashreplace")


# How every manifest begins (the keys before the first that varies), byte for byte.
_HEAD = _encode(Manifest("", "", "", 0, False, ())).partition(b'"command"')[0]


def _unfinished_first(dir_fd: int) -> bool:
    """Whether MANIFEST_NEW in the folder open at `dir_fd` is a first manifest that was
    never finished (see the module docstring): a plain file of one link, holding a
    beginning of a manifest (nothing, part of `_HEAD`, or `_HEAD` and more)."""
    try:
        fd = os.open(MANIFEST_NEW, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > _MANIFEST_MAX:
            return False
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(len(_HEAD))
    except OSError:
        return False
    finally:
        os.close(fd)
    return raw == _HEAD[: len(raw)]


def write_manifest(folder: Path, m: Manifest, *, dir_fd: int | None = None) -> None:
    """Write beside (MANIFEST_NEW) and rename in: the manifest is whole at every instant.
    With `dir_fd` (the folder opened), written through it: whatever it is called now."""
    data = _encode(m)
    new, final = (
        (MANIFEST_NEW, MANIFEST)
        if dir_fd is not None
        else (folder / MANIFEST_NEW, folder / MANIFEST)
    )
    fd = os.open(new, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o666, dir_fd=dir_fd)
    with naming(folder / MANIFEST), os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(new, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _ours(m: Manifest) -> set[str]:
    return {*m.files, MANIFEST, MANIFEST_NEW}


def foreign_entries(folder: Path, *, dir_fd: int | None = None) -> list[str] | None:
    """What in `folder` graph-harness did not write: None when it has no manifest of ours,
    else the entries its manifest does not list (or that are not plain files)."""
    m = read_manifest(folder, dir_fd=dir_fd)
    if m is None:
        return None
    ours = _ours(m)
    out = []
    with os.scandir(folder if dir_fd is None else dir_fd) as entries:
        for e in entries:
            if e.name not in ours or not e.is_file(follow_symlinks=False):
                out.append(e.name)
    return sorted(out)


def remove_listed(folder: Path, dir_fd: int) -> list[str]:
    """Remove a folder graph-harness wrote, through `dir_fd` (the folder opened and
    locked): the plain files its manifest lists and MANIFEST_NEW, then, if nothing else
    is in it, the manifest and the folder. Returns what was left (empty: the folder is
    gone); the manifest stays while anything else does, so the folder stays recognisably
    ours.
    Without a manifest, only an empty folder, or one holding nothing but an unfinished
    first manifest, is removed. OSError (no permission, say) is the caller's to report."""
    m = read_manifest(folder, dir_fd=dir_fd)
    if m is None:
        with os.scandir(dir_fd) as entries:
            left = sorted(e.name for e in entries)
        if left == [MANIFEST_NEW] and _unfinished_first(dir_fd):
            os.unlink(MANIFEST_NEW, dir_fd=dir_fd)
            left = []
        if not left:
            _rmdir(folder, dir_fd)
        return left
    listed = set(m.files)
    left = []
    with os.scandir(dir_fd) as entries:
        found = list(entries)
    for e in found:  # what is there, and listed: never a path built from text
        if e.name in listed and e.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(e.name, dir_fd=dir_fd)
        elif e.name not in (MANIFEST, MANIFEST_NEW):
            left.append(e.name)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(MANIFEST_NEW, dir_fd=dir_fd)  # a write that failed: only the lock's holder writes
    if left:
        return sorted(left)
    for name in (MANIFEST_NEW, MANIFEST):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
    _rmdir(folder, dir_fd)
    return []


def _rmdir(folder: Path, dir_fd: int) -> None:
    """Remove the (empty) folder `dir_fd` is open on, if it is still the one at `folder`."""
    here, there = os.stat(folder, follow_symlinks=False), os.fstat(dir_fd)
    if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
        os.rmdir(folder)
