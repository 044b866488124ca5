"""The recorder's process-wide settings, and the capture counter: what every capture of
this process is recorded with (set by the recording that listens: capture/record/process.py,
steps.py), and the order captures are numbered in."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph_harness.capture.record.hooks import Listener
    from graph_harness.capture.record.keys import KeyFn


@dataclass
class Settings:
    listeners: list[Listener] = field(default_factory=list)
    adapters: list[tuple[str, KeyFn]] = field(default_factory=list)
    module_scopes: bool = False  # open module scopes in each capture (program.py)
    pool_memory: bool = True  # read the pool's bytes after each capture
    # name a graph no key names by what its region reads (a dispatch mode in the capture)
    read_names: bool = True
    attribute: Callable[[list, Any], str | None] | None = None  # compiled code's modules
    check: Any = None  # record --check: the process's checker (capture/live/checked.py)
    started: float = field(default_factory=time.perf_counter)


settings = Settings()
lock = threading.RLock()
_counter = itertools.count()
_NAMES = ("adapters", "module_scopes", "pool_memory", "read_names", "attribute", "check")
_KEEP: Any = object()  # configure(check=...) not given


def next_index() -> int:
    """The next capture's place in this process's capture order, from 0."""
    return next(_counter)


def _reset_after_fork() -> None:
    # a forked child's captures are its own, numbered from 0; its listeners are told by
    # their own fork handlers (process.py) whether they go on. The lock is re-made in
    # place (modules hold it by name): one another thread held at the fork is free here.
    global _counter
    _counter = itertools.count()
    lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def configure(
    *,
    adapters: list[tuple[str, KeyFn]] | None = None,
    module_scopes: bool | None = None,
    pool_memory: bool | None = None,
    read_names: bool | None = None,
    attribute: Callable[[list, Any], str | None] | None = None,
    check: Any = _KEEP,
) -> dict[str, Any]:
    """Set the recorder's settings (process.py sets them from the command); the settings
    before, for `restore` (those not given are left as they are)."""
    with lock:
        saved = {k: getattr(settings, k) for k in _NAMES}
        if adapters is not None:
            settings.adapters = list(adapters)
        if module_scopes is not None:
            settings.module_scopes = module_scopes
        if pool_memory is not None:
            settings.pool_memory = pool_memory
        if read_names is not None:
            settings.read_names = read_names
        if attribute is not None:
            settings.attribute = attribute
        if check is not _KEEP:
            settings.check = check
        return saved


def restore(saved: dict[str, Any]) -> None:
    """Put back settings `configure` returned (a recording ends: the one around it goes
    on with its own)."""
    with lock:
        for k in _NAMES:
            setattr(settings, k, saved[k])
