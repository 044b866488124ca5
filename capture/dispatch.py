"""Counting dispatched operations, for machines without a GPU (source "cpu-dispatch").

Every ATen op dispatched while counting is recorded with the scopes it ran in; views and
allocations (which launch nothing) are recorded as such and left out of the totals. Triton
kernels launched through `kernels.launch` count as one "triton" launch each (their
interpreter's own tensor traffic is hidden), and a torch.compile'd region as one
"compiled" call. This is a count of dispatches, not of graph nodes, and says so.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from graph_harness.capture.scopes import ScopeKey, current_stack
from graph_harness.kernels import add_launch_listener, remove_launch_listener

# Allocations launch nothing (in a graph they come from its memory pool).
_ALLOCS = ("aten.empty.", "aten.empty_strided.", "aten.empty_like.")
# Types that launch no device work, kept in the records but not in the totals.
NON_LAUNCHING = ("view", "alloc")


@dataclass
class Dispatched:
    type: str  # "aten" | "triton" | "compiled", or NON_LAUNCHING "view" | "alloc"
    name: str
    stack: tuple[ScopeKey, ...]  # the scopes open as it ran, outermost first


class DispatchCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[Dispatched] = []

    def _add(self, type_: str, name: str) -> None:
        self.records.append(Dispatched(type_, name, current_stack()))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        kind = "view" if func.is_view else "alloc" if name.startswith(_ALLOCS) else "aten"
        self._add(kind, name)
        return func(*args, **(kwargs or {}))

    def _on_launch(self, name, device, grid) -> None:
        self._add("triton", name)

    def __enter__(self):
        add_launch_listener(self._on_launch)
        self._token = _counter.set(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _counter.reset(self._token)
        remove_launch_listener(self._on_launch)
        return super().__exit__(*exc)


# The counter in use, per thread and task (see capture/scopes.py's recorder).
_counter: contextvars.ContextVar[DispatchCounter | None] = contextvars.ContextVar(
    "graph_harness_dispatch_counter", default=None
)


def counted_compiled_call(name: str, fn, *args, **kwargs):
    """Call a torch.compile'd function; while counting, as one "compiled" dispatch (its
    generated code does not go through the dispatcher, so the mode is lifted for it)."""
    counter = _counter.get()
    if counter is None:
        return fn(*args, **kwargs)
    counter._add("compiled", name)
    with _disable_current_modes():
        return fn(*args, **kwargs)
