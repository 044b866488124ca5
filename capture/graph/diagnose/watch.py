"""Watching a failed step's next capture attempt: which ATen op and which torch call were
in flight when it failed, inside which module and scope, and what each submodule was
called with (so that bisection can capture it alone).

A TorchDispatchMode and a TorchFunctionMode pass calls through and record a failing call's
arguments as plain records (never the tensors); a global forward pre-hook and forward hook,
removed on exit, keep the module stack and each submodule's first call. Details:
docs/capture-failures.md, "Watching an attempt". Device-agnostic: the CPU tests inject
failures with a mode below it.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch._ops import OpOverload
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from graph_harness.capture.graph.diagnose.classes import CallSeen, OpSeen, TensorSeen, chain
from graph_harness.capture.scopes.modules import module_names
from graph_harness.capture.scopes.recorder import current_stack

# How a schema's return types print (`Scalar` prints as "number").
_HOST_VALUES = {"bool", "int", "float", "complex", "number", "Scalar", "SymInt", "SymFloat"}
_HOST_VALUES |= {"SymBool"}


def _pinned(t: torch.Tensor) -> bool:
    if t.device.type != "cpu" or not torch.cuda.is_available():
        return False
    try:
        return bool(t.is_pinned())
    except Exception:
        return False


def seen_of(v: object) -> TensorSeen | tuple[object, ...] | str | int | float | None:
    """A plain record of an argument: tensors as TensorSeen, sequences element-wise,
    devices as their type ("cuda"), plain values as given, others by type name."""
    if isinstance(v, torch.Tensor):
        return TensorSeen(v.device.type, str(v.dtype), v.dim(), _pinned(v))
    if isinstance(v, list | tuple):
        return tuple(seen_of(x) for x in v)
    if isinstance(v, torch.device):
        return v.type
    if isinstance(v, torch.dtype):
        return str(v)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return type(v).__name__


def op_seen(func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]) -> OpSeen:
    """The op and its arguments bound to its schema's names."""
    name = f"{getattr(func, 'namespace', 'aten')}.{getattr(func, '_opname', str(func))}"
    schema = getattr(func, "_schema", None)
    if schema is None:
        return OpSeen(name, {f"arg{i}": seen_of(a) for i, a in enumerate(args)})
    bound = {a.name: seen_of(v) for a, v in zip(schema.arguments, args)}
    bound.update({k: seen_of(v) for k, v in kwargs.items()})
    host = any(str(r.type) in _HOST_VALUES for r in schema.returns)
    return OpSeen(name, bound, returns_host_value=host)


def _is_python_data(v: object) -> bool:
    """A Python list of numbers (or of lists), at any depth inside tuples."""
    if isinstance(v, list):
        return all(isinstance(x, bool | int | float | list) for x in v)
    if isinstance(v, tuple):
        return any(_is_python_data(x) for x in v)
    return False


def call_seen(
    func: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]
) -> CallSeen:
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    owner, _, short = qual.rpartition(".")
    prefix = "Tensor" if owner in ("TensorBase", "Tensor", "_TensorBase") else "torch"
    devices = [t.device for t in _flat_tensors((args, kwargs))]
    if kwargs.get("device") is not None:
        devices.append(torch.device(kwargs["device"]))
    data = any(_is_python_data(a) for a in args) or (
        short in ("tensor", "as_tensor", "asarray") and bool(args) and isinstance(args[0], tuple)
    )
    return CallSeen(f"{prefix}.{short}", tuple(d.type for d in devices), data)


def _flat_tensors(v: object) -> list[torch.Tensor]:
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, list | tuple):
        return [t for x in v for t in _flat_tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _flat_tensors(x)]
    return []


@dataclass
class Inputs:
    """A submodule's first call during the attempt: enough to call it alone again."""

    name: str
    module: torch.nn.Module
    args: tuple
    kwargs: dict | None  # None: not readable (torch's _call_impl changed shape)
    order: int  # call order in the attempt
    grad: bool
    inference: bool

    @property
    def depth(self) -> int:
        return self.name.count(".") + 1


