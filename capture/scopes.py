"""Scopes: label the work between two points, so every node can be attributed.

On a capturing CUDA stream a scope records the capture's dependency frontier at its
start and end; after capture, a scope's nodes are the ancestors of its end frontier
minus the ancestors of its start frontier. On the CPU dispatch counter a scope is just
the label attached to each op as it is dispatched. Scopes are flat: one at a time.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ScopeKey:
    stage: int | None
    step: str

    @property
    def label(self) -> str:
        return self.step if self.stage is None else f"stage{self.stage}/{self.step}"


@dataclass
class ScopeMark:
    key: ScopeKey
    begin: list[int] = field(default_factory=list)  # frontier node handles at entry
    end: list[int] = field(default_factory=list)  # frontier node handles at exit


class Recorder:
    """Collects scope marks. `frontier` is called at each boundary (None: labels only)."""

    def __init__(self, frontier=None) -> None:
        self.frontier = frontier
        self.marks: list[ScopeMark] = []
        self.current: ScopeKey | None = None
        self.failed_in: ScopeKey | None = None  # the scope an exception escaped from


# The recorder of the capture in progress, per thread and task: capture runs beside other
# threads (NCCL's watchdog, a user's), which must neither see nor disturb it.
_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "graph_harness_scope_recorder", default=None
)


@contextlib.contextmanager
def recording(recorder: Recorder) -> Iterator[Recorder]:
    if _active.get() is not None:
        raise RuntimeError("a scope recorder is already active; captures do not nest")
    token = _active.set(recorder)
    try:
        yield recorder
    finally:
        _active.reset(token)


@contextlib.contextmanager
def scope(step: str, stage: int | None = None) -> Iterator[None]:
    """Attribute the work inside to (stage, step). A no-op when nothing is recording,
    so user code can keep its scopes in production paths."""
    rec = _active.get()
    if rec is None:
        yield
        return
    if rec.current is not None:
        raise RuntimeError(
            f"scope {ScopeKey(stage, step).label!r} opened inside {rec.current.label!r}; "
            "scopes are flat: close one before opening the next"
        )
    mark = ScopeMark(ScopeKey(stage, step))
    if rec.frontier is not None:
        mark.begin = rec.frontier()
    rec.current = mark.key
    try:
        yield
    except BaseException:
        rec.failed_in = rec.failed_in or mark.key
        raise
    finally:
        rec.current = None
    if rec.frontier is not None:
        mark.end = rec.frontier()
    rec.marks.append(mark)


def current_scope() -> ScopeKey | None:
    rec = _active.get()
    return rec.current if rec is not None else None
