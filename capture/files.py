"""Files the user names, written without surprises: the one place that decides how a
path is written (what a path is, and reading one: capture/paths.py).

`write_output`: `-` is stdout; a path to one of this process's descriptors, a device or a
FIFO is written as a stream; a regular file or a new path is written beside and renamed
in (a link written through); anything else is refused (OutputPathError; `check_output`
says it before any work). Text is UTF-8, a lone surrogate as its backslash escape. Inside
an output folder being built every file is claimed before it is made (`claiming`). Every
rule: docs/output.md, "Files the user names"."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from graph_harness.capture.errors import UsageError
from graph_harness.capture.paths import descriptor_of, kind_of, os_reason
from graph_harness.capture.results import results_descriptor, results_stream

if TYPE_CHECKING:
    import pandas as pd

ENCODING, ERRORS = "utf-8", "backslashreplace"


class OutputPathError(UsageError, ValueError):
    """A path that cannot take the output (a folder, a broken link, ...): a usage error."""


def process_umask() -> int:
    """The process umask (read by setting and restoring it: do this on the main thread)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode(*, folder: bool = False) -> int:
    return (0o777 if folder else 0o666) & ~process_umask()


# --- claims: what an output folder being built will hold -------------------------------

_claims: dict[str, Callable[[str], None]] = {}
_claims_lock = threading.Lock()


