"""A full disk, injected in this process for files under one folder (a test's tmp_path):
FullDisk (a test module's `disk` fixture makes one)."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path


class FullDisk:
    """A disk under `root` that fills at the `nth` file opened for writing whose name
    matches `pattern`: that file is made (as the OS makes it), takes `keep` bytes of what
    is written to it, and every write from then on fails with ENOSPC, until `free()`
    (`only`: that file alone fails, as when the room a large file would take is all that
    is missing). Files are written through os.fdopen (capture/files.py and the manifest's
    writer)."""

    def __init__(self, monkeypatch, root: Path):
        self.root, self.trigger, self.full, self.hits = os.path.realpath(root), None, False, 0
        self.only = False
        real = os.fdopen

        def fdopen(fd, *args, **kwargs):
            f = real(fd, *args, **kwargs)
            path = os.readlink(f"/proc/self/fd/{fd}")
            if not path.startswith(self.root + "/") or "w" not in getattr(f, "mode", ""):
                return f
            hit = bool(self.trigger) and re.fullmatch(self.trigger[0], os.path.basename(path))
            if hit:
                self.hits += 1
                self.full = self.full or self.hits == self.trigger[1]
            fails = self.full and (hit or not self.only)
            return _Failing(f, self.trigger[2]) if fails else f

        monkeypatch.setattr(os, "fdopen", fdopen)

    def fill_at(self, pattern: str, nth: int = 1, keep: int = 0, *, only: bool = False) -> None:
        self.trigger, self.full, self.hits = (pattern, nth, keep), False, 0
        self.only = only

    def free(self) -> None:
        self.trigger, self.full = None, False


class _Failing:
    def __init__(self, f, keep: int):
        self.f, self.keep = f, keep

    def write(self, data):
        self.f.write(bytes(data)[: self.keep])  # what fitted, then the disk is full
        self.f.flush()
        self.keep = 0
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def __getattr__(self, name):
        return getattr(self.f, name)
