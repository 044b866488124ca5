"""Counting dispatched operations, for machines without a GPU (source "cpu-dispatch").

Every ATen op dispatched while counting is recorded with the scopes it ran in; views and
allocations (which launch nothing) are recorded as such and left out of the totals. Triton
kernels launched through `kernels.launch` count as one "triton" launch each, a compiled
region as one "compiled" call. A count of dispatches, not of graph nodes, and says so. A
view is decided from the op as it ran (its schema, or it wrote nothing and returned only
its inputs' storage): docs/your-model.md, "Views, decided as they run".
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.utils._pytree as pytree
from torch._ops import OpOverload
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from graph_harness.capture.scopes.recorder import ScopeKey, current_stack
from graph_harness.kernels import add_launch_listener, remove_launch_listener

# Allocations launch nothing (in a graph they come from its memory pool).
_ALLOCS = ("aten.empty.", "aten.empty_strided.", "aten.empty_like.")
R = TypeVar("R")


@dataclass
class Dispatched:
    type: str  # "aten" | "triton" | "compiled", or "view" | "alloc" (node_types.py)
    name: str
    stack: tuple[ScopeKey, ...]  # the scopes open as it ran, outermost first


class DispatchCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[Dispatched] = []

    def _add(self, type_: str, name: str) -> None:
        self.records.append(Dispatched(type_, name, current_stack()))

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: tuple[type, ...],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        name = str(func)
        kwargs = kwargs or {}
        if func.is_view:
            self._add("view", name)
            return func(*args, **kwargs)
        if name.startswith(_ALLOCS):
            self._add("alloc", name)
            return func(*args, **kwargs)
        record = Dispatched("aten", name, current_stack())
        self.records.append(record)  # before it runs: a nested dispatch comes after it
        out = func(*args, **kwargs)
        if aliases_only(func, args, kwargs, out):
            record.type = "view"
        return out

    def _on_launch(self, name: str, device: torch.device, grid: tuple[int, ...]) -> None:
        self._add("triton", name)

    def __enter__(self) -> DispatchCounter:
        add_launch_listener(self._on_launch)
        self._token = _counter.set(self)
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        _counter.reset(self._token)
        remove_launch_listener(self._on_launch)
        return super().__exit__(*exc)


def _tensors(tree: object) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _writes(func: OpOverload) -> bool:
    """Whether the op may write an argument: its schema marks one as written (in place,
    out=), or, where the schema says nothing, its name is an in-place one by ATen's
    convention (a trailing underscore: c10d's `_allgather_base_` writes its unannotated
    output argument)."""
    try:
        schema = func._schema
    except AttributeError:  # no schema to read: assume it writes, and count it
        return True
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return True
    return schema.name.rsplit("::", 1)[-1].endswith("_")


def aliases_only(
    func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object], out: object
) -> bool:
    """The op launched nothing of its own: it wrote nothing, returned tensors and nothing
    else (no work handle, no scalar), and every one shares storage with a tensor it was
    given."""
    leaves = [x for x in pytree.tree_leaves(out) if x is not None]
    if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves) or _writes(func):
        return False
    ins = _tensors((args, kwargs))
    try:
        return all(any(torch._C._is_alias_of(o, i) for i in ins) for o in leaves)
    except RuntimeError:  # a tensor without storage (sparse, nested): not a view here
        return False


# The counter in use, per thread and task (see capture/scopes/recorder.py's recorder).
_counter: contextvars.ContextVar[DispatchCounter | None] = contextvars.ContextVar(
    "graph_harness_dispatch_counter", default=None
)


def counted_compiled_call(name: str, fn: Callable[..., R], *args: object, **kwargs: object) -> R:
    """Call a torch.compile'd function; while counting, as one "compiled" dispatch (its
    generated code does not go through the dispatcher, so the mode is lifted for it)."""
    counter = _counter.get()
    if counter is None:
        return fn(*args, **kwargs)
    counter._add("compiled", name)
    with _disable_current_modes():
        return fn(*args, **kwargs)
