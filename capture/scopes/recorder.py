"""Scopes: label the work between two points, so every node can be attributed.

Scopes nest; each opening and closing is a boundary, and the recorder keeps, for every
boundary, which scopes were open in the interval ending there (outermost first). On a
capturing CUDA stream a node belongs to the first boundary whose capture frontier has it
as an ancestor; on the CPU dispatch counter a scope is the label stack on each op. Scopes
do nothing while Dynamo traces. In full: docs/your-model.md, "capture/scopes/recorder.py".
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from graph_harness.capture.scopes.names import ScopeKey

if TYPE_CHECKING:
    from types import TracebackType


@dataclass
class ScopeMark:
    """One boundary: the scopes open in the interval that ends here, outermost first, and
    (on a capturing stream) the frontier node handles at this point."""

    stack: tuple[ScopeKey, ...]
    frontier: list[int] = field(default_factory=list)


class Recorder:
    """Collects boundaries. `frontier` is called at each one (None: labels only).

    `yields`: a recorder that gives way to another one entered inside it (a recorded
    program's per-capture recorder, capture/record/hooks.py, gives way to graph-harness's
    own capture of the same graph: its scopes are the ones asked for)."""

    yields = False

    def __init__(
        self,
        frontier: Callable[[], list[int]] | None = None,
        on_change: Callable[[tuple[ScopeKey, ...]], None] | None = None,
    ) -> None:
        """`frontier` is read at each boundary; `on_change` is told the open scopes after
        each change (capture/graph/memory.py tags allocations with them)."""
        self.frontier = frontier
        self.on_change = on_change
        self.marks: list[ScopeMark] = []
        self.stack: list[ScopeKey] = []
        self.failed_in: ScopeKey | None = None  # the scope an exception escaped from

    @property
    def current(self) -> ScopeKey | None:
        return self.stack[-1] if self.stack else None

    def _boundary(self) -> None:
        mark = ScopeMark(tuple(self.stack))
        if self.frontier is not None:
            mark.frontier = self.frontier()
        self.marks.append(mark)

    def open(self, key: ScopeKey) -> None:
        self._boundary()
        self.stack.append(key)
        if self.on_change is not None:
            self.on_change(tuple(self.stack))

    def close(self, key: ScopeKey, *, failing: bool = False) -> None:
        """Close `key` and anything left open inside it (a scope an exception escaped
        from, whose closing was never seen). `failing`: an exception is leaving the scope:
        its boundary is recorded if it can be, but a frontier that cannot be read (the
        exception broke the capture) never replaces the exception that broke it."""
        if key not in self.stack:
            return
        if failing:
            with contextlib.suppress(Exception):  # the exception on its way up says why
                self._boundary()
        else:
            self._boundary()
        while self.stack and self.stack.pop() != key:
            pass
        if self.on_change is not None:
            self.on_change(tuple(self.stack))

    def innermost_failed(self) -> ScopeKey | None:
        return self.failed_in or self.current


# The recorder of the capture in progress, per thread and task: capture runs beside other
# threads (NCCL's watchdog, a user's), which must neither see nor disturb it.
_active: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "graph_harness_scope_recorder", default=None
)


class recording:
    """Make `recorder` the active one for the work inside (captures do not nest)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def __enter__(self) -> Recorder:
        current = _active.get()
        if current is not None and not current.yields:
            raise RuntimeError("a scope recorder is already active; captures do not nest")
        self._token = _active.set(self.recorder)
        return self.recorder

    def __exit__(self, *exc: object) -> bool:
        _active.reset(self._token)
        return False


def active_recorder() -> Recorder | None:
    return _active.get()


def activate_recorder(recorder: Recorder) -> contextvars.Token | None:
    """Make `recorder` the active one unless another is active already (then None: the
    one active keeps the scopes). `deactivate_recorder(token)` undoes it."""
    if _active.get() is not None:
        return None
    return _active.set(recorder)


def deactivate_recorder(token: contextvars.Token | None) -> None:
    if token is None:
        return
    # ended in another context than it began in: that context keeps it
    with contextlib.suppress(ValueError):
        _active.reset(token)


class scope:
    """Attribute the work inside to (stage, step), nested in any scope already open.

    A no-op when nothing is recording (user code can keep its scopes in production
    paths), and while torch.compile traces (no graph break, nothing traced). A class,
    not a generator, so Dynamo sees two plain calls that return at once."""

    def __init__(self, step: str, stage: int | None = None) -> None:
        self.step, self.stage = step, stage  # the key is made only when recording
        self._rec: Recorder | None = None

    @property
    def key(self) -> ScopeKey:
        return ScopeKey(self.stage, self.step)

    def __enter__(self) -> None:
        if torch.compiler.is_compiling():
            return
        self._rec = _active.get()
        if self._rec is not None:
            self._rec.open(self.key)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if torch.compiler.is_compiling():
            return False
        rec, self._rec = self._rec, None
        if rec is None:
            return False
        if exc_type is not None and rec.failed_in is None:
            rec.failed_in = self.key
        rec.close(self.key, failing=exc_type is not None)
        return False


def current_stack() -> tuple[ScopeKey, ...]:
    rec = _active.get()
    return tuple(rec.stack) if rec is not None else ()
