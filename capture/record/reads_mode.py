"""The reads of a captured region, seen as it runs: a `TorchDispatchMode` pushed once torch
has begun a capture and popped as the program ends it, telling reads.py of each aten
operator (what it read, wrote, returned) until QUIET operators in a row read no new input
(a step reads its inputs first), MAX_OPS at most; then it sleeps (dormant.py). It stays on
the stack to the end: C++ guards entered inside the region (inference_mode, a compiled
call's, the autograd engine's) put back the dispatch state they found, this mode
included, so a mode popped mid-region breaks the thread (docs/record.md). It only looks,
host metadata only; a failure stops the looking. It declares `ignore_compile_internals`
(Dynamo compiles under it: `available()`); work outside the dispatcher is not seen."""

from __future__ import annotations

import functools
import sys
from typing import Any

from graph_harness.capture.record import dormant
from graph_harness.capture.record.reads import RegionReads, Touch

QUIET = 32  # operators in a row that read no new input, after which the looking ends
MAX_OPS = 256  # operators looked at per capture at most


def available() -> str | None:
    """None where the mode may be pushed; else why not (this torch's Dynamo would skip
    compiled frames under it)."""
    from torch.utils import _python_dispatch as pd

    if not hasattr(pd, "is_in_any_mode_without_ignore_compile_internals"):
        return "this torch's Dynamo would not compile under a dispatch mode"
    return None


@functools.cache
def _schema_of(func: Any) -> tuple[bool, frozenset[int], frozenset[str]] | None:
    """An operator's aliasing, from its schema: whether it is a view (its aliased
    arguments are read-only aliases), and its written arguments by place and name. None
    for one without a schema (a higher-order operator)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return None
    aliased = [a.alias_info for a in schema.arguments if a.alias_info is not None]
    view = bool(aliased) and not any(a.is_write for a in aliased)
    written = [
        (i, a.name)
        for i, a in enumerate(schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]
    return view, frozenset(i for i, _ in written), frozenset(n for _, n in written)


_DTYPES: dict[Any, str] = {}  # torch.int64 -> "int64"
_TYPES: tuple[type, type] | None = None  # torch.Tensor, torch.nn.Parameter


def _types() -> tuple[type, type]:
    global _TYPES
    import torch

    _TYPES = (torch.Tensor, torch.nn.Parameter)
    return _TYPES


def _touches(value: Any, tensor: type, parameter: type, out: list, full: bool) -> None:
    """The tensors in an argument or result (a tensor, or a list or tuple of them), each a
    `Touch` made as a plain tuple (this runs per tensor of every operator: the host cost
    of a capture), by its storage's data pointer; shape and dtype only where `full` (a
    read: what a key names)."""
    if isinstance(value, tensor):
        try:
            ptr = value.untyped_storage().data_ptr()
        except Exception:  # a wrapper subclass has no storage of its own: not looked at
            return
        if not ptr or not value.numel():  # an empty tensor, or an empty view, reads no data
            return
        weight = issubclass(type(value), parameter)  # Parameter's isinstance is slow
        if not full:
            out.append(((value.get_device(), ptr), (), "", weight))
            return
        dtype = value.dtype
        name = _DTYPES.get(dtype)
        if name is None:
            name = _DTYPES[dtype] = str(dtype).removeprefix("torch.")
        out.append(((value.get_device(), ptr), tuple(value.shape), name, weight))
    elif isinstance(value, (list, tuple)):
        for v in value:
            _touches(v, tensor, parameter, out, full)


def tell(reads: RegionReads, func: Any, args: tuple, kwargs: dict, result: Any) -> None:
    """One operator the region ran, told to `reads` (its aliasing from its schema). A view
    reads no data: only the weights among its arguments are looked at. Scalars are passed
    over before any call (most arguments of most operators)."""
    schema = _schema_of(func)
    if schema is None:
        return
    view, places, names = schema
    T, P = _TYPES or _types()
    if view:
        weights = [a for a in args if issubclass(type(a), P)]
        if weights:
            touched: list[Touch] = []
            _touches(weights, T, P, touched, False)
            reads.view(touched)
        return
    read: list[Touch] = []
    write: list[Touch] = []
    for i, a in enumerate(args):
        if isinstance(a, (T, list, tuple)):
            _touches(a, T, P, write if i in places else read, i not in places)
    for k, a in kwargs.items():
        if isinstance(a, (T, list, tuple)):
            _touches(a, T, P, write if k in names else read, k not in names)
    outputs: list[Touch] = []
    _touches(result, T, P, outputs, False)
    reads.op(read, write, outputs)


def _look(self: Any, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
    """The mode's `__torch_dispatch__`: the operator run as it is, then told; once the
    looking is over, the mode sent to sleep (again, where a guard woke it)."""
    kwargs = kwargs or {}
    result = func(*args, **kwargs)  # the program's own error goes on as it is
    if self.looking:
        try:
            tell(self.reads, func, args, kwargs, result)
            reads = self.reads
            if reads.ops - reads.last_input >= self.quiet or reads.ops >= self.most:
                self.looking = False
                self.capped = reads.ops - reads.last_input < self.quiet
        except Exception as e:
            self.looking = False
            self.broken = f"{type(e).__name__}: {e}"
    if not self.looking and sys.getprofile() is None:
        dormant.sleep_soon(self)
    return result


@functools.cache
def _mode_type(dynamo: bool) -> type:
    """The mode's class. With Dynamo loaded (`dynamo`), its handler runs with Dynamo off,
    as torch's own modes' do (compiled code calling an operator must not compile the
    handler); without, the handler is plain, and the first capture does not import
    Dynamo (seconds) for a program that never compiles."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class ReadsMode(TorchDispatchMode):
        """Tells `reads` of each operator (the module's notes); never changes one."""

        supports_higher_order_operators = True  # passed through, not looked at

        @classmethod
        def ignore_compile_internals(cls) -> bool:
            return True

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # decided here: `dynamo`

        def __init__(self, reads: RegionReads, quiet: int, most: int, sleeps: bool) -> None:
            super().__init__()
            self.reads, self.quiet, self.most = reads, quiet, most
            self.looking = True
            self.capped = False  # stopped at `most` while still finding inputs
            self.broken: str | None = None
            self.dormancy = dormant.Dormancy(sleeps)

    if dynamo:
        import torch._dynamo

        ReadsMode.__torch_dispatch__ = torch._dynamo.disable(_look, recursive=True)
    else:
        ReadsMode.__torch_dispatch__ = _look
    return ReadsMode


