"""Signals that arrive while foreign code runs inside the program (a key adapter:
capture/record/keys.py): what tells a signal's exception (Ctrl-C's KeyboardInterrupt, a
SIGTERM handler's sys.exit, an alarm's timeout) from one that code raised itself.

While the code runs, every handler of Python's own (default_int_handler included) is
wrapped to keep what it raised, so that the caller can tell that exception, by identity,
from the code's own, and let it go on to the program (docs/record.md, "Key adapters").
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

Handler = Callable[[int, FrameType | None], object]


@contextlib.contextmanager
def raised_by_signals() -> Iterator[list[BaseException]]:
    """A list of what signal handlers raised inside the block (main thread only:
    elsewhere no handler can run, and the list stays empty)."""
    raised: list[BaseException] = []
    if threading.current_thread() is not threading.main_thread():
        yield raised
        return
    wrapped: dict[int, Handler] = {}
    for signum in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handler = signal.getsignal(signum)
            if callable(handler):
                signal.signal(signum, _keeping(raised, handler))
                wrapped[signum] = handler
    try:
        yield raised
    finally:
        for signum, handler in wrapped.items():
            with contextlib.suppress(OSError, ValueError):
                current = signal.getsignal(signum)
                if getattr(current, "_kept_for", None) is handler:  # not changed inside
                    signal.signal(signum, handler)


def _keeping(raised: list[BaseException], handler: Handler) -> Handler:
    def keeping(signum: int, frame: FrameType | None) -> object:
        try:
            return handler(signum, frame)
        except BaseException as e:
            raised.append(e)
            raise

    keeping._kept_for = handler  # type: ignore[attr-defined]
    return keeping