@contextlib.contextmanager
def claiming(folder: Path, record: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, `record(name)` is called before any file `name` is made in
    `folder` through this module (or `claim`)."""
    key = os.path.realpath(folder)
    with _claims_lock:
        _claims[key] = record
    try:
        yield
    finally:
        with _claims_lock:
            _claims.pop(key, None)


def claim(path: str | Path) -> Path:
    """Say, before making `path`, that graph-harness makes it; returns `path`. Outside a
    folder being built this does nothing."""
    path = Path(path)
    with _claims_lock:
        record = _claims.get(os.path.realpath(path.parent)) if _claims else None
    if record is not None:
        record(path.name)
    return path


# --- what a path is ------------------------------------------------------------------------


def _resolve(path: str | Path) -> tuple[Path, os.stat_result | None]:
    """The file to write (a link's target) and its stat (None: it does not exist yet)."""
    name = os.fspath(path)
    p = Path(path)
    target = p
    try:
        if p.is_symlink():
            if not p.exists():
                raise OutputPathError(
                    f"{name} is a symbolic link to {os.readlink(p)}, which does not exist; "
                    "give the path of a file to write"
                )
            target = Path(os.path.realpath(p))  # write through: the link stays a link
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputPathError(f"{name}: {os_reason(e)}; give the path of a file") from e
    if st is None:
        parent = Path(os.path.realpath(target.parent))
        if not parent.is_dir():
            raise OutputPathError(f"{name}: folder {target.parent} does not exist; make it first")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise OutputPathError(f"{name}: no permission to write in {target.parent}")
        return target, None
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return target, st
    if not stat.S_ISREG(st.st_mode):
        raise OutputPathError(f"{name} is {kind_of(st.st_mode)}; give the path of a file to write")
    if not os.access(target, os.W_OK):
        raise OutputPathError(f"{name} is read-only; graph-harness does not replace it")
    return target, st


def check_output(path: str | Path) -> None:
    """Refuse, before any work, a path `write_output` could not take (OutputPathError)."""
    if os.fspath(path) == "-":
        return
    fd = descriptor_of(path)
    if fd is None:
        _resolve(path)
    elif fd >= 0:
        _check_descriptor(path, fd)


def _check_descriptor(path: str | Path, fd: int) -> None:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        raise OutputPathError(
            f"{os.fspath(path)}: descriptor {fd} is not open in graph-harness; give a file"
        ) from None
    if stat.S_ISDIR(mode):
        raise OutputPathError(f"{os.fspath(path)} is a folder; give the path of a file")
    if _read_only(fd):  # /dev/stdin: a write would fail only after the work, with EBADF
        raise OutputPathError(
            f"{os.fspath(path)}: descriptor {fd} is open for reading only; give a file to "
            "write, or - for stdout"
        )


def _read_only(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # not a POSIX system: left to the write
        return False
    try:
        return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
    except OSError:
        return False


# --- writing -----------------------------------------------------------------------------------


def _encode(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode(ENCODING, ERRORS)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_stream(fd: int, text: str | bytes) -> None:
    """Write through an open descriptor, after what Python buffered for it."""
    for stream in (sys.stdout, sys.stderr, results_stream()):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            if stream is not None and stream.fileno() == fd:
                stream.flush()
    _write_all(fd, _encode(text))


def _open_stream(target: Path, st: os.stat_result, name: str) -> int:
    """A device or FIFO opened for writing; a FIFO without a reader is refused, not
    waited on."""
    flags = os.O_WRONLY | os.O_APPEND
    if stat.S_ISFIFO(st.st_mode):
        flags |= os.O_NONBLOCK
    try:
        fd = os.open(target, flags)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise OutputPathError(
                f"{name} is a FIFO (named pipe) that nothing reads; start its reader first"
            ) from None
        raise OutputPathError(f"{name}: {os_reason(e)}") from None
    os.set_blocking(fd, True)
    return fd


def write_output(path: str | Path, text: str | bytes, *, mode: int | None = None) -> str:
    """Write `text` (or bytes) to the file the user named (see the module docstring);
    returns where it went, as the user would say it. `mode`: a new file's permissions
    (default 0666 less the umask)."""
    name = os.fspath(path)
    if name == "-":
        out = results_stream()  # stdout, wherever a running command keeps it (capture/results.py)
        if out is None:
            raise OSError(errno.EBADF, "stdout is closed", "-")
        out.flush()
        buffer = getattr(out, "buffer", None)
        if buffer is None:  # a text-only stream (a test's StringIO)
            out.write(text if isinstance(text, str) else text.decode(ENCODING, ERRORS))
        else:
            buffer.write(_encode(text))
        out.flush()
        return "stdout"
    fd = descriptor_of(path)
    if fd is not None and fd >= 0:
        fd = results_descriptor(fd)  # /dev/stdout: the results, not what holds descriptor 1
        _check_descriptor(path, fd)
        with naming(path):
            _write_stream(fd, text)
        return name
    if fd == -1:  # another process's descriptor: its file, opened again, as a stream
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
        except OSError as e:
            raise OutputPathError(f"{name}: {os_reason(e)}") from None
        try:
            os.set_blocking(fd, True)
            with naming(path):
                _write_all(fd, _encode(text))
        finally:
            os.close(fd)
        return name
    target, st = _resolve(path)
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        fd = _open_stream(target, st, name)
        try:
            with naming(path):
                _write_all(fd, _encode(text))
        finally:
            os.close(fd)
        return name
    _replace(target, _encode(text), mode=mode if st is None else stat.S_IMODE(st.st_mode))
    return name


def write_csv(path: str | Path, frame: pd.DataFrame) -> str:
    """A DataFrame as CSV, through write_output (no index column)."""
    return write_output(path, frame.to_csv(index=False))


def _temp_beside(path: Path) -> tuple[int, Path]:
    """A new private file in `path`'s folder, claimed first. Its name keeps a short stem
    of `path`'s, so a long name still leaves room for the temporary's."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name[:80]}.{secrets.token_hex(4)}.tmp")
        claim(tmp)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))  # pragma: no cover


@contextlib.contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An OSError raised in the block without a file name (a write's ENOSPC, EDQUOT or
    EIO: os.write knows only its descriptor) raised again naming `path`, so a full disk
    says which file it could not take."""
    try:
        yield
    except OSError as e:
        if e.filename is not None or e.errno is None:
            raise
        raise OSError(e.errno, e.strerror, os.fspath(path)) from e


def _replace(path: Path, data: bytes, *, mode: int | None) -> None:
    """Write beside, then rename onto `path` (a regular file or nothing)."""
    claim(path)
    fd, tmp = _temp_beside(path)
    try:
        os.fchmod(fd, default_mode() if mode is None else mode)
        with naming(path), os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # our own temporary, made just above
        raise


def write_atomic(path: Path, text: str | bytes, *, mode: int | None = None) -> Path:
    """`write_output` for a path graph-harness chose (a file in a folder it writes)."""
    write_output(path, text, mode=mode)
    return Path(path)