class RegionWatch:
    """The mode over one region: `start()` pushes it, `stop()` pops it and says what went
    wrong, if anything (the reads are `reads`). `quiet` and `most`: QUIET and MAX_OPS, or
    more to look at a whole region; `sleeps`: False to pass the rest through awake (both
    for benchmarks/experiments/read_watch_cost.py)."""

    def __init__(self, quiet: int = QUIET, most: int = MAX_OPS, sleeps: bool = True) -> None:
        self.reads = RegionReads()
        self.quiet, self.most, self.sleeps = quiet, most, sleeps
        self._mode: Any = None

    def start(self) -> None:
        kind = _mode_type("torch._dynamo" in sys.modules)
        mode = kind(self.reads, self.quiet, self.most, self.sleeps)
        mode.__enter__()
        try:
            dormant.watching(mode)
        except BaseException:  # no mode left behind on a watch that did not begin
            mode.__exit__(None, None, None)
            raise
        self._mode = mode

    def stop(self) -> str | None:
        """The mode popped, where it is the innermost (the thread's top of the stack); one
        the region left another mode above is switched off instead, and stays a no-op
        until that one is popped. What went wrong, or None."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        mode, self._mode = self._mode, None
        if mode is None:
            return "the reads were never looked at"
        mode.looking = False
        dormant.forget(mode)
        if _get_current_dispatch_mode() is not mode:
            return "another dispatch mode was left active inside the capture"
        mode.__exit__(None, None, None)
        if mode.broken is not None:
            return f"stopped looking: {mode.broken}"
        if mode.capped:
            return f"looked at the first {mode.most} operators only, still finding inputs"
        if mode.dormancy.error is not None:
            return f"stayed awake past the looking: {mode.dormancy.error}"
        return None
