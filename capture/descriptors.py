"""Descriptors graph-harness holds while a user's code runs: the results' copy of stdout
(capture/results.py), stdout saved around a call of theirs (reports/cli/user_stdout.py),
an output folder's lock (reports/output/folder.py).

Each is registered with what it is and which file it is open on, so that a target closing
descriptors it did not open (`os.closerange(3, 1024)` at import, as daemonizing code does)
is named right after the call that did it (reports/cli/target.py), instead of a raw "Bad
file descriptor" at the end; and a number the target's own files took meanwhile is never
written to or closed as if it were still ours.
"""

from __future__ import annotations

import os
import threading

_held: dict[int, tuple[str, int, int]] = {}  # descriptor -> (what it is, st_dev, st_ino)
_lost: list[str] = []  # what release() found gone, until take_lost() says it
_lock = threading.Lock()


def _same(fd: int, dev: int, ino: int) -> bool:
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


def hold(fd: int, what: str) -> None:
    """Register `fd` (open now) as graph-harness's, `what` naming it for a message."""
    st = os.fstat(fd)
    with _lock:
        _held[fd] = (what, st.st_dev, st.st_ino)


def intact(fd: int) -> bool:
    """Whether held `fd` is still open on the file it was held on."""
    with _lock:
        got = _held.get(fd)
    return got is not None and _same(fd, got[1], got[2])


def release(fd: int) -> bool:
    """Forget `fd`: True when it is still ours (the caller closes it), False when it was
    closed meanwhile or its number now holds another file (never close that one); what
    it was is then said by the next take_lost()."""
    with _lock:
        got = _held.pop(fd, None)
    if got is None:
        return False
    if _same(fd, got[1], got[2]):
        return True
    with _lock:
        _lost.append(got[0])
    return False


def take_lost() -> list[str]:
    """What each held descriptor closed (or replaced) since the last call was, once."""
    with _lock:
        gone = [w for fd, (w, dev, ino) in _held.items() if not _same(fd, dev, ino)]
        gone = [*_lost, *gone]
        _lost.clear()
    return list(dict.fromkeys(gone))