@dataclass(frozen=True)
class Failure:
    """What was in flight when the attempt failed."""

    seen: OpSeen | CallSeen
    modules: tuple[str, ...]  # the modules open, outermost first
    scope: str | None  # the innermost scope of the step's own (not a module's)


class _Ops(TorchDispatchMode):
    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: tuple[type, ...],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except BaseException as e:
            self.watch._raised(e, lambda: op_seen(func, args, kwargs))
            raise


class _Calls(TorchFunctionMode):
    def __init__(self, watch: Watch) -> None:
        super().__init__()
        self.watch = watch

    def __torch_function__(
        self,
        func: Callable[..., object],
        types: tuple[type, ...],
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        try:
            return func(*args, **kwargs)
        except BaseException as e:
            self.watch._raised(e, lambda: call_seen(func, args, kwargs))
            raise


def _caller_kwargs(args: tuple[object, ...]) -> dict | None:
    """The keyword arguments of the module call a global pre-hook was called for: a local
    of torch's `_call_impl.inner`, the hook's caller (checked by its `args`)."""
    frame = sys._getframe(2)
    local = frame.f_locals
    if local.get("args") is args and isinstance(local.get("kwargs"), dict):
        return dict(local["kwargs"])
    return None


class Watch:
    """`with Watch(model, ops=True): step()` records the failure in flight (`failure`),
    the modules left open (`open_modules`) and each submodule's inputs (`inputs`)."""

    def __init__(self, model: torch.nn.Module | None, *, ops: bool) -> None:
        self.names = module_names(model) if model is not None else {}
        self.known = set(self.names.values())
        self.ops = ops
        self.stack: list[str] = []
        self.inputs: dict[str, Inputs] = {}
        self._raises: list[tuple[BaseException, Failure]] = []
        self._exits: list = []

    def _raised(self, exc: BaseException, seen: Callable[[], OpSeen | CallSeen]) -> None:
        if any(e is exc for e, _ in self._raises[-1:]):
            return  # the same exception leaving an enclosing call: the inner one stays
        user = [k.label for k in current_stack() if k.label not in self.known]
        self._raises.append((exc, Failure(seen(), tuple(self.stack), user[-1] if user else None)))

    def failure(self, exc: BaseException | None) -> Failure | None:
        """The innermost op (else torch call) that raised `exc` or one it was raised from;
        a call whose exception the step caught and replaced is matched through the chain."""
        if exc is None:
            return None
        ids = {id(e) for e in chain(exc)}
        hits = [f for e, f in self._raises if id(e) in ids]
        ops = [f for f in hits if isinstance(f.seen, OpSeen)]
        return (ops or hits or [None])[0]

    @property
    def open_modules(self) -> tuple[str, ...]:
        return tuple(self.stack)

    def _pre(self, mod: torch.nn.Module, args: tuple[object, ...]) -> None:
        if torch.compiler.is_compiling():
            return
        name = self.names.get(mod)
        if name is None:
            return
        self.stack.append(name)
        if name not in self.inputs:
            self.inputs[name] = Inputs(
                name,
                mod,
                args,
                _caller_kwargs(args),
                len(self.inputs),
                torch.is_grad_enabled(),
                torch.is_inference_mode_enabled(),
            )

    def _post(self, mod: torch.nn.Module, args: tuple[object, ...], output: object) -> None:
        if torch.compiler.is_compiling():
            return
        name = self.names.get(mod)
        if name is not None and name in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name)]

    def __enter__(self) -> Watch:
        if self.names:
            # Our global hooks make torch warn that a compiled module's hooks fire twice:
            # ours ignore the OptimizedModule wrapper's second call (as module_scopes does).
            quiet = warnings.catch_warnings()
            quiet.__enter__()
            self._exits.append(lambda: quiet.__exit__(None, None, None))
            warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there")
            self._exits.append(register_module_forward_pre_hook(self._pre).remove)
            self._exits.append(register_module_forward_hook(self._post).remove)
        try:
            if self.ops:
                for mode in (_Calls(self), _Ops(self)):
                    mode.__enter__()
                    self._exits.append(lambda m=mode: m.__exit__(None, None, None))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> bool:
        while self._exits:
            self._exits.pop()()
        return False
