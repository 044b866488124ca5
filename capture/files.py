"""Writing one file the user named, without ever losing what was there.

- `-` is stdout.
- A regular file (or a new path) is written beside, then renamed in (git's lock files,
  rsync's temporaries): a reader sees the old file or the whole new one, never half.
- A symbolic link is written through, never replaced: the temporary goes beside the
  file it points to and is renamed onto that, so `--csv link` updates the target and
  keeps the link. A link whose target is missing is refused.
- A character device or FIFO (`/dev/stdout`, `/dev/null`, a named pipe) is opened and
  written in place: it cannot be swapped atomically, and must not be replaced.
- A folder, socket or block device, a read-only file, or a path whose folder does not
  exist is refused with a message that says so (`check_output` says it before any work).

Files get the permissions any tool gives them: 0666 less the umask, or the mode of the
file they replace.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """A path that cannot take the output (a folder, a broken link, ...): a usage error."""


def process_umask() -> int:
    """The process umask (read by setting and restoring it: do this on the main thread)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode(*, folder: bool = False) -> int:
    return (0o777 if folder else 0o666) & ~process_umask()


def check_output(path: str | Path) -> None:
    """Refuse, before any work, a path `write_output` could not take (OutputPathError)."""
    _resolve(path)


def _resolve(path: str | Path) -> tuple[Path, os.stat_result | None]:
    """The file to write (a link's target) and its stat (None: it does not exist yet)."""
    name = str(path)
    p = Path(path)
    target = p
    if p.is_symlink():
        if not p.exists():
            raise OutputPathError(
                f"{name} is a symbolic link to {os.readlink(p)}, which does not exist; "
                "give the path of a file to write"
            )
        target = Path(os.path.realpath(p))  # write through: the link stays a link
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputPathError(f"{name}: {e.strerror.lower()}; give the path of a file") from e
    if st is None:
        parent = target.parent
        if not parent.is_dir():
            raise OutputPathError(f"{name}: folder {parent} does not exist; make it first")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputPathError(f"{name}: no permission to write in {parent}")
        return target, None
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return target, st
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise OutputPathError(f"{name} is {kind}; give the path of a file to write")
    if not os.access(target, os.W_OK):
        raise OutputPathError(f"{name} is read-only; graph-harness does not replace it")
    return target, st


def write_output(path: str | Path, text: str) -> str:
    """Write `text` to the file the user named (see the module docstring); returns where
    it went, as the user would say it."""
    name = str(path)
    if name == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return "stdout"
    target, st = _resolve(path)
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        with open(target, "w") as f:  # a device or pipe: write in place
            f.write(text)
        return name
    write_atomic(target, text, mode=None if st is None else stat.S_IMODE(st.st_mode))
    return name


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> Path:
    """Write beside, then rename onto `path` (a regular file or nothing). The new file
    gets `mode`, else 0666 less the umask (mkstemp's own 0600 would hide it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, default_mode() if mode is None else mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)  # our own temporary, made just above
        raise
    return path
